"""An object pinned to its own branch (issue 30): ``StructuredSession(..., branch=NAME)`` reads
and writes that branch, as each AdvancedSQLiteSession object keeps its own current branch; the
session's head stays the database's (docs/design.md), moved by a pinned object's write only
when it was at that branch's end. Driven side by side with AdvancedSQLiteSession, turnstore on
every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("agents")

from agents.extensions.memory import AdvancedSQLiteSession

from builders import run_items, user
from turnstore import InvalidOperationError, NotFoundError, Store, StructuredSession


class Pair:
    """One AdvancedSQLiteSession object and one pinned StructuredSession, given each step."""

    def __init__(self, sdk: AdvancedSQLiteSession, ours: StructuredSession) -> None:
        self.sdk, self.ours = sdk, ours

    async def turn(self, tag: str) -> None:
        await self.sdk.add_items(run_items(tag))  # type: ignore[arg-type]
        await self.ours.add_items(run_items(tag))

    async def same_items(self) -> list[str]:
        theirs = await self.sdk.get_items()
        mine = await self.ours.get_items()
        assert mine == theirs
        return [item["content"] for item in mine if item.get("role") == "user"]


async def test_two_objects_two_branches(store: Store, tmp_path: Path) -> None:
    path = str(tmp_path / "sdk.db")
    one = Pair(
        AdvancedSQLiteSession(session_id="s", db_path=path, create_tables=True),
        StructuredSession("s", store, branch="main"),
    )
    assert one.ours.branch == "main"
    await one.turn("q1")
    await one.turn("q2")
    assert await one.same_items() == ["q1", "q2"]
    # Branching before turn 2 moves this object to the new branch, whose past is turn 1.
    assert await one.sdk.create_branch_from_turn(2, "alt") == "alt"
    assert await one.ours.create_branch_from_turn(2, "alt") == "alt"
    assert await one.same_items() == ["q1"]
    await one.turn("q2 again")
    assert one.ours.branch == "alt"
    assert await one.same_items() == ["q1", "q2 again"]

    # A second object starts on its own branch, whatever the first one is on.
    two = Pair(
        AdvancedSQLiteSession(session_id="s", db_path=path),
        StructuredSession("s", store, branch="main"),
    )
    assert await two.same_items() == ["q1", "q2"]
    await two.turn("q3")
    assert await two.same_items() == ["q1", "q2", "q3"]
    assert await one.same_items() == ["q1", "q2 again"]  # the first one's branch is its own
    await one.turn("q3 again")
    assert await one.same_items() == ["q1", "q2 again", "q3 again"]
    assert await two.same_items() == ["q1", "q2", "q3"]

    # switch_to_branch moves the object, not the others.
    await two.sdk.switch_to_branch("alt")
    await two.ours.switch_to_branch("alt")
    assert await two.same_items() == ["q1", "q2 again", "q3 again"]

    # The database's head: pinned writes moved it only when it was at their branch's end
    # ("main" all along); an object without branch= follows it, as the CLI and viewer do.
    shared = StructuredSession("s", store)
    assert [i["content"] for i in await shared.get_items() if i.get("role") == "user"] == [
        "q1",
        "q2",
        "q3",
    ]
    names = {b.name for b in await store.branches("s")}
    assert names == {"main", "alt"}
    # Per-branch analytics default to the object's branch.
    turns = await two.ours.get_conversation_turns()
    assert [t["content"] for t in turns] == ["q1", "q2 again", "q3 again"]


async def test_a_pinned_object_s_refusals(store: Store) -> None:
    with pytest.raises(InvalidOperationError):
        StructuredSession("s", store, branch="")
    pinned = StructuredSession("s", store, branch="main")
    await pinned.add_items([user("q1")])
    await pinned.add_items([user("q2")])
    with pytest.raises(InvalidOperationError, match="pinned"):
        await pinned.pop_item()
    with pytest.raises(InvalidOperationError, match="turn 2"):
        await pinned.create_branch_from_turn(1, "x")
    with pytest.raises(NotFoundError):
        await pinned.create_branch_from_turn(5, "x")
    with pytest.raises(NotFoundError):
        await pinned.switch_to_branch("nowhere")
    assert pinned.branch == "main"
    assert len(await pinned.get_items()) == 2
    with pytest.raises(NotFoundError):  # a branch another writer deleted
        await StructuredSession("s", store, branch="gone").get_items()


async def _pinned_beside_the_head(store: Store) -> tuple[StructuredSession, StructuredSession]:
    """A session whose head is on "main" (q1, q2) and an object pinned to "alt" (q1, q2b)."""
    shared = StructuredSession("s", store)
    await shared.add_items([user("q1")])
    await shared.add_items([user("q2")])
    _, second = await store.runs("s")
    await store.name_branch("s", second.id, "main")
    await store.name_branch("s", (await shared.edit(second.id, "q2b")).id, "alt")
    await shared.switch_to_branch("main")
    return shared, StructuredSession("s", store, branch="alt")


async def test_a_pinned_object_annotates_its_own_branch(store: Store) -> None:
    # A thumbs endpoint holding a pinned object judges the answer that object gave.
    _, pinned = await _pinned_beside_the_head(store)
    alt_end = (await store.runs("s", branch="alt"))[-1].id
    assert (await pinned.annotate("thumbs", value=0)).run_id == alt_end


async def test_a_pinned_object_compacts_nothing_of_another_branch(store: Store) -> None:
    # Compaction acts on the head's path: on an object pinned elsewhere it would replace the
    # model's view of another branch, so it is refused and changes nothing.
    shared, pinned = await _pinned_beside_the_head(store)
    before = await shared.get_items(), await pinned.get_items()
    with pytest.raises(InvalidOperationError, match="pinned"):
        await pinned._get_compaction_snapshot(10)
    with pytest.raises(InvalidOperationError, match="pinned"):
        await pinned._atomic_replace_items([user("summary")])
    assert (await shared.get_items(), await pinned.get_items()) == before

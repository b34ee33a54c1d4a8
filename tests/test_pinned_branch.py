"""An object pinned to its own branch (issue 30): ``StructuredSession(..., branch=NAME)`` reads
and writes that branch, as each AdvancedSQLiteSession object keeps its own current branch; the
session's head stays the database's (docs/design.md), moved by a pinned object's write only
when it was at that branch's end. Driven side by side with AdvancedSQLiteSession, turnstore on
every backend."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("agents")

from agents.extensions.memory import AdvancedSQLiteSession

from builders import assistant, run_items, snapshot, user
from catalogue import assert_kept
from turnstore import (
    ConflictError,
    InvalidOperationError,
    NotFoundError,
    RunNotFoundError,
    StorageError,
    Store,
    StructuredSession,
    Turn,
)
from turnstore.core import append, history
from turnstore.core import statements as S


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


# -- the tree operations on a pinned object: its branch moves, the head stays -------------------


def _asked(items: list[Any]) -> list[str]:
    return [item["content"] for item in items if item.get("role") == "user"]


async def _cancelled_after(call: Awaitable[Any], steps: int) -> bool:
    """``call`` run as a task and cancelled after ``steps`` turns of the event loop (0: before
    it starts); whether it had ended by then (the cancellation then changes nothing)."""
    task = asyncio.ensure_future(call)
    for _ in range(steps):
        await asyncio.sleep(0)
    ended = task.done()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):  # none once it has ended
        await task
    return ended


async def _names(store: Store, session_id: str = "s") -> dict[str | None, list[str]]:
    """Each branch's user messages, by its name."""
    found = {}
    for branch in await store.branches(session_id):
        runs = await store.runs(session_id, branch=branch.leaf_run_id)
        found[branch.name] = [run.user_message or "" for run in runs]
    return found


async def test_a_pinned_edit_moves_its_branch_not_the_head(store: Store) -> None:
    shared, pinned = await _pinned_beside_the_head(store)
    head = (await store.session("s")).head_run_id  # type: ignore[union-attr]
    old_end = (await store.runs("s", branch="alt"))[-1].id
    main_second = (await store.runs("s", branch="main"))[1].id
    with pytest.raises(ConflictError):  # expected_head is the branch's end here
        await pinned.edit(Turn(2), "q2c", expected_head=head)
    with pytest.raises(InvalidOperationError, match="not on branch"):  # main's run, not alt's
        await pinned.edit(main_second, "q2c")
    edited = await pinned.edit(Turn(2), "q2c", expected_head=old_end)  # turn 2 of alt
    assert edited.user_message == "q2c"
    assert pinned.branch == "alt"
    assert _asked(await pinned.get_items()) == ["q1", "q2c"]
    assert (await store.session("s")).head_run_id == head  # type: ignore[union-attr]
    assert _asked(await shared.get_items()) == ["q1", "q2"]
    # The name went with the course; the older one stays, unnamed, as an edit leaves the head's.
    assert await _names(store) == {"main": ["q1", "q2"], None: ["q1", "q2b"], "alt": ["q1", "q2c"]}
    # regenerate alike; a second object pinned to alt follows the name.
    again = await pinned.regenerate(Turn(2))
    assert again.user_message == "q2c"
    assert again.id != edited.id
    assert (await store.runs("s", branch="alt"))[-1].id == again.id
    await pinned.add_items([assistant("a2")])
    other = StructuredSession("s", store, branch="alt")
    assert [item.get("role") for item in await other.get_items()] == ["user", "user", "assistant"]
    assert (await store.session("s")).head_run_id == head  # type: ignore[union-attr]


async def test_a_pinned_rewind_and_checkout_move_its_branch_at_its_next_write(
    store: Store,
) -> None:
    shared, pinned = await _pinned_beside_the_head(store)
    await pinned.add_items([user("q3")])
    head = (await store.session("s")).head_run_id  # type: ignore[union-attr]
    await pinned.rewind(Turn(3))
    assert _asked(await pinned.get_items()) == ["q1", "q2b"]
    # Nothing is written until the next write: another object pinned to alt sees it whole.
    other = StructuredSession("s", store, branch="alt")
    assert _asked(await other.get_items()) == ["q1", "q2b", "q3"]
    await pinned.add_items([user("q3 again")])
    assert _asked(await pinned.get_items()) == ["q1", "q2b", "q3 again"]
    assert _asked(await other.get_items()) == ["q1", "q2b", "q3 again"]
    assert (await store.session("s")).head_run_id == head  # type: ignore[union-attr]
    assert _asked(await shared.get_items()) == ["q1", "q2"]
    # checkout: back to a run of its own course (turn 2), then on from there.
    await pinned.checkout(Turn(2))
    assert _asked(await pinned.get_items()) == ["q1", "q2b"]
    await pinned.checkout(Turn(2))  # its end already: nothing changes
    await pinned.add_items([user("q3 third")])
    assert _asked(await pinned.get_items()) == ["q1", "q2b", "q3 third"]
    assert (await _names(store))["alt"] == ["q1", "q2b", "q3 third"]
    assert (await store.session("s")).head_run_id == head  # type: ignore[union-attr]


async def test_a_pinned_object_s_tree_refusals(store: Store) -> None:
    _, pinned = await _pinned_beside_the_head(store)
    main_second = (await store.runs("s", branch="main"))[1].id
    end = (await store.runs("s", branch="alt"))[-1].id
    before = await _names(store)
    with pytest.raises(InvalidOperationError, match="not on branch"):
        await pinned.checkout(main_second)
    with pytest.raises(InvalidOperationError, match="not on branch"):
        await pinned.rewind(Turn(2, "main"))
    with pytest.raises(InvalidOperationError, match="turn 1"):
        await pinned.rewind(Turn(1))
    with pytest.raises(ConflictError):
        await pinned.rewind(Turn(2), expected_head=main_second)
    with pytest.raises(NotFoundError):
        await pinned.rewind(10**9)
    with pytest.raises(NotFoundError):
        await pinned.checkout(Turn(7))
    assert await _names(store) == before
    assert (await pinned.get_items())[-1]["content"] == "q2b"
    await pinned.rewind(Turn(2), expected_head=end)
    with pytest.raises(InvalidOperationError, match="no run of its own"):  # not written yet
        await pinned.pop_item()


async def test_a_pinned_pop_takes_its_branch_s_newest_item(store: Store) -> None:
    shared, pinned = await _pinned_beside_the_head(store)
    head = (await store.session("s")).head_run_id  # type: ignore[union-attr]
    await pinned.add_items([assistant("a2b")])
    popped = await pinned.pop_item()
    assert popped is not None
    assert popped["content"][0]["text"] == "a2b"
    assert _asked(await shared.get_items()) == ["q1", "q2"]
    assert (await store.session("s")).head_run_id == head  # type: ignore[union-attr]
    # q2b is alt's only run of its own: popping it would delete the branch.
    with pytest.raises(InvalidOperationError, match="delete the branch"):
        await pinned.pop_item()
    await pinned.add_items([user("q3")])
    assert (await pinned.pop_item())["content"] == "q3"  # a run of alt's removed whole
    assert _asked(await pinned.get_items()) == ["q1", "q2b"]
    assert (await store.session("s")).head_run_id == head  # type: ignore[union-attr]
    await assert_kept(store)  # the session's totals, kept by the writes


async def test_a_pinned_pop_refuses_to_hand_its_branch_to_another(store: Store) -> None:
    # main: q1 → q2 → q3, and a younger sibling of q3 (branch "side"): popping q3 would
    # remove run q3, and main would then continue through side's run.
    pinned = StructuredSession("s", store, branch="main")
    for text in ("q1", "q2", "q3"):
        await pinned.add_items([user(text)])
    third = (await store.runs("s"))[-1]
    side = await store.fork("s", third.id, "q3 side")
    await store.name_branch("s", side.id, "side")
    with pytest.raises(InvalidOperationError, match="continue through"):
        await pinned.pop_item()
    assert _asked(await pinned.get_items()) == ["q1", "q2", "q3"]
    # Once side is gone q3 goes, and the head that stood on it moves up.
    await store.delete_branch("s", "side", force=True)
    await store.move_head("s", third.id, to_parent=False)
    assert (await pinned.pop_item())["content"] == "q3"
    assert _asked(await pinned.get_items()) == ["q1", "q2"]
    assert (await store.session("s")).head_run_id == third.parent_id  # type: ignore[union-attr]
    await assert_kept(store)


async def test_a_pinned_session_edited_and_rewound_under_the_runner(store: Store) -> None:
    # The real Runner on a pinned object: an edit answered with [], a rewind then a new
    # question; each lands on the object's branch, and the head's course is untouched.
    from agents import Agent, Runner
    from agents.testing import ModelStep, ScriptedModel, assistant_message

    shared, pinned = await _pinned_beside_the_head(store)
    head = (await store.session("s")).head_run_id  # type: ignore[union-attr]
    steps = [ModelStep(output=[assistant_message(f"answer {n}")]) for n in range(3)]
    agent = Agent("assistant", model=ScriptedModel(steps))

    def said(items: list[Any]) -> list[str]:
        return [
            item["content"] if item.get("role") == "user" else item["content"][0]["text"]
            for item in items
        ]

    await Runner.run(agent, "q3", session=pinned)
    await pinned.edit(Turn(3), "q3 edited")
    await Runner.run(agent, [], session=pinned)
    assert said(await pinned.get_items()) == ["q1", "q2b", "q3 edited", "answer 1"]
    await pinned.rewind(Turn(3))
    await Runner.run(agent, "q3 third", session=pinned)
    assert said(await pinned.get_items()) == ["q1", "q2b", "q3 third", "answer 2"]
    assert (await _names(store))["alt"] == ["q1", "q2b", "q3 third"]
    assert (await store.session("s")).head_run_id == head  # type: ignore[union-attr]
    assert said(await shared.get_items()) == ["q1", "q2"]
    runs = await store.runs("s", branch="alt")
    assert [run.assistant_message for run in runs][-1] == "answer 2"


async def test_an_edit_after_branching_follows_the_branch_it_made(store: Store) -> None:
    # create_branch_from_turn then edit: the edit's run takes the new name, and the object
    # follows it, as it follows the branch its next add_items makes.
    pinned = StructuredSession("s", store, branch="main")
    for tag in ("q1", "q2", "q3"):
        await pinned.add_items(run_items(tag))
    await pinned.create_branch_from_turn(3, "alt")
    run = await pinned.edit(Turn(2), "q2 edited")
    assert pinned.branch == "alt"
    assert _asked(await pinned.get_items()) == ["q1", "q2 edited"]
    assert (await _names(store))["alt"] == ["q1", "q2 edited"]
    assert (await store.runs("s", branch="alt"))[-1].id == run.id
    await pinned.add_items(run_items("q3 again"))
    assert (await _names(store))["alt"] == ["q1", "q2 edited", "q3 again"]
    assert (await _names(store))["main"] == ["q1", "q2", "q3"]


async def test_pinned_objects_starting_one_session_side_by_side(store: Store) -> None:
    # Two objects pinned to different names write a new session's first run at once: one
    # makes its branch, the other finds runs and not its name, as it would after the first;
    # neither writes onto the other's run nor renames its branch.
    one = StructuredSession("s", store, branch="one")
    two = StructuredSession("s", store, branch="two")
    results = await asyncio.gather(
        one.add_items(run_items("q one")), two.add_items(run_items("q two")), return_exceptions=True
    )
    refused = [result for result in results if result is not None]
    assert len(refused) == 1
    assert isinstance(refused[0], NotFoundError)
    first, tag = (one, "one") if results[0] is None else (two, "two")
    assert await _names(store) == {tag: [f"q {tag}"]}
    assert _asked(await first.get_items()) == [f"q {tag}"]
    # Objects pinned to one name share its branch however they interleave.
    same = [StructuredSession("t", store, branch="main") for _ in range(4)]
    await asyncio.gather(*(pinned.add_items(run_items(f"q{n}")) for n, pinned in enumerate(same)))
    assert sorted(_asked(await same[0].get_items())) == ["q0", "q1", "q2", "q3"]
    assert [found.name for found in await store.branches("t")] == ["main"]
    await assert_kept(store)


async def test_a_pinned_object_beside_a_head_rewound_to_the_empty_path(store: Store) -> None:
    # An object without branch= rewinds the head above turn 1: the pinned branch is still
    # there, and the pinned object reads it and writes at its end (not a new root).
    pinned = StructuredSession("s", store, branch="main")
    await pinned.add_items(run_items("q1"))
    await pinned.add_items(run_items("q2"))
    await StructuredSession("s", store).rewind(Turn(1))
    assert _asked(await pinned.get_items()) == ["q1", "q2"]
    await pinned.add_items(run_items("q3"))
    assert _asked(await pinned.get_items()) == ["q1", "q2", "q3"]
    assert (await _names(store))["main"] == ["q1", "q2", "q3"]
    assert (await store.session("s")).head_run_id is None  # type: ignore[union-attr]
    assert (await pinned.pop_item())["id"] == "m-q3"
    assert await store.get_items("s") == []
    await assert_kept(store)


async def test_a_pinned_edit_cancelled_while_it_writes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cancellation arrives while the fork is written: the edit ends whole (its run
    # stored and holding the branch's name, the object on it), not a run nobody names.
    pinned = StructuredSession("s", store, branch="main")
    for tag in ("q1", "q2"):
        await pinned.add_items(run_items(tag))
    fork = store.fork

    async def cancelled_meanwhile(*args: Any, **kwargs: Any) -> Any:
        editing.cancel()
        return await fork(*args, **kwargs)

    monkeypatch.setattr(store, "fork", cancelled_meanwhile)
    editing = asyncio.ensure_future(pinned.edit(Turn(2), "q2 edited"))
    with pytest.raises(asyncio.CancelledError):
        await editing
    assert await _names(store) == {"main": ["q1", "q2 edited"], None: ["q1", "q2"]}
    assert _asked(await pinned.get_items()) == ["q1", "q2 edited"]


async def test_a_pinned_write_cancelled_after_a_rewind(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cancellation arrives while the question that follows a rewind is written: the run
    # it starts still takes the branch's name, and the next write follows it.
    pinned = StructuredSession("s", store, branch="main")
    for tag in ("q1", "q2", "q3"):
        await pinned.add_items(run_items(tag))
    await pinned.rewind(Turn(3))
    add_items = store.add_items

    async def cancelled_meanwhile(*args: Any, **kwargs: Any) -> Any:
        writing.cancel()
        return await add_items(*args, **kwargs)

    monkeypatch.setattr(store, "add_items", cancelled_meanwhile)
    writing = asyncio.ensure_future(pinned.add_items(run_items("q3 again")))
    with pytest.raises(asyncio.CancelledError):
        await writing
    monkeypatch.undo()
    await pinned.add_items(run_items("q4"))
    assert _asked(await pinned.get_items()) == ["q1", "q2", "q3 again", "q4"]
    assert await _names(store) == {"main": ["q1", "q2", "q3 again", "q4"], None: ["q1", "q2", "q3"]}


# -- an edit and its branch's name are one write ---------------------------------------------


async def test_a_pinned_edit_whose_name_is_refused_writes_nothing(store: Store) -> None:
    # create_branch_from_turn's name is taken by another writer before the edit that starts
    # the branch: the edit is refused whole (no sibling nobody names), the object unmoved.
    pinned = StructuredSession("s", store, branch="main")
    for tag in ("q1", "q2", "q3"):
        await pinned.add_items(run_items(tag))
    await pinned.create_branch_from_turn(3, "alt")
    await store.name_branch("s", (await store.fork("s", Turn(2), "elsewhere")).id, "alt")
    before = await snapshot(store)
    with pytest.raises(InvalidOperationError, match="already has a branch named 'alt'"):
        await pinned.edit(Turn(2), "q2 edited")
    assert await snapshot(store) == before
    assert pinned.branch == "main"
    assert _asked(await pinned.get_items()) == ["q1", "q2"]  # still where it branched


async def test_a_pinned_edit_whose_naming_statement_fails_writes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fault in the naming statement, after the fork's own statements: the name inserted
    # without its check, which the database refuses (UNIQUE (session_id, name)). The whole
    # write rolls back: no new run, the old course still named, the object where it was.
    pinned = StructuredSession("s", store, branch="main")
    for tag in ("q1", "q2"):
        await pinned.add_items(run_items(tag))

    def unchecked(session_id: str, fork: int, name: str, *, take: bool = False) -> Any:
        yield S.NAME_BRANCH({"sid": session_id, "id": fork, "name": name})

    monkeypatch.setattr(history, "name_new_branch", unchecked)
    before = await snapshot(store)
    with pytest.raises(StorageError):
        await pinned.edit(Turn(2), "q2 edited")
    assert await snapshot(store) == before
    assert await _names(store) == {"main": ["q1", "q2"]}
    monkeypatch.undo()
    await pinned.edit(Turn(2), "q2 edited")  # the same edit, whole this time
    assert await _names(store) == {"main": ["q1", "q2 edited"], None: ["q1", "q2"]}


async def test_a_pinned_edit_cancelled_anywhere_stores_both_or_neither(store: Store) -> None:
    # A cancellation at each step of the event loop in turn, from before the edit starts on:
    # the sibling is stored with the branch's name and the object follows it,
    # or nothing is stored and the object stays; its next write continues whichever it is.
    outcomes = set()
    for step in range(40):
        sid = f"s{step}"
        pinned = StructuredSession(sid, store, branch="main")
        for tag in ("q1", "q2"):
            await pinned.add_items(run_items(tag))
        await _cancelled_after(pinned.edit(Turn(2), "q2 edited"), step)
        names = await _names(store, sid)
        edited = names != {"main": ["q1", "q2"]}
        if edited:
            assert names == {"main": ["q1", "q2 edited"], None: ["q1", "q2"]}
        outcomes.add(edited)
        course = ["q1", "q2 edited"] if edited else ["q1", "q2"]
        assert _asked(await pinned.get_items()) == course
        await pinned.add_items(run_items("q3"))
        assert (await _names(store, sid))["main"] == [*course, "q3"]
    assert outcomes == {False, True}  # both ends were reached


# -- a move back to a run that another writer deleted ------------------------------------------


async def _rewound_then_deleted(store: Store) -> StructuredSession:
    """An object pinned to main (q1 to q4) rewound to turn 4, its next write to go below q3;
    then another writer deletes q3 and q4 while the head stands on q2: main stays, ending at
    q2 (the head above the deleted runs keeps its path, and the name with it)."""
    pinned = StructuredSession("s", store, branch="main")
    for tag in ("q1", "q2", "q3", "q4"):
        await pinned.add_items(run_items(tag))
    runs = await store.runs("s")
    await pinned.rewind(Turn(4))
    await store.move_head("s", runs[1].id, to_parent=False)
    await store.delete_branch("s", runs[2].id)
    assert await _names(store) == {"main": ["q1", "q2"]}
    return pinned


CALLS_AT_THE_END = {
    "get_items": lambda pinned: pinned.get_items(),
    "add_items": lambda pinned: pinned.add_items(run_items("q3 again")),
    "edit": lambda pinned: pinned.edit(Turn(2), "q2 edited"),
    "regenerate": lambda pinned: pinned.regenerate(Turn(2)),
    "rewind": lambda pinned: pinned.rewind(Turn(2)),
    "checkout": lambda pinned: pinned.checkout(Turn(1)),
    "annotate": lambda pinned: pinned.annotate("thumbs", value=1),
}


@pytest.mark.parametrize("call", sorted(CALLS_AT_THE_END))
async def test_a_move_back_to_a_deleted_run_fails_once_and_says_so(store: Store, call: str) -> None:
    # The object's next call says the run it moved back to is gone and does nothing; the
    # move is dropped, so the calls after it act on the branch as it is now, rather than
    # failing with "no run N" until switch_to_branch.
    pinned = await _rewound_then_deleted(store)
    before = await snapshot(store)
    with pytest.raises(NotFoundError, match="was deleted by another writer"):
        await CALLS_AT_THE_END[call](pinned)
    assert await snapshot(store) == before
    assert pinned.branch == "main"
    assert _asked(await pinned.get_items()) == ["q1", "q2"]
    await pinned.add_items(run_items("q3 again"))
    assert await _names(store) == {"main": ["q1", "q2", "q3 again"]}


async def test_a_new_branch_below_a_deleted_run_fails_once_then_the_branch_s_own_error(
    store: Store,
) -> None:
    # create_branch_from_turn's run and the pinned branch both deleted: the first call says
    # which run went and which branch it was to start, the next that the branch is gone (as
    # for any pinned object whose branch another writer deleted), and switch_to_branch
    # moves the object on.
    pinned = StructuredSession("s", store, branch="main")
    for tag in ("q1", "q2", "q3"):
        await pinned.add_items(run_items(tag))
    await store.fork("s", Turn(2), "q2 side", name="side")
    await pinned.create_branch_from_turn(3, "alt")
    await store.delete_branch("s", "main", force=True)
    with pytest.raises(NotFoundError, match=r"branch 'alt'.*was deleted by another writer"):
        await pinned.add_items(run_items("q3 again"))
    with pytest.raises(NotFoundError, match="no branch named 'main'"):
        await pinned.add_items(run_items("q3 again"))
    await pinned.switch_to_branch("side")
    await pinned.add_items(run_items("q3 side"))
    assert await _names(store) == {"side": ["q1", "q2 side", "q3 side"]}


# -- a write that starts a pending branch and the branch's name are one write -----------------

# The tree once "alt", made by create_branch_from_turn(3, "alt"), holds the write after it.
BRANCHED = {"main": ["q1", "q2", "q3"], "alt": ["q1", "q2", "q3 again"]}


async def _branched(store: Store, session_id: str, *, pinned: bool) -> StructuredSession:
    """q1, q2, q3 on branch "main", then create_branch_from_turn(3, "alt"): the object's next
    write of items starts "alt" below q2 (pinned: the object's course; else the head)."""
    session = StructuredSession(session_id, store, branch="main" if pinned else None)
    for tag in ("q1", "q2", "q3"):
        await session.add_items(run_items(tag))
    if not pinned:
        await session.name_branch("main")
    await session.create_branch_from_turn(3, "alt")
    return session


@pytest.mark.parametrize("pinned", [False, True])
async def test_a_write_after_branching_whose_name_is_refused_writes_nothing(
    store: Store, pinned: bool
) -> None:
    # Another writer takes "alt" before the write that starts it: the write is refused whole
    # (no run that nobody names), and the object still starts "alt" with its next write.
    session = await _branched(store, "s", pinned=pinned)
    taken = await store.fork("s", Turn(2, "main"), "elsewhere", branch="main", name="alt")
    before = await snapshot(store)
    with pytest.raises(InvalidOperationError, match="already has a branch named 'alt'"):
        await session.add_items(run_items("q3 again"))
    assert await snapshot(store) == before
    assert session.branch == ("main" if pinned else None)
    assert _asked(await session.get_items()) == ["q1", "q2"]  # still where it branched
    await store.name_branch("s", taken.id, None)
    await session.add_items(run_items("q3 again"))
    assert (await _names(store))["alt"] == BRANCHED["alt"]


@pytest.mark.parametrize("pinned", [False, True])
async def test_a_write_after_branching_whose_naming_statement_fails_writes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch, pinned: bool
) -> None:
    # A fault in the naming statement, after the batch's own statements: the name inserted
    # twice, which the database refuses. The whole write rolls back: no new run, no name, the
    # object where it was; the same write then goes through whole.
    session = await _branched(store, "s", pinned=pinned)

    def twice(session_id: str, fork: int, name: str, *, take: bool = False) -> Any:
        for _ in range(2):
            yield S.NAME_BRANCH({"sid": session_id, "id": fork, "name": name})

    monkeypatch.setattr(append, "name_new_branch", twice)
    before = await snapshot(store)
    with pytest.raises(StorageError):
        await session.add_items(run_items("q3 again"))
    assert await snapshot(store) == before
    assert _asked(await session.get_items()) == ["q1", "q2"]
    monkeypatch.undo()
    await session.add_items(run_items("q3 again"))
    assert await _names(store) == BRANCHED
    assert session.branch == ("alt" if pinned else None)


@pytest.mark.parametrize("pinned", [False, True])
async def test_a_write_after_branching_cancelled_anywhere_stores_both_or_neither(
    store: Store, pinned: bool
) -> None:
    # A cancellation at each step of the event loop in turn, from before the write starts
    # on: its run is stored holding "alt" and a pinned object follows it, or nothing is
    # stored and the object still starts "alt" with its next write.
    outcomes = set()
    for step in range(40):
        sid = f"s{step}"
        session = await _branched(store, sid, pinned=pinned)
        await _cancelled_after(session.add_items(run_items("q3 again")), step)
        names = await _names(store, sid)
        written = names != {"main": BRANCHED["main"]}
        if written:
            assert names == BRANCHED
        outcomes.add(written)
        course = BRANCHED["alt"] if written else ["q1", "q2"]
        assert _asked(await session.get_items()) == course
        assert session.branch == (None if not pinned else "alt" if written else "main")
        await session.add_items(run_items("q4"))
        assert (await _names(store, sid))["alt"] == [*course, "q4"]
    assert outcomes == {False, True}  # both ends were reached


async def test_a_write_after_branching_sent_elsewhere_by_another_writer_is_unnamed(
    store: Store,
) -> None:
    # Another writer moves the head after create_branch_from_turn: this object's write
    # follows the head (it is not pinned) and starts no "alt"; the name is dropped.
    session = await _branched(store, "s", pinned=False)
    await store.switch_to_branch("s", "main")
    await session.add_items(run_items("q4"))
    await session.add_items(run_items("q5"))
    assert await _names(store) == {"main": ["q1", "q2", "q3", "q4", "q5"]}


async def test_usage_alone_leaves_a_pinned_rewind_pending(store: Store) -> None:
    # A write of usage alone (a Runner call's tokens, no items) starts no run: the object
    # stays moved back, and its next question starts the run that takes the name.
    pinned = StructuredSession("s", store, branch="main")
    for tag in ("q1", "q2", "q3"):
        await pinned.add_items(run_items(tag))
    await pinned.rewind(Turn(3))
    usage = SimpleNamespace(requests=1, input_tokens=2, output_tokens=3, total_tokens=5)
    await pinned.add_items([], wrapper=SimpleNamespace(usage=usage))
    assert _asked(await pinned.get_items()) == ["q1", "q2"]
    await pinned.add_items(run_items("q3 again"))
    assert await _names(store) == {"main": ["q1", "q2", "q3 again"], None: ["q1", "q2", "q3"]}


@pytest.mark.parametrize("call", sorted(CALLS_AT_THE_END))
async def test_a_call_cancelled_while_its_deleted_move_is_checked(
    store: Store, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    # The call below the deleted run fails (nothing stored), and a cancellation arrives while
    # the object reads whether that run is gone: the call raises its own error, not the
    # cancellation (which from a write says that it is stored: docs/reliability.md), and
    # what add_items was to write (the object's catalogue fields, given with its first
    # write) waits for the write that stores it.
    writer = StructuredSession("s", store)
    for tag in ("q1", "q2", "q3", "q4"):
        await writer.add_items(run_items(tag))
    runs = await store.runs("s")
    await store.name_branch("s", runs[0].id, "main")
    pinned = StructuredSession("s", store, branch="main", title="kept")
    await pinned.rewind(Turn(4))
    await store.move_head("s", runs[1].id, to_parent=False)
    await store.delete_branch("s", runs[2].id)
    before = await snapshot(store)
    run = store.run

    async def cancelled_meanwhile(*args: Any, **kwargs: Any) -> Any:
        calling.cancel()
        return await run(*args, **kwargs)

    monkeypatch.setattr(store, "run", cancelled_meanwhile)
    calling = asyncio.ensure_future(CALLS_AT_THE_END[call](pinned))
    # An edit's check ends under its write's shield (finish_write); any other call's is cut
    # short, and the next call makes it.
    shielded = call in ("edit", "regenerate")
    with pytest.raises(NotFoundError, match="was deleted by" if shielded else r"no run \d+$"):
        await calling
    monkeypatch.undo()
    assert await snapshot(store) == before
    if not shielded:
        with pytest.raises(NotFoundError, match="was deleted by another writer"):
            await pinned.get_items()
    assert _asked(await pinned.get_items()) == ["q1", "q2"]
    await pinned.add_items(run_items("q3 again"))
    assert await _names(store) == {"main": ["q1", "q2", "q3 again"]}
    assert (await store.session("s")).title == "kept"  # type: ignore[union-attr]


@pytest.mark.parametrize("pinned", [False, True])
async def test_a_write_that_joins_the_branching_run_after_its_children_went_is_kept(
    store: Store, pinned: bool
) -> None:
    # Another writer pops the run the new branch was to sit beside (q3), so q2 is a leaf:
    # a write without a user message (the answer of a Runner call given no new question)
    # joins q2 and starts no run. It is stored (a Runner call failing there would lose the
    # model's output), and q2's branch takes the name, as a run starting below q2, its first
    # child, would have given it: the object is on "alt" and its next question continues it.
    session = await _branched(store, "s", pinned=pinned)
    for _ in run_items("q3"):
        await store.pop_item("s", branch="main")
    await session.add_items([assistant("kept", item_id="m-kept")])
    assert await _names(store) == {"alt": ["q1", "q2"]}
    assert session.branch == ("alt" if pinned else None)
    await session.add_items(run_items("q3 again"))
    assert await _names(store) == {"alt": ["q1", "q2", "q3 again"]}
    items = await session.get_items()
    assert items[8]["id"] == "m-kept"
    assert _asked(items) == ["q1", "q2", "q3 again"]


@pytest.mark.parametrize("pinned", [False, True])
async def test_branching_from_a_turn_counts_along_the_object_s_course(
    store: Store, pinned: bool
) -> None:
    # After a rewind to turn 2 the object's course is q1, q2: it has no turn 5 to branch
    # from, pinned or not (a pinned one counted along its branch's whole old course, and its
    # next question went below q4, which it no longer showed), and nothing changes.
    session = StructuredSession("s", store, branch="main" if pinned else None)
    for tag in ("q1", "q2", "q3", "q4", "q5"):
        await session.add_items(run_items(tag))
    if not pinned:
        await session.name_branch("main")
    await session.rewind(Turn(3))
    with pytest.raises(RunNotFoundError, match=r"turn[: ]5"):
        await session.create_branch_from_turn(5, "b")
    assert _asked(await session.get_items()) == ["q1", "q2"]
    await session.create_branch_from_turn(2, "b")
    await session.add_items(run_items("q2b"))
    assert (await _names(store))["b"] == ["q1", "q2b"]
    assert (await _names(store))["main"] == ["q1", "q2", "q3", "q4", "q5"]
    assert session.branch == ("b" if pinned else None)


@pytest.mark.parametrize("pinned", [False, True])
async def test_branching_from_a_turn_cancelled_anywhere_moves_both_or_neither(
    store: Store, pinned: bool
) -> None:
    # A cancellation at each step of the event loop in turn: the object's next write starts
    # "alt" below q2 (it moved, and the name waits for that write), or it moved nothing and
    # the write continues "main". Never moved without the name: an unnamed run below q2,
    # and create_branch_from_turn(3) refused when tried again (the path is two turns long).
    outcomes = set()
    step, ended = 0, False
    while not ended:
        step += 1
        sid = f"s{step}"
        session = StructuredSession(sid, store, branch="main" if pinned else None)
        for tag in ("q1", "q2", "q3"):
            await session.add_items(run_items(tag))
        if not pinned:
            await session.name_branch("main")
        ended = await _cancelled_after(session.create_branch_from_turn(3, "alt"), step)
        await session.add_items(run_items("q3 again"))
        names = await _names(store, sid)
        moved = "alt" in names
        outcomes.add(moved)
        if moved:
            assert names == BRANCHED
        else:
            assert names == {"main": ["q1", "q2", "q3", "q3 again"]}
    assert outcomes == {False, True}  # both ends were reached


@pytest.mark.parametrize("pinned", [False, True])
async def test_a_switch_after_branching_drops_the_name_it_left_pending(
    store: Store, pinned: bool
) -> None:
    # create_branch_from_turn(3, "alt"), then back to "main" before writing: the branch is
    # given up. A question asked later below q2 again (a rewind) is not named "alt", pinned
    # or not (an object without branch= kept the name, and named that question with it).
    session = await _branched(store, "s", pinned=pinned)
    await session.switch_to_branch("main")
    await session.rewind(Turn(3))
    await session.add_items(run_items("q3 later"))
    assert "alt" not in await _names(store)


async def test_a_switch_after_branching_cancelled_anywhere_gives_the_branch_up_or_not_at_all(
    store: Store,
) -> None:
    # A cancellation at each step of the event loop in turn: the switch is stored (the head
    # on main's q3) and the pending "alt" given up, or the head stays below q2 and the next
    # question still starts "alt". Never switched with the name kept, nor the name dropped
    # without the switch.
    outcomes = set()
    step, ended = -1, False
    while not ended:
        step += 1  # from 0: cancelled before it starts
        sid = f"s{step}"
        session = await _branched(store, sid, pinned=False)
        main_end = (await store.runs(sid, branch="main"))[-1].id
        ended = await _cancelled_after(session.switch_to_branch("main"), step)
        switched = (await store.session(sid)).head_run_id == main_end  # type: ignore[union-attr]
        outcomes.add(switched)
        if switched:
            await session.rewind(Turn(3))
            await session.add_items(run_items("q3 later"))
            assert "alt" not in await _names(store, sid)
        else:
            await session.add_items(run_items("q3 again"))
            assert await _names(store, sid) == BRANCHED
    assert outcomes == {False, True}  # both ends were reached


async def test_a_pinned_object_s_turns_after_branching_are_those_of_its_course(
    store: Store, tmp_path: Path
) -> None:
    # After create_branch_from_turn(3) an object's turns, tools and turn usage are those of
    # the course it reads (get_items: q1, q2), as AdvancedSQLiteSession's are of the branch
    # it made; a pinned object read its branch's whole old course (turn 3 too).
    sdk = AdvancedSQLiteSession(
        session_id="s", db_path=str(tmp_path / "sdk.db"), create_tables=True
    )
    pinned = StructuredSession("s", store, branch="main")
    for tag in ("q1", "q2", "q3"):
        await sdk.add_items(run_items(tag))  # type: ignore[arg-type]
        await pinned.add_items(run_items(tag))
    await sdk.create_branch_from_turn(3, "alt")
    await pinned.create_branch_from_turn(3, "alt")
    for found in (await pinned.get_conversation_turns(), await pinned.find_turns_by_content("q")):
        assert [(turn["turn"], turn["full_content"]) for turn in found] == [(1, "q1"), (2, "q2")]
    for theirs in (await sdk.get_conversation_turns(), await sdk.find_turns_by_content("q")):
        assert [(turn["turn"], turn["full_content"]) for turn in theirs] == [(1, "q1"), (2, "q2")]
    assert await pinned.get_tool_usage() == await sdk.get_tool_usage()
    # A named branch is read whole, as before.
    assert len(await pinned.get_conversation_turns("main")) == 3

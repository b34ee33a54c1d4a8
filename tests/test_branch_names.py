"""Conformance tests of branches as users know them (issue 16): each branch's stable handle
(its fork run), where it forks and how (edit or regenerate), and names: unique per session,
renamed, unnamed, deleted with the branch, switched to; hostile names refused or kept exactly.
"""

from __future__ import annotations

import pytest

from builders import assistant, converse, head, path, snapshot, user
from support import sql
from turnstore import (
    ANY_HEAD,
    InvalidOperationError,
    NotFoundError,
    RunNotFoundError,
    Store,
    StructuredSession,
    Turn,
    Usage,
)


async def forked(session: StructuredSession) -> tuple[list[int], int, int]:
    """q1 → q2 → q3, with run 2 edited and regenerated: three branches, the head on the last."""
    runs = await converse(session, "q1", "q2", "q3")
    edited = await session.edit(runs[1], "q2 edited")
    await session.add_items([assistant("edited answer", item_id="m-e")])
    regenerated = await session.regenerate(runs[1])
    await session.add_items([assistant("another answer", item_id="m-r")])
    return runs, edited.id, regenerated.id


async def test_each_branch_says_where_it_forks_and_how(store: Store) -> None:
    session = StructuredSession("s", store)
    (r1, _r2, r3), edited, regenerated = await forked(session)
    found = [
        (b.leaf_run_id, b.fork_run_id, b.forks_from, b.origin, b.active)
        for b in await session.branches()
    ]
    assert found == [
        (r3, r1, None, None, False),  # the first branch starts at the root
        (edited, edited, r1, "edit", False),
        (regenerated, regenerated, r1, "regenerate", True),
    ]


async def test_the_handle_stays_as_the_branch_grows(store: Store) -> None:
    session = StructuredSession("s", store)
    (r1, _r2, r3), edited, regenerated = await forked(session)
    await session.checkout(edited)
    await converse(session, "more", "and more")
    await session.checkout(r3)
    await converse(session, "first grows")
    branches = await session.branches()  # ordered by where they start, not by their leaves
    assert [b.fork_run_id for b in branches] == [r1, edited, regenerated]
    assert [b.last_user_message for b in branches] == ["first grows", "and more", "q2"]


async def test_name_rename_unname_and_switch(store: Store) -> None:
    session = StructuredSession("s", store)
    (_r1, r2, r3), edited, regenerated = await forked(session)
    named = await session.name_branch("packing list")  # the head's branch
    assert (named.fork_run_id, named.name, named.leaf_run_id) == (
        regenerated,
        "packing list",
        regenerated,
    )
    await store.name_branch("s", r2, "main")  # any run of the branch names it
    await store.name_branch("s", edited, "draft")
    assert [b.name for b in await session.branches()] == ["main", "draft", "packing list"]

    assert await session.switch_to_branch("draft") == edited
    assert await head(store) == edited
    assert await path(session) == ["q1", "q2 edited"]
    await converse(session, "grown")  # the name follows the branch as it grows
    assert await session.switch_to_branch("main") == r3
    assert await session.switch_to_branch("draft") == (await session.runs())[-1].id
    assert await path(session) == ["q1", "q2 edited", "grown"]

    renamed = await store.name_branch("s", edited, "final")
    assert renamed.name == "final"
    with pytest.raises(NotFoundError, match="no branch named 'draft'"):
        await session.switch_to_branch("draft")
    unnamed = await store.name_branch("s", edited, None)
    assert unnamed.name is None
    assert [b.name for b in await session.branches()] == ["main", None, "packing list"]
    assert await sql(store, "SELECT count(*) FROM branch_names") == [(2,)]


async def test_a_name_is_unique_in_its_session(store: Store) -> None:
    session = StructuredSession("s", store)
    (r1, _, _), edited, _ = await forked(session)
    other = StructuredSession("other", store)
    await converse(other, "elsewhere")
    await store.name_branch("s", r1, "main")
    before = await sql(store, "SELECT session_id, run_id, name FROM branch_names")
    with pytest.raises(InvalidOperationError, match="already has a branch named 'main'"):
        await store.name_branch("s", edited, "main")
    assert await sql(store, "SELECT session_id, run_id, name FROM branch_names") == before
    await store.name_branch("s", r1, "main")  # naming a branch its own name is no conflict
    await other.name_branch("main")  # another session may use it
    assert [b.name for b in await other.branches()] == ["main"]


@pytest.mark.parametrize(
    "name",
    [
        "What should I pack?",
        "'; DROP TABLE runs; --",
        "<script>alert(1)</script>",
        "ünïcødé 🧳 名前",
        "a" * 200,
        "%s %(x)s {0} :name ?",
        "\u202eevil",  # a bidi override is text, kept as given
    ],
)
async def test_hostile_names_are_stored_exactly(store: Store, name: str) -> None:
    session = StructuredSession("s", store)
    await converse(session, "q1")
    assert (await session.name_branch(name)).name == name
    assert [b.name for b in await session.branches()] == [name]
    assert await sql(store, "SELECT name FROM branch_names") == [(name,)]
    assert await session.switch_to_branch(name) == (await session.runs())[-1].id


@pytest.mark.parametrize(
    "name",
    ["", " ", " padded", "padded ", "line\nbreak", "tab\there", "esc\x1b[31m", "nul\x00",
     "\ud800", "a" * 201, 7, b"bytes"],
)  # fmt: skip
async def test_bad_names_are_refused(store: Store, name: object) -> None:
    session = StructuredSession("s", store)
    await converse(session, "q1")
    with pytest.raises(InvalidOperationError):
        await session.name_branch(name)  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError):
        await session.switch_to_branch(name)  # type: ignore[arg-type]
    assert await sql(store, "SELECT count(*) FROM branch_names") == [(0,)]


async def test_unknown_runs_and_names_are_refused(store: Store) -> None:
    session = StructuredSession("s", store)
    await converse(session, "q1")
    other = StructuredSession("other", store)
    (other_run,) = await converse(other, "elsewhere")
    with pytest.raises(RunNotFoundError):
        await store.name_branch("s", other_run, "x")  # a run of another session
    with pytest.raises(NotFoundError, match="no branch named 'x'"):
        await session.switch_to_branch("x")
    empty = StructuredSession("empty", store)
    with pytest.raises(InvalidOperationError, match="no head run"):
        await empty.name_branch("x")
    assert await sql(store, "SELECT count(*) FROM branch_names") == [(0,)]


async def test_deleting_a_branch_deletes_its_name(store: Store) -> None:
    session = StructuredSession("s", store)
    (r1, _r2, r3), edited, regenerated = await forked(session)
    await store.name_branch("s", r3, "main")
    await store.name_branch("s", edited, "draft")
    await store.name_branch("s", regenerated, "retry")

    await session.delete_branch(edited)  # a younger child: its fork run goes with it
    assert [b.name for b in await session.branches()] == ["main", "retry"]

    # The branch that continued the fork (its oldest child) goes: the next branch there
    # takes over the fork run and keeps its own name; "main" goes.
    await session.delete_branch(r3)
    branches = await session.branches()
    assert [(b.fork_run_id, b.name, b.origin) for b in branches] == [(r1, "retry", None)]
    assert await session.switch_to_branch("retry") == regenerated
    with pytest.raises(NotFoundError):
        await session.switch_to_branch("main")
    assert await sql(store, "SELECT run_id, name FROM branch_names") == [(r1, "retry")]


async def test_clearing_or_deleting_the_session_deletes_its_names(store: Store) -> None:
    session = StructuredSession("s", store)
    await converse(session, "q1")
    await session.name_branch("main")
    await session.clear_session()
    assert await sql(store, "SELECT count(*) FROM branch_names") == [(0,)]
    await converse(session, "q1")
    await session.name_branch("main")
    await store.delete_session("s")
    assert await sql(store, "SELECT count(*) FROM branch_names") == [(0,)]


async def test_two_branches_with_the_same_last_message_are_told_apart(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("What should I pack?"), assistant("A coat.", item_id="a")])
    (first,) = [run.id for run in await session.runs()]
    await session.regenerate(first)
    await session.add_items([assistant("Sunscreen.", item_id="b")])
    await store.name_branch("s", first, "cold")
    await session.name_branch("warm")
    branches = await session.branches()
    assert [b.last_user_message for b in branches] == ["What should I pack?"] * 2
    assert [(b.name, b.origin) for b in branches] == [("cold", None), ("warm", "regenerate")]


async def test_a_fork_names_the_branch_it_starts_in_its_own_write(store: Store) -> None:
    session = StructuredSession("s", store)
    (r1, r2, r3), edited, _ = await forked(session)
    await store.name_branch("s", r3, "main")
    named = await store.fork("s", r2, "q2 named", name="named")
    by_name = {b.name: b for b in await store.branches("s")}
    assert (by_name["named"].fork_run_id, by_name["named"].leaf_run_id) == (named.id, named.id)
    assert await head(store) == named.id
    # A name another branch holds is refused, and nothing is written: no run, no name moved.
    before = await snapshot(store)
    with pytest.raises(InvalidOperationError, match="already has a branch named 'main'"):
        await store.fork("s", r2, "q2 again", name="main")
    assert await snapshot(store) == before
    # take moves it to the new branch; the one that held it stays, unnamed.
    taken = await store.fork(
        "s", Turn(2, "main"), "q2 again", branch="main", name="main", take=True
    )
    assert await head(store) == named.id  # a fork on a branch's course leaves the head
    by_name = {b.name: b for b in await store.branches("s")}
    assert by_name["main"].leaf_run_id == taken.id
    assert r3 in {b.leaf_run_id for b in await store.branches("s") if b.name is None}
    assert [run.id for run in await store.runs("s", branch="main")] == [r1, taken.id]
    assert edited in {b.leaf_run_id for b in await store.branches("s")}


@pytest.mark.parametrize(
    ("name", "take"),
    [("", False), (" padded", False), ("line\nbreak", False), ("a" * 201, False), (7, False),
     (None, True), ("x", "yes"), ("x", 1)],
)  # fmt: skip
async def test_a_fork_s_bad_name_or_take_is_refused(
    store: Store, name: object, take: object
) -> None:
    session = StructuredSession("s", store)
    _, second = await converse(session, "q1", "q2")
    before = await snapshot(store)
    with pytest.raises(InvalidOperationError, match=r"name|take"):
        await store.fork("s", second, "again", name=name, take=take)  # type: ignore[arg-type]
    assert await snapshot(store) == before


async def _branch_names(store: Store) -> dict[str | None, list[str | None]]:
    """Each branch's user messages, by its name (one unnamed branch at most in these tests)."""
    return {
        b.name: [run.user_message for run in await store.runs("s", branch=b.leaf_run_id)]
        for b in await store.branches("s")
    }


async def test_a_batch_names_the_branch_it_starts_in_its_own_write(store: Store) -> None:
    session = StructuredSession("s", store)
    _, r2, r3 = await converse(session, "q1", "q2", "q3")
    await store.name_branch("s", r3, "main")
    await store.move_head("s", r3, to_parent=True)  # below r2, which has a child: a branch
    named = await store.add_items("s", [user("q3 named")], name="named", name_below=r2)
    assert await _branch_names(store) == {
        "main": ["q1", "q2", "q3"],
        "named": ["q1", "q2", "q3 named"],
    }
    assert await head(store) == named
    # A name another branch holds is refused, and nothing is written: no run, no name moved.
    await store.move_head("s", named, to_parent=True)
    before = await snapshot(store)
    with pytest.raises(InvalidOperationError, match="already has a branch named 'main'"):
        await store.add_items("s", [user("q3 again")], name="main", name_below=r2)
    assert await snapshot(store) == before
    # take moves it; the branch that held it stays, unnamed. Later runs of the batch (a
    # second user message) continue the branch its first run starts.
    taken = await store.add_items(
        "s", [user("q3 taken"), user("q4 taken")], name="main", take=True, name_below=r2
    )
    assert await _branch_names(store) == {
        "main": ["q1", "q2", "q3 taken", "q4 taken"],
        "named": ["q1", "q2", "q3 named"],
        None: ["q1", "q2", "q3"],
    }
    assert await head(store) == taken
    # A batch written below another run than name_below (another writer moved the head
    # since the name was chosen) is stored unnamed; ANY_HEAD (no name_below) names it anyway.
    await store.move_head("s", r2, to_parent=True)
    elsewhere = await store.add_items("s", [user("q2 elsewhere")], name="late", name_below=r2)
    assert [b.name for b in await store.branches("s") if b.leaf_run_id == elsewhere] == [None]
    await store.move_head("s", elsewhere, to_parent=True)
    anywhere = await store.add_items("s", [user("q2 anywhere")], name="anywhere")
    assert [b.name for b in await store.branches("s") if b.leaf_run_id == anywhere] == ["anywhere"]
    # A first child continues its parent's branch, which takes the name (as name_branch).
    grown = await store.add_items("s", [user("q3 grown")], name="grown", name_below=anywhere)
    assert [b.name for b in await store.branches("s") if b.leaf_run_id == grown] == ["grown"]
    assert "anywhere" not in {b.name for b in await store.branches("s")}


async def test_a_batch_that_starts_no_run_names_the_branch_it_joins(store: Store) -> None:
    session = StructuredSession("s", store)
    _, second = await converse(session, "q1", "q2")
    before = await snapshot(store)
    # No items start no branch, and a session's first write at a branch name starts that
    # branch, named so already: both refused, nothing written.
    with pytest.raises(InvalidOperationError, match="no items starts no run"):
        await store.add_items("s", [], Usage(requests=1, total_tokens=3), name="x")
    with pytest.raises(InvalidOperationError, match="starts branch 'main'"):
        await store.add_items("new", [user("q1")], branch="main", name="x")
    assert await snapshot(store) == before
    # Items written below another run than name_below leave the name unused.
    await store.add_items("s", [assistant("more")], name="x", name_below=second + 1)
    assert [b.name for b in await store.branches("s")] == [None]
    # Items that join the run they are written at (a leaf's answer) are on its branch, which
    # takes the name, as a run they started there (its first child) would give it.
    await store.add_items("s", [assistant("more")], name="x", name_below=second)
    assert [(b.name, b.leaf_run_id) for b in await store.branches("s")] == [("x", second)]
    await store.add_items("s", [assistant("more")], name="y", take=True)
    assert await _branch_names(store) == {"y": ["q1", "q2"]}
    assert await head(store) == second


@pytest.mark.parametrize(
    ("name", "take", "below"),
    [("", False, ANY_HEAD), (" padded", False, ANY_HEAD), ("a" * 201, False, ANY_HEAD),
     (7, False, ANY_HEAD), (None, True, ANY_HEAD), ("x", "yes", ANY_HEAD), ("x", 1, ANY_HEAD),
     (None, False, 1), ("x", False, "1"), ("x", False, True), ("x", False, 1.0)],
)  # fmt: skip
async def test_a_batch_s_bad_name_take_or_name_below_is_refused(
    store: Store, name: object, take: object, below: object
) -> None:
    session = StructuredSession("s", store)
    await converse(session, "q1")
    before = await snapshot(store)
    with pytest.raises(InvalidOperationError, match=r"name|take"):
        await store.add_items(
            "s",
            [user("q2")],
            name=name,  # type: ignore[arg-type]
            take=take,  # type: ignore[arg-type]
            name_below=below,  # type: ignore[arg-type]
        )
    assert await snapshot(store) == before

"""The full read of a path (``get_items()``, and of a branch by its run: ``get_items(branch=)``)
returns the items of the runs the walk up from its end meets, as the model sees them, whatever
the tree's shape, on every backend.

PostgreSQL reads it in one statement of two arms (postgres/sql.py, ``_whole_path``): a
session whose path is every run it holds (a line) in one scan of its items, any other by the
walk. Where the shape is one the line's arm must not read (a branch, a head rewound above runs,
a compaction, a run deleted by hand), the tests check there that the walk ran; on a line, that
the line's arm did.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given

from builders import assistant, history, user
from chains import build_chain
from support import sql
from turnstore import Store
from turnstore.core import statements as S
from writes import PLAYED, STEPS, Step, ids, tree_runs

LINE, WALK = "line", "walk"


async def walked(store: Store, sid: str, leaf: int | None = None) -> list[Any]:
    """The items of the path up from ``leaf`` (default: the head), computed here from the
    session's tree: each run's step up is its parent, a compaction's the run before what it
    replaced; the walk stops at a run that is not there."""
    runs = {run.id: (run, items) for run, items in await store.tree(sid)}
    if leaf is None:
        info = await store.session(sid)
        leaf = None if info is None else info.head_run_id
    path: list[list[Any]] = []
    while leaf is not None and leaf in runs:
        run, items = runs[leaf]
        path.append(items)
        leaf = run.parent_id if run.kind is None else run.prior_run_id
    return [item for items in reversed(path) for item in items]


async def plan(store: Store, sid: str, leaf: int | None = None) -> dict[str, Any] | None:
    """PostgreSQL's full read as run (EXPLAIN ANALYZE); None on SQLite, which always walks."""
    if store.backend.dialect == "sqlite":
        return None
    from turnstore.postgres.sql import SQL

    statement = S.PATH_ITEMS if leaf is None else S.PATH_ITEMS_AT
    [(found,)] = await sql(
        store, "EXPLAIN (ANALYZE, FORMAT JSON) " + SQL[statement], sid=sid, leaf=leaf
    )
    return dict(found[0]["Plan"])


def find(node: dict[str, Any], key: str, value: str) -> dict[str, Any] | None:
    """The first node of ``node``'s plan whose ``key`` is ``value`` (``"Subplan Name"``,
    ``"CTE path"``)."""
    if node.get(key) == value:
        return node
    found = (find(child, key, value) for child in node.get("Plans", []))
    return next((n for n in found if n is not None), None)


async def arm(store: Store, sid: str, leaf: int | None = None) -> str | None:
    """Which arm of PostgreSQL's full read ran (``LINE`` or ``WALK``), from its plan as run;
    None on SQLite."""
    found = await plan(store, sid, leaf)
    if found is None:
        return None
    walk = find(found, "Subplan Name", "CTE path")
    assert walk is not None
    return WALK if walk["Actual Loops"] else LINE


def runs_read(node: dict[str, Any]) -> int:
    """How many rows of ``runs`` the plan ``node`` read."""
    own = node["Actual Rows"] * node["Actual Loops"] if node.get("Relation Name") == "runs" else 0
    return int(own) + sum(runs_read(child) for child in node.get("Plans", []))


async def check(store: Store, sid: str, expected: str, leaf: int | None = None) -> list[Any]:
    """The read equals the walk's items, by the arm ``expected`` on PostgreSQL; the items."""
    items = await store.get_items(sid, branch=leaf)
    assert items == await walked(store, sid, leaf)
    assert await arm(store, sid, leaf) in (None, expected)
    return items


async def turns(store: Store, sid: str, *tags: str) -> list[int]:
    """One run per tag (question, call, output, answer); their ids."""
    from builders import run_items

    for tag in tags:
        await store.add_items(sid, run_items(tag))
    return [run.id for run in await tree_runs(store, sid)][-len(tags) :]


async def delete_run(store: Store, sid: str, run_id: int) -> None:
    """Delete a run by hand, with its rows (docs/reliability.md: on PostgreSQL its rows name
    the session, not the run; on SQLite they go by its foreign keys)."""
    tables = ["runs"]
    if store.backend.dialect != "sqlite":
        tables = ["items", "tool_calls", "model_responses", "spans", "branch_names", *tables]
    for table in tables:
        column = "id" if table == "runs" else "run_id"
        await sql(
            store,
            f"DELETE FROM {table} WHERE session_id = {{sid}} AND {column} = {{id}}",
            write=True,
            sid=sid,
            id=run_id,
        )


async def recount(store: Store, sid: str) -> None:
    """The session's run_count set by hand to the runs it holds."""
    await sql(
        store,
        "UPDATE sessions SET run_count = (SELECT count(*) FROM runs r WHERE r.session_id = {sid})"
        " WHERE session_id = {sid}",
        write=True,
        sid=sid,
    )


# ---------------------------------------------------------------------------------------------
# A line: the line's arm


async def test_an_unbranched_session_is_read_as_a_line(store: Store) -> None:
    _, r2, r3 = await turns(store, "s", "q1", "q2", "q3")
    assert await check(store, "s", LINE) == history("q1", "q2", "q3")
    assert await check(store, "s", LINE, leaf=r3) == history("q1", "q2", "q3")
    # A branch read by a run above the end is a path of some of the runs: the walk.
    assert await check(store, "s", WALK, leaf=r2) == history("q1", "q2")
    assert await check(store, "other", WALK) == []  # no such session


async def test_a_session_that_is_a_line_again_after_a_delete_or_a_pop(store: Store) -> None:
    _, r2, _ = await turns(store, "s", "q1", "q2", "q3")
    edited = await store.fork("s", r2, "q2 edited")
    await check(store, "s", WALK)
    await store.delete_branch("s", r2)  # the old course: a line of newer ids
    assert await check(store, "s", LINE) == [*history("q1"), user("q2 edited")]
    await store.add_items("s", [assistant("a2")])
    await store.pop_item("s")
    await store.pop_item("s")  # the edited run emptied, and deleted
    assert await check(store, "s", LINE) == history("q1")
    assert edited.id not in [run.id for run in await tree_runs(store, "s")]


# ---------------------------------------------------------------------------------------------
# The walk: every shape whose path is not every run in id order


async def test_a_head_rewound_above_its_runs_is_walked(store: Store) -> None:
    r1, r2, _ = await turns(store, "s", "q1", "q2", "q3")
    await store.move_head("s", r2, to_parent=False)
    assert await check(store, "s", WALK) == history("q1", "q2")
    await store.move_head("s", r1, to_parent=True)  # the head at no run
    assert await check(store, "s", WALK) == []


async def test_a_branched_session_is_walked_on_either_branch(store: Store) -> None:
    _, r2, r3 = await turns(store, "s", "q1", "q2", "q3")
    edited = await store.fork("s", r2, None)  # a regenerate
    assert await check(store, "s", WALK) == [*history("q1"), user("q2")]
    await store.move_head("s", r3, to_parent=False)  # back to the old course
    assert await check(store, "s", WALK) == history("q1", "q2", "q3")
    assert await check(store, "s", WALK, leaf=edited.id) == [*history("q1"), user("q2")]


async def test_a_compaction_is_walked(store: Store) -> None:
    await turns(store, "s", "q1", "q2")
    summary = {"type": "compaction", "encrypted_content": "x"}
    assert await store.compact("s", [summary])
    assert await check(store, "s", WALK) == [summary]
    await turns(store, "s", "q3")
    assert await check(store, "s", WALK) == [summary, *history("q3")]


async def test_a_compacted_sessions_check_reads_only_the_runs_since_its_compaction(
    store: Store,
) -> None:
    """A compaction leaves the session's runs in a line of the tree (it is the head's child):
    the check that the path is a line reads the newest runs first and stops at the
    compaction, so a long session the SDK compacts is not read whole at every turn."""
    await build_chain(store, "s", 40)
    summary = {"type": "compaction", "encrypted_content": "x"}
    assert await store.compact("s", [summary])
    await turns(store, "s", "q1", "q2")
    assert await check(store, "s", WALK) == [summary, *history("q1", "q2")]
    found = await plan(store, "s")
    if found is not None:
        line = find(found, "Subplan Name", "CTE line")
        assert line is not None
        window = find(line, "Node Type", "WindowAgg")  # the check, past the head's row
        assert window is not None
        # The two runs since the compaction, the compaction, and the run below it, which
        # the compaction's step up is compared with.
        assert runs_read(window) <= 4


async def test_a_side_branch_deleted_by_hand_is_walked_until_recounted(store: Store) -> None:
    _, _, r3 = await turns(store, "s", "q1", "q2", "q3")
    edited = await store.fork("s", r3, "q3 edited")
    await store.move_head("s", r3, to_parent=False)
    await delete_run(store, "s", edited.id)
    # run_count still counts it: a line only in fact.
    assert await check(store, "s", WALK) == history("q1", "q2", "q3")
    await recount(store, "s")
    assert await check(store, "s", LINE) == history("q1", "q2", "q3")


async def test_a_path_run_deleted_by_hand_is_walked(store: Store) -> None:
    if store.backend.dialect == "sqlite":
        pytest.skip("SQLite's key on runs.parent_id refuses to delete a run with children")
    _, r2, r3 = await turns(store, "s", "q1", "q2", "q3")
    edited = await store.fork("s", r3, "q3 edited")
    await store.move_head("s", r3, to_parent=False)
    await delete_run(store, "s", r2)
    # The walk stops where the path's parent is missing, counted or not; and once recounted,
    # the runs left (r1, r3, the edit) are as many as the head's depth + 1, the ids in order.
    for _ in range(2):
        assert await check(store, "s", WALK) == history("q3")
        assert await check(store, "s", WALK, leaf=edited.id) == [user("q3 edited")]
        await recount(store, "s")


async def test_a_line_whose_parent_was_deleted_by_hand_is_walked(store: Store) -> None:
    if store.backend.dialect == "sqlite":
        pytest.skip("SQLite's key on runs.parent_id refuses to delete a run with children")
    await turns(store, "s", "q1", "q2", "q3")
    _, r2, r3 = [run.id for run in await tree_runs(store, "s")]
    edited = await store.fork("s", r2, "q2 edited")
    await turns(store, "s", "q3b")
    await delete_run(store, "s", r3)
    await delete_run(store, "s", edited.id)
    await recount(store, "s")
    # The runs left are a root, q2 and q3b, their depths 0, 1, 2 in id order, but q3b's parent
    # is the edit: the walk stops there.
    assert await check(store, "s", WALK) == history("q3b")


async def test_runs_not_counted_are_walked(store: Store) -> None:
    """Runs written by SQL without the session's totals: run_count lags what it holds."""
    _, r2, _ = await turns(store, "s", "q1", "q2", "q3")
    await store.move_head("s", r2, to_parent=False)
    await sql(store, "UPDATE sessions SET run_count = 2", write=True)
    assert await check(store, "s", WALK) == history("q1", "q2")


# ---------------------------------------------------------------------------------------------
# Any sequence of writes (tests/writes.py): the read is the walk's


@PLAYED
@given(steps=STEPS)
def test_the_read_is_the_walks_after_any_writes(
    shared_loop_store: tuple[asyncio.AbstractEventLoop, Store], steps: list[Step]
) -> None:
    loop, store = shared_loop_store
    prefix = f"p{next(ids)}-"

    async def play() -> None:
        for write, session, n in steps:
            sid = prefix + session
            await write(store, sid, n)
            assert await store.get_items(sid) == await walked(store, sid)
            for run in await tree_runs(store, sid):
                assert await store.get_items(sid, branch=run.id) == await walked(store, sid, run.id)

    loop.run_until_complete(play())

"""Deletes at any length (issue 26): a conversation of 100,000 runs is cleared, deleted, pruned,
cut by ``delete_branch`` and compacted on every backend, its rows gone and the others kept.

SQLite stops a chain of cascades at 1,000 levels, and ``runs.parent_id`` cascaded from each
run to its child: a session of 999 runs could not be cleared ("too many levels of trigger
recursion"). The long sessions are written by set-based SQL (tests/chains.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from builders import assistant, call, output, user
from chains import SESSION_TABLES, Chain, build_chain, chain_items, count_rows
from support import sql
from turnstore import Store

LONG = 100_000
GONE = dict.fromkeys(SESSION_TABLES, 0)
SUMMARY = {"type": "compaction", "encrypted_content": "the conversation so far"}


async def _other(store: Store) -> Any:
    """A short session beside the long one, with a fork, a tool call and a named branch; what
    a delete of the long one must leave exactly as it was."""
    await store.add_items(
        "other", [user("q1"), call("k", "tool"), output("k", "o"), assistant("a1")]
    )
    await store.add_items("other", [user("q2"), assistant("a2")])
    (_, second) = await store.runs("other")
    await store.fork("other", second.id, "q2, edited")
    await store.name_branch("other", second.id, "first try")
    return await _state(store)


async def _state(store: Store) -> Any:
    return (
        await count_rows(store, "other"),
        await store.get_items("other"),
        await store.tree("other"),
        await store.branches("other"),
    )


def _expected_tail(chain: Chain, runs: range) -> list[Any]:
    return [item for i in runs for item in chain_items(i, chain.calls_every)]


async def _long(store: Store, runs: int = LONG, *, when: datetime | None = None) -> Chain:
    chain = await build_chain(store, "long", runs, when=when)
    assert await count_rows(store, "long") == {
        **dict.fromkeys(("sessions", "branch_names"), 1),
        "runs": runs,
        "items": chain.items(),
        **dict.fromkeys(("tool_calls", "model_responses", "spans"), chain.calls()),
    }
    # The store reads it as its own.
    assert await store.get_items("long", limit=4) == _expected_tail(chain, range(runs - 2, runs))
    return chain


@pytest.mark.parametrize("runs", [999, 1_000])
async def test_clear_a_session_just_past_the_old_depth_limit(store: Store, runs: int) -> None:
    kept = await _other(store)
    await _long(store, runs)
    await store.clear_session("long")
    assert await count_rows(store, "long") == GONE
    assert await _state(store) == kept


async def _prune(store: Store) -> None:
    """What ``turnstore prune`` does to each idle session: delete it only if still idle."""
    cutoff = datetime.now(timezone.utc) - timedelta(days=90)
    page = await store.sessions(updated_before=cutoff, order_by="updated_at")
    assert [info.session_id for info in page.sessions] == ["long"]
    await store.delete_session("long", updated_before=cutoff)


WHOLE = {
    "clear_session": lambda store: store.clear_session("long"),
    "delete_session": lambda store: store.delete_session("long"),
    "prune": _prune,
}


@pytest.mark.parametrize("delete", WHOLE.values(), ids=WHOLE.keys())
async def test_delete_a_session_of_100k_runs(
    store: Store, delete: Callable[[Store], Awaitable[None]]
) -> None:
    kept = await _other(store)
    await _long(store, when=datetime.now(timezone.utc) - timedelta(days=365))
    await delete(store)
    assert await count_rows(store, "long") == GONE
    assert await store.session("long") is None
    assert await store.get_items("long") == []
    assert await _state(store) == kept


async def test_delete_a_branch_of_100k_runs(store: Store) -> None:
    """The second question edited, then the first version deleted from its leaf with the head
    there: the climb to the fork and the 99,999 runs below it go, the head moves to the root."""
    kept = await _other(store)
    chain = await _long(store)
    edited = await store.fork("long", chain.run_id(1), "question 1, edited")
    await store.move_head("long", chain.last_run, to_parent=False)
    assert await store.delete_branch("long", chain.last_run, force=True) == chain.first_run
    assert await store.get_items("long") == chain_items(0, chain.calls_every)
    assert [run.id for run in await store.runs("long")] == [chain.first_run]
    branches = await store.branches("long")
    assert [(branch.leaf_run_id, branch.name) for branch in branches] == [(edited.id, None)]
    assert await count_rows(store, "long") == {
        "sessions": 1,
        "runs": 2,
        "items": len(chain_items(0, chain.calls_every)) + 1,
        **dict.fromkeys(("tool_calls", "model_responses", "spans"), 1),  # run 0's
        "branch_names": 0,  # the deleted branch's name went with it
    }
    assert await _state(store) == kept


async def test_compact_a_session_of_100k_runs(store: Store) -> None:
    """The SDK's compaction through the store (``history_tail``, ``compact``): the newest
    turns, then the whole view, replaced; every original run stays in the transcript."""
    kept = await _other(store)
    chain = await _long(store)
    tail = await store.history_tail("long", 4)
    assert tail is not None
    assert tail.items == _expected_tail(chain, range(LONG - 2, LONG))
    assert await store.compact("long", [user(f"question {LONG - 2}"), SUMMARY], tail=tail)
    view = await store.get_items("long", limit=4)
    assert view == [
        *chain_items(LONG - 3, chain.calls_every),
        user(f"question {LONG - 2}"),
        SUMMARY,
    ]
    assert await store.compact("long", [SUMMARY])  # the whole view
    assert await store.get_items("long") == [SUMMARY]
    runs = await store.runs("long")
    assert len(runs) == LONG + 2
    assert [run.status for run in runs[-4:]] == ["compacted"] * 3 + [None]
    assert all(run.compacted_by == runs[-1].id for run in runs[: LONG - 2])
    assert await _state(store) == kept


async def _run_rows(store: Store) -> dict[str, dict[int, int]]:
    """Every table that holds rows of a run (a run_id column; views are not tables): how
    many rows of session "long" each run holds there. Read from the database's own schema,
    so that a table added later is checked too."""
    if store.backend.dialect == "sqlite":
        listing = """SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c
                     WHERE m.type = 'table' AND c.name = 'run_id'"""
    else:
        listing = """SELECT c.table_name FROM information_schema.columns c
                     JOIN information_schema.tables t USING (table_schema, table_name)
                     WHERE c.table_schema = current_schema() AND c.column_name = 'run_id'
                       AND t.table_type = 'BASE TABLE'"""
    found = {}
    for (table,) in await sql(store, listing):
        counts = await sql(
            store,
            f"SELECT run_id, count(*) FROM {table} WHERE session_id = {{sid}} GROUP BY run_id",
            sid="long",
        )
        found[table] = {int(run): int(count) for run, count in counts}
    return found


def _without(rows: dict[str, dict[int, int]], runs: set[int]) -> dict[str, dict[int, int]]:
    return {t: {r: n for r, n in counts.items() if r not in runs} for t, counts in rows.items()}


async def test_a_deleted_run_takes_every_row_it_holds(store: Store) -> None:
    """delete_branch and pop_item remove their runs' rows from every table that holds them
    (items, tool calls, model calls, spans, branch names, annotations of the run and of its
    tool calls) and leave every other run's (PostgreSQL: those rows' keys name the session,
    and the delete removes them itself)."""
    chain = await build_chain(store, "long", 4, calls_every=1)
    for i in range(4):
        await store.annotate(chain.run_id(i), "thumbs", value=1, session_id="long")
        (tool_call,) = await store.tool_calls(run_id=chain.run_id(i))
        await store.annotate(chain.run_id(i), "ok", tool_call_id=tool_call.id, session_id="long")
    await store.name_branch("long", chain.run_id(2), "from two")
    edited = await store.fork("long", chain.run_id(2), "question 2, edited")
    await store.annotate(edited.id, "thumbs", value=0, session_id="long")
    await store.name_branch("long", edited.id, "edited")
    before = await _run_rows(store)
    assert {"items", "tool_calls", "model_responses", "spans", "annotations"} <= {
        table for table, counts in before.items() if chain.run_id(3) in counts
    }
    await store.delete_branch("long", chain.run_id(2))
    gone = {chain.run_id(2), chain.run_id(3)}
    after = await _run_rows(store)
    # The root's branch carries on through the edit, under the edit's name (the other goes).
    assert after == _without(before, gone | {edited.id}) | {
        "branch_names": {chain.first_run: 1},
        "annotations": after["annotations"] | {edited.id: 1},
        "items": after["items"] | {edited.id: 1},
    }
    assert await store.pop_item("long") == user("question 2, edited")  # its run with it
    assert await _run_rows(store) == _without(after, {edited.id})

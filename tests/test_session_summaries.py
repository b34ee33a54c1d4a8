"""The catalogue's numbers (issue 16): what each session holds -- runs, branches, tokens, failed
runs and failed tool calls -- for a page of sessions in one query that searches indexes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from builders import assistant, call, converse, output, user
from turnstore import (
    InvalidOperationError,
    NewRun,
    SessionSummary,
    Store,
    StructuredSession,
    Usage,
    postgres,
    sqlite,
)
from turnstore.core import statements as S
from turnstore.core.ops import Fetch, Query


async def _build(store: Store) -> None:
    session = StructuredSession("forked", store)
    runs = await converse(session, "q1", "q2")
    await session.edit(runs[1], "q2 again")
    await session.add_items([call("bad", "lookup"), output("bad", "boom")])
    await store.backend.run(_fail_call, write=True)
    await store.add_items("failed", [user("first")])
    await store.add_items("failed", [user("second"), assistant("a")])  # the first failed
    await store.add_items("empty", [])  # catalogued? an empty write catalogues nothing
    await store.update_session("bare", title="no runs")


def _fail_call() -> Any:
    yield Query("UPDATE tool_calls SET status = 'failed' WHERE call_id = 'bad'", raw=True)


async def test_each_session_s_numbers(store: Store) -> None:
    await _build(store)
    ids = ["forked", "failed", "bare", "unknown"]
    summaries = await store.session_summaries(ids)
    assert list(summaries) == ids
    tree = await store.tree("forked")
    tokens = sum(run.usage.total_tokens for run, _ in tree)
    assert summaries["forked"] == SessionSummary(
        runs=3, branches=2, total_tokens=tokens, failed_runs=0, failed_tool_calls=1, tool_calls=3
    )
    assert summaries["failed"] == SessionSummary(runs=2, branches=1, failed_runs=1)
    assert summaries["bare"] == SessionSummary()
    assert summaries["unknown"] == SessionSummary()
    assert await store.session_summaries([]) == {}


async def test_tokens_come_from_every_branch(store: Store) -> None:
    await store.add_runs(
        "s",
        [
            NewRun([user("a"), assistant("x")], usage=Usage(1, 10, 5, 15)),
            NewRun([user("b"), assistant("y")], parent=0, usage=Usage(1, 20, 5, 25)),
            NewRun([user("b2"), assistant("z")], parent=0, usage=Usage(1, 30, 5, 35)),
        ],
    )
    [summary] = (await store.session_summaries(("s",))).values()
    assert (summary.runs, summary.branches, summary.total_tokens) == (3, 2, 75)


@pytest.mark.parametrize("bad", ["s", None, ["s", 3], ["\x00"], ["s"] * 1001])
async def test_bad_arguments_are_refused(store: Store, bad: Any) -> None:
    with pytest.raises(InvalidOperationError):
        await store.session_summaries(bad)


async def test_one_query_that_searches_indexes(store: Store) -> None:
    """No N+1 (one statement for the page) and no scan of a whole table, on either backend."""
    await _build(store)
    for n in range(40):  # enough rows that a planner would rather not scan
        await store.add_items(f"other{n}", [user("q"), call(f"c{n}", "t"), output(f"c{n}", "o")])
    params = {"sids": json.dumps(["forked", "failed"])}
    if store.backend.dialect == "sqlite":
        sql = sqlite.SQL[S.SESSION_SUMMARIES]

        def plan() -> Any:
            return (yield Query(f"EXPLAIN QUERY PLAN {sql}", params, Fetch.ALL, raw=True))

        details = [row[-1] for row in await store.backend.run(plan, write=False)]
        assert not [line for line in details if line.startswith("SCAN r") or "SCAN t" in line]
        # The session's runs through an index that leads with session_id (migration 16's
        # covering runs_session_totals, or runs_session_parent), its failed calls likewise.
        runs = ("runs_session_parent", "runs_session_totals")
        calls = ("tool_calls_session_call", "tool_calls_session_failed")
        assert any(index in line for line in details for index in runs), details
        assert any(index in line for line in details for index in calls), details
    else:
        sql = postgres.SQL[S.SESSION_SUMMARIES]

        def plan() -> Any:
            # On Citus (tests/citus.py) the workers plan the shards: the setting reaches them
            # only when propagated (a placeholder, unused, on plain PostgreSQL).
            yield Query("SET LOCAL citus.propagate_set_commands = 'local'", raw=True)
            yield Query("SET LOCAL enable_seqscan = off", raw=True)
            return (yield Query(f"EXPLAIN {sql}", params, Fetch.ALL, raw=True))

        text = "\n".join(row[0] for row in await store.backend.run(plan, write=False))
        assert "Seq Scan" not in text, text
        # By session_id as on SQLite, or by the run ids (runs_pkey) where the planner prefers.
        runs = ("runs_session_parent", "runs_session_totals", "runs_pkey")
        assert any(index in text for index in runs), text
        assert "tool_calls_session_call" in text, text

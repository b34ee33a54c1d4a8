"""Query and analytics (issue 4), on every backend: the session catalogue, tool calls and their
statistics, hooks timing and attribution, usage, full-text search, the SQL views, export.

The conversations are written by the real ``Runner`` with ``agents.testing.ScriptedModel``:
a failing tool, a handoff between agents on different models, usage on every model step.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from builders import assistant, call, output, user
from querydata import build, get_weather, named, usage
from support import sql, writes_before_totals
from turnstore import (
    FIRST_PAGE,
    InvalidItemError,
    InvalidOperationError,
    PageCursor,
    SessionNotFoundError,
    Store,
    StructuredSession,
    ToolCall,
    Usage,
)
from turnstore.core.ops import Capability
from turnstore.core.search import parse_search
from turnstore.core.statements import LOCK_HEAD
from turnstore.core.tables import as_datetime
from turnstore.formats.export import runs_from_jsonl

pytestmark = pytest.mark.e2e

SDK_ERROR = "An error occurred while running the tool. Please try again."


def shape(calls: list[ToolCall]) -> list[tuple[Any, ...]]:
    return [(c.tool_name, c.call_id, c.arguments, c.output, c.status, c.error) for c in calls]


# ---------------------------------------------------------------------------------------------
# The session catalogue


async def test_catalogue_from_constructor_and_first_user_message(store: Store) -> None:
    await build(store)
    page = await store.sessions()
    assert [s.session_id for s in page] == ["s2", "s1"]
    assert page.next_cursor is None
    s1, s2 = page[1], page[0]
    assert (s1.user_id, s1.title, s1.metadata) == (
        "alice",
        "What is the weather in Oslo?",
        {"team": "support", "tier": 2, "vip": True},
    )
    assert (s2.user_id, s2.title, s2.metadata) == ("bob", "Bob's refunds", {})
    assert [s.session_id for s in await store.sessions(user_id="alice")] == ["s1"]
    assert [s.session_id for s in await store.sessions(user_id="nobody")] == []


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"team": "support"}, ["s1"]),
        ({"team": "support", "tier": 2}, ["s1"]),
        ({"tier": 2.0}, ["s1"]),  # numbers compare by value
        ({"vip": True}, ["s1"]),
        ({"tier": "2"}, []),  # a string is not a number
        ({"vip": 1}, []),  # nor is True the number 1
        ({"team": "support", "tier": 3}, []),
        ({"missing": None}, []),
        ({}, ["s2", "s1"]),
    ],
)
async def test_metadata_filter(store: Store, metadata: dict[str, Any], expected: list[str]) -> None:
    await build(store)
    assert [s.session_id for s in await store.sessions(metadata=metadata)] == expected


HOSTILE = [
    "",
    "a.b",
    "$.team",
    '$."team"',
    "[0]",
    "'; DROP TABLE sessions; --",
    '" OR 1=1 --',
    "%(sid)s",
    ":sid",
    "?",
    "\\",
    "ключ 🔑",
    "a\nb",
]


@pytest.mark.parametrize("key", HOSTILE)
async def test_metadata_filter_with_hostile_keys_and_values(store: Store, key: str) -> None:
    await store.update_session("hostile", metadata={key: key, "other": 1})
    await store.update_session("plain", metadata={"k": "v"})
    assert [s.session_id for s in await store.sessions(metadata={key: key})] == ["hostile"]
    assert [s.session_id for s in await store.sessions(metadata={key: key + "x"})] == []
    assert [s.session_id for s in await store.sessions(metadata={"k": key})] == []
    assert (await store.session("hostile")).metadata == {key: key, "other": 1}  # type: ignore[union-attr]
    rows = await sql(store, "SELECT count(*) FROM sessions")
    assert rows == [(2,)]


@pytest.mark.parametrize(
    "bad",
    [{"k": [1]}, {"k": {"a": 1}}, {1: "x"}, {"k": float("nan")}, ["k"], "k"],
)
async def test_metadata_filter_refuses_non_scalars(store: Store, bad: Any) -> None:
    with pytest.raises(InvalidOperationError):
        await store.sessions(metadata=bad)


async def test_set_info_and_update_session(store: Store) -> None:
    session = StructuredSession("s", store, user_id="u1", metadata={"a": 1}, title="Mine")
    assert await session.info() is None  # nothing is written before the first write
    await session.add_items([user("first question")])
    info = await session.info()
    assert info is not None
    assert (info.user_id, info.title, info.metadata) == ("u1", "Mine", {"a": 1})
    info = await session.set_info(metadata={"b": 2})
    assert (info.user_id, info.title, info.metadata) == ("u1", "Mine", {"b": 2})
    info = await store.update_session("s", title="Renamed", user_id="u2")
    assert (info.user_id, info.title, info.metadata) == ("u2", "Renamed", {"b": 2})
    # A later write through the same object does not re-apply the constructor's values.
    await session.add_items([user("second question")])
    assert (await session.info()).title == "Renamed"  # type: ignore[union-attr]
    # clear_session starts afresh: the constructor's values land with the next write.
    await session.clear_session()
    await session.add_items([user("again")])
    info = await session.info()
    assert (info.user_id, info.title, info.metadata) == ("u1", "Mine", {"a": 1})  # type: ignore[union-attr]


async def test_set_info_before_any_write_catalogues_the_session(store: Store) -> None:
    session = StructuredSession("s", store, user_id="u1")
    info = await session.set_info(title="Planned")
    assert (info.user_id, info.title, info.head_run_id) == ("u1", "Planned", None)
    assert await session.get_items() == []
    await session.add_items([user("hello there")])
    assert (await session.info()).title == "Planned"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"metadata": {"k": object()}},
        {"metadata": {"k": "a\x00b"}},
        {"metadata": {1: "x"}},
        {"user_id": 5},
        {"title": "a\x00b"},
        {"user_id": "\ud800"},
    ],
)
async def test_bad_catalogue_fields_are_refused(store: Store, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidOperationError):
        await store.update_session("s", **kwargs)
    with pytest.raises(InvalidOperationError):
        StructuredSession("s", store, **kwargs)
    assert await store.session("s") is None


async def test_delete_session_removes_every_row(store: Store) -> None:
    await build(store)
    assert [r.session_id for r in await store.search("generous")] == ["s2"]
    await store.delete_session("s2")
    assert await store.session("s2") is None
    assert await store.search("generous") == []
    for table in ("runs", "items", "tool_calls", "model_responses"):
        assert await sql(store, f"SELECT count(*) FROM {table} WHERE session_id = 's2'") == [(0,)]
    assert [s.session_id for s in await store.sessions()] == ["s1"]
    with pytest.raises(SessionNotFoundError):
        await store.delete_session("s2")
    with pytest.raises(SessionNotFoundError):
        await store.delete_session("never")


async def test_time_filters(store: Store) -> None:
    await store.add_items("old", [user("one")])
    middle = datetime.now(timezone.utc)
    await store.add_items("new", [user("two")])
    later = middle + timedelta(days=1)
    assert [s.session_id for s in await store.sessions(created_after=middle)] == ["new"]
    assert [s.session_id for s in await store.sessions(created_before=middle)] == ["old"]
    assert [s.session_id for s in await store.sessions(updated_after=later)] == []
    # Naive datetimes are UTC.
    naive = middle.replace(tzinfo=None)
    assert [s.session_id for s in await store.sessions(created_before=naive)] == ["old"]
    await store.add_items("old", [user("three")])  # old is now the most recently updated
    assert [s.session_id for s in await store.sessions(updated_after=middle)] == ["new", "old"]
    by_update = await store.sessions(order_by="updated_at")
    assert [s.session_id for s in by_update] == ["old", "new"]


# ---------------------------------------------------------------------------------------------
# Pagination


async def all_pages(
    store: Store, between: Callable[[int], Any] | None = None, **kw: Any
) -> list[str]:
    seen: list[str] = []
    after: PageCursor = FIRST_PAGE
    page_number = 0
    while True:
        page = await store.sessions(limit=7, after=after, **kw)
        seen += [s.session_id for s in page]
        if page.next_cursor is None:
            return seen
        after = page.next_cursor
        assert len(page) == 7
        page_number += 1
        if between is not None:
            await between(page_number)


async def test_keyset_pages_have_no_duplicates_or_gaps(store: Store) -> None:
    ids = [f"s{i:02d}" for i in range(30)]
    for sid in ids:
        await store.add_items(sid, [user(f"hello {sid}")])
    assert await all_pages(store) == list(reversed(ids))
    first = await store.sessions(limit=7)
    later = await store.sessions(limit=7, after=first.next_cursor)
    assert [s.session_id for s in later] == list(reversed(ids))[7:14]

    async def write_in_between(page_number: int) -> None:
        # New sessions and writes to sessions on every page, while the listing goes on.
        await store.add_items(f"new{page_number}", [user("new")])
        for sid in (ids[0], ids[15], ids[29]):
            await store.add_items(sid, [assistant("more")])

    assert await all_pages(store, write_in_between) == list(reversed(ids))


async def test_pages_by_update_time_never_repeat_a_session(store: Store) -> None:
    ids = [f"s{i:02d}" for i in range(20)]
    for sid in ids:
        await store.add_items(sid, [user(f"hello {sid}")])

    async def touch(page_number: int) -> None:
        await store.add_items(ids[-1], [assistant("newest again")])  # listed on page 1

    seen = await all_pages(store, touch, order_by="updated_at")
    assert len(seen) == len(set(seen)) == 20


async def test_pages_with_a_user_filter(store: Store) -> None:
    for i in range(16):
        await store.add_items(f"s{i:02d}", [user("hi")])
        await store.update_session(f"s{i:02d}", user_id="even" if i % 2 == 0 else "odd")
    expected = [f"s{i:02d}" for i in range(14, -1, -2)]
    assert await all_pages(store, user_id="even") == expected


async def test_the_documented_loop_ends_at_the_last_page(store: Store) -> None:
    """The loop of SessionPage's docstring, and a naive one that passes next_cursor on
    without looking: the first ends, the second raises at the end instead of starting over."""
    ids = [f"s{i:02d}" for i in range(5)]
    for sid in ids:
        await store.add_items(sid, [user("hi")])
    seen: list[str] = []
    page = await store.sessions(limit=2)
    for _ in range(10):  # bounded: a loop that started over would fail the count below
        seen += [info.session_id for info in page]
        if page.next_cursor is None:
            break
        page = await store.sessions(limit=2, after=page.next_cursor)
    assert seen == list(reversed(ids))
    assert [info.session_id async for info in store.iter_sessions(page_size=2)] == seen
    assert [info.session_id async for info in store.iter_sessions(user_id="nobody")] == []
    with pytest.raises(InvalidOperationError, match="page_size"):
        [info async for info in store.iter_sessions(after="x")]

    naive: list[str] = []

    async def naive_loop() -> None:
        cursor: Any = FIRST_PAGE
        for _ in range(10):
            page = await store.sessions(limit=2, after=cursor)
            naive.extend(info.session_id for info in page)
            cursor = page.next_cursor

    with pytest.raises(InvalidOperationError, match="after=None names no page"):
        await naive_loop()
    assert naive == seen
    assert len(await store.sessions(limit=2, after=FIRST_PAGE)) == 2


# JSON nested past the parser: before, a RecursionError (a traceback from `sessions --after`).
_DEEP_CURSOR = base64.urlsafe_b64encode(b"[" * 100_000).decode()


@pytest.mark.parametrize(
    "cursor", ["", "nonsense", "bm90IGpzb24", "WzEsMiwzXQ", "W10", _DEEP_CURSOR]
)
async def test_a_foreign_cursor_is_refused(store: Store, cursor: str) -> None:
    with pytest.raises(InvalidOperationError):
        await store.sessions(after=cursor)


async def test_a_cursor_of_the_other_order_is_refused(store: Store) -> None:
    for i in range(3):
        await store.add_items(f"s{i}", [user("hi")])
    page = await store.sessions(limit=1)
    with pytest.raises(InvalidOperationError, match="ordered by created_at"):
        await store.sessions(limit=1, after=page.next_cursor, order_by="updated_at")


# ---------------------------------------------------------------------------------------------
# Tool calls, statistics, hooks


async def test_tool_calls_exact(store: Store) -> None:
    built = await build(store)
    run1 = built["runs1"][0].id
    expected = [
        ("get_weather", "c1", '{"city":"Oslo"}', "Sunny in Oslo, 21 degrees", "completed", None),
        ("lookup_order", "c2", '{"order_id":"A-17"}', SDK_ERROR, "failed", SDK_ERROR),
        ("transfer_to_billing", "c3", "{}", '{"assistant": "billing"}', "completed", None),
    ]
    assert shape(await store.tool_calls(session_id="s1")) == expected
    assert shape(await store.tool_calls(run_id=run1)) == expected
    assert shape(await store.tool_calls()) == expected  # bob's run used no tool
    assert shape(await store.tool_calls(tool_name="get_weather")) == expected[:1]
    assert shape(await store.tool_calls(status="failed")) == [expected[1]]
    assert shape(await store.tool_calls(status="completed")) == [expected[0], expected[2]]
    assert shape(await store.tool_calls(limit=2)) == expected[1:]  # the newest, oldest first
    assert await store.tool_calls(session_id="s2") == []
    assert await store.tool_calls(run_id=built["runs1"][1].id) == []
    calls = await store.tool_calls(session_id="s1")
    assert [c.kind for c in calls] == ["function", "function", "handoff"]
    assert [c.failed for c in calls] == [False, True, False]
    now = datetime.now(timezone.utc)
    assert await store.tool_calls(since=now) == []
    assert len(await store.tool_calls(until=now)) == 3
    assert await store.tool_calls(until=now - timedelta(hours=1)) == []


async def test_hooks_time_tool_calls(store: Store) -> None:
    await build(store)
    calls = await store.tool_calls(session_id="s1")
    # The two function tools ran under the hooks; the handoff is not a tool run.
    for timed in calls[:2]:
        assert timed.duration_ms is not None
        assert timed.duration_ms >= 0
        assert timed.started_at is not None
        assert timed.completed_at is not None
        assert timed.started_at <= timed.completed_at
    assert calls[2].duration_ms is None
    assert calls[2].started_at is None
    slowest = await store.slowest_tool_calls()
    assert sorted(c.call_id for c in slowest) == ["c1", "c2"]
    assert slowest[0].duration_ms >= slowest[1].duration_ms  # type: ignore[operator]
    rows = await sql(
        store,
        "SELECT call_id FROM tool_calls WHERE duration_ms IS NOT NULL ORDER BY call_id",
    )
    assert rows == [("c1",), ("c2",)]


async def test_tool_stats(store: Store) -> None:
    await build(store)
    stats = {s.tool_name: s for s in await store.tool_stats()}
    assert set(stats) == {"get_weather", "lookup_order", "transfer_to_billing"}
    failing = stats["lookup_order"]
    assert (failing.calls, failing.failed, failing.failure_rate, failing.timed_calls) == (
        1,
        1,
        1.0,
        1,
    )
    assert failing.p50_ms == failing.p95_ms == failing.max_ms == failing.mean_ms
    assert failing.p50_ms is not None
    handoff = stats["transfer_to_billing"]
    assert (handoff.calls, handoff.failed, handoff.timed_calls, handoff.p50_ms) == (1, 0, 0, None)
    assert [s.tool_name for s in await store.tool_stats(tool_name="get_weather")] == ["get_weather"]
    assert await store.tool_stats(session_id="s2") == []


async def test_tool_stats_percentiles_are_nearest_rank(store: Store) -> None:
    # Durations set by hand: 1..20 ms for one tool.
    batch: list[Any] = [user("go")]
    for i in range(20):
        batch += [call(f"c{i}", "t"), output(f"c{i}", SDK_ERROR if i < 5 else "ok")]
    await store.add_items("s", batch)
    for i in range(20):
        await sql_write(
            store,
            "UPDATE tool_calls SET duration_ms = {d} WHERE call_id = {c}",
            d=float(i + 1),
            c=f"c{i}",
        )
    [stats] = await store.tool_stats()
    assert (stats.calls, stats.failed, stats.failure_rate, stats.timed_calls) == (20, 5, 0.25, 20)
    assert (stats.p50_ms, stats.p95_ms, stats.max_ms, stats.mean_ms) == (10.0, 19.0, 20.0, 10.5)


async def sql_write(store: Store, statement: str, **params: Any) -> None:
    from turnstore.core.ops import Query

    placeholder = ":{}" if store.backend.dialect == "sqlite" else "%({})s"
    text = statement.format(**{name: placeholder.format(name) for name in params})

    def op() -> Any:
        yield Query(text, params, raw=True)

    await store.backend.run(op, write=True)


async def test_failed_calls_of_every_kind(store: Store) -> None:
    timeout = "Tool 'slow' timed out after 2.5 seconds."
    await store.add_items(
        "s",
        [
            user("go"),
            call("a", "ok_tool"),
            output("a", "fine"),
            call("b", "raises"),
            output("b", SDK_ERROR),
            call("c", "slow"),
            output("c", timeout),
            {"type": "function_call_output", "call_id": "d", "output": "x", "status": "incomplete"},
            {
                "type": "mcp_call",
                "id": "mcp_1",
                "server_label": "srv",
                "name": "fetch",
                "arguments": "{}",
                "output": None,
                "error": "connection refused",
                "status": "completed",
            },
            call("e", "unanswered"),
        ],
    )
    failed = await store.tool_calls(status="failed")
    assert [(c.call_id, c.status, c.error) for c in failed] == [
        ("b", "failed", SDK_ERROR),
        ("c", "timed_out", timeout),  # a failure of its own kind (toolcalls.FAILED_STATUSES)
        ("d", "incomplete", "x"),  # an incomplete output is its own error
        ("mcp_1", "failed", "connection refused"),
    ]
    assert [c.call_id for c in await store.tool_calls(status="pending")] == ["e"]
    assert [c.call_id for c in await store.tool_calls(status="completed")] == ["a"]
    rows = await sql(
        store,
        "SELECT call_id FROM tool_call_overview WHERE session_id = {sid} AND failed"
        " ORDER BY tool_call_id",
        sid="s",
    )
    assert rows == [("b",), ("c",), ("d",), ("mcp_1",)]


def _counts(usage: Usage) -> Usage:
    """``usage``'s counts alone (tests/test_token_details.py checks the details)."""
    return dataclasses.replace(usage, input_tokens_details={}, output_tokens_details={})


async def test_model_responses_and_run_attribution(store: Store) -> None:
    built = await build(store)
    run1, run2 = (run.id for run in built["runs1"])
    responses = await store.model_responses(session_id="s1")
    assert [
        (r.run_id, r.agent_name, r.model, r.response_id, _counts(r.usage)) for r in responses
    ] == [
        (run1, "triage", "model-a", "r1", Usage(1, 10, 5, 15, 0, 0)),
        (run1, "triage", "model-a", "r2", Usage(1, 20, 5, 25, 0, 0)),
        (run1, "billing", "model-b", "r3", Usage(1, 30, 5, 35, 0, 0)),
        (run2, "triage", "model-a", "r4", Usage(1, 40, 8, 48, 4, 2)),
    ]
    for r in responses:
        assert r.latency_ms is not None
        assert r.latency_ms >= 0
        assert r.started_at is not None
        assert r.started_at <= r.completed_at
    assert [r.response_id for r in await store.model_responses(run_id=run2)] == ["r4"]
    assert await store.model_responses(session_id="s2") == []  # no hooks there
    run_1, run_2 = built["runs1"]
    # The run's agent and model: the last to answer. Its usage: the SDK's cumulative usage.
    assert responses[3].usage.input_tokens_details["cached_tokens"] == 4  # and every detail
    assert (run_1.agent_name, run_1.model, _counts(run_1.usage)) == (
        "billing",
        "model-b",
        Usage(3, 60, 15, 75, 0, 0),
    )
    assert (run_2.agent_name, run_2.model) == ("triage", "model-a")
    [bob_run] = built["runs2"]
    assert (bob_run.agent_name, bob_run.model, bob_run.usage) == (None, None, Usage(1, 7, 3, 10))


async def test_usage_grouped(store: Store) -> None:
    def today() -> str:
        return datetime.now(timezone.utc).strftime("%Y-%m-%d")

    started = today()
    await build(store)

    def table(rows: list[Any]) -> dict[Any, tuple[int, Usage]]:
        return {row.key: (row.runs, row.usage) for row in rows}

    s1 = Usage(4, 100, 23, 123, 4, 2)
    s2 = Usage(1, 7, 3, 10, 0, 0)
    assert table(await store.usage()) == {"s1": (2, s1), "s2": (1, s2)}
    assert table(await store.usage("user")) == {"alice": (2, s1), "bob": (1, s2)}
    # Tokens go to the agent (model) of each model call; each run counts once, under the
    # agent that answered it: run 2's handoff makes triage's and billing's calls, one run.
    assert table(await store.usage("model")) == {
        None: (1, s2),
        "model-a": (1, Usage(3, 70, 18, 88, 4, 2)),
        "model-b": (1, Usage(1, 30, 5, 35, 0, 0)),
    }
    assert table(await store.usage("agent")) == {
        None: (1, s2),
        "billing": (1, Usage(1, 30, 5, 35, 0, 0)),
        "triage": (1, Usage(3, 70, 18, 88, 4, 2)),
    }
    for group in ("session", "user", "day", "model", "agent"):
        rows = await store.usage(group)
        assert sum(row.runs for row in rows) == 3, group  # every run once, whatever the group
        assert sum(row.usage.total_tokens for row in rows) == 133, group
    # Each run counts on the UTC day it was created (a build across midnight makes two days).
    by_day: dict[str, tuple[int, int]] = {}
    for session_id in ("s1", "s2"):
        for run, _ in await store.tree(session_id):
            day = run.created_at.astimezone(timezone.utc).strftime("%Y-%m-%d")
            runs, tokens = by_day.get(day, (0, 0))
            by_day[day] = (runs + 1, tokens + run.usage.total_tokens)
    days = await store.usage("day")
    assert {row.key: (row.runs, row.usage.total_tokens) for row in days} == by_day
    assert [row.key for row in days] == sorted(by_day)
    assert started <= min(by_day) <= max(by_day) <= today()
    assert sum(row.usage.total_tokens for row in days) == 133
    assert table(await store.usage(session_id="s2")) == {"s2": (1, s2)}
    assert table(await store.usage("model", user_id="alice")) == {
        "model-a": (1, Usage(3, 70, 18, 88, 4, 2)),
        "model-b": (1, Usage(1, 30, 5, 35, 0, 0)),
    }
    assert await store.usage(since=datetime.now(timezone.utc) + timedelta(seconds=5)) == []
    assert [row.key for row in await store.usage("model")] == [None, "model-a", "model-b"]
    with pytest.raises(InvalidOperationError):
        await store.usage("week")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Search


async def test_search_finds_tool_outputs_and_assistant_text(store: Store) -> None:
    await build(store)
    hits = await store.search("sunny")
    assert {(h.session_id, h.type, h.role) for h in hits} == {
        ("s1", "function_call_output", None),
        ("s1", "message", "assistant"),
    }
    for hit in hits:
        assert hit.matches
        assert all(hit.snippet[a:b].lower() == "sunny" for a, b in hit.matches)
    [args] = await store.search("A-17", types=["function_call"])
    assert (args.type, args.session_id) == ("function_call", "s1")
    [user_hit] = await store.search("weather", roles=["user"])
    assert user_hit.role == "user"
    assert user_hit.run_id == (await store.runs("s1"))[0].id
    [(stamp,)] = await sql(
        store, "SELECT created_at FROM items WHERE id = {id}", id=user_hit.item_id
    )
    assert user_hit.created_at == as_datetime(stamp)


async def test_search_follows_writes_and_deletes_past_the_index_batch(store: Store) -> None:
    from turnstore.core.search_index import INDEX_BATCH

    # More items than one index batch, so that some are indexed on write and some are not.
    batch = [assistant(f"filler {n}") for n in range(INDEX_BATCH + 5)]
    await store.add_items("s", [user("first question"), *batch])
    await store.add_items("s", [assistant("the zebra answer")])
    assert [hit.role for hit in await store.search("zebra")] == ["assistant"]
    assert len(await store.search("filler", limit=500)) == INDEX_BATCH + 5
    # Popping the newest (indexed) item frees its id, which the next item takes again: the
    # index must drop the old text and learn the new one.
    await store.search("filler")  # indexes everything
    assert await store.pop_item("s") == assistant("the zebra answer")
    assert await store.search("zebra") == []
    await store.add_items("s", [assistant("the okapi answer")])
    [hit] = await store.search("okapi")
    # PostgreSQL's headline leaves out the leading stop word.
    assert hit.pieces()[-2:] == [("okapi", True), (" answer", False)]
    assert hit.snippet in ("the okapi answer", "okapi answer")
    assert await store.search("zebra") == []
    await store.clear_session("s")
    assert await store.search("filler") == []


async def test_sqlite_appends_feed_the_index_in_batches(tmp_path: Any) -> None:
    from turnstore.core.search_index import INDEX_BATCH

    async def indexed_through(store: Store) -> int:
        [(value,)] = await sql(store, "SELECT indexed_through FROM items_fts_state")
        return int(value)

    with Store.open(tmp_path / "t.db") as store:
        await store.add_items("s", [user("q")])
        for n in range(INDEX_BATCH - 2):
            await store.add_items("s", [assistant(f"a{n}")])
        assert await indexed_through(store) == 0  # a backlog of INDEX_BATCH - 1 waits
        await store.add_items("s", [assistant("the one that fills the batch")])
        assert await indexed_through(store) == INDEX_BATCH
        [(count,)] = await sql(store, "SELECT count(*) FROM items_fts")
        assert count == INDEX_BATCH


async def test_sqlite_search_without_a_backlog_needs_no_write_lock(tmp_path: Any) -> None:
    path = tmp_path / "t.db"
    with Store.open(path, busy_timeout=0.2) as store:
        await store.add_items("s", [user("find the walrus")])
        assert len(await store.search("walrus")) == 1  # feeds the index: a write
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process's writer holds the lock
            assert len(await store.search("walrus")) == 1
            other.execute("ROLLBACK")
        finally:
            other.close()


async def test_search_filters(store: Store) -> None:
    await build(store)
    everywhere = await store.search("refund")
    assert {h.session_id for h in everywhere} == {"s1", "s2"}
    assert {h.session_id for h in await store.search("refund", session_id="s2")} == {"s2"}
    assistant_hits = await store.search("refund", roles=["assistant"])
    assert {h.role for h in assistant_hits} == {"assistant"}
    assert len(assistant_hits) == 3
    assert await store.search("refund", types=["function_call_output"]) == []
    assert len(await store.search("refund", limit=2)) == 2
    assert await store.search("refund", session_id="nobody") == []


async def test_search_ranks_exact_phrases_first(store: Store) -> None:
    await build(store)
    hits = await store.search("refund policy")
    texts = [(h.exact, h.snippet) for h in hits]
    # The exact phrase first (three items hold it), then the words apart.
    assert [exact for exact, _ in texts] == [True, True, True, False]
    assert texts[-1][1].startswith("Which policy applies to my refund")
    assert all(a.rank >= b.rank for a, b in itertools.pairwise(hits[:3]))  # within a tier
    phrase_only = await store.search('"refund policy"')
    assert len(phrase_only) == 3
    assert all(h.exact for h in phrase_only)


async def test_search_by_recency(store: Store) -> None:
    await store.add_items(
        "s",
        [
            user("refund policy please"),  # the exact phrase, oldest
            assistant("a refund, maybe"),
            user("what policy for a refund"),
            assistant("the refund policy again"),  # the exact phrase, newest
        ],
    )
    text = {row[0]: row[1] for row in await sql(store, "SELECT id, text FROM items")}
    hits = await store.search("refund policy", order="recent")
    assert [(text[h.item_id], h.exact, h.rank) for h in hits] == [
        ("the refund policy again", True, 0.0),
        ("refund policy please", True, 0.0),
        ("what policy for a refund", False, 0.0),
    ]
    assert [text[h.item_id] for h in await store.search("refund", order="recent")] == [
        "the refund policy again",
        "what policy for a refund",
        "a refund, maybe",
        "refund policy please",
    ]
    with pytest.raises(InvalidOperationError):
        await store.search("refund", order="oldest")  # type: ignore[arg-type]


async def test_search_syntax(store: Store) -> None:
    await store.add_items(
        "s",
        [
            user("apples and oranges"),
            assistant("bananas only"),
            user("apples without anything else"),
            assistant("cherries, and refunding"),
        ],
    )

    async def texts(query: str) -> list[str]:
        return sorted(h.snippet for h in await store.search(query))

    assert await texts("apples") == ["apples and oranges", "apples without anything else"]
    assert await texts("apples -oranges") == ["apples without anything else"]
    assert await texts("bananas OR cherries") == ["bananas only", "cherries, and refunding"]
    assert await texts("cherr*") == ["cherries, and refunding"]
    assert await texts("refund") == ["cherries, and refunding"]  # stemmed
    assert await texts("-apples") == []  # nothing to look for


HOSTILE_QUERIES = [
    "'; DROP TABLE items; --",
    '"',
    '""',
    '"unterminated phrase',
    "*",
    "a*b*",
    "NEAR(apples oranges)",
    "apples AND OR NOT",
    "OR",
    "OR apples",
    "apples OR",
    "- -apples",
    "text:apples",
    "^apples",
    "apples:*",
    "(apples",
    "apples)",
    "{apples}",
    "\\",
    "'",
    "''",
    "a & b | !c <-> d",
    "%(sid)s :sid ?",
    "ключ 🔑 apples",
    "   ",
    "",
    "apples" * 500,
    " ".join(["apples"] * 300),
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
async def test_search_never_fails_on_user_syntax(store: Store, query: str) -> None:
    await store.add_items("s", [user("apples and oranges"), assistant("NEAR text: ^apples")])
    hits = await store.search(query)
    assert isinstance(hits, list)
    assert await sql(store, "SELECT count(*) FROM items") == [(2,)]


QUOTED_WORDS = [
    # A text stored and a search for it: real words whose quote characters must reach the
    # engine escaped (FTS5 doubles '"'; a tsquery lexeme doubles "'" and escapes "\\").
    pytest.param('a 12" pizza, please', '12"', id="inch-mark"),
    pytest.param('a 12" pizza, please', '12" pizza', id="inch-mark-phrase"),
    pytest.param('she said "hi"there', 'said "hi"there', id="quote-inside-a-word"),
    pytest.param("saved in C:\\Users\\bob\\ today", "bob\\", id="trailing-backslash"),
    pytest.param("saved in C:\\Users\\bob\\ today", "C:\\Users\\bob\\", id="windows-path"),
    pytest.param("ask O'Brien first", "O'Brien", id="apostrophe"),
    pytest.param("ask O'Brien first", "O'Brien*", id="apostrophe-prefix"),
    pytest.param("ask O'Brien first", "'O'Brien' first", id="quoted-apostrophe-phrase"),
]


@pytest.mark.parametrize(("text", "query"), QUOTED_WORDS)
async def test_search_finds_words_written_with_quote_characters(
    store: Store, text: str, query: str
) -> None:
    await store.add_items("found", [user(text)])
    await store.add_items("other", [user("nothing to see here, Users")])
    assert [hit.session_id for hit in await store.search(query)] == ["found"]


async def test_search_treats_operators_as_text(store: Store) -> None:
    await store.add_items("s", [user("the NEAR operator and AND gates")])
    assert len(await store.search("NEAR")) == 1
    assert len(await store.search("AND gates")) == 1
    assert len(await store.search("operator:and")) == 1  # a column filter to FTS5


async def test_search_index_follows_pop_and_delete_branch(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("first zebra"), assistant("zebra answer")])
    await session.add_items([user("second giraffe")])
    assert len(await store.search("zebra")) == 2
    await session.pop_item()
    assert await store.search("giraffe") == []
    [first] = await session.runs()
    await session.delete_branch(first.id, force=True)
    assert await store.search("zebra") == []


def test_parse_search_renders_quoted_terms() -> None:
    parsed = parse_search('refund "exact words" a OR b -"no way" pre* x\'y')
    assert parsed.fts5() == (
        '("refund" AND "exact words" AND ("a" OR "b") AND "pre" * AND "x\'y") NOT "no way"'
    )
    assert parsed.tsquery() == (
        "'refund' & 'exact words' & ('a' | 'b') & 'pre':* & 'x''y' & !'no way'"
    )
    assert parse_search("refund policy").fts5_phrase() == '"refund policy"'
    assert parse_search("refund").fts5_phrase() is None
    assert parse_search('say "hi"""').fts5() == '"say" AND "hi"'


def test_search_rendering_edges() -> None:
    assert parse_search("refund policy").tsquery_phrase() == "'refund policy'"
    assert parse_search("refund").tsquery_phrase() is None
    assert parse_search("a\\b").tsquery() == "'a\\\\b'"  # a backslash, escaped
    assert parse_search("TAX*").fts5() == '"TAX" *'  # only the star goes
    assert parse_search("?? refund").fts5() == '"refund"'  # a term without letters is skipped
    assert parse_search("refund OR ?? policy").fts5() == '"refund" AND "policy"'  # OR of nothing


async def test_search_ranks_by_relevance_unless_asked_for_recency(store: Store) -> None:
    await store.add_items("s", [user("zebra zebra zebra zebra"), user("zebra")])
    await store.add_items("s", [user("one zebra among a great many other long words here")])
    texts = {row[0]: row[1] for row in await sql(store, "SELECT id, text FROM items")}
    relevant = [texts[hit.item_id] for hit in await store.search("zebra")]
    assert relevant[0] == "zebra zebra zebra zebra"
    assert relevant[-1] == "one zebra among a great many other long words here"
    recent = [texts[hit.item_id] for hit in await store.search("zebra", order="recent")]
    assert recent == [texts[item_id] for item_id in sorted(texts, reverse=True)]


async def test_search_fills_the_limit_across_the_phrase_and_word_tiers(store: Store) -> None:
    await store.add_items(
        "s", [user("alpha beta"), *[assistant(f"beta {n} alpha") for n in range(5)]]
    )
    hits = await store.search("alpha beta", limit=3)
    assert [hit.exact for hit in hits] == [True, False, False]


# ---------------------------------------------------------------------------------------------
# The SQL views


async def test_run_overview(store: Store) -> None:
    built = await build(store)
    rows = await sql(
        store,
        "SELECT run_id, user_id, user_message, assistant_message, tools, tool_calls,"
        " failed_tool_calls, agent_name, model, requests, total_tokens, is_head"
        " FROM run_overview WHERE session_id = {sid} ORDER BY run_id",
        sid="s1",
    )
    run1, run2 = (run.id for run in built["runs1"])
    assert [(*tuple(row[:-1]), bool(row[-1])) for row in rows] == [
        (
            run1,
            "alice",
            "What is the weather in Oslo?",
            "Sunny in Oslo, and your refund was approved.",
            "get_weather, lookup_order, transfer_to_billing",
            3,
            1,
            "billing",
            "model-b",
            3,
            75,
            False,
        ),
        (
            run2,
            "alice",
            "Which policy applies to my refund?",
            "Your refund policy allows returns in 30 days.",
            None,
            0,
            0,
            "triage",
            "model-a",
            1,
            48,
            True,
        ),
    ]


async def test_tool_call_overview(store: Store) -> None:
    built = await build(store)
    rows = await sql(
        store,
        "SELECT run_id, user_message, tool_name, arguments, output, status, failed,"
        " duration_ms IS NOT NULL FROM tool_call_overview WHERE session_id = {sid}"
        " ORDER BY tool_call_id",
        sid="s1",
    )
    run1 = built["runs1"][0].id
    question = "What is the weather in Oslo?"
    assert [(*row[:6], bool(row[6]), bool(row[7])) for row in rows] == [
        (
            run1,
            question,
            "get_weather",
            '{"city":"Oslo"}',
            "Sunny in Oslo, 21 degrees",
            "completed",
            False,
            True,
        ),
        (run1, question, "lookup_order", '{"order_id":"A-17"}', SDK_ERROR, "failed", True, True),
        (
            run1,
            question,
            "transfer_to_billing",
            "{}",
            '{"assistant": "billing"}',
            "completed",
            False,
            False,
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Export


async def test_export_jsonl_round_trips_the_tree(store: Store) -> None:
    built = await build(store)
    alice: StructuredSession = built["alice"]
    first = built["runs1"][0]
    await alice.edit(first.id, "What is the weather in Bergen?")
    await alice.add_items([assistant("Rain in Bergen.")])
    path_items = await alice.get_items()

    active = await store.export("s1")
    records = [json.loads(line) for line in active.splitlines()]
    assert [r["item"] for r in records] == path_items
    assert {r["session_id"] for r in records} == {"s1"}

    everything = await store.export("s1", "jsonl", all_branches=True)
    assert len(everything.splitlines()) == await _count(store, "items", "s1")
    runs = runs_from_jsonl(everything.splitlines())
    await store.add_runs("copy", runs, head=len(runs) - 1)
    assert await store.get_items("copy") == path_items
    copy = await store.export("copy", "jsonl", all_branches=True)
    assert [json.loads(line)["item"] for line in copy.splitlines()] == [
        r["item"] for r in map(json.loads, everything.splitlines())
    ]
    assert len(await store.branches("copy")) == len(await alice.branches()) == 2


async def _count(store: Store, table: str, session_id: str) -> int:
    [(count,)] = await sql(
        store, f"SELECT count(*) FROM {table} WHERE session_id = {{sid}}", sid=session_id
    )
    return int(count)


async def test_export_json_holds_the_tree(store: Store) -> None:
    built = await build(store)
    alice: StructuredSession = built["alice"]
    second = built["runs1"][1]
    edited = await alice.edit(second.id, "Which refund rules apply?")
    doc = json.loads(await store.export("s1", "json", all_branches=True))
    assert doc["format"] == "turnstore-export"
    assert doc["all_branches"] is True
    assert doc["session"]["user_id"] == "alice"
    assert doc["session"]["head_run_id"] == edited.id
    runs = {run["id"]: run for run in doc["runs"]}
    root = built["runs1"][0].id
    assert doc["roots"] == [root]
    assert runs[root]["children"] == [second.id, edited.id]
    assert [c["tool_name"] for c in runs[root]["tool_calls"]] == [
        "get_weather",
        "lookup_order",
        "transfer_to_billing",
    ]
    assert runs[root]["usage"]["total_tokens"] == 75
    assert runs[edited.id]["items"] == [{"content": "Which refund rules apply?", "role": "user"}]
    path_doc = json.loads(await store.export("s1", "json"))
    assert [run["id"] for run in path_doc["runs"]] == [root, edited.id]


async def test_export_markdown(store: Store) -> None:
    built = await build(store)
    text = await store.export("s1", "markdown", all_branches=True)
    assert text.startswith("# What is the weather in Oslo?\n")
    assert "> What is the weather in Oslo?" in text
    assert "**Tool call** `lookup_order` (failed" in text
    assert "**Assistant (billing):**" in text
    assert "> Sunny in Oslo, and your refund was approved." in text
    assert f"## Run {built['runs1'][1].id} ← head" in text
    # Content cannot break out of its code fence.
    await store.add_items(
        "fence", [user("x"), call("f", "t", "```\n# injected"), output("f", "ok")]
    )
    fenced = await store.export("fence", "markdown")
    assert "````\n```\n# injected\n````" in fenced


async def test_export_errors(store: Store) -> None:
    with pytest.raises(SessionNotFoundError):
        await store.export("nobody")
    await store.add_items("s", [user("hi")])
    with pytest.raises(InvalidOperationError):
        await store.export("s", "yaml")  # type: ignore[arg-type]


def test_runs_from_jsonl_refuses_other_lines() -> None:
    with pytest.raises(InvalidItemError, match="line 2"):
        runs_from_jsonl(['{"run_id": 1, "item": {"role": "user", "content": "x"}}', "[1, 2]"])
    with pytest.raises(InvalidItemError, match="parent"):
        runs_from_jsonl(['{"run_id": 2, "parent_id": 1, "item": {"role": "user"}}'])


# ---------------------------------------------------------------------------------------------
# Upgrading a database written before the query schema (version 1)


async def test_a_version_1_database_upgrades(
    backend_name: str, db_target: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend_name == "sqlite-memory":
        pytest.skip("a :memory: database cannot be reopened")
    from turnstore import postgres, sqlite

    module: Any = sqlite if backend_name.startswith("sqlite") else postgres
    target, options = db_target
    with monkeypatch.context() as patch, writes_before_totals(module.sql.DIALECT.name.lower()):
        patch.setattr(module.migrations, "MIGRATIONS", module.MIGRATIONS[:1])
        # Statements of later versions that every write now issues (SQLite's search backlog,
        # which the lock reads too, and its upsert of the head): without those capabilities.
        if module is sqlite:
            later = Capability.SEARCH_BACKLOG | Capability.UPSERT_HEAD
            capabilities = sqlite.SQLiteBackend.capabilities & ~later
            patch.setattr(sqlite.SQLiteBackend, "capabilities", capabilities)
        lock = module.SQL[LOCK_HEAD].replace(module.sql._VIEW, "parent_id")
        if module is sqlite:
            lock = lock.replace(module.sql._INDEXED_THROUGH, "NULL")
        patch.setitem(module.SQL, LOCK_HEAD, lock)
        # Nor did writes carry keys (core/once.py): write as turnstore 1 did.
        patch.setattr("turnstore.store.base.once", lambda sid, key, op, *args, **kwargs: op)
        old = Store.open(target, **options)
        await old.add_items(
            "s",
            [user("find the walrus"), call("c1", "t"), output("c1", SDK_ERROR), assistant("ok")],
        )
        # As turnstore 1 classified it: an error message was a completed call.
        await sql_write(old, "UPDATE tool_calls SET status = 'completed', error = NULL")
        assert await sql(old, "SELECT max(version) FROM turnstore_schema") == [(1,)]
        await old.aclose()
    store = Store.open(target, **options)
    try:
        version = len(module.MIGRATIONS)
        assert await sql(store, "SELECT max(version) FROM turnstore_schema") == [(version,)]
        assert [h.role for h in await store.search("walrus")] == ["user"]
        [failed] = await store.tool_calls(status="failed")
        assert (failed.call_id, failed.error) == ("c1", SDK_ERROR)
        rows = await sql(store, "SELECT user_message, tools FROM run_overview")
        assert rows == [("find the walrus", "t")]
        assert [s.session_id for s in await store.sessions()] == ["s"]
    finally:
        await store.aclose()


# ---------------------------------------------------------------------------------------------
# Hooks: streaming, and a run that ends without writing its answer


async def test_hooks_with_a_streamed_run(store: Store) -> None:
    model = named(
        ScriptedModel(
            [
                ModelStep(
                    output=[function_call("get_weather", {"city": "Rome"}, call_id="w1")],
                    usage=usage(3, 1),
                    response_id="s1",
                ),
                ModelStep(
                    output=[assistant_message("Sunny.")], usage=usage(4, 1), response_id="s2"
                ),
            ]
        ),
        "stream-model",
    )
    session = StructuredSession("s", store)
    streamed = Runner.run_streamed(
        Agent("streamer", model=model, tools=[get_weather]),
        "Weather in Rome?",
        session=session,
        hooks=session.hooks,
    )
    async for _ in streamed.stream_events():
        pass
    [run] = await session.runs()
    responses = await store.model_responses(session_id="s")
    assert [(r.run_id, r.response_id, r.model) for r in responses] == [
        (run.id, "s1", "stream-model"),
        (run.id, "s2", "stream-model"),
    ]
    [weather] = await store.tool_calls(session_id="s")
    assert weather.duration_ms is not None
    assert (run.agent_name, run.model) == ("streamer", "stream-model")


async def test_hooks_records_of_an_unwritten_answer_land_on_their_run(store: Store) -> None:
    from agents import GuardrailFunctionOutput, OutputGuardrailTripwireTriggered, output_guardrail

    @output_guardrail
    async def no_secrets(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(None, tripwire_triggered="secret" in str(output))

    model = ScriptedModel(
        [
            ModelStep(output=[assistant_message("The secret is 42.")], response_id="a"),
            ModelStep(output=[assistant_message("Fine.")], response_id="b"),
        ]
    )
    agent = Agent("guarded", model=model, output_guardrails=[no_secrets])
    session = StructuredSession("s", store)
    with pytest.raises(OutputGuardrailTripwireTriggered):
        await Runner.run(agent, "Tell me the secret", session=session, hooks=session.hooks)
    # The answer was never written; its model call waits for the session's next write ...
    assert await store.model_responses() == []
    await Runner.run(agent, "Something else", session=session, hooks=session.hooks)
    first, second = await session.runs()
    # ... and then lands on the run it belongs to, not on the new one.
    assert [(r.run_id, r.response_id) for r in await store.model_responses()] == [
        (first.id, "a"),
        (second.id, "b"),
    ]

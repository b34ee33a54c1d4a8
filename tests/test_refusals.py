"""Conformance tests of refusals (issue 11): every public call refuses a bad argument with a
turnstore error of the class ``turnstore.domain.validate``'s rule names, and changes nothing.

Each case below raised something outside the error tree before (OverflowError, RecursionError,
UnicodeEncodeError, AttributeError, TypeError, ValueError), a driver error mapped to
``StorageError``, or stored a value it should have refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from builders import assistant, converse, snapshot, user
from support import POSTGRES_URL, require_module, sql
from turnstore import (
    ArgumentTypeError,
    ConfigurationError,
    ConflictError,
    InvalidItemError,
    InvalidOperationError,
    NewRun,
    NotFoundError,
    ResponseRecord,
    RunNotFoundError,
    SessionPatch,
    Store,
    StructuredSession,
    Telemetry,
    ToolTiming,
    TurnstoreError,
    Usage,
)
from turnstore.domain.validate import MAX_DEPTH, MAX_INT, MAX_REQUESTS
from turnstore.sqlite import SQLiteBackend

HUGE = 2**63  # one more than either backend stores
SURROGATE = "lone \ud800 half"
NUL = "nul\x00inside"
EARLIEST_EAST = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))
LATEST_WEST = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14)))
WHEN = "2024-01-01T00:00:00"  # a time as text, not a datetime


def nested(depth: int, kind: str = "list") -> Any:
    """A value that nests ``depth`` lists (or objects) around a string."""
    value: Any = "core"
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


def deep_user(depth: int, kind: str = "list") -> dict[str, Any]:
    """A user message item that nests ``depth`` containers in all (itself included)."""
    return {"role": "user", "content": nested(depth - 1, kind)}


def depth_of(value: Any) -> int:
    """How many containers nest in ``value``, down its first entries, counted without
    recursion."""
    depth = 0
    while isinstance(value, (list, dict)):
        depth += 1
        value = value[0] if isinstance(value, list) else next(iter(value.values()))
    return depth


Call = Callable[[Store, int], Awaitable[Any]]

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
DEEP_TEXT = '{"k": ' + "[" * 5000 + "]" * 5000 + "}"  # metadata text nested 5,000 deep


def response(**fields: Any) -> ResponseRecord:
    """A model call as ``session.hooks`` records it, but for ``fields``."""
    usage = Usage(1, 2, 3, 5)
    values = {"agent_name": "a", "model": "m", "response_id": "r", "request_id": None}
    values |= {"usage": usage, "started_at": NOW, "completed_at": NOW, "latency_ms": 1.5}
    return ResponseRecord(**(values | fields))


def timing(**fields: Any) -> ToolTiming:
    """The timing of session "s"'s newest tool call (``seeded``'s), but for ``fields``."""
    values = {"call_id": "c-q2", "started_at": NOW, "completed_at": NOW, "duration_ms": 2.5}
    return ToolTiming(**(values | fields))


def patched(**fields: Any) -> Call:
    """``patch_session`` of a hand-built ``SessionPatch``."""
    return lambda s, r: s.patch_session("s", SessionPatch(**fields))


def with_info(**fields: Any) -> Call:
    """A write carrying a hand-built ``SessionPatch``."""
    return lambda s, r: s.add_items("s", [assistant("i")], info=SessionPatch(**fields))


def with_telemetry(**lists: Any) -> Call:
    """A write carrying a hand-built ``Telemetry``."""
    return lambda s, r: s.add_items("s", [assistant("t")], telemetry=Telemetry(**lists))


# (call on a store holding session "s" with run ``run``, the error the rule names)
CASES: dict[str, tuple[Call, type[TurnstoreError]]] = {
    # Ids: an int no database stores names nothing; anything else is a wrong argument.
    "run of a huge id": (lambda s, r: s.run(HUGE), RunNotFoundError),
    "run of a very negative id": (lambda s, r: s.run(-HUGE - 1), RunNotFoundError),
    "run_items of a huge id": (lambda s, r: s.run_items(HUGE), RunNotFoundError),
    "tool_call of a huge id": (lambda s, r: s.tool_call(HUGE), NotFoundError),
    "siblings of a huge id": (lambda s, r: s.siblings("s", HUGE), RunNotFoundError),
    "fork of a huge id": (lambda s, r: s.fork("s", HUGE, None), RunNotFoundError),
    "move_head to a huge id": (
        lambda s, r: s.move_head("s", 2**64, to_parent=False),
        RunNotFoundError,
    ),
    "delete_branch of a huge id": (lambda s, r: s.delete_branch("s", HUGE), RunNotFoundError),
    "path_view through a huge id": (
        lambda s, r: s.path_view("s", through=HUGE),
        RunNotFoundError,
    ),
    "add_runs under a huge parent_id": (
        lambda s, r: s.add_runs("s", [NewRun([user("x")], parent_id=HUGE)]),
        RunNotFoundError,
    ),
    "run of a str id": (lambda s, r: s.run("1"), InvalidOperationError),  # type: ignore[arg-type]
    "tool_call of a float id": (lambda s, r: s.tool_call(1.0), InvalidOperationError),  # type: ignore[arg-type]
    "tool_calls of a list run_id": (lambda s, r: s.tool_calls(run_id=[r]), InvalidOperationError),  # type: ignore[arg-type]
    "add_runs under a str parent_id": (
        lambda s, r: s.add_runs("s", [NewRun([user("x")], parent_id=str(r))]),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    # A value whose repr runs out of stack, or that Python cannot write as digits: the error
    # message shows it bounded (before: RecursionError, ValueError).
    "run of an id nested 1,000 deep": (lambda s, r: s.run(nested(1000)), InvalidOperationError),
    "fork of an id nested 1,000 deep": (
        lambda s, r: s.fork("s", nested(1000), "x"),
        InvalidOperationError,
    ),
    "tool_calls of a run_id nested 1,000 deep": (
        lambda s, r: s.tool_calls(run_id=nested(1000)),
        InvalidOperationError,
    ),
    "run of an id of 5,000 digits": (lambda s, r: s.run(10**5000), RunNotFoundError),
    "expected_head nested 1,000 deep": (
        lambda s, r: s.move_head("s", r, to_parent=False, expected_head=nested(1000)),
        InvalidOperationError,
    ),
    "operation_id nested 1,000 deep": (
        lambda s, r: s.add_items("s", [user("x")], operation_id=nested(1000)),
        InvalidOperationError,
    ),
    "expected_head that is a str": (
        lambda s, r: s.move_head("s", r, to_parent=False, expected_head=str(r)),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    # Limits, positions and depths: ints in range.
    "get_items with a huge limit": (lambda s, r: s.get_items("s", HUGE), InvalidOperationError),
    "sessions with a huge limit": (lambda s, r: s.sessions(limit=2**64), InvalidOperationError),
    "search with a huge limit": (lambda s, r: s.search("hello", limit=HUGE), InvalidOperationError),
    "get_items with a limit nested 1,000 deep": (
        lambda s, r: s.get_items("s", nested(1000)),
        InvalidOperationError,
    ),
    "sessions with a limit nested 1,000 deep": (
        lambda s, r: s.sessions(limit=nested(1000)),
        InvalidOperationError,
    ),
    "search with a limit nested 1,000 deep": (
        lambda s, r: s.search("hello", limit=nested(1000)),
        InvalidOperationError,
    ),
    "path_view from a huge start": (
        lambda s, r: s.path_view("s", start=HUGE),
        InvalidOperationError,
    ),
    "path_view from a negative stop": (
        lambda s, r: s.path_view("s", stop=-1),
        InvalidOperationError,
    ),
    "add_runs with a str head": (
        lambda s, r: s.add_runs("s", [NewRun([user("x")])], head="0"),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "add_runs with a list parent": (
        lambda s, r: s.add_runs("s", [NewRun([user("x")]), NewRun([user("y")], parent=[0])]),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    # Usage given as an argument: a Usage of ints from 0 to 2**63 - 1.
    "usage of 2**63 tokens": (
        lambda s, r: s.add_items("s", [assistant("u")], Usage(input_tokens=HUGE)),
        InvalidOperationError,
    ),
    "usage of 2**31 requests": (  # PostgreSQL counts requests in INTEGER columns
        lambda s, r: s.add_items("s", [assistant("u")], Usage(requests=MAX_REQUESTS + 1)),
        InvalidOperationError,
    ),
    "usage of -1 requests": (
        lambda s, r: s.add_items("s", [assistant("u")], Usage(requests=-1)),
        InvalidOperationError,
    ),
    "usage of 1.5 tokens": (
        lambda s, r: s.add_items("s", [assistant("u")], Usage(output_tokens=1.5)),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "usage of '7' tokens": (
        lambda s, r: s.add_items("s", [assistant("u")], Usage(total_tokens="7")),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "usage that is a dict": (
        lambda s, r: s.add_items("s", [assistant("u")], {"requests": 1}),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "add_runs usage of 2**63": (
        lambda s, r: s.add_runs("s", [NewRun([user("x")], usage=Usage(requests=HUGE))]),
        InvalidOperationError,
    ),
    # Times: datetimes only.
    "add_runs created_at as text": (
        lambda s, r: s.add_runs("s", [NewRun([user("x")], created_at=WHEN)]),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "sessions created_after as text": (
        lambda s, r: s.sessions(created_after=WHEN),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "sessions updated_before as an int": (
        lambda s, r: s.sessions(updated_before=1),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "tool_calls since as text": (lambda s, r: s.tool_calls(since=WHEN), InvalidOperationError),  # type: ignore[arg-type]
    "tool_stats until as bytes": (lambda s, r: s.tool_stats(until=b"x"), InvalidOperationError),  # type: ignore[arg-type]
    "usage since as text": (lambda s, r: s.usage(since=WHEN), InvalidOperationError),  # type: ignore[arg-type]
    # Times Python cannot move to UTC (before: OverflowError, a traceback from the CLI).
    "usage since the first instant east of UTC": (
        lambda s, r: s.usage(since=EARLIEST_EAST),
        InvalidOperationError,
    ),
    "tool_calls until the last instant west of UTC": (
        lambda s, r: s.tool_calls(until=LATEST_WEST),
        InvalidOperationError,
    ),
    "sessions created_after the first instant east of UTC": (
        lambda s, r: s.sessions(created_after=EARLIEST_EAST),
        InvalidOperationError,
    ),
    "add_runs created_at the last instant west of UTC": (
        lambda s, r: s.add_runs("s", [NewRun([user("x")], created_at=LATEST_WEST)]),
        InvalidOperationError,
    ),
    # Text: no lone surrogates (no UTF-8 encoder writes one), no NUL (PostgreSQL refuses it).
    "sessions of a user with a lone surrogate": (
        lambda s, r: s.sessions(user_id=SURROGATE),
        InvalidOperationError,
    ),
    "a metadata filter value with a lone surrogate": (
        lambda s, r: s.sessions(metadata={"k": SURROGATE}),
        InvalidOperationError,
    ),
    "a metadata filter key with a lone surrogate": (
        lambda s, r: s.sessions(metadata={SURROGATE: 1}),
        InvalidOperationError,
    ),
    "a metadata filter value with NUL": (
        lambda s, r: s.sessions(metadata={"k": NUL}),
        InvalidOperationError,
    ),
    "a cursor with a lone surrogate": (
        lambda s, r: s.sessions(after=SURROGATE),
        InvalidOperationError,
    ),
    "tool_calls of a tool name with a lone surrogate": (
        lambda s, r: s.tool_calls(tool_name=SURROGATE),
        InvalidOperationError,
    ),
    "slowest_tool_calls of a status with a lone surrogate": (
        lambda s, r: s.slowest_tool_calls(status=SURROGATE),
        InvalidOperationError,
    ),
    "usage of a user with a lone surrogate": (
        lambda s, r: s.usage(user_id=SURROGATE),
        InvalidOperationError,
    ),
    "search for a lone surrogate": (lambda s, r: s.search(SURROGATE), InvalidOperationError),
    "search for a word with NUL": (lambda s, r: s.search("hel\x00lo"), InvalidOperationError),
    "search of roles with a lone surrogate": (
        lambda s, r: s.search("hello", roles=[SURROGATE]),
        InvalidOperationError,
    ),
    "search of types that is an int": (
        lambda s, r: s.search("hello", types=1),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "fork to an input with NUL": (lambda s, r: s.fork("s", r, NUL), InvalidOperationError),
    "fork to a megabyte of text with NUL": (
        lambda s, r: s.fork("s", r, NUL * 100_000),
        InvalidOperationError,
    ),
    "sessions of a megabyte user_id with a lone surrogate": (
        lambda s, r: s.sessions(user_id=SURROGATE * 100_000),
        InvalidOperationError,
    ),
    # Deep nesting: refused before anything encodes it (which ran out of stack).
    "an item nested 1,000 lists deep": (
        lambda s, r: s.add_items("s", [deep_user(1000)]),
        InvalidItemError,
    ),
    "an item nested 100,000 objects deep": (
        lambda s, r: s.add_items("s", [deep_user(100_000, "dict")]),
        InvalidItemError,
    ),
    "an item nested one level too deep": (
        lambda s, r: s.add_items("s", [deep_user(MAX_DEPTH + 1)]),
        InvalidItemError,
    ),
    "add_runs of an item nested 1,000 deep": (
        lambda s, r: s.add_runs("s", [NewRun([deep_user(1000, "dict")])]),
        InvalidItemError,
    ),
    "compact to an item nested 1,000 deep": (
        lambda s, r: s.compact("s", [deep_user(1000)]),
        InvalidItemError,
    ),
    "fork to an input nested 1,000 deep": (
        lambda s, r: s.fork("s", r, deep_user(1000)),
        InvalidItemError,
    ),
    "metadata nested 1,000 deep": (
        lambda s, r: s.update_session("s", metadata={"k": nested(1000)}),
        InvalidOperationError,
    ),
    "metadata nested one level too deep": (
        lambda s, r: s.update_session("s", metadata={"k": nested(MAX_DEPTH, "dict")}),
        InvalidOperationError,
    ),
    # Other wrong types.
    "add_runs of a str": (lambda s, r: s.add_runs("s", "runs"), InvalidOperationError),  # type: ignore[arg-type]
    "add_runs of None": (lambda s, r: s.add_runs("s", None), InvalidOperationError),  # type: ignore[arg-type]
    "add_runs of dicts": (
        lambda s, r: s.add_runs("s", [{"items": [user("x")]}]),  # type: ignore[list-item]
        InvalidOperationError,
    ),
    "add_items with info that is a str": (
        lambda s, r: s.add_items("s", [assistant("i")], info="title"),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "add_items with telemetry that is a list": (
        lambda s, r: s.add_items("s", [assistant("t")], telemetry=[]),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "compact with a tail that is a list": (
        lambda s, r: s.compact("s", [assistant("c")], tail=[]),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "patch_session with a dict": (
        lambda s, r: s.patch_session("s", {"title": "t"}),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "move_head with to_parent as text": (
        lambda s, r: s.move_head("s", r, to_parent="no"),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "export with all_branches as text": (
        lambda s, r: s.export("s", "json", all_branches="no"),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "export in a format that is a list": (
        lambda s, r: s.export("s", ["json"]),  # type: ignore[arg-type]
        InvalidOperationError,
    ),
    "session_id with NUL": (lambda s, r: s.get_items(NUL), InvalidOperationError),
    "session_id that is an int": (lambda s, r: s.pop_item(7), InvalidOperationError),  # type: ignore[arg-type]
    # Records a caller builds (issue 26): each field by the rule of the argument it stands
    # for. Before, each was stored as given (and broke every later listing or export), or
    # raised AttributeError.
    "a patch of metadata that is not JSON": (patched(metadata="not json"), InvalidOperationError),
    "a patch of metadata that is a JSON list": (patched(metadata="[1,2]"), InvalidOperationError),
    "a patch of metadata that is JSON null": (patched(metadata="null"), InvalidOperationError),
    "a patch of metadata nested 5,000 deep": (patched(metadata=DEEP_TEXT), InvalidOperationError),
    "a patch of metadata one level too deep": (
        patched(metadata=json.dumps({"k": nested(MAX_DEPTH, "dict")})),
        InvalidOperationError,
    ),
    "a patch of metadata holding NaN": (patched(metadata='{"k": NaN}'), InvalidOperationError),
    "a patch of metadata holding 1e999": (patched(metadata='{"k": 1e999}'), InvalidOperationError),
    "a patch of metadata holding an escaped NUL": (
        patched(metadata='{"k": "\\u0000"}'),
        InvalidOperationError,
    ),
    "a patch of metadata holding an escaped lone surrogate": (
        patched(metadata='{"k": "\\ud800"}'),
        InvalidOperationError,
    ),
    "a patch of metadata text with NUL": (
        patched(metadata='{"k": 1}' + NUL),
        InvalidOperationError,
    ),
    "a patch of metadata that is a dict": (patched(metadata={"k": 1}), InvalidOperationError),
    "a patch of metadata of 5,000 digits": (
        patched(metadata='{"k": ' + "7" * 5000 + "}"),
        InvalidOperationError,
    ),
    "a patch of a 5,000-character user_id": (patched(user_id="u" * 5000), InvalidOperationError),
    "a patch of a user_id that is an int": (patched(user_id=7), InvalidOperationError),
    "a patch of a title with NUL": (patched(title=NUL), InvalidOperationError),
    "a patch of a title with a lone surrogate": (patched(title=SURROGATE), InvalidOperationError),
    "a write's info of metadata that is not JSON": (
        with_info(metadata="not json"),
        InvalidOperationError,
    ),
    "a write's info of metadata that is a JSON list": (
        with_info(metadata="[1,2]"),
        InvalidOperationError,
    ),
    "a write's info of a 5,000-character user_id": (
        with_info(user_id="u" * 5000),
        InvalidOperationError,
    ),
    "a write's info of a title that is a list": (with_info(title=["t"]), InvalidOperationError),
    "telemetry whose responses hold an int": (with_telemetry(responses=[1]), InvalidOperationError),
    "telemetry whose responses are a str": (
        with_telemetry(responses="r"),
        InvalidOperationError,
    ),
    "telemetry whose tools hold a dict": (
        with_telemetry(tools=[{"call_id": "c-q2"}]),
        InvalidOperationError,
    ),
    "telemetry whose tools are None": (with_telemetry(tools=None), InvalidOperationError),
    "a model call started 'yesterday'": (
        with_telemetry(responses=[response(started_at="yesterday")]),
        InvalidOperationError,
    ),
    "a model call completed at None": (
        with_telemetry(responses=[response(completed_at=None)]),
        InvalidOperationError,
    ),
    "a model call completed at a time as text": (
        with_telemetry(responses=[response(completed_at=WHEN)]),
        InvalidOperationError,
    ),
    "a model call completed at the last instant west of UTC": (
        with_telemetry(responses=[response(completed_at=LATEST_WEST)]),
        InvalidOperationError,
    ),
    "a model call of NaN latency": (
        with_telemetry(responses=[response(latency_ms=float("nan"))]),
        InvalidOperationError,
    ),
    "a model call of infinite latency": (
        with_telemetry(responses=[response(latency_ms=float("inf"))]),
        InvalidOperationError,
    ),
    "a model call of negative latency": (
        with_telemetry(responses=[response(latency_ms=-1.0)]),
        InvalidOperationError,
    ),
    "a model call of a latency as text": (
        with_telemetry(responses=[response(latency_ms="5")]),
        InvalidOperationError,
    ),
    "a model call of a latency of 10**400": (
        with_telemetry(responses=[response(latency_ms=10**400)]),
        InvalidOperationError,
    ),
    "a model call of usage None": (
        with_telemetry(responses=[response(usage=None)]),
        InvalidOperationError,
    ),
    "a model call of 2**63 tokens": (
        with_telemetry(responses=[response(usage=Usage(input_tokens=HUGE))]),
        InvalidOperationError,
    ),
    "a model call of an agent name with NUL": (
        with_telemetry(responses=[response(agent_name=NUL)]),
        InvalidOperationError,
    ),
    "a model call of a model with a lone surrogate": (
        with_telemetry(responses=[response(model=SURROGATE)]),
        InvalidOperationError,
    ),
    "a model call of a response id that is an int": (
        with_telemetry(responses=[response(response_id=7)]),
        InvalidOperationError,
    ),
    "a tool timing started 'yesterday'": (
        with_telemetry(tools=[timing(started_at="yesterday")]),
        InvalidOperationError,
    ),
    "a tool timing completed at None": (
        with_telemetry(tools=[timing(completed_at=None)]),
        InvalidOperationError,
    ),
    "a tool timing completed at the first instant east of UTC": (
        with_telemetry(tools=[timing(completed_at=EARLIEST_EAST)]),
        InvalidOperationError,
    ),
    "a tool timing of NaN duration": (
        with_telemetry(tools=[timing(duration_ms=float("nan"))]),
        InvalidOperationError,
    ),
    "a tool timing of a duration that is True": (
        with_telemetry(tools=[timing(duration_ms=True)]),
        InvalidOperationError,
    ),
    "a tool timing of call_id None": (
        with_telemetry(tools=[timing(call_id=None)]),
        InvalidOperationError,
    ),
    "a tool timing of a call_id with NUL": (
        with_telemetry(tools=[timing(call_id="c-q2" + NUL)]),
        InvalidOperationError,
    ),
    "a good model call beside a bad tool timing": (
        with_telemetry(responses=[response()], tools=[timing(duration_ms=-2.0)]),
        InvalidOperationError,
    ),
}


async def seeded(store: Store) -> int:
    """Session "s" with two runs (the second a child of the first); the first run's id."""
    runs = await converse(StructuredSession("s", store), "q1", "q2")
    await store.update_session("s", user_id="u", metadata={"a": 1})
    return runs[0]


async def stored(store: Store) -> Any:
    """Everything a refusal must leave as it was."""
    timings = await sql(store, "SELECT id, started_at, duration_ms FROM tool_calls ORDER BY id")
    return (
        await snapshot(store),
        await store.session("s"),
        await store.get_items("s"),
        await store.model_responses(),
        timings,
    )


@pytest.mark.parametrize("case", list(CASES))
async def test_a_wrong_argument_is_refused_by_the_rule_and_changes_nothing(
    store: Store, case: str
) -> None:
    call, error = CASES[case]
    run = await seeded(store)
    before = await stored(store)
    with pytest.raises(error) as caught:
        await call(store, run)
    # The class the rule names, not a subclass of another branch of the tree; a wrong type
    # is its ArgumentTypeError (a TypeError too, as the SDK's sessions raise).
    refined = {ArgumentTypeError} if error is InvalidOperationError else set()
    assert type(caught.value) in {error, *refined}
    assert len(str(caught.value)) < 400  # a bad value is shown bounded, in a line
    assert await stored(store) == before


async def test_nesting_up_to_the_limit_is_stored_and_read_back(store: Store) -> None:
    items = [deep_user(MAX_DEPTH), deep_user(MAX_DEPTH, "dict")]
    await store.add_items("s", items)
    assert await store.get_items("s") == items
    metadata = {"k": nested(MAX_DEPTH - 1)}  # the mapping itself is the first level
    info = await store.update_session("s", metadata=metadata)
    assert info.metadata == metadata
    assert (await store.session("s")).metadata == metadata  # type: ignore[union-attr]


async def test_hand_built_records_within_the_limits_are_stored_and_read_back(
    store: Store,
) -> None:
    await seeded(store)
    fits = "é" * 512  # 1,024 bytes of UTF-8
    metadata = {"k": nested(MAX_DEPTH - 1), "n": 1.5, "t": "é\u2028"}
    text = json.dumps(metadata, indent=1)  # any JSON text of the object: stored as the object
    info = await store.patch_session("s", SessionPatch(user_id=fits, title="t", metadata=text))
    assert (info.user_id, info.title, info.metadata) == (fits, "t", metadata)
    naive = datetime(2025, 1, 2, 3, 4, 5, 678901)  # UTC
    east = datetime(2025, 1, 2, 8, 4, 6, tzinfo=timezone(timedelta(hours=5)))
    telemetry = Telemetry(
        [response(started_at=naive, completed_at=east, latency_ms=7)],
        [timing(started_at=naive, completed_at=east, duration_ms=0)],
    )
    await store.add_items("s", [assistant("t")], telemetry=telemetry)
    (model_call,) = await store.model_responses(session_id="s")
    assert model_call.started_at == naive.replace(tzinfo=timezone.utc)
    assert (model_call.completed_at, model_call.latency_ms) == (east, 7.0)
    assert (model_call.agent_name, model_call.usage) == ("a", Usage(1, 2, 3, 5))
    tool_call = (await store.tool_calls(session_id="s"))[-1]
    assert tool_call.started_at == naive.replace(tzinfo=timezone.utc)
    assert (tool_call.call_id, tool_call.completed_at, tool_call.duration_ms) == ("c-q2", east, 0)


async def test_a_session_refuses_deep_metadata_when_it_is_made(store: Store) -> None:
    with pytest.raises(InvalidOperationError, match="deep"):
        StructuredSession("s", store, metadata={"k": nested(1000)})
    assert await store.session("s") is None


async def test_an_id_filter_out_of_range_matches_nothing(store: Store) -> None:
    run = await seeded(store)
    assert await store.tool_calls(run_id=HUGE) == []
    assert await store.tool_calls(run_id=-HUGE - 1, limit=None) == []
    assert await store.slowest_tool_calls(run_id=2**64) == []
    assert await store.tool_stats(run_id=HUGE) == []
    assert await store.model_responses(run_id=HUGE) == []
    # An owner that names nothing: the batch counts for the head, as for a deleted owner.
    head = (await store.session("s")).head_run_id  # type: ignore[union-attr]
    assert await store.add_items("s", [assistant("more")], owner=HUGE) == head
    assert run != head


async def test_an_expected_head_that_names_nothing_is_a_conflict(store: Store) -> None:
    run = await seeded(store)
    before = await stored(store)
    with pytest.raises(ConflictError):
        await store.move_head("s", run, to_parent=False, expected_head=HUGE)
    assert await stored(store) == before


async def test_the_largest_counts_are_accepted(store: Store) -> None:
    await seeded(store)
    full = Usage(MAX_REQUESTS, MAX_INT, MAX_INT, MAX_INT, MAX_INT, MAX_INT)
    await store.add_items("s", [user("q3")], full)
    assert (await store.runs("s"))[-1].usage == full
    assert len(await store.get_items("s", MAX_INT)) == len(await store.get_items("s"))
    assert len((await store.sessions(limit=MAX_INT)).sessions) == 1
    assert await store.search("q3", limit=MAX_INT) != []


class _Details(SimpleNamespace):
    cached_tokens: Any
    reasoning_tokens: Any


@pytest.mark.parametrize(
    ("figures", "stored_as"),
    [
        # Beyond 64 bits: clamped to the largest count the database stores.
        ((10**30, 2**64, 5, HUGE, 1, 2), (MAX_REQUESTS, MAX_INT, 5, MAX_INT, 1, 2)),
        # Negative, not a number, infinite: counted as 0.
        ((-1, "many", float("inf"), float("nan"), None, 3), (0, 0, 0, 0, 0, 3)),
    ],
)
async def test_usage_the_sdk_passes_never_loses_the_turn(
    store: Store, figures: tuple[Any, ...], stored_as: tuple[int, ...]
) -> None:
    requests, input_tokens, output_tokens, total_tokens, cached, reasoning = figures
    usage = SimpleNamespace(
        requests=requests,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=total_tokens,
        input_tokens_details=_Details(cached_tokens=cached),
        output_tokens_details=_Details(reasoning_tokens=reasoning),
    )
    session = StructuredSession("s", store)
    await session.add_items([user("q")], wrapper=SimpleNamespace(usage=usage))
    assert await session.get_items() == [user("q")]
    stored = (await session.runs())[0].usage
    assert replace(stored, input_tokens_details={}, output_tokens_details={}) == Usage(*stored_as)
    # The details as given, clamped alike; a field that is not a count (None) left out.
    assert stored.input_tokens_details == ({} if cached is None else {"cached_tokens": cached})
    assert stored.output_tokens_details == {"reasoning_tokens": stored_as[5]}


async def test_usage_sums_stop_at_the_largest_count(store: Store) -> None:
    # Two Runner calls that count for one run (a call without a user message continues it).
    session = StructuredSession("s", store)
    full = SimpleNamespace(requests=HUGE, input_tokens=MAX_INT, output_tokens=1)
    await session.add_items([user("q")], wrapper=SimpleNamespace(usage=full))
    await session.add_items([assistant("a")], wrapper=SimpleNamespace(usage=full))
    assert await session.get_items() == [user("q"), assistant("a")]
    usage = (await session.runs())[0].usage
    assert (usage.requests, usage.input_tokens, usage.output_tokens) == (MAX_REQUESTS, MAX_INT, 2)
    assert [type(value) for value in (usage.requests, usage.input_tokens)] == [int, int]


async def test_export_renders_the_deepest_item_a_database_holds(store: Store) -> None:
    # Written by a turnstore without the nesting limit (older versions, or a SQLiteSession
    # file taken over): as deep as still reads back, ~950 levels.
    await store.add_items("s", [user("placeholder")])
    data = '{"role": "user", "content": ' + "[" * 950 + '"core"' + "]" * 950 + "}"

    def replace() -> Any:
        from turnstore.core.ops import Query

        yield Query(
            "UPDATE items SET data = {data} WHERE session_id = 's'".format(
                data=":data" if store.backend.dialect == "sqlite" else "%(data)s"
            ),
            {"data": data},
            raw=True,
        )

    await store.backend.run(replace, write=True)
    [item] = await store.get_items("s")
    assert depth_of(item["content"]) == 950  # level by level: == would run out of stack
    assert '"core"' in await store.export("s", "json")
    assert '"core"' in await store.export("s", "jsonl")
    assert "placeholder" in await store.export("s", "markdown")  # the run's user message


# ---------------------------------------------------------------------------------------------
# Opening: ConfigurationError, and nothing created


OPEN_OPTIONS = [
    {"schema": "x"},  # PostgreSQL's option, given to SQLite
    {"schema": SURROGATE},
    {"bogus": 1},
    {"busy_timeout": "30"},
    {"busy_timeout": float("nan")},
    {"durable": "yes"},
    {"read_only": 0},
    {"min_size": -1},
    {"max_size": 2.5},
    {"connect_timeout": HUGE},
    {"connect_kwargs": "sslmode=require"},
    {"connect_kwargs": {SURROGATE: ""}},  # libpq's parameters are UTF-8 text
    {"connect_kwargs": {"application_name": SURROGATE}},
    {"connect_kwargs": {"application_name": NUL}},
    {"connect_kwargs": {1: "x"}},
    {"migrate": "no"},
]


@pytest.mark.parametrize("bad", OPEN_OPTIONS, ids=lambda bad: next(iter(bad)))
def test_bad_open_options_are_refused_and_create_nothing(
    db_target: tuple[str, dict[str, Any]], bad: dict[str, Any]
) -> None:
    # Each is an option the backend does not take, or one of its own with a wrong value.
    target, options = db_target
    is_postgres = target.startswith("postgresql")
    if is_postgres and bad == {"schema": "x"}:
        bad = {"schema": NUL}  # "x" is a fine schema on PostgreSQL
    with pytest.raises(ConfigurationError):
        Store.open(target, **{**options, **bad})
    if is_postgres:
        import psycopg

        with psycopg.connect(POSTGRES_URL) as conn:
            found = conn.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (options["schema"],)
            ).fetchone()
        assert found == (0,)
    elif target != ":memory:":
        assert not os.path.exists(target)


@pytest.mark.parametrize(
    "target",
    ["conv\x00ersations.db", "sqlite:///a\x00b.db", "lone\udcff.db", "postgresql://h/d\x00b"],
)
def test_a_database_path_or_url_with_nul_or_lone_surrogates_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError):
        Store.open(target)
    with pytest.raises(ConfigurationError):
        StructuredSession("s", target)  # resolved as a path first, to share its store
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("target", ["file:app.db", "file:app.db?mode=ro", "sqlite:///file:app.db"])
def test_a_sqlite_uri_is_refused_not_read_two_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    # SQLite built to read URIs (Debian's) opens app.db for file:app.db where the checks
    # before an open look for a file named file:app.db: one target, two files.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="SQLite URI"):
        Store.open(target)
    with pytest.raises(ConfigurationError, match="SQLite URI"):
        StructuredSession("s", target)
    with pytest.raises(ConfigurationError, match="SQLite URI"):
        Store.inspect(target)
    with pytest.raises(ConfigurationError, match="SQLite URI"):
        SQLiteBackend(target.removeprefix("sqlite:///"))
    assert os.listdir(tmp_path) == []
    # A file whose name starts with file: is named by a path that does not.
    Store.open("./file:app.db").close()
    assert "file:app.db" in os.listdir(tmp_path)


@pytest.mark.parametrize("target", ["app.db", Path("app.db"), b"app.db", None, 7])
def test_a_store_is_opened_with_store_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: Any
) -> None:
    # Store() wraps an open backend; a path was an AttributeError at the first call.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=r"Store\(\) takes an open backend.*Store\.open"):
        Store(target)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("settings", ["limit=5", 5, {"limit": "x"}, {"bogus": 1}])
async def test_a_session_refuses_bad_settings_when_it_is_made(store: Store, settings: Any) -> None:
    require_module("agents")  # the SDK checks settings; without it they are not used
    with pytest.raises(InvalidOperationError, match="session_settings"):
        StructuredSession("s", store, session_settings=settings)
    assert await store.session("s") is None


async def test_a_batch_with_one_deep_item_stores_nothing(store: Store) -> None:
    with pytest.raises(InvalidItemError):
        await store.add_items("s", [user("ok"), deep_user(1000)])
    assert await sql(store, "SELECT count(*) FROM items") == [(0,)]
    assert await store.session("s") is None

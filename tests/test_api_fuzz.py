"""A fuzz test of the public API (issue 11): hostile values in every argument of every public
call, on every backend.

Each example puts one hostile value (NUL, lone surrogates, ints beyond 64 bits or negative,
nesting 1,000 deep, text where a time or an int belongs, bytes, floats, lists, None) into one
argument of one call of ``Store``, ``StructuredSession`` or ``Store.open``, and asserts: the
call raises nothing but a ``TurnstoreError``, and a call that raised left every stored row as
it was. A call that accepts the value is fine (many hostile values are valid somewhere).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import assistant, converse, snapshot, user
from support import POSTGRES_URL, require_module
from turnstore import (
    NewRun,
    ResponseRecord,
    SessionPatch,
    Store,
    StructuredSession,
    Telemetry,
    ToolTiming,
    TurnstoreError,
    Usage,
)
from turnstore.store import session_patch


def nested(depth: int, kind: str) -> Any:
    value: Any = "core"
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


_TEXT = st.text(
    alphabet=st.sampled_from(["a", "s", " ", "\x00", "\ud800", "\udcff", "é", "*", '"', "-"]),
    max_size=6,
)
_INTS = st.sampled_from([2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -1, 0, 1, 2**31])

HOSTILE = st.one_of(
    _TEXT,
    _INTS,
    st.integers(),
    st.sampled_from(
        [
            None,
            True,
            1.5,
            float("nan"),
            float("inf"),
            b"bytes",
            "2024-01-01T00:00:00",
            datetime(2024, 1, 1),
            datetime(2024, 1, 1, tzinfo=timezone.utc),
            [],
            ["s"],
            {},
            {"k": "\x00"},
            {1: "one", "1": "two"},
            object(),
        ]
    ),
    st.builds(nested, st.integers(150, 1500), st.sampled_from(["list", "dict"])),
    st.lists(_TEXT, max_size=3),
    st.dictionaries(_TEXT, _TEXT, max_size=2),
)

# Each call takes the store, the id of a run of session "s" and the hostile value.
Call = Callable[[Store, int, Any], Awaitable[Any]]


def _session(store: Store) -> StructuredSession:
    return StructuredSession("s", store)


def _annotate(field: str) -> Call:
    return lambda s, r, v: s.annotate(r, "thumbs", **{field: v})


def _update_annotation(field: str) -> Call:
    async def update(store: Store, run: int, value: Any) -> Any:
        (seeded,) = await store.annotations(session_id="s", name="seed", limit=1)
        return await store.update_annotation(seeded.id, **{field: value})

    return update


def _annotations(field: str) -> Call:
    return lambda s, r, v: s.annotations(**{field: v})


def _sdk_usage(value: Any) -> Any:
    return SimpleNamespace(usage=SimpleNamespace(requests=value, input_tokens=value))


_NOW = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _telemetry(record: str, field: str) -> Callable[[Any], Telemetry]:
    """A ``Telemetry`` of one hand-built record whose ``field`` is the value."""

    def build(value: Any) -> Telemetry:
        if record == "ResponseRecord":
            response = ResponseRecord("a", "m", "r", None, Usage(), _NOW, _NOW, 1.0)
            return Telemetry(responses=[dataclasses.replace(response, **{field: value})])
        timing = ToolTiming("c-q2", _NOW, _NOW, 1.0)  # the newest call of session "s"
        return Telemetry(tools=[dataclasses.replace(timing, **{field: value})])

    return build


def _with_telemetry(build: Callable[[Any], Telemetry]) -> Call:
    return lambda s, r, v: s.add_items("s", [assistant("t")], telemetry=build(v))


async def _hooked_write(store: Store, value: Any) -> None:
    """A write after ``session.hooks`` saw a model call and a tool call of hostile fields."""
    require_module("agents")
    session = _session(store)
    recorder = session.hooks.recorder
    response = SimpleNamespace(response_id=value, request_id=value, usage=_sdk_usage(value).usage)
    recorder.llm_start("call")
    recorder.llm_end("call", value, value, response)
    if isinstance(value, str):  # the hooks time a call whose call_id is text
        recorder.tool_start(value)
        recorder.tool_end(value)
    await session.add_items([assistant("h")])


STORE_CALLS: dict[str, Call] = {
    "add_items(items)": lambda s, r, v: s.add_items("s", v),
    "add_items(an item)": lambda s, r, v: s.add_items("s", [v]),
    "add_items(an item's content)": lambda s, r, v: s.add_items("s", [user(v)]),
    "add_items(session_id)": lambda s, r, v: s.add_items(v, [user("x")]),
    "add_items(usage)": lambda s, r, v: s.add_items("s", [assistant("u")], v),
    "add_items(a usage figure)": lambda s, r, v: s.add_items(
        "s", [assistant("u")], Usage(input_tokens=v)
    ),
    "add_items(owner)": lambda s, r, v: s.add_items("s", [assistant("o")], owner=v),
    "add_items(info)": lambda s, r, v: s.add_items("s", [assistant("i")], info=v),
    "add_items(telemetry)": lambda s, r, v: s.add_items("s", [assistant("t")], telemetry=v),
    "add_items(operation_id)": lambda s, r, v: s.add_items("s", [user("k")], operation_id=v),
    "add_items(name)": lambda s, r, v: s.add_items("s", [user("n")], name=v),
    "add_items(take)": lambda s, r, v: s.add_items("s", [user("n")], name="fuzzed", take=v),
    "add_items(name_below)": lambda s, r, v: s.add_items(
        "s", [user("n")], name="fuzzed", name_below=v
    ),
    "get_items(session_id)": lambda s, r, v: s.get_items(v),
    "get_items(limit)": lambda s, r, v: s.get_items("s", v),
    "pop_item(session_id)": lambda s, r, v: s.pop_item(v),
    "clear_session(session_id)": lambda s, r, v: s.clear_session(v),
    "history_tail(limit)": lambda s, r, v: s.history_tail("s", v),
    "compact(items)": lambda s, r, v: s.compact("s", v),
    "compact(tail)": lambda s, r, v: s.compact("s", [user("c")], tail=v),
    "compact(start)": lambda s, r, v: s.compact("s", [user("c")], start=v),
    "session(session_id)": lambda s, r, v: s.session(v),
    "runs(session_id)": lambda s, r, v: s.runs(v),
    "fork(run_id)": lambda s, r, v: s.fork("s", v, None),
    "fork(new_input)": lambda s, r, v: s.fork("s", r, v),
    "fork(expected_head)": lambda s, r, v: s.fork("s", r, "again", expected_head=v),
    "fork(name)": lambda s, r, v: s.fork("s", r, "again", name=v),
    "fork(take)": lambda s, r, v: s.fork("s", r, "again", name="fuzzed", take=v),
    "move_head(run_id)": lambda s, r, v: s.move_head("s", v, to_parent=False),
    "move_head(to_parent)": lambda s, r, v: s.move_head("s", r, to_parent=v),
    "branches(session_id)": lambda s, r, v: s.branches(v),
    "siblings(run_id)": lambda s, r, v: s.siblings("s", v),
    "tree(session_id)": lambda s, r, v: s.tree(v),
    "add_runs(runs)": lambda s, r, v: s.add_runs("s", v),
    "add_runs(items)": lambda s, r, v: s.add_runs("s", [NewRun(v)]),
    "add_runs(parent_id)": lambda s, r, v: s.add_runs("s", [NewRun([user("p")], parent_id=v)]),
    "add_runs(parent)": lambda s, r, v: s.add_runs(
        "s", [NewRun([user("p")]), NewRun([user("q")], parent=v)]
    ),
    "add_runs(usage)": lambda s, r, v: s.add_runs("s", [NewRun([user("p")], usage=v)]),
    "add_runs(created_at)": lambda s, r, v: s.add_runs("s", [NewRun([user("p")], created_at=v)]),
    "add_runs(head)": lambda s, r, v: s.add_runs("s", [NewRun([user("p")])], head=v),
    "delete_branch(run_id)": lambda s, r, v: s.delete_branch("s", v),
    "delete_branch(expected_head)": lambda s, r, v: s.delete_branch("s", r, expected_head=v),
    "path_view(through)": lambda s, r, v: s.path_view("s", through=v),
    "path_view(start)": lambda s, r, v: s.path_view("s", start=v),
    "path_view(stop)": lambda s, r, v: s.path_view("s", stop=v),
    "path_view(limit)": lambda s, r, v: s.path_view("s", limit=v),
    "run(run_id)": lambda s, r, v: s.run(v),
    "run_items(run_id)": lambda s, r, v: s.run_items(v),
    "tool_call(call_id)": lambda s, r, v: s.tool_call(v),
    "sessions(user_id)": lambda s, r, v: s.sessions(user_id=v),
    "sessions(metadata)": lambda s, r, v: s.sessions(metadata=v),
    "sessions(a metadata value)": lambda s, r, v: s.sessions(metadata={"a": v}),
    "sessions(created_after)": lambda s, r, v: s.sessions(created_after=v),
    "sessions(updated_before)": lambda s, r, v: s.sessions(updated_before=v),
    "sessions(order_by)": lambda s, r, v: s.sessions(order_by=v),
    "sessions(limit)": lambda s, r, v: s.sessions(limit=v),
    "sessions(after)": lambda s, r, v: s.sessions(after=v),
    "update_session(user_id)": lambda s, r, v: s.update_session("s", user_id=v),
    "update_session(title)": lambda s, r, v: s.update_session("s", title=v),
    "update_session(metadata)": lambda s, r, v: s.update_session("s", metadata=v),
    "update_session(a metadata value)": lambda s, r, v: s.update_session("s", metadata={"a": v}),
    "patch_session(patch)": lambda s, r, v: s.patch_session("s", v),
    "delete_session(session_id)": lambda s, r, v: s.delete_session(v),
    "tool_calls(session_id)": lambda s, r, v: s.tool_calls(session_id=v),
    "tool_calls(run_id)": lambda s, r, v: s.tool_calls(run_id=v),
    "tool_calls(tool_name)": lambda s, r, v: s.tool_calls(tool_name=v),
    "tool_calls(status)": lambda s, r, v: s.tool_calls(status=v),
    "tool_calls(since)": lambda s, r, v: s.tool_calls(since=v),
    "tool_calls(limit)": lambda s, r, v: s.tool_calls(limit=v),
    "slowest_tool_calls(until)": lambda s, r, v: s.slowest_tool_calls(until=v),
    "tool_stats(run_id)": lambda s, r, v: s.tool_stats(run_id=v),
    "model_responses(limit)": lambda s, r, v: s.model_responses(limit=v),
    "usage(group_by)": lambda s, r, v: s.usage(v),
    "usage(user_id)": lambda s, r, v: s.usage(user_id=v),
    "usage(since)": lambda s, r, v: s.usage(since=v),
    "search(query)": lambda s, r, v: s.search(v),
    "search(session_id)": lambda s, r, v: s.search("q1", session_id=v),
    "search(roles)": lambda s, r, v: s.search("q1", roles=v),
    "search(types)": lambda s, r, v: s.search("q1", types=v),
    "search(limit)": lambda s, r, v: s.search("q1", limit=v),
    "search(order)": lambda s, r, v: s.search("q1", order=v),
    **{
        f"annotate({name})": _annotate(name)
        for name in ("value", "label", "comment", "source", "author", "tool_call_id")
    },
    "annotate(run_id)": lambda s, r, v: s.annotate(v, "thumbs", value=1),
    "annotate(name)": lambda s, r, v: s.annotate(r, v, value=1),
    "annotate(session_id)": lambda s, r, v: s.annotate(r, "thumbs", session_id=v),
    **{
        f"update_annotation({name})": _update_annotation(name)
        for name in ("name", "value", "label", "comment", "source", "author")
    },
    "update_annotation(annotation_id)": lambda s, r, v: s.update_annotation(v, value=1),
    "delete_annotation(annotation_id)": lambda s, r, v: s.delete_annotation(v),
    **{
        f"annotations({name})": _annotations(name)
        for name in (
            "session_id",
            "run_id",
            "name",
            "source",
            "label",
            "min_value",
            "max_value",
            "since",
            "until",
            "limit",
        )
    },
    "annotation_stats(group_by)": lambda s, r, v: s.annotation_stats(v),
    "annotation_stats(session_id)": lambda s, r, v: s.annotation_stats("branch", session_id=v),
    "session.annotate(name)": lambda s, r, v: _session(s).annotate(v, value=0),
    "session.annotate(run_id)": lambda s, r, v: _session(s).annotate("thumbs", run_id=v),
    "export(session_id)": lambda s, r, v: s.export(v),
    "export(format)": lambda s, r, v: s.export("s", v),
    "export(all_branches)": lambda s, r, v: s.export("s", all_branches=v),
    # StructuredSession: the SDK protocol and the tree.
    "StructuredSession(session_id)": lambda s, r, v: StructuredSession(v, s).get_items(),
    "StructuredSession(user_id)": lambda s, r, v: StructuredSession("s", s, user_id=v).runs(),
    "StructuredSession(metadata)": lambda s, r, v: StructuredSession("s", s, metadata=v).runs(),
    "StructuredSession(title)": lambda s, r, v: StructuredSession("s", s, title=v).runs(),
    "StructuredSession(session_settings)": lambda s, r, v: StructuredSession(
        "s", s, session_settings=v
    ).get_items(),
    "session.get_items(limit)": lambda s, r, v: _session(s).get_items(v),
    "session.add_items(items)": lambda s, r, v: _session(s).add_items(v),
    "session.add_items(an item)": lambda s, r, v: _session(s).add_items([v]),
    "session.edit(run_id)": lambda s, r, v: _session(s).edit(v, "edited"),
    "session.edit(new_input)": lambda s, r, v: _session(s).edit(r, v),
    "session.regenerate(run_id)": lambda s, r, v: _session(s).regenerate(v),
    "session.rewind(run_id)": lambda s, r, v: _session(s).rewind(v),
    "session.checkout(run_id)": lambda s, r, v: _session(s).checkout(v),
    "session.checkout(expected_head)": lambda s, r, v: _session(s).checkout(r, expected_head=v),
    "session.siblings(run_id)": lambda s, r, v: _session(s).siblings(v),
    "session.delete_branch(run_id)": lambda s, r, v: _session(s).delete_branch(v),
    "session.set_info(user_id)": lambda s, r, v: _session(s).set_info(user_id=v),
    "session.set_info(metadata)": lambda s, r, v: _session(s).set_info(metadata=v),
    "session_patch(title)": lambda s, r, v: s.patch_session("s", session_patch(title=v)),
    # Records a caller builds (issue 26): each field checked as its argument is.
    "patch_session(SessionPatch(user_id))": lambda s, r, v: s.patch_session(
        "s", SessionPatch(user_id=v)
    ),
    "patch_session(SessionPatch(title))": lambda s, r, v: s.patch_session(
        "s", SessionPatch(title=v)
    ),
    "patch_session(SessionPatch(metadata))": lambda s, r, v: s.patch_session(
        "s", SessionPatch(metadata=v)
    ),
    "add_items(info=SessionPatch(metadata))": lambda s, r, v: s.add_items(
        "s", [assistant("i")], info=SessionPatch(metadata=v)
    ),
    "add_items(telemetry=Telemetry(responses))": _with_telemetry(lambda v: Telemetry(responses=v)),
    "add_items(telemetry=Telemetry(tools))": _with_telemetry(lambda v: Telemetry(tools=v)),
    **{
        f"add_items(telemetry: {record}.{field.name})": _with_telemetry(
            _telemetry(record, field.name)
        )
        for record, kind in (("ResponseRecord", ResponseRecord), ("ToolTiming", ToolTiming))
        for field in dataclasses.fields(kind)
    },
}

# What the SDK passes (usage, and what session.hooks records of it) is never refused: the turn
# is stored whatever it holds.
NEVER_REFUSED: dict[str, Call] = {
    "session.add_items(wrapper usage)": lambda s, r, v: _session(s).add_items(
        [assistant("w")], wrapper=_sdk_usage(v)
    ),
    "session.hooks' records": lambda s, r, v: _hooked_write(s, v),
}


async def _state(store: Store) -> Any:
    """Every stored row, session "s"'s catalogue entry and the items its model sees."""
    return await snapshot(store), await store.session("s"), await store.get_items("s")


async def _seed(store: Store) -> int:
    """Session "s" with two runs, unless a call before deleted it; its first run's id."""
    runs = await store.runs("s")
    if len(runs) < 2:
        await store.clear_session("s")
        await converse(StructuredSession("s", store), "q1", "q2")
        runs = await store.runs("s")
    if not await store.annotations(session_id="s", name="seed", limit=1):
        await store.annotate(runs[0].id, "seed", value=1)  # what update_annotation corrects
    return runs[0].id


def _fuzz_settings(max_examples: int) -> Any:
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@_fuzz_settings(150)
@given(call=st.sampled_from(sorted(STORE_CALLS)), value=HOSTILE)
def test_hostile_arguments_raise_only_turnstore_errors_and_change_nothing(
    shared_loop_store: tuple[asyncio.AbstractEventLoop, Store], call: str, value: Any
) -> None:
    loop, store = shared_loop_store

    async def example() -> None:
        run = await _seed(store)
        before = await _state(store)
        try:
            await STORE_CALLS[call](store, run, value)
        except TurnstoreError:
            assert await _state(store) == before, f"{call} with {value!r} changed rows"

    loop.run_until_complete(example())


@_fuzz_settings(25)
@given(value=HOSTILE)
def test_hostile_usage_from_the_sdk_is_stored_not_refused(
    shared_loop_store: tuple[asyncio.AbstractEventLoop, Store], value: Any
) -> None:
    loop, store = shared_loop_store

    async def example() -> None:
        run = await _seed(store)
        for call in NEVER_REFUSED.values():
            before = len(await store.get_items("s"))
            await call(store, run, value)
            assert len(await store.get_items("s")) == before + 1

    loop.run_until_complete(example())


OPTIONS = [
    "busy_timeout",
    "durable",
    "read_only",
    "schema",
    "min_size",
    "max_size",
    "connect_timeout",
    "pool_timeout",
    "retries",
    "migrate",
    "connect_kwargs",
    "pool",
    "unknown",
]
_opened = itertools.count()


@_fuzz_settings(30)
@given(option=st.sampled_from([*OPTIONS, "target"]), value=HOSTILE)
def test_hostile_open_options_raise_only_turnstore_errors_and_create_nothing(
    db_target: tuple[str, dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    option: str,
    value: Any,
) -> None:
    target, options = db_target
    folder = tmp_path / f"open-{next(_opened)}"
    folder.mkdir()
    monkeypatch.chdir(folder)  # a target that is a valid relative path lands here
    postgres = target.startswith("postgresql")
    schema = f"t_fuzz_{uuid.uuid4().hex[:12]}"
    if postgres:
        options = {**options, "schema": schema}
    elif target != ":memory:":
        target = str(folder / "fuzz.db")
    if option == "target":
        target = value
    elif postgres and option == "schema" and isinstance(value, str):
        # The hostile text after a prefix of this example's own: it can never name a schema
        # that someone else uses.
        options["schema"] = schema + value
    else:
        options = {**options, option: value}
    try:
        Store.open(target, **options).close()
    except TurnstoreError:
        assert os.listdir(folder) == []
        if postgres:
            assert not _schemas_like(schema)
    finally:
        if postgres:
            _drop_schemas_like(schema)


def _schemas_like(prefix: str) -> list[str]:
    """The PostgreSQL schemas whose names start with ``prefix``."""
    import psycopg

    with psycopg.connect(POSTGRES_URL) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (prefix,)
        ).fetchall()
    return [row[0] for row in rows]


def _drop_schemas_like(prefix: str) -> None:
    """Drop the schemas ``_schemas_like(prefix)`` finds, whatever characters they hold."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for name in _schemas_like(prefix):
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))

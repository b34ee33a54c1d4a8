"""What the tests build: SDK-shaped items, conversations of them, the rows a store holds,
span records, and the sessions whose rows a copy must keep in order.

Shapes follow what openai-agents 0.24 persists: the user input has no ``type`` key, model
output items are the Responses API's, tool outputs carry the call's ``call_id``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta, timezone
from typing import Any

from support import sql
from turnstore import (
    ResponseRecord,
    Store,
    StructuredSession,
    Telemetry,
    Usage,
)
from turnstore.core.spans import SpanRecord, ToolOutcome, encode_data


def user(text: str, **extra: Any) -> dict[str, Any]:
    """A user message as the SDK writes a str input: no ``type`` key."""
    return {"role": "user", "content": text, **extra}


def assistant(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    """A final assistant message, as the SDK converts a model output message."""
    return {
        "id": item_id,
        "content": [{"annotations": [], "text": text, "type": "output_text", "logprobs": []}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }


def call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    """A function tool call."""
    return {
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
        "type": "function_call",
        "id": f"fc_{call_id}",
        "status": "completed",
    }


def output(call_id: str, text: str) -> dict[str, Any]:
    """A function tool call's output."""
    return {"call_id": call_id, "output": text, "type": "function_call_output"}


def run_in_new_loop(coro_factory: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a coroutine in a fresh event loop on a thread of its own; return its value."""
    result: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro_factory()))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


# ---------------------------------------------------------------------------------------------
# Conversations: one run per tag, and what a test reads back


def run_items(tag: str) -> list[dict[str, Any]]:
    """One SDK-shaped run: the question, a tool call and its output, the answer."""
    return [
        user(tag),
        call(f"c-{tag}", "lookup", f'{{"q": "{tag}"}}'),
        output(f"c-{tag}", f"out {tag}"),
        assistant(f"answer {tag}", item_id=f"m-{tag}"),
    ]


async def converse(session: StructuredSession, *tags: str) -> list[int]:
    """Write one run per tag the way the Runner does (input, then turns); return run ids."""
    for tag in tags:
        items = run_items(tag)
        await session.add_items(items[:1])
        await session.add_items(items[1:3])
        await session.add_items(items[3:])
    return [run.id for run in await session.runs()][-len(tags) :]


def history(*tags: str) -> list[dict[str, Any]]:
    return [item for tag in tags for item in run_items(tag)]


async def path(session: StructuredSession) -> list[str | None]:
    """The user messages of the active path."""
    return [run.user_message for run in await session.runs()]


async def head(store: Store, session_id: str = "s") -> int | None:
    info = await store.session(session_id)
    assert info is not None
    return info.head_run_id


async def snapshot(store: Store) -> dict[str, Any]:
    """Every row of every table, to show that an operation changed nothing (a schema from
    before annotations, as a migration test opens, has none to show)."""
    found = await sql(
        store,
        "SELECT count(*) FROM sqlite_master WHERE name = 'annotations'"
        if store.dialect == "sqlite"
        else "SELECT count(*) FROM pg_tables WHERE tablename = 'annotations'"
        " AND schemaname = current_schema()",
    )
    annotations = (
        await sql(
            store,
            "SELECT id, session_id, run_id, tool_call_id, name, value, label, comment, source,"
            " author, created_at, updated_at FROM annotations ORDER BY id",
        )
        if found[0][0]
        else []
    )
    return {
        "sessions": await sql(
            store, "SELECT session_id, head_run_id, title FROM sessions ORDER BY session_id"
        ),
        "runs": await sql(
            store,
            "SELECT id, session_id, parent_id, depth, user_message, assistant_message,"
            " item_count, requests, total_tokens, created_at, updated_at FROM runs ORDER BY id",
        ),
        "items": await sql(
            store, "SELECT id, run_id, position, type, role, text, data FROM items ORDER BY id"
        ),
        "tool_calls": await sql(
            store,
            "SELECT id, run_id, call_id, tool_name, output, status, call_item_id,"
            " output_item_id, completed_at FROM tool_calls ORDER BY id",
        ),
        "annotations": annotations,
    }


# ---------------------------------------------------------------------------------------------
# Spans


SPAN_START = datetime(2025, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)


def span_record(store: Store, run_id: int, n: int, **changes: object) -> SpanRecord:
    started = SPAN_START + timedelta(seconds=n)
    fields: dict[str, object] = {
        "run_id": run_id,
        "trace_id": "trace_1",
        "span_id": f"span_{n}",
        "parent_span_id": None if n == 0 else "span_0",
        "kind": "function" if n else "agent",
        "name": f"name {n}",
        "started_at": store.backend.bind_time(started),
        "ended_at": store.backend.bind_time(started + timedelta(milliseconds=10 * n)),
        "duration_ms": 10.0 * n,
        "error": None,
        "data": encode_data({"n": n}),
    }
    fields.update(changes)
    return SpanRecord(**fields)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Sessions whose rows a copy (or an export) must keep in their order


async def grow_an_older_branch_later(store: Store) -> None:
    """Session "p": two runs, then a third beside the second, then the second's open run
    continued, so that its newest items are newer than the third run's."""
    await store.add_items("p", [user("a"), assistant("A")])
    await store.add_items("p", [user("b"), call("c1", "t")])
    first, second = (run for run, _ in await store.tree("p"))
    await store.move_head("p", first.id, to_parent=False)
    await store.add_items("p", [user("c"), assistant("C")])
    await store.move_head("p", second.id, to_parent=False)
    await store.add_items("p", [output("c1", "done"), assistant("B")])
    [(run_id,)] = await sql(store, "SELECT run_id FROM items ORDER BY id DESC LIMIT 1")
    assert run_id == second.id  # the newest item is on the older branch


async def newer_rows_in_earlier_runs(store: Store) -> None:
    """Sessions in which a row of an earlier run is newer than a row of a later run of its
    table, so that a copy cutting between the runs would number the two the other way round:
    "calls" (c0's output lands in the next run; c1, after it, is answered in its own run),
    "owner" (a call credited to its writer's older run, written after the newer run's call),
    "responses" (a model call recorded for an older run after the newer run's) and "spans"
    (an older run's span stored after the newer run's)."""
    await store.add_items(
        "calls", [user("q0"), call("c0", "t"), call("c1", "t"), output("c1", "1")]
    )
    await store.add_items("calls", [user("q1"), output("c0", "0"), assistant("a1")])
    older = await store.add_items("owner", [user("q0"), assistant("a0")])
    await store.add_items("owner", [user("q1"), call("k1", "t"), output("k1", "1"), assistant("a")])
    await store.add_items("owner", [call("k0", "t"), output("k0", "0")], owner=older)

    def model_call(name: str) -> Telemetry:
        now = datetime.now(timezone.utc)
        return Telemetry([ResponseRecord(name, "m", name, None, Usage(1, 1, 1, 2), now, now, 1.0)])

    older = await store.add_items("responses", [user("q0"), assistant("a0")])
    await store.add_items("responses", [user("q1"), assistant("a1")])
    await store.add_items("responses", [], telemetry=model_call("newer run"))  # the head's
    await store.move_head("responses", older, to_parent=False)
    await store.add_items("responses", [], telemetry=model_call("older run"))
    await store.add_items("responses", [user("q2"), assistant("a2")])

    def span(run_id: int | None, name: str) -> SpanRecord:
        now = store.backend.now()
        assert run_id is not None
        return SpanRecord(run_id, "trace", name, None, "function", name, now, now, 1.0, None, "{}")

    older = await store.add_items("spans", [user("q0"), assistant("a0")])
    newer = await store.add_items("spans", [user("q1"), assistant("a1")])
    await store._record_spans("spans", [span(newer, "newer run")])
    await store._record_spans("spans", [span(older, "older run")])


async def orders(store: Store) -> list[list[str | None]]:
    """What the queries list, oldest first: each session's tool calls and model calls."""
    return [
        [c.call_id for s in ("calls", "owner") for c in await store.tool_calls(session_id=s)],
        [r.agent_name for r in await store.model_responses(session_id="responses")],
    ]


# What the SDK (0.23 on) writes as a failed function tool's output: the exception's text is
# only in the trace span.
SDK_TOOL_ERROR = "An error occurred while running the tool. Please try again."


async def failed_call_with_span_error(store: Store, session_id: str, detail: str) -> int:
    """A function call whose output is the SDK's bare error message, and whose trace span
    gives the exception's text (as turnstore.tracing records it); its output item's id."""
    await store.add_items(
        session_id, [user("divide please"), call("c1", "divide"), output("c1", SDK_TOOL_ERROR)]
    )
    [run] = await store.runs(session_id)
    await store._record_spans(
        session_id,
        [
            span_record(
                store,
                run.id,
                1,
                name="divide",
                error=detail,
                outcome=ToolOutcome("divide", "{}", 0, "failed", detail),
            )
        ],
    )
    [(item_id,)] = await sql(
        store,
        "SELECT id FROM items WHERE session_id = {sid} AND type = 'function_call_output'",
        sid=session_id,
    )
    return int(item_id)

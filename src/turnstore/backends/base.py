"""What every backend shares: the backend protocol and the SQL-free logic of each operation.

Each operation (append items, pop, edit, …) is written once, here, as a generator that
yields ``Query`` requests and receives their results: the logic never touches a driver. A
backend supplies the SQL for each query name (one dict per backend, in one module) and a
driver that runs one operation inside one transaction: synchronously on SQLite's worker
thread, asynchronously on Postgres. So the tree, pairing and usage rules cannot drift apart
between backends, and an operation can be retried whole after a transient failure.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Protocol, TypeVar

import msgspec

from ..errors import (
    ConflictError,
    InvalidItemError,
    InvalidOperationError,
    NotFoundError,
    RunNotFoundError,
    SchemaError,
    SessionNotFoundError,
)
from ..items import ItemInfo, classify
from ..model import Branch, Fork, PathView, Run, SessionInfo, ToolCall, Usage

__all__ = [
    "ANY_HEAD",
    "INDEX_BATCH",
    "Backend",
    "ExpectedHead",
    "Fetch",
    "GraftRun",
    "Op",
    "PreparedItem",
    "Query",
    "ResponseRecord",
    "SessionPatch",
    "Telemetry",
    "ToolTiming",
    "append",
    "as_datetime",
    "branches",
    "clear_session",
    "delete_branch",
    "fork",
    "get_items",
    "get_run",
    "get_tool_call",
    "graft",
    "index_backlog",
    "loads_item",
    "migrate_step",
    "move_head",
    "path_runs",
    "path_view",
    "pending_migrations",
    "pop_item",
    "prepare_items",
    "reports_error",
    "run_items",
    "session_info",
    "session_tree",
    "siblings",
    "tool_call_from_row",
    "update_session",
]

log = logging.getLogger("turnstore")

T = TypeVar("T")


class Fetch(Enum):
    """What a query's caller wants back."""

    NONE = 0  # nothing (DDL, UPDATE, DELETE)
    ONE = 1  # the first row, or None
    ALL = 2  # every row


@dataclass(frozen=True, slots=True)
class Query:
    """One statement: a name in the backend's SQL table (or raw DDL) and its parameters."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    fetch: Fetch = Fetch.NONE
    raw: bool = False  # ``name`` is the SQL itself (migrations)


Op = Generator[Query, Any, T]
"""An operation: yields queries, receives their results, returns its value."""


class Backend(Protocol):
    """A storage engine: runs operations, each in one transaction."""

    async def run(self, op: Callable[[], Op[T]], *, write: bool) -> T:
        """Run the operation ``op()`` in one transaction and return its value.

        ``op`` is a factory so that a backend may retry a transient failure from scratch.
        """
        ...

    def now(self) -> Any:
        """The current time, as this backend binds timestamps."""
        ...

    def close(self) -> None:
        """Release connections and threads. Idempotent."""
        ...

    async def aclose(self) -> None:
        """Like ``close``, awaitable."""
        ...


# ---------------------------------------------------------------------------------------------
# Items


@dataclass(frozen=True, slots=True)
class PreparedItem:
    """An item checked, serialised and classified: ready to store."""

    data: str
    info: ItemInfo


# json.dumps's own settings, built once (json.dumps builds an encoder per call when any
# argument differs from its defaults).
_UTF8_ENCODER = json.JSONEncoder(ensure_ascii=False)
_ASCII_ENCODER = json.JSONEncoder()


def _dumps(item: Mapping[str, Any]) -> str:
    # Readable UTF-8 in the database; an item holding a lone surrogate cannot be encoded as
    # UTF-8 text, so it is stored \u-escaped instead (it decodes to the same value).
    data = _UTF8_ENCODER.encode(item)
    if not data.isascii():
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            data = _ASCII_ENCODER.encode(item)
    return data


def prepare_items(items: Sequence[Any]) -> list[PreparedItem]:
    """Check, serialise and classify a batch, refusing it whole on the first bad item."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise InvalidItemError(f"items must be a list of mappings, got {type(items).__name__}")
    prepared = []
    for index, item in enumerate(items):
        if type(item) is not dict and not isinstance(item, Mapping):  # the ABC check is slow
            raise InvalidItemError(
                f"item {index} is a {type(item).__name__}, not a mapping; nothing was written"
            )
        try:
            data = _dumps(item)
        except (TypeError, ValueError) as exc:
            raise InvalidItemError(
                f"item {index} cannot be serialised to JSON ({exc}); nothing was written"
            ) from exc
        prepared.append(PreparedItem(data, classify(item)))
    return prepared


_fast_loads = msgspec.json.Decoder().decode


def loads_item(data: str | bytes) -> Any:
    """Decode one stored item's JSON exactly as ``json.loads`` would.

    msgspec decodes 3-6x faster than ``json`` (and leaves the result out of the garbage
    collector's way), with the same values, key order and integers of any size. What it
    refuses and ``json.dumps`` can write (NaN, Infinity, lone surrogates) goes to ``json``.
    """
    try:
        return _fast_loads(data)
    except (ValueError, RecursionError):
        return json.loads(data)


def decode_items(rows: Sequence[Sequence[Any]], session_id: str) -> list[Any]:
    """Decode stored item JSON (the last column of each row), skipping corrupt rows.

    The column is ``bytes`` where the backend can return it so (msgspec reads UTF-8 directly,
    2-3x faster than from ``str``). One corrupt row never hides the rest: it is logged (by its
    id, the first column, where the row has one) and left out.
    """
    try:
        items = [_fast_loads(row[-1]) for row in rows]
        if all(type(item) is dict for item in items):
            return items
    except (ValueError, TypeError, RecursionError):
        pass
    decoded = []
    for index, row in enumerate(rows):
        try:
            item = loads_item(row[-1])
        except (ValueError, TypeError, RecursionError):
            item = None
        if type(item) is dict:
            decoded.append(item)
        else:
            where = f"id {row[0]}" if len(row) > 1 else f"number {index + 1} of the path"
            log.warning("skipping corrupt item (%s) of session %r", where, session_id)
    return decoded


def as_datetime(value: Any) -> datetime:
    """A timestamp as the driver returned it (datetime, or ISO text from SQLite)."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


# ---------------------------------------------------------------------------------------------
# Planning an append: pure, so that both backends share the rules.


@dataclass(slots=True, eq=False)
class _PlanRun:
    """A run an append touches: the existing head, or one it creates."""

    id: int | None
    parent: _PlanRun | None
    parent_id: int | None
    depth: int
    item_count: int
    user_message: str | None = None
    assistant_message: str | None = None
    assistant_changed: bool = False
    newest_item_id: int | None = None  # the id of the last item this append wrote to it

    @property
    def resolved_parent_id(self) -> int | None:
        return self.parent.id if self.parent is not None else self.parent_id


@dataclass(slots=True, eq=False)
class _PlanItem:
    run: _PlanRun
    position: int
    prepared: PreparedItem
    id: int | None = None


@dataclass(slots=True, eq=False)
class _PlanCall:
    run: _PlanRun
    call_item: _PlanItem | None
    info: ItemInfo
    output_item: _PlanItem | None = None
    output: str | None = None
    status: str | None = None
    error: str | None = None
    completed: bool = False


@dataclass(slots=True)
class _Head:
    """What an append needs to know of the session before it writes."""

    id: int | None
    depth: int = -1
    item_count: int = 0
    parent_id: int | None = None
    has_children: bool = False
    # Through which item id the search index is fed, where a backend feeds it in batches
    # (SQLite); read with the lock, so that an append knows whether to feed it.
    indexed_through: int | None = None


def _call_status(info: ItemInfo) -> str:
    # A call item's own status says the model finished writing it, not that the tool ran.
    return info.status if info.status in ("failed", "incomplete") else "pending"


def _pairing_key(info: ItemInfo) -> str:
    # Server-run tool searches carry no call_id: the SDK pairs the output with the call just
    # before it of the same tool, so within a batch that is what they pair with here.
    return info.call_id if info.call_id is not None else f"\0{info.tool_kind}"


# Outputs that report a failure in words rather than a status: what openai-agents writes when
# a function tool raises (``default_tool_error_function``) or times out
# (``default_tool_timeout_error_message``). A custom ``failure_error_function`` is not
# recognised; its calls count as completed.
_ERROR_OUTPUT = re.compile(
    r"An error occurred while running the tool\. Please try again\."
    r"|Tool '.*' timed out after [0-9.e+-]+ seconds\.",
    re.DOTALL,
)


def reports_error(output: str | None) -> bool:
    """The tool output is one of the SDK's error messages (see ``_ERROR_OUTPUT``)."""
    return output is not None and _ERROR_OUTPUT.fullmatch(output) is not None


def _output_error(info: ItemInfo) -> str | None:
    if info.error is not None:
        return info.error
    return info.output if reports_error(info.output) else None


def _output_status(info: ItemInfo) -> str:
    if info.status is not None and info.status not in ("in_progress", "searching"):
        return "failed" if info.status == "completed" and _output_error(info) else info.status
    return "failed" if _output_error(info) else "completed"


def _hosted_status(info: ItemInfo) -> str:
    # An MCP call that reports an error failed, whatever status the item carries.
    if info.error is not None and info.status not in ("failed", "incomplete"):
        return "failed"
    return info.status or "completed"


def _plan(
    head: _Head, batch: Sequence[PreparedItem], open_calls: Mapping[str, int]
) -> tuple[list[_PlanRun], list[_PlanItem], list[_PlanCall], list[tuple[int, _PlanCall]], _PlanRun]:
    runs: list[_PlanRun] = []
    items: list[_PlanItem] = []
    calls: list[_PlanCall] = []
    updates: list[tuple[int, _PlanCall]] = []
    pending: dict[str, _PlanCall] = {}
    current: _PlanRun | None = None
    anchor: _PlanRun | None = None  # the run new runs hang below when there is no current
    if head.id is not None:
        anchor = _PlanRun(head.id, None, head.parent_id, head.depth, head.item_count)
        # A run that other branches share is never changed: what would join it starts a new
        # run below it instead (a sibling of its children, with no user message).
        if not head.has_children:
            current = anchor
            runs.append(current)
    for prepared in batch:
        info = prepared.info
        if current is None or info.starts_run:
            parent = current if current is not None else anchor
            current = _PlanRun(
                None,
                parent,
                None,
                parent.depth + 1 if parent is not None else 0,
                0,
                user_message=info.text if info.starts_run else None,
            )
            runs.append(current)
        item = _PlanItem(current, current.item_count, prepared)
        current.item_count += 1
        items.append(item)
        kind = info.kind
        if kind == "message":
            if info.role == "assistant" and info.text is not None:
                current.assistant_message = info.text
                current.assistant_changed = True
        elif kind == "tool_call":
            call = _PlanCall(current, item, info, status=_call_status(info))
            calls.append(call)
            pending[_pairing_key(info)] = call
        elif kind == "hosted_tool":
            calls.append(
                _PlanCall(
                    current,
                    item,
                    info,
                    output_item=item,
                    output=info.output,
                    status=_hosted_status(info),
                    error=info.error,
                    completed=info.status not in ("in_progress", "searching", "generating"),
                )
            )
        elif kind == "tool_output":
            paired = pending.pop(_pairing_key(info), None)
            if paired is not None:
                call = paired
            else:
                existing = open_calls.get(info.call_id) if info.call_id is not None else None
                # An output whose call is unknown still gets a row, so that it can be queried.
                call = _PlanCall(current, None, info)
                if existing is not None:
                    updates.append((existing, call))
                else:
                    calls.append(call)
            call.output_item = item
            call.output = info.output
            call.status = _output_status(info)
            call.error = _output_error(info)
            call.completed = True
    assert current is not None
    return runs, items, calls, updates, current


def _apply_append(
    session_id: str,
    head: _Head,
    batch: Sequence[PreparedItem],
    open_calls: Mapping[str, int],
    now: Any,
    usage: Usage | None,
) -> Op[int]:
    """Write ``batch`` after ``head``; return the id of the run it ends in."""
    last = yield from _apply_append_run(session_id, head, batch, open_calls, now, usage)
    assert last.id is not None
    return last.id


def _apply_append_run(
    session_id: str,
    head: _Head,
    batch: Sequence[PreparedItem],
    open_calls: Mapping[str, int],
    now: Any,
    usage: Usage | None,
) -> Op[_PlanRun]:
    """``_apply_append``, returning the last run as planned (id, depth, parent, items)."""
    runs, items, calls, updates, last = _plan(head, batch, open_calls)
    sid = session_id
    for run in runs:
        if run.id is None:
            row = yield Query(
                "insert_run",
                {
                    "sid": sid,
                    "parent_id": run.resolved_parent_id,
                    "depth": run.depth,
                    "user_message": run.user_message,
                    "assistant_message": run.assistant_message,
                    "item_count": run.item_count,
                    "now": now,
                },
                Fetch.ONE,
            )
            run.id = row[0]
        elif run.item_count != head.item_count:
            # Only the head run can exist already; one that gains nothing (a new run starts
            # below it: a fork) is left untouched, since other branches share it.
            yield Query(
                "update_run_append",
                {
                    "sid": sid,
                    "id": run.id,
                    "item_count": run.item_count,
                    "assistant_message": run.assistant_message,
                    "assistant_changed": run.assistant_changed,
                    "now": now,
                },
            )
    for item in items:
        info = item.prepared.info
        row = yield Query(
            "insert_item",
            {
                "sid": sid,
                "run_id": item.run.id,
                "position": item.position,
                "type": info.type,
                "role": info.role,
                "call_id": info.call_id,
                "name": info.name,
                "text": info.text,
                "data": item.prepared.data,
                "now": now,
            },
            Fetch.ONE,
        )
        item.id = item.run.newest_item_id = row[0]
    for call in calls:
        info = call.info
        yield Query(
            "insert_tool_call",
            {
                "sid": sid,
                "run_id": call.run.id,
                "call_id": info.call_id,
                "tool_name": info.name,
                "kind": info.tool_kind,
                "arguments": info.arguments,
                "output": call.output,
                "status": call.status,
                "error": call.error,
                "call_item_id": call.call_item.id if call.call_item else None,
                "output_item_id": call.output_item.id if call.output_item else None,
                "now": now,
                "completed_at": now if call.completed else None,
            },
        )
    for call_row_id, call in updates:
        yield Query(
            "complete_tool_call",
            {
                "sid": sid,
                "id": call_row_id,
                "output": call.output,
                "status": call.status,
                "error": call.error,
                "output_item_id": call.output_item.id if call.output_item else None,
                "now": now,
            },
        )
    if usage is not None:
        yield Query(
            "set_run_usage", {"sid": sid, "id": last.id, "now": now, **_usage_params(usage)}
        )
    return last


def _usage_params(usage: Usage) -> dict[str, int]:
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": usage.cached_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
    }


def _title(batch: Sequence[PreparedItem]) -> str | None:
    for prepared in batch:
        if prepared.info.starts_run and prepared.info.text:
            return " ".join(prepared.info.text.split())[:100]
    return None


def _lock_session(
    session_id: str, now: Any, title: str | None = None, *, create: bool = True
) -> Op[_Head]:
    """Create the session if new, lock it for this transaction, and read its head.

    With ``create=False`` a session that does not exist is left uncreated (its head reads as
    empty): popping from, or adding nothing to, an unknown session must not catalogue it.
    """
    row = None
    if create:
        params = {"sid": session_id, "now": now, "title": title}
        # One statement where the backend can (SQLite: an upsert that returns the head).
        # Postgres has none: RETURNING would read the head's run from the snapshot taken
        # before the statement waited for the row lock, so it locks first and reads after.
        row = yield Query("upsert_head", params, Fetch.ONE)
        if row is None:
            yield Query("ensure_session", params)
    if row is None:
        row = yield Query("lock_head", {"sid": session_id}, Fetch.ONE)
    if row is None:
        return _Head(None)
    head = _Head(*row)
    return head if head.id is not None else _Head(None, indexed_through=head.indexed_through)


def _set_head(session_id: str, head_id: int | None, now: Any) -> Op[None]:
    yield Query("set_head", {"sid": session_id, "head": head_id, "now": now})


def append(
    session_id: str,
    batch: Sequence[PreparedItem],
    now: Any,
    usage: Usage | None = None,
    *,
    info: SessionPatch | None = None,
    telemetry: Telemetry | None = None,
) -> Op[None]:
    """Add a batch: user messages start runs (children of the head), the rest join the head.

    ``info`` sets the session's catalogue fields in the same transaction; ``telemetry`` (what
    ``session.hooks`` saw since the last write) lands on the run that was the head before the
    batch: the model's output joins that run, and a new user message follows its run.
    """
    head = yield from _lock_session(
        session_id, now, _title(batch), create=bool(batch) or info is not None
    )
    if info is not None:
        yield from _patch_session(session_id, info, now)
    if head.id is None and not batch:
        return  # usage alone, and no run for it to land on
    open_calls = yield from _open_calls(session_id, batch)
    last = yield from _apply_append_run(session_id, head, batch, open_calls, now, usage)
    assert last.id is not None
    if last.id != head.id:  # ensure_session already stamped updated_at
        yield from _set_head(session_id, last.id, now)
    if telemetry:
        target = head.id if head.id is not None else last.id
        yield from _record_telemetry(session_id, target, telemetry)
    newest = last.newest_item_id
    if (
        head.indexed_through is not None
        and newest is not None
        and newest - head.indexed_through >= INDEX_BATCH
    ):
        yield from index_backlog()


# How many new items wait before a backend that indexes for search in batches (SQLite's FTS5:
# each writing transaction costs it as much as the rest of an SDK turn) feeds them in.
INDEX_BATCH = 64


def index_backlog() -> Op[None]:
    """Feed the search index every item it lacks.

    Searches call it first, so they see every committed item; appends call it once
    ``INDEX_BATCH`` items wait. A backend whose index keeps up on its own has no statements
    for it.
    """
    # A search runs in a read transaction: only a backlog makes it write.
    pending = yield Query("index_pending", fetch=Fetch.ONE)
    if pending is not None and pending[0]:
        yield Query("index_backlog")
        yield Query("mark_indexed")


@dataclass(frozen=True, slots=True)
class SessionPatch:
    """Catalogue fields to set on a session; None leaves a field as it is.

    ``metadata`` is JSON text (a JSON object), stored as given.
    """

    user_id: str | None = None
    title: str | None = None
    metadata: str | None = None


def _patch_session(session_id: str, patch: SessionPatch, now: Any) -> Op[None]:
    yield Query(
        "update_session_info",
        {
            "sid": session_id,
            "user_id": patch.user_id,
            "title": patch.title,
            "metadata": patch.metadata,
            "now": now,
        },
    )


def update_session(session_id: str, patch: SessionPatch, now: Any) -> Op[SessionInfo]:
    """Set catalogue fields of a session, creating it (with no runs) if it is new."""
    yield Query("ensure_session", {"sid": session_id, "now": now, "title": None})
    yield from _patch_session(session_id, patch, now)
    info = yield from session_info(session_id)
    assert info is not None
    return info


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    """One model call seen by ``session.hooks``; times are backend timestamps."""

    agent_name: str | None
    model: str | None
    response_id: str | None
    request_id: str | None
    usage: Usage
    started_at: Any
    completed_at: Any
    latency_ms: float | None


@dataclass(frozen=True, slots=True)
class ToolTiming:
    """When one tool call (by the model's ``call_id``) ran, as seen by ``session.hooks``."""

    call_id: str
    started_at: Any
    completed_at: Any
    duration_ms: float


@dataclass(slots=True)
class Telemetry:
    """What ``session.hooks`` recorded since the session last wrote."""

    responses: list[ResponseRecord] = field(default_factory=list)
    tools: list[ToolTiming] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.responses or self.tools)


def _record_telemetry(session_id: str, run_id: int, telemetry: Telemetry) -> Op[None]:
    for record in telemetry.responses:
        yield Query(
            "insert_model_response",
            {
                "sid": session_id,
                "run_id": run_id,
                "agent_name": record.agent_name,
                "model": record.model,
                "response_id": record.response_id,
                "request_id": record.request_id,
                "started_at": record.started_at,
                "completed_at": record.completed_at,
                "latency_ms": record.latency_ms,
                **_usage_params(record.usage),
            },
        )
    if telemetry.responses:
        last = telemetry.responses[-1]
        # The run is attributed to the agent (and model) that answered last.
        yield Query(
            "set_run_agent",
            {
                "sid": session_id,
                "id": run_id,
                "agent_name": last.agent_name,
                "model": last.model,
            },
        )
    for timing in telemetry.tools:
        # The newest call with that call_id in the session: call ids repeat across runs with
        # some providers, and the one that just ran is the newest.
        yield Query(
            "set_tool_timing",
            {
                "sid": session_id,
                "call_id": timing.call_id,
                "started_at": timing.started_at,
                "completed_at": timing.completed_at,
                "duration_ms": timing.duration_ms,
            },
        )


def _open_calls(session_id: str, batch: Sequence[PreparedItem]) -> Op[dict[str, int]]:
    """The unanswered stored calls that outputs in ``batch`` answer: call_id -> row id."""
    # Outputs whose call is in an earlier batch (an interrupted run resumed) pair with it.
    calls_here = {p.info.call_id for p in batch if p.info.kind == "tool_call"}
    call_ids = sorted(
        {
            p.info.call_id
            for p in batch
            if p.info.kind == "tool_output" and p.info.call_id and p.info.call_id not in calls_here
        }
    )
    if not call_ids:
        return {}
    rows = yield Query(
        "open_tool_calls", {"sid": session_id, "call_ids": json.dumps(call_ids)}, Fetch.ALL
    )
    return {call_id: row_id for call_id, row_id in rows}


@dataclass(frozen=True, slots=True)
class GraftRun:
    """One run to add by ``graft``: its items, where it hangs, its usage and time.

    ``parent`` (the index of an earlier ``GraftRun`` of the same call) wins over
    ``parent_id`` (a stored run); neither means a root. A leading user message starts a child
    of the parent; other items join the parent run itself (they extend it).
    """

    batch: Sequence[PreparedItem]
    parent_id: int | None = None
    parent: int | None = None
    usage: Usage | None = None
    now: Any = None


def graft(session_id: str, runs: Sequence[GraftRun], head: int | None, now: Any) -> Op[list[int]]:
    """Add many runs anywhere in the tree in one transaction; return each one's run id.

    The bulk path of imports: one lock and one head update for the whole call instead of one
    per batch. The head ends at ``runs[head]``, or stays where it was when ``head`` is None.
    """
    title = next((t for t in (_title(run.batch) for run in runs) if t is not None), None)
    original = yield from _lock_session(session_id, now, title)
    ids: list[int] = []
    # The runs this call wrote, as they stand now: a child needs no query for its parent.
    written: dict[int, _Head] = {}
    for index, run in enumerate(runs):
        if run.parent is not None and not 0 <= run.parent < index:
            raise InvalidOperationError(f"run {index} names a parent that does not precede it")
        parent_id = ids[run.parent] if run.parent is not None else run.parent_id
        parent = written.get(parent_id) if parent_id is not None else _Head(None)
        if parent is None:
            parent = yield from _parent_head(session_id, parent_id)
        open_calls = yield from _open_calls(session_id, run.batch)
        last = yield from _apply_append_run(
            session_id,
            parent,
            run.batch,
            open_calls,
            now if run.now is None else run.now,
            run.usage,
        )
        assert last.id is not None
        written[last.id] = _Head(last.id, last.depth, last.item_count, last.resolved_parent_id)
        ids.append(last.id)
    yield from index_backlog()
    # _apply_append never moves the head: only this does, once.
    yield from _set_head(session_id, ids[head] if head is not None else original.id, now)
    return ids


# ---------------------------------------------------------------------------------------------
# Reading


def get_items(session_id: str, limit: int | None) -> Op[list[Any]]:
    """The newest ``limit`` items of the active path (all when None), oldest first."""
    if limit is None:
        rows = yield Query("path_items", {"sid": session_id}, Fetch.ALL)
    else:  # newest first
        rows = yield Query("path_items_tail", {"sid": session_id, "limit": limit}, Fetch.ALL)
        rows.reverse()
    return decode_items(rows, session_id)


RUN_COLUMNS = (
    "id, session_id, parent_id, depth, user_message, assistant_message, agent_name, model, "
    "status, requests, input_tokens, output_tokens, total_tokens, cached_tokens, "
    "reasoning_tokens, item_count, created_at, updated_at"
)


def run_from_row(row: Sequence[Any]) -> Run:
    """Build a ``Run`` from a row in ``RUN_COLUMNS`` order."""
    return Run(
        id=row[0],
        session_id=row[1],
        parent_id=row[2],
        depth=row[3],
        user_message=row[4],
        assistant_message=row[5],
        agent_name=row[6],
        model=row[7],
        status=row[8],
        usage=Usage(*row[9:15]),
        item_count=row[15],
        created_at=as_datetime(row[16]),
        updated_at=as_datetime(row[17]),
    )


def path_runs(session_id: str) -> Op[list[Run]]:
    """The runs of the active path, root first."""
    rows = yield Query("path_runs", {"sid": session_id}, Fetch.ALL)
    return [run_from_row(row) for row in rows]


def _find_run(session_id: str, run_id: int) -> Op[Run]:
    """The run ``run_id`` of this session (looked up by session, so that a sharded store
    reads one shard); RunNotFoundError if it is unknown or another session's."""
    _check_run_id(run_id)
    row = yield Query("session_run", {"sid": session_id, "id": run_id}, Fetch.ONE)
    if row is None:
        yield from get_run(run_id)  # raises if there is no such run at all
        raise RunNotFoundError(f"run {run_id} belongs to another session, not {session_id!r}")
    return run_from_row(row)


def siblings(session_id: str, run_id: int) -> Op[list[Run]]:
    """The runs that share ``run_id``'s parent (itself included), in creation order."""
    run = yield from _find_run(session_id, run_id)
    rows = yield Query("children", {"sid": session_id, "parent_id": run.parent_id}, Fetch.ALL)
    return [run_from_row(row) for row in rows]


def branches(session_id: str) -> Op[list[Branch]]:
    """Every leaf of the session's tree, oldest first; ``active`` where the head lies on it."""
    rows = yield Query("leaves", {"sid": session_id}, Fetch.ALL)
    active = yield Query("head_leaves", {"sid": session_id}, Fetch.ALL)
    active_ids = {row[0] for row in active}
    return [
        Branch(
            leaf_run_id=row[0],
            depth=row[1],
            last_user_message=row[2],
            active=row[0] in active_ids,
            created_at=as_datetime(row[3]),
        )
        for row in rows
    ]


SESSION_COLUMNS = "session_id, user_id, title, metadata, head_run_id, created_at, updated_at"


def session_from_row(row: Sequence[Any]) -> SessionInfo:
    """Build a ``SessionInfo`` from a row in ``SESSION_COLUMNS`` order."""
    metadata = row[3]  # JSON text on SQLite, already decoded from jsonb on Postgres
    return SessionInfo(
        session_id=row[0],
        user_id=row[1],
        title=row[2],
        metadata=json.loads(metadata) if isinstance(metadata, str) else (metadata or {}),
        head_run_id=row[4],
        created_at=as_datetime(row[5]),
        updated_at=as_datetime(row[6]),
    )


def session_info(session_id: str) -> Op[SessionInfo | None]:
    """The session's catalogue row, or None."""
    row = yield Query("session", {"sid": session_id}, Fetch.ONE)
    return session_from_row(row) if row is not None else None


def session_tree(session_id: str) -> Op[list[tuple[Run, list[Any]]]]:
    """Every run of the session (all branches) in creation order, each with its items."""
    rows = yield Query("session_runs", {"sid": session_id}, Fetch.ALL)
    item_rows = yield Query("session_items", {"sid": session_id}, Fetch.ALL)
    by_run: dict[int, list[Sequence[Any]]] = {}
    for row in item_rows:  # run_id, id, data
        by_run.setdefault(row[0], []).append(row[1:])
    return [
        (run, decode_items(by_run.get(run.id, []), session_id))
        for run in (run_from_row(row) for row in rows)
    ]


# ---------------------------------------------------------------------------------------------
# Viewing: what the web viewer reads (one branch a window at a time, runs and calls by id)


TOOL_CALL_COLUMNS = (
    "id, session_id, run_id, call_id, tool_name, kind, arguments, output, status, error, "
    "created_at, completed_at, duration_ms, started_at"
)


def tool_call_from_row(row: Sequence[Any]) -> ToolCall:
    """Build a ``ToolCall`` from a row in ``TOOL_CALL_COLUMNS`` order."""
    return ToolCall(
        id=row[0],
        session_id=row[1],
        run_id=row[2],
        call_id=row[3],
        tool_name=row[4],
        kind=row[5],
        arguments=row[6],
        output=row[7],
        status=row[8],
        error=row[9],
        created_at=as_datetime(row[10]),
        completed_at=as_datetime(row[11]) if row[11] is not None else None,
        duration_ms=row[12],
        started_at=as_datetime(row[13]) if row[13] is not None else None,
    )


def _check_id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise NotFoundError(f"{what} ids are integers, got {value!r}")
    return value


def _check_run_id(run_id: Any) -> None:
    try:
        _check_id(run_id, "run")
    except NotFoundError as exc:
        raise RunNotFoundError(str(exc)) from None


def get_run(run_id: int) -> Op[Run]:
    """The run ``run_id``, whatever its session."""
    _check_run_id(run_id)
    row = yield Query("run", {"id": run_id}, Fetch.ONE)
    if row is None:
        raise RunNotFoundError(f"no run {run_id}")
    return run_from_row(row)


def get_tool_call(call_id: int) -> Op[ToolCall]:
    """The tool call row ``call_id`` (the row id, not the model's ``call_id`` string)."""
    row = yield Query("tool_call", {"id": _check_id(call_id, "tool call")}, Fetch.ONE)
    if row is None:
        raise NotFoundError(f"no tool call {call_id}")
    return tool_call_from_row(row)


def run_items(run_id: int) -> Op[list[Any]]:
    """The items of one run, verbatim, in order."""
    run = yield from get_run(run_id)
    rows = yield Query(
        "run_items_before",
        {"sid": run.session_id, "run_id": run.id, "position": run.item_count},
        Fetch.ALL,
    )
    return decode_items(rows, run.session_id)


def path_view(
    session_id: str,
    through: int | None,
    start: int | None,
    stop: int | None,
    limit: int,
) -> Op[PathView]:
    """At most ``limit`` consecutive runs of the branch through ``through`` (default: the head).

    The branch through a run follows the head when the head lies below it, else its newest
    run. The window is the runs of depth ``start`` and after when ``start`` is given, of depth
    ``stop`` and before when ``stop`` is given, else the branch's last runs (or, with
    ``through``, the runs from just above ``through``). The cost is the window's size plus the
    distance from its end to the leaf, never the size of the session.
    """
    if through is None:
        info = yield from session_info(session_id)
        if info is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        if info.head_run_id is None:
            return PathView(session_id, None, -1, [], {}, {})
        head = yield from _find_run(session_id, info.head_run_id)
        leaf_id, leaf_depth = head.id, head.depth
    else:
        anchor = yield from _find_run(session_id, through)
        leaf_id, leaf_depth = yield Query(
            "descend", {"sid": session_id, "id": anchor.id}, Fetch.ONE
        )
    if start is not None:
        lo = max(0, start)
        hi = min(leaf_depth, lo + limit - 1)
    elif stop is not None:
        hi = min(leaf_depth, stop)
        lo = max(0, hi - limit + 1)
    elif through is not None:
        # A little context above the chosen run, the rest of the window below it.
        lo = max(0, anchor.depth - limit // 5)
        hi = min(leaf_depth, lo + limit - 1)
    else:
        hi = leaf_depth
        lo = max(0, hi - limit + 1)
    rows = yield Query(
        "path_window", {"sid": session_id, "leaf": leaf_id, "lo": lo, "hi": hi}, Fetch.ALL
    )
    runs: list[Run] = []
    forks: dict[int, Fork] = {}
    width = len(RUN_COLUMNS.split(","))
    for row in rows:
        run = run_from_row(row)
        runs.append(run)
        count, index, previous_id, next_id = row[width:]
        if count > 1:
            forks[run.id] = Fork(index, count, previous_id, next_id)
    calls: dict[int, list[ToolCall]] = {}
    if runs:
        call_rows = yield Query(
            "tool_calls_of_runs",
            {"sid": session_id, "run_ids": json.dumps([run.id for run in runs])},
            Fetch.ALL,
        )
        for call_row in call_rows:
            call = tool_call_from_row(call_row)
            calls.setdefault(call.run_id, []).append(call)
    return PathView(session_id, leaf_id, leaf_depth, runs, forks, calls)


# ---------------------------------------------------------------------------------------------
# Changing history


def clear_session(session_id: str) -> Op[None]:
    """Remove the session with every branch and derived row."""
    yield Query("delete_session", {"sid": session_id})


def _parent_head(session_id: str, parent_id: int | None) -> Op[_Head]:
    if parent_id is None:
        return _Head(None)
    parent = yield from _find_run(session_id, parent_id)
    child = yield Query("first_child", {"sid": session_id, "id": parent.id}, Fetch.ONE)
    return _Head(parent.id, parent.depth, parent.item_count, parent.parent_id, child is not None)


def pop_item(session_id: str, now: Any) -> Op[Any]:
    """Remove and return the newest item of the active path (None when empty).

    A run left empty is removed and the head moves to its parent. When the head run is shared
    with other branches (it has children), its items are not touched: a sibling holding all
    but the last of them becomes the head instead.
    """
    while True:
        head = yield from _lock_session(session_id, now, create=False)
        if head.id is None:
            return None
        row = yield Query("last_item", {"sid": session_id, "run_id": head.id}, Fetch.ONE)
        item_id, position, call_id, data = row
        shared = yield Query("first_child", {"sid": session_id, "id": head.id}, Fetch.ONE)
        if shared is not None:
            rows = yield Query(
                "run_items_before",
                {"sid": session_id, "run_id": head.id, "position": position},
                Fetch.ALL,
            )
            keep = decode_items(rows, session_id)
            parent = yield from _parent_head(session_id, head.parent_id)
            new_head: int | None = parent.id
            if keep:
                new_head = yield from _apply_append(
                    session_id, parent, prepare_items(keep), {}, now, None
                )
            yield from _set_head(session_id, new_head, now)
        else:
            if call_id is not None:
                params = {"sid": session_id, "call_id": call_id, "item": item_id}
                yield Query("drop_call_of_item", params)
                yield Query("reopen_call_of_output", params)
            yield Query("delete_item", {"sid": session_id, "id": item_id})
            if position == 0:
                yield Query("delete_run", {"sid": session_id, "id": head.id})
                yield from _set_head(session_id, head.parent_id, now)
            else:
                yield Query(
                    "shrink_run",
                    {"sid": session_id, "id": head.id, "item_count": position, "now": now},
                )
        popped = decode_items([(item_id, data)], session_id)
        if popped:
            return popped[0]
        # A corrupt row is dropped and the next one tried, as the SDK's SQLiteSession does.


def _edited(original: Mapping[str, Any], new_input: str | Mapping[str, Any]) -> Any:
    """The user item ``original`` with its content replaced: same role, type and extra keys.

    String content stays a string; a list of parts becomes one ``input_text`` part.
    """
    if not isinstance(new_input, str):
        return new_input
    item = dict(original)
    content = item.get("content")
    item["content"] = (
        [{"type": "input_text", "text": new_input}] if isinstance(content, list) else new_input
    )
    return item


class _AnyHead(Enum):
    ANY = 0


ANY_HEAD = _AnyHead.ANY
"""``expected_head`` default: move the head wherever it is."""

ExpectedHead = int | None | _AnyHead


def _lock_expected(session_id: str, now: Any, expected_head: ExpectedHead) -> Op[_Head]:
    """Lock the session; refuse when its head is not ``expected_head`` (optimistic check)."""
    head = yield from _lock_session(session_id, now)
    if expected_head is not ANY_HEAD and head.id != expected_head:
        raise ConflictError(
            f"the head of session {session_id!r} is run {head.id}, not run {expected_head}: "
            "another writer moved it first; nothing was changed"
        )
    return head


def fork(
    session_id: str,
    run_id: int,
    new_input: str | Mapping[str, Any] | None,
    now: Any,
    expected_head: ExpectedHead = ANY_HEAD,
) -> Op[Run]:
    """Start a sibling of ``run_id`` with its user message, or with that message edited."""
    yield from _lock_expected(session_id, now, expected_head)
    run = yield from _find_run(session_id, run_id)
    row = yield Query("first_item", {"sid": session_id, "run_id": run.id}, Fetch.ONE)
    original = decode_items([row], session_id) if row is not None else []
    if not original or not classify(original[0]).starts_run:
        raise InvalidOperationError(f"run {run_id} has no user message to edit or regenerate")
    item = original[0] if new_input is None else _edited(original[0], new_input)
    batch = prepare_items([item])
    if not batch[0].info.starts_run:
        raise InvalidOperationError("the new input must be a user message")
    parent = yield from _parent_head(session_id, run.parent_id)
    new_id = yield from _apply_append(session_id, parent, batch, {}, now, None)
    yield from _set_head(session_id, new_id, now)
    return (yield from _find_run(session_id, new_id))


def move_head(
    session_id: str,
    run_id: int,
    *,
    to_parent: bool,
    now: Any,
    expected_head: ExpectedHead = ANY_HEAD,
) -> Op[int | None]:
    """Point the head at ``run_id`` (or at its parent: None, the empty path, for a root)."""
    yield from _lock_expected(session_id, now, expected_head)
    run = yield from _find_run(session_id, run_id)
    target = run.parent_id if to_parent else run.id
    yield from _set_head(session_id, target, now)
    return target


def delete_branch(
    session_id: str, run_id: int, now: Any, expected_head: ExpectedHead = ANY_HEAD
) -> Op[int | None]:
    """Remove ``run_id``, its descendants, and the ancestors that only they reach.

    Returns the new head: unchanged unless it was removed, else the nearest surviving ancestor.
    """
    head = yield from _lock_expected(session_id, now, expected_head)
    run = yield from _find_run(session_id, run_id)
    ancestors = yield Query("ancestors_child_counts", {"sid": session_id, "id": run.id}, Fetch.ALL)
    top, parent_id = run.id, run.parent_id
    for ancestor_id, ancestor_parent, child_count in ancestors:
        if child_count != 1:
            break
        top, parent_id = ancestor_id, ancestor_parent
    head_id = head.id
    if head_id is not None:
        on_path = yield Query("is_ancestor", {"sid": session_id, "id": top}, Fetch.ONE)
        if on_path is not None:
            head_id = parent_id
    yield Query("delete_run", {"sid": session_id, "id": top})
    yield from _set_head(session_id, head_id, now)
    return head_id


# ---------------------------------------------------------------------------------------------
# Schema


def migrate_step(migrations: Sequence[Sequence[str]], lock: str | None) -> Op[bool]:
    """Apply the next pending migration with its version row; False when none is pending.

    The driver runs each step in its own transaction, so a step and its version row land
    together or not at all; ``lock`` (Postgres: an advisory lock) serialises migrators.
    """
    if lock is not None:
        yield Query(lock, raw=True)
    yield Query("create_version_table")
    version = yield from _schema_version(migrations)
    if version == len(migrations):
        return False
    for statement in migrations[version]:
        yield Query(statement, raw=True)
    yield Query("record_version", {"version": version + 1})
    return True


def _schema_version(migrations: Sequence[Sequence[str]]) -> Op[int]:
    """The database's schema version (the version table must exist); refuses a newer one."""
    row = yield Query("schema_version", fetch=Fetch.ONE)
    version: int = row[0] if row is not None and row[0] is not None else 0
    if version > len(migrations):
        raise SchemaError(
            f"the database's schema is at version {version}, newer than this turnstore "
            f"knows ({len(migrations)}): upgrade turnstore"
        )
    return version


def pending_migrations(migrations: Sequence[Sequence[str]]) -> Op[int]:
    """How many of ``migrations`` the database lacks, without writing anything.

    Lets a backend skip the migration lock when the schema is current, and open a read-only
    replica; refuses a schema newer than ``migrations``.
    """
    row = yield Query("version_table_exists", fetch=Fetch.ONE)
    if row is None or not row[0]:
        return len(migrations)
    version = yield from _schema_version(migrations)
    return len(migrations) - version

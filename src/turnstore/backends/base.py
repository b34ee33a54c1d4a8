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
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Protocol, TypeVar

from ..errors import InvalidItemError, InvalidOperationError, RunNotFoundError, SchemaError
from ..items import ItemInfo, classify
from ..model import Branch, Run, SessionInfo, Usage

__all__ = [
    "Backend",
    "Fetch",
    "Op",
    "PreparedItem",
    "Query",
    "append",
    "as_datetime",
    "branches",
    "clear_session",
    "delete_branch",
    "fork",
    "get_items",
    "migrate_step",
    "move_head",
    "path_runs",
    "pop_item",
    "prepare_items",
    "session_info",
    "siblings",
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


def _dumps(item: Mapping[str, Any]) -> str:
    # Readable UTF-8 in the database; an item holding a lone surrogate cannot be encoded as
    # UTF-8 text, so it is stored \u-escaped instead (it decodes to the same value).
    data = json.dumps(item, ensure_ascii=False)
    if not data.isascii():
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            data = json.dumps(item)
    return data


def prepare_items(items: Sequence[Any]) -> list[PreparedItem]:
    """Check, serialise and classify a batch, refusing it whole on the first bad item."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise InvalidItemError(f"items must be a list of mappings, got {type(items).__name__}")
    prepared = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
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


def decode_items(rows: Sequence[Sequence[Any]], session_id: str) -> list[Any]:
    """Decode stored item JSON (the last column of each row), skipping corrupt rows.

    One ``json.loads`` over the joined rows is about twice as fast as one per row; the per-row
    path only runs when that fails, so that one corrupt row never hides the rest.
    """
    if not rows:
        return []
    try:
        items = json.loads("[" + ",".join([row[-1] for row in rows]) + "]")
        if len(items) == len(rows) and all(type(item) is dict for item in items):
            return list(items)
    except (ValueError, TypeError):
        pass
    decoded = []
    for row in rows:
        try:
            item = json.loads(row[-1])
        except (ValueError, TypeError):
            item = None
        if type(item) is dict:
            decoded.append(item)
        else:
            log.warning("skipping corrupt item %r of session %r", row[0], session_id)
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


def _call_status(info: ItemInfo) -> str:
    # A call item's own status says the model finished writing it, not that the tool ran.
    return info.status if info.status in ("failed", "incomplete") else "pending"


def _pairing_key(info: ItemInfo) -> str:
    # Server-run tool searches carry no call_id: the SDK pairs the output with the call just
    # before it of the same tool, so within a batch that is what they pair with here.
    return info.call_id if info.call_id is not None else f"\0{info.tool_kind}"


def _output_status(info: ItemInfo) -> str:
    if info.status is not None and info.status not in ("in_progress", "searching"):
        return info.status
    return "failed" if info.error else "completed"


def _plan(
    head: _Head, batch: Sequence[PreparedItem], open_calls: Mapping[str, int]
) -> tuple[list[_PlanRun], list[_PlanItem], list[_PlanCall], list[tuple[int, _PlanCall]], _PlanRun]:
    runs: list[_PlanRun] = []
    items: list[_PlanItem] = []
    calls: list[_PlanCall] = []
    updates: list[tuple[int, _PlanCall]] = []
    pending: dict[str, _PlanCall] = {}
    current: _PlanRun | None = None
    if head.id is not None:
        current = _PlanRun(head.id, None, head.parent_id, head.depth, head.item_count)
        runs.append(current)
    for prepared in batch:
        info = prepared.info
        if current is None or info.starts_run:
            current = _PlanRun(
                None,
                current,
                None,
                current.depth + 1 if current is not None else 0,
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
                    status=info.status or "completed",
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
            call.error = info.error
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
        else:
            yield Query(
                "update_run_append",
                {
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
        item.id = row[0]
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
                "id": call_row_id,
                "output": call.output,
                "status": call.status,
                "error": call.error,
                "output_item_id": call.output_item.id if call.output_item else None,
                "now": now,
            },
        )
    if usage is not None:
        yield Query("set_run_usage", {"id": last.id, "now": now, **_usage_params(usage)})
    assert last.id is not None
    return last.id


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


def _lock_session(session_id: str, now: Any, title: str | None = None) -> Op[_Head]:
    """Create the session if new, lock it for this transaction, and read its head."""
    yield Query("ensure_session", {"sid": session_id, "now": now, "title": title})
    row = yield Query("lock_head", {"sid": session_id}, Fetch.ONE)
    return _Head(*row) if row[0] is not None else _Head(None)


def _set_head(session_id: str, head_id: int | None, now: Any) -> Op[None]:
    yield Query("set_head", {"sid": session_id, "head": head_id, "now": now})


def append(
    session_id: str, batch: Sequence[PreparedItem], now: Any, usage: Usage | None = None
) -> Op[None]:
    """Add a batch: user messages start runs (children of the head), the rest join the head."""
    head = yield from _lock_session(session_id, now, _title(batch))
    # Outputs whose call is in an earlier batch (an interrupted run resumed) pair with it.
    calls_here = {p.info.call_id for p in batch if p.info.kind == "tool_call"}
    call_ids = sorted(
        {
            p.info.call_id
            for p in batch
            if p.info.kind == "tool_output" and p.info.call_id and p.info.call_id not in calls_here
        }
    )
    open_calls: dict[str, int] = {}
    if call_ids:
        rows = yield Query(
            "open_tool_calls", {"sid": session_id, "call_ids": json.dumps(call_ids)}, Fetch.ALL
        )
        open_calls = {call_id: row_id for call_id, row_id in rows}
    last = yield from _apply_append(session_id, head, batch, open_calls, now, usage)
    yield from _set_head(session_id, last, now)


# ---------------------------------------------------------------------------------------------
# Reading


def get_items(session_id: str, limit: int | None) -> Op[list[Any]]:
    """The newest ``limit`` items of the active path (all when None), oldest first."""
    if limit is None:
        rows = yield Query("path_items", {"sid": session_id}, Fetch.ALL)
        return decode_items(rows, session_id)
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
    if isinstance(run_id, bool) or not isinstance(run_id, int):
        raise RunNotFoundError(f"run ids are integers, got {run_id!r}")
    row = yield Query("run", {"id": run_id}, Fetch.ONE)
    if row is None:
        raise RunNotFoundError(f"no run {run_id}")
    run = run_from_row(row)
    if run.session_id != session_id:
        raise RunNotFoundError(f"run {run_id} belongs to another session, not {session_id!r}")
    return run


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


def session_info(session_id: str) -> Op[SessionInfo | None]:
    """The session's catalogue row, or None."""
    row = yield Query("session", {"sid": session_id}, Fetch.ONE)
    if row is None:
        return None
    metadata = row[3]
    return SessionInfo(
        session_id=row[0],
        user_id=row[1],
        title=row[2],
        metadata=json.loads(metadata) if isinstance(metadata, str) else (metadata or {}),
        head_run_id=row[4],
        created_at=as_datetime(row[5]),
        updated_at=as_datetime(row[6]),
    )


# ---------------------------------------------------------------------------------------------
# Changing history


def clear_session(session_id: str) -> Op[None]:
    """Remove the session with every branch and derived row."""
    yield Query("delete_session", {"sid": session_id})


def _parent_head(session_id: str, parent_id: int | None) -> Op[_Head]:
    if parent_id is None:
        return _Head(None)
    parent = yield from _find_run(session_id, parent_id)
    return _Head(parent.id, parent.depth, parent.item_count, parent.parent_id)


def pop_item(session_id: str, now: Any) -> Op[Any]:
    """Remove and return the newest item of the active path (None when empty).

    A run left empty is removed and the head moves to its parent. When the head run is shared
    with other branches (it has children), its items are not touched: a sibling holding all
    but the last of them becomes the head instead.
    """
    while True:
        head = yield from _lock_session(session_id, now)
        if head.id is None:
            return None
        row = yield Query("last_item", {"run_id": head.id}, Fetch.ONE)
        item_id, position, call_id, data = row
        shared = yield Query("first_child", {"sid": session_id, "id": head.id}, Fetch.ONE)
        if shared is not None:
            rows = yield Query(
                "run_items_before", {"run_id": head.id, "position": position}, Fetch.ALL
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
            yield Query("delete_item", {"id": item_id})
            if position == 0:
                yield Query("delete_run", {"id": head.id})
                yield from _set_head(session_id, head.parent_id, now)
            else:
                yield Query("shrink_run", {"id": head.id, "item_count": position, "now": now})
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


def fork(
    session_id: str, run_id: int, new_input: str | Mapping[str, Any] | None, now: Any
) -> Op[Run]:
    """Start a sibling of ``run_id`` with its user message, or with that message edited."""
    yield from _lock_session(session_id, now)
    run = yield from _find_run(session_id, run_id)
    row = yield Query("first_item", {"run_id": run.id}, Fetch.ONE)
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


def move_head(session_id: str, run_id: int | None, *, to_parent: bool, now: Any) -> Op[int | None]:
    """Point the head at ``run_id`` (or at its parent); ``None`` means the root (empty path)."""
    yield from _lock_session(session_id, now)
    target: int | None = None
    if run_id is not None:
        run = yield from _find_run(session_id, run_id)
        target = run.parent_id if to_parent else run.id
    yield from _set_head(session_id, target, now)
    return target


def delete_branch(session_id: str, run_id: int, now: Any) -> Op[int | None]:
    """Remove ``run_id``, its descendants, and the ancestors that only they reach.

    Returns the new head: unchanged unless it was removed, else the nearest surviving ancestor.
    """
    head = yield from _lock_session(session_id, now)
    run = yield from _find_run(session_id, run_id)
    ancestors = yield Query("ancestors_child_counts", {"id": run.id}, Fetch.ALL)
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
    yield Query("delete_run", {"id": top})
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
    row = yield Query("schema_version", fetch=Fetch.ONE)
    version = row[0] if row is not None and row[0] is not None else 0
    if version > len(migrations):
        raise SchemaError(
            f"the database's schema is at version {version}, newer than this turnstore "
            f"knows ({len(migrations)}): upgrade turnstore"
        )
    if version == len(migrations):
        return False
    for statement in migrations[version]:
        yield Query(statement, raw=True)
    yield Query("record_version", {"version": version + 1})
    return True

"""What every backend shares: the backend protocol, the item codec and the row mappers.

Each operation (append items, pop, edit, …) is written once, as a generator that yields
``Query`` requests and receives their results: the logic never touches a driver. A backend
supplies the SQL for each query name (one dict per backend, in one module) and a driver that
runs one operation inside one transaction: synchronously on SQLite's worker thread,
asynchronously on Postgres. So the tree, pairing and usage rules cannot drift apart between
backends, and an operation can be retried whole after a transient failure.

The operations live in ``append`` (batches, grafts, telemetry, the search backlog, catalogue
fields), ``reads`` (the active path, the tree, the viewer's windows), ``history`` (pop,
clear, fork, move the head, delete a branch), ``schema`` (migrations) and ``queries``
(catalogue, tool calls, usage, search, export). This module is what they build on: the query
primitives, the item codec, the row mappers and the session lock; it imports none of them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Protocol, TypeVar

import msgspec

from ..errors import InvalidItemError
from ..items import ItemInfo, classify
from ..model import Run, SessionInfo, ToolCall, Usage
from ..validate import check_json

__all__ = [
    "RUN_COLUMNS",
    "SESSION_COLUMNS",
    "TOOL_CALL_COLUMNS",
    "Backend",
    "Fetch",
    "Head",
    "Op",
    "PreparedItem",
    "Query",
    "as_datetime",
    "decode_items",
    "dumps_item",
    "finish_write",
    "loads_item",
    "lock_session",
    "prepare_items",
    "run_from_row",
    "session_from_row",
    "set_head",
    "tool_call_from_row",
]

log = logging.getLogger("turnstore")

T = TypeVar("T")


class Fetch(Enum):
    """What a query's caller wants back."""

    NONE = 0  # nothing (DDL, UPDATE, DELETE)
    ONE = 1  # the first row, or None
    ALL = 2  # every row
    ID = 3  # the id of the row an INSERT made (its SQL returns it where the driver cannot)


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

    read_only: bool
    """Opened read-only: ``run(..., write=True)`` raises ``ReadOnlyError``."""

    found_version: int | None
    """The schema version the database had when opened (None: it held no turnstore schema)."""

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


async def finish_write(write: Awaitable[T]) -> T:
    """Await ``write`` to its end, even when the caller is cancelled meanwhile.

    Every backend's ``run(..., write=True)`` goes through here. A cancellation (a task's
    ``cancel()``, a ``wait_for`` timeout) that arrives while a write runs or waits for a lock
    is held back until the write has committed (it then propagates, so a ``CancelledError``
    from a write means the write is stored) or failed (its error propagates instead): a write
    that has started is never dropped nor left running behind the caller's back.
    """
    task = asyncio.ensure_future(write)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError as exc:
            if task.done():  # the write itself was cancelled (its loop is shutting down)
                raise
            cancelled = exc
    if cancelled is not None:
        raise cancelled
    return result


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


def dumps_item(item: Mapping[str, Any]) -> str:
    """``item`` as JSON text; ValueError when it nests deeper than ``MAX_DEPTH`` or two of an
    object's keys are one in JSON (see ``validate.check_json``), TypeError when JSON cannot
    hold it."""
    check_json(item)
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
            data = dumps_item(item)
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
# Rows: the columns the statements select, and the records built from them


RUN_COLUMNS = (
    "id, session_id, parent_id, depth, user_message, assistant_message, agent_name, model, "
    "status, requests, input_tokens, output_tokens, total_tokens, cached_tokens, "
    "reasoning_tokens, item_count, created_at, updated_at, kind, prior_run_id, compacted_by"
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
        kind=row[18],
        prior_run_id=row[19],
        compacted_by=row[20],
    )


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


# ---------------------------------------------------------------------------------------------
# The session's head: every write locks it first


@dataclass(slots=True)
class Head:
    """What an append needs to know of the session before it writes."""

    id: int | None
    depth: int = -1
    item_count: int = 0
    # The run above the head in the model's view: its parent, or a compaction run's prior run.
    parent_id: int | None = None
    has_children: bool = False
    # Through which item id the search index is fed, where a backend feeds it in batches
    # (SQLite); read with the lock, so that an append knows whether to feed it.
    indexed_through: int | None = None


def lock_session(
    session_id: str, now: Any, title: str | None = None, *, create: bool = True
) -> Op[Head]:
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
        return Head(None)
    head = Head(*row)
    return head if head.id is not None else Head(None, indexed_through=head.indexed_through)


def set_head(session_id: str, head_id: int | None, now: Any) -> Op[None]:
    yield Query("set_head", {"sid": session_id, "head": head_id, "now": now})

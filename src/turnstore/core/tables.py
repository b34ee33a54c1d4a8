"""Rows: what the statements return, by name, and the records built from them.

Each row type is a NamedTuple whose fields are the columns a statement selects, in order;
the driver builds it and checks once per statement that the database's column names are the
fields (see ``core.dialect.check_columns``). The token columns are declared once, by the
model's ``Usage``: ``TOKEN_COLUMNS`` is its counts, in order, and every SQL fragment, row and
sum of tokens is written from it; ``DETAIL_COLUMNS`` its token details (JSON).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from operator import attrgetter
from typing import Any, NamedTuple, NewType

from ..domain import validate
from ..domain.model import (
    DETAIL_FIELDS,
    TOKEN_FIELDS,
    Run,
    SessionInfo,
    ToolCall,
    Usage,
)
from ..domain.tokens import clamped_details, usage_with
from ..domain.units import kept_ms
from ..errors import InvalidOperationError

__all__ = [
    "DETAIL_COLUMNS",
    "RUN_COLUMNS",
    "SESSION_COLUMNS",
    "TOKEN_COLUMNS",
    "TOOL_CALL_COLUMNS",
    "TOOL_CALL_FROM_ITEM",
    "CopyToolCallRow",
    "DetailsText",
    "PathWindowRow",
    "RunRow",
    "SessionRow",
    "ToolCallRow",
    "as_datetime",
    "check_extends",
    "columns",
    "details_param",
    "run_from_row",
    "session_columns",
    "session_from_row",
    "stored_details",
    "stored_metadata",
    "stored_time",
    "tool_call_from_row",
    "tool_call_item_values",
    "usage_from_row",
    "usage_params",
]

log = logging.getLogger("turnstore")

TOKEN_COLUMNS: tuple[str, ...] = TOKEN_FIELDS
"""The token columns of runs and model_responses: ``Usage``'s counts, named alike."""
DETAIL_COLUMNS: tuple[str, ...] = DETAIL_FIELDS
"""The token details' columns of runs and model_responses: JSON objects, named as ``Usage``'s
fields (and as the SDK's and AdvancedSQLiteSession's ``turn_usage``'s)."""

DetailsText = NewType("DetailsText", str)
"""A token details column's value: JSON text of an object of counts."""

_tokens = attrgetter(*TOKEN_COLUMNS)


def stored_details(value: Any) -> dict[str, int]:
    """A token details column as the driver returned it (JSON text, SQLite; a dict, jsonb):
    its counts. NULL, and text that is no JSON object of counts (written by hand), are
    ``{}``: a listing never fails on it."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return clamped_details(value)


def details_param(details: dict[str, int]) -> str | None:
    """Token details as a statement parameter: JSON text; None (NULL) for none."""
    return json.dumps(details, sort_keys=True) if details else None


def usage_from_row(row: Any) -> Usage:
    """The ``Usage`` of a row that holds the token columns (by name; a sum may be NULL), and
    its token details where it has them."""
    inputs, outputs = (stored_details(getattr(row, name, None)) for name in DETAIL_COLUMNS)
    counts = [int(value or 0) for value in _tokens(row)]
    return usage_with(counts, inputs, outputs)


def usage_params(usage: Usage) -> dict[str, Any]:
    """The token columns of ``usage`` as statement parameters, named as the columns."""
    params: dict[str, Any] = dict(zip(TOKEN_COLUMNS, _tokens(usage), strict=True))
    for name in DETAIL_COLUMNS:
        params[name] = details_param(getattr(usage, name))
    return params


def columns(row: type[Any], alias: str = "") -> str:
    """The select list of a row type: its fields, as columns of the table ``alias``; token
    details as JSON text on every backend (PostgreSQL's driver would decode jsonb, which a
    copy could not write back as it is)."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(
        f"CAST({prefix}{name} AS TEXT) AS {name}" if name in DETAIL_COLUMNS else prefix + name
        for name in row._fields
    )


def as_datetime(value: Any) -> datetime:
    """A timestamp as the driver returned it (datetime, or ISO text from SQLite)."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def stored_time(value: Any, what: str) -> datetime | None:
    """A timestamp a caller's record wrote (a tool call's timing, a model call's times) as the
    driver returned it; None for NULL, and for text that is no time (written by hand, or
    stored unchecked before issue 26), which is logged and never fails a listing."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        log.warning("%s is not a time (%s): read as unknown", what, validate.shown(value))
        return None


class RunRow(NamedTuple):
    """A row of ``runs``."""

    id: int
    session_id: str
    parent_id: int | None
    depth: int
    user_message: str | None
    assistant_message: str | None
    agent_name: str | None
    model: str | None
    status: str | None
    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    input_tokens_details: DetailsText | None
    output_tokens_details: DetailsText | None
    item_count: int
    created_at: Any
    updated_at: Any
    kind: str | None
    prior_run_id: int | None
    compacted_by: int | None


class PathWindowRow(NamedTuple):
    """A run of a branch's window with its place among its siblings (``RunRow`` + 4)."""

    id: int
    session_id: str
    parent_id: int | None
    depth: int
    user_message: str | None
    assistant_message: str | None
    agent_name: str | None
    model: str | None
    status: str | None
    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    input_tokens_details: DetailsText | None
    output_tokens_details: DetailsText | None
    item_count: int
    created_at: Any
    updated_at: Any
    kind: str | None
    prior_run_id: int | None
    compacted_by: int | None
    sibling_count: int
    sibling_index: int
    previous_id: int | None
    next_id: int | None


RUN_COLUMNS = columns(RunRow)


def run_from_row(row: RunRow | PathWindowRow) -> Run:
    """Build a ``Run`` from a row of ``runs``."""
    return Run(
        id=row.id,
        session_id=row.session_id,
        parent_id=row.parent_id,
        depth=row.depth,
        user_message=row.user_message,
        assistant_message=row.assistant_message,
        agent_name=row.agent_name,
        model=row.model,
        status=row.status,
        usage=usage_from_row(row),
        item_count=row.item_count,
        created_at=as_datetime(row.created_at),
        updated_at=as_datetime(row.updated_at),
        kind=row.kind,
        prior_run_id=row.prior_run_id,
        compacted_by=row.compacted_by,
    )


class SessionRow(NamedTuple):
    """A row of ``sessions``."""

    session_id: str
    user_id: str | None
    title: str | None
    metadata: str  # JSON text, on every backend (SESSION_COLUMNS)
    head_run_id: int | None
    created_at: Any
    updated_at: Any


# metadata as text on PostgreSQL too: its driver would decode jsonb itself, failing the whole
# statement on a value nested past the parser's depth; stored_metadata reads it instead.
def session_columns(table: str = "") -> str:
    """The select list of ``SessionRow``, as columns of ``table`` (a statement that joins
    another table with a session_id names it)."""
    prefix = f"{table}." if table else ""
    return ", ".join(
        f"CAST({prefix}metadata AS TEXT) AS metadata" if name == "metadata" else prefix + name
        for name in SessionRow._fields
    )


SESSION_COLUMNS = session_columns()


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(number: str) -> float:
    value = float(number)
    if not math.isfinite(value):
        raise ValueError(f"{number} is past any float")
    return value


# JSON as it is: NaN and Infinity (which json reads) and numbers past a float are not.
_STRICT = json.JSONDecoder(parse_constant=_not_json, parse_float=_finite)


def stored_metadata(text: str) -> tuple[dict[str, Any], str | None]:
    """A session's stored metadata: its object, and None; or ``{}`` and the stored text when
    it is not metadata turnstore writes (``validate.metadata_text``: the JSON text of an
    object within the limits of metadata), as SQL by hand, or a ``SessionPatch`` stored
    unchecked before issue 26, can leave it."""
    try:
        value = _STRICT.decode(text)
    except (TypeError, ValueError, RecursionError):
        return {}, text
    if type(value) is not dict:
        return {}, text
    # What else that rule refuses, text can hold only as a \u escape (NUL, a lone surrogate:
    # the column's own characters are valid UTF-8) or as nesting: only such text pays for the
    # rule's full check (a listing reads a page of sessions).
    if "\\u" in text or text.count("[") + text.count("{") > validate.MAX_DEPTH:
        try:
            validate.metadata(value)
        except InvalidOperationError:
            return {}, text
    return value, None


def session_from_row(row: SessionRow) -> SessionInfo:
    """Build a ``SessionInfo`` from a row of ``sessions``; metadata that is not a JSON object
    turnstore writes is read as ``{}``, its text kept in ``unreadable_metadata`` (and logged),
    so that one such session never breaks a listing."""
    metadata, unreadable = stored_metadata(row.metadata)
    if unreadable is not None:
        log.warning("session %r: its metadata is not a JSON object, read as {}", row.session_id)
    return SessionInfo(
        session_id=row.session_id,
        user_id=row.user_id,
        title=row.title,
        metadata=metadata,
        head_run_id=row.head_run_id,
        created_at=as_datetime(row.created_at),
        updated_at=as_datetime(row.updated_at),
        unreadable_metadata=unreadable,
    )


class ToolCallRow(NamedTuple):
    """A row of ``tool_calls``."""

    id: int
    session_id: str
    run_id: int
    call_id: str | None
    tool_name: str | None
    kind: str | None
    arguments: str | None
    output: str | None
    status: str | None
    error: str | None
    created_at: Any
    completed_at: Any | None
    duration_ms: float | None
    started_at: Any | None


TOOL_CALL_COLUMNS = columns(ToolCallRow)


# How a stored value becomes a ToolCall's: times as the driver returns them, durations kept
# to the microsecond; every other field is the column of its name.
_TOOL_CALL_READ: dict[str, Callable[[Any], Any]] = {
    "created_at": lambda row: as_datetime(row.created_at),
    "completed_at": lambda row: stored_time(row.completed_at, f"tool call {row.id}'s completed_at"),
    "started_at": lambda row: stored_time(row.started_at, f"tool call {row.id}'s started_at"),
    "duration_ms": lambda row: kept_ms(row.duration_ms),
}
_TOOL_CALL_PLAIN = tuple(
    f.name for f in fields(ToolCall) if f.name not in _TOOL_CALL_READ and f.init
)
_missing = [name for name in _TOOL_CALL_PLAIN if name not in ToolCallRow._fields]
if _missing:
    raise TypeError(f"ToolCall's fields {_missing} are no column of ToolCallRow")
_tool_call_plain = attrgetter(*_TOOL_CALL_PLAIN)


def tool_call_from_row(row: ToolCallRow | CopyToolCallRow) -> ToolCall:
    """Build a ``ToolCall`` from a row of ``tool_calls``: each field from its column."""
    values = dict(zip(_TOOL_CALL_PLAIN, _tool_call_plain(row), strict=True))
    for name, read in _TOOL_CALL_READ.items():
        values[name] = read(row)
    return ToolCall(**values)


class CopyToolCallRow(NamedTuple):
    """A tool call as a copy reads it: ``ToolCallRow``'s columns, then the items it names by
    their place (run, position), which a copy finds again under their new ids (checked
    against ``ToolCallRow`` at import: a column added there and not here fails at once)."""

    id: int
    session_id: str
    run_id: int
    call_id: str | None
    tool_name: str | None
    kind: str | None
    arguments: str | None
    output: str | None
    status: str | None
    error: str | None
    created_at: Any
    completed_at: Any | None
    duration_ms: float | None
    started_at: Any | None
    call_item_run: int | None
    call_item_position: int | None
    output_item_run: int | None
    output_item_position: int | None


# What an append writes of a tool call, by the column: the item's classification
# (``items.ItemInfo``) names each value; a column the item gives is one more entry here.
TOOL_CALL_FROM_ITEM: dict[str, str] = {
    "call_id": "call_id",
    "tool_name": "name",
    "kind": "tool_kind",
    "arguments": "arguments",
}
tool_call_item_values = attrgetter(*TOOL_CALL_FROM_ITEM.values())
"""The ``TOOL_CALL_FROM_ITEM`` values of an ``ItemInfo``, in its order (C: no Python frame on
the write path)."""


def check_extends(row: type[Any], base: type[Any], extra: tuple[str, ...]) -> None:
    """A row type that repeats a table's columns must repeat all of them, in order."""
    if row._fields != (*base._fields, *extra):
        raise TypeError(
            f"{row.__name__} must be {base.__name__}'s columns then {extra}: got {row._fields}"
        )


check_extends(
    CopyToolCallRow,
    ToolCallRow,
    ("call_item_run", "call_item_position", "output_item_run", "output_item_position"),
)

"""Rows: what the statements return, by name, and the records built from them.

Each row type is a NamedTuple whose fields are the columns a statement selects, in order;
the driver builds it and checks once per statement that the database's column names are the
fields (see ``core.dialect.check_columns``). The token columns are declared once, by the
model's ``Usage``: ``TOKEN_COLUMNS`` is its fields, in order, and every SQL fragment, row and
sum of tokens is written from it.
"""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import datetime
from operator import attrgetter
from typing import Any, NamedTuple

from ..model import Run, SessionInfo, ToolCall, Usage
from ..units import kept_ms

__all__ = [
    "RUN_COLUMNS",
    "SESSION_COLUMNS",
    "TOKEN_COLUMNS",
    "TOOL_CALL_COLUMNS",
    "PathWindowRow",
    "RunRow",
    "SessionRow",
    "ToolCallRow",
    "as_datetime",
    "columns",
    "run_from_row",
    "session_from_row",
    "tool_call_from_row",
    "usage_from_row",
    "usage_params",
]

TOKEN_COLUMNS: tuple[str, ...] = tuple(field.name for field in fields(Usage))
"""The token columns of runs and model_responses: ``Usage``'s fields, named alike."""

_tokens = attrgetter(*TOKEN_COLUMNS)


def usage_from_row(row: Any) -> Usage:
    """The ``Usage`` of a row that holds the token columns (by name; a sum may be NULL)."""
    return Usage(*(int(value or 0) for value in _tokens(row)))


def usage_params(usage: Usage) -> dict[str, int]:
    """The token columns of ``usage`` as statement parameters, named as the columns."""
    return dict(zip(TOKEN_COLUMNS, _tokens(usage), strict=True))


def columns(row: type[Any], alias: str = "") -> str:
    """The select list of a row type: its fields, as columns of the table ``alias``."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in row._fields)


def as_datetime(value: Any) -> datetime:
    """A timestamp as the driver returned it (datetime, or ISO text from SQLite)."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


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
assert PathWindowRow._fields[: len(RunRow._fields)] == RunRow._fields
assert set(TOKEN_COLUMNS) <= set(RunRow._fields)


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
        usage=Usage(*_tokens(row)),
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
    metadata: Any  # JSON text on SQLite, already decoded from jsonb on Postgres
    head_run_id: int | None
    created_at: Any
    updated_at: Any


SESSION_COLUMNS = columns(SessionRow)


def session_from_row(row: SessionRow) -> SessionInfo:
    """Build a ``SessionInfo`` from a row of ``sessions``."""
    metadata = row.metadata
    return SessionInfo(
        session_id=row.session_id,
        user_id=row.user_id,
        title=row.title,
        metadata=json.loads(metadata) if isinstance(metadata, str) else (metadata or {}),
        head_run_id=row.head_run_id,
        created_at=as_datetime(row.created_at),
        updated_at=as_datetime(row.updated_at),
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


def tool_call_from_row(row: ToolCallRow) -> ToolCall:
    """Build a ``ToolCall`` from a row of ``tool_calls``."""
    return ToolCall(
        id=row.id,
        session_id=row.session_id,
        run_id=row.run_id,
        call_id=row.call_id,
        tool_name=row.tool_name,
        kind=row.kind,
        arguments=row.arguments,
        output=row.output,
        status=row.status,
        error=row.error,
        created_at=as_datetime(row.created_at),
        completed_at=as_datetime(row.completed_at) if row.completed_at is not None else None,
        duration_ms=kept_ms(row.duration_ms),
        started_at=as_datetime(row.started_at) if row.started_at is not None else None,
    )

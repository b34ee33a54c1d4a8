"""Rows: the columns the statements select, and the records built from them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..model import Run, SessionInfo, ToolCall, Usage

__all__ = [
    "RUN_COLUMNS",
    "SESSION_COLUMNS",
    "TOOL_CALL_COLUMNS",
    "as_datetime",
    "run_from_row",
    "session_from_row",
    "tool_call_from_row",
]


def as_datetime(value: Any) -> datetime:
    """A timestamp as the driver returned it (datetime, or ISO text from SQLite)."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


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

"""The SDK's trace spans of each run (``turnstore.tracing``): written in batches, read back.

A span arrives as a ``SpanRecord``: SDK-free, with its run resolved and its times bound as
the backend binds them. ``data`` is the span's own fields as JSON (``encode_data``); a
function span may also say how its tool call ended (``ToolOutcome``), which then replaces
what the call's output alone suggested (``tool_calls.status`` and ``error``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from ..domain.items import clean_text
from ..domain.model import TraceSpan
from ..domain.units import kept_ms
from . import results as R
from . import statements as S
from .lock import Tally, count_rows
from .ops import Op
from .tables import stored_time

__all__ = [
    "SpanRecord",
    "ToolOutcome",
    "cleaned",
    "encode_data",
    "error_spans",
    "record_spans",
    "slowest_spans",
    "spans",
]

logger = logging.getLogger("turnstore.tracing")


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """How a function span says its tool call ended: the ``nth`` call of ``tool_name`` in the
    run (with ``arguments``, when the span has them) gets ``status`` and ``error`` (None:
    the call keeps its error)."""

    tool_name: str
    arguments: str | None
    nth: int
    status: str
    error: str | None


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One finished span, ready to store in ``run_id``."""

    run_id: int
    trace_id: str
    span_id: str
    parent_span_id: str | None
    kind: str
    name: str | None
    started_at: Any
    ended_at: Any
    duration_ms: float | None
    error: str | None
    data: str
    outcome: ToolOutcome | None = None


def _clean_fields(record: Any) -> Any:
    changes = {
        field.name: clean_text(value)
        for field in fields(record)
        if isinstance(value := getattr(record, field.name), str)
    }
    return replace(record, **changes)


def cleaned(record: SpanRecord) -> SpanRecord:
    """``record`` with its text as a column holds it: NUL and lone surrogates replaced
    (``items.clean_text``), in the span and in what it says of its tool call."""
    record = _clean_fields(record)
    if record.outcome is not None:
        record = replace(record, outcome=_clean_fields(record.outcome))
    return record


def encode_data(data: Mapping[str, Any]) -> str:
    """A span's fields as stored: JSON, anything JSON lacks as its text, and ASCII, so that a
    lone surrogate or a NUL in a tool's output cannot fail the batch. Nor can what a custom
    span's data may hold that JSON cannot: a cycle, a key that is not text, a value whose
    text fails, NaN (none of them raises: each is stored as what can be told of it)."""
    try:
        return json.dumps(data, default=_text_of, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(_plain(data, ()), ensure_ascii=True, allow_nan=False)


# How deep ``_plain`` follows a span's data before it stores the rest as text.
_DEEPEST = 64


def _text_of(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # a __str__ that raises: the type is all there is to tell
        return f"<{type(value).__name__}>"


def _plain(value: Any, within: tuple[int, ...]) -> Any:
    """``value`` as JSON can hold it; ``within``: the ids of the containers it is inside."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if not isinstance(value, (Mapping, list, tuple)):
        return _text_of(value)
    if id(value) in within:
        return "<cycle>"
    if len(within) >= _DEEPEST:
        return "<too deep>"
    inner = (*within, id(value))
    if isinstance(value, Mapping):
        return {
            key if isinstance(key, str) else _text_of(key): _plain(item, inner)
            for key, item in value.items()
        }
    return [_plain(item, inner) for item in value]


def _decode_data(text: str) -> dict[str, Any]:
    """A stored span's data; what is not JSON a listing can read (text written by hand,
    nesting past the parser's depth) is read as empty and logged, never failing it."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        logger.warning("a stored span's data is not JSON; read as empty")
        return {}
    return value if isinstance(value, dict) else {"value": value}


def record_spans(session_id: str, records: Sequence[SpanRecord]) -> Op[None]:
    """Store ``records`` in the session (those of runs since deleted are dropped)."""
    outcomes = Tally()  # a call's outcome may count it failed, or no longer
    for record in records:
        yield S.INSERT_SPAN(
            {
                "sid": session_id,
                "run_id": record.run_id,
                "trace_id": record.trace_id,
                "span_id": record.span_id,
                "parent_span_id": record.parent_span_id,
                "kind": record.kind,
                "name": record.name,
                "started_at": record.started_at,
                "ended_at": record.ended_at,
                "duration_ms": record.duration_ms,
                "error": record.error,
                "data": record.data,
            }
        )
        if (outcome := record.outcome) is not None:
            yield S.SET_TOOL_OUTCOME(
                {
                    "sid": session_id,
                    "run_id": record.run_id,
                    "tool_name": outcome.tool_name,
                    "arguments": outcome.arguments,
                    "nth": outcome.nth,
                    "status": outcome.status,
                    "error": outcome.error,
                }
            )
            outcomes.failures = True
    yield from count_rows(session_id, outcomes)


def _span(row: R.SpanRow) -> TraceSpan:
    return TraceSpan(
        id=row.id,
        session_id=row.session_id,
        run_id=row.run_id,
        trace_id=row.trace_id,
        span_id=row.span_id,
        parent_span_id=row.parent_span_id,
        kind=row.kind,
        name=row.name,
        started_at=stored_time(row.started_at, f"span {row.id}'s started_at"),
        ended_at=stored_time(row.ended_at, f"span {row.id}'s ended_at"),
        duration_ms=kept_ms(row.duration_ms),
        error=row.error,
        data=_decode_data(row.data),
    )


def spans(*, session_id: str, run_id: int | None, limit: int) -> Op[list[TraceSpan]]:
    """The spans of a run, or of every run of a session, in the order they started."""
    statement = S.SPANS_BY_RUN if run_id is not None else S.SPANS_BY_SESSION
    rows = yield statement({"sid": session_id, "run_id": run_id, "limit": limit})
    return [_span(row) for row in rows]


def slowest_spans(*, session_id: str | None, kind: str | None, limit: int) -> Op[list[TraceSpan]]:
    """The ``limit`` longest spans (of ``kind``, of ``session_id``), slowest first."""
    statement = S.SLOWEST_SPANS_BY_SESSION if session_id else S.SLOWEST_SPANS_BY_ALL
    rows = yield statement({"sid": session_id, "kind": kind, "limit": limit})
    return [_span(row) for row in rows]


def error_spans(*, session_id: str | None, kind: str | None, limit: int) -> Op[list[TraceSpan]]:
    """The newest ``limit`` spans that ended with an error, newest first."""
    statement = S.ERROR_SPANS_BY_SESSION if session_id else S.ERROR_SPANS_BY_ALL
    rows = yield statement({"sid": session_id, "kind": kind, "limit": limit})
    return [_span(row) for row in rows]

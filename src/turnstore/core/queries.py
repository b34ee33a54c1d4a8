"""The read side shared by every backend: catalogue, tool calls, usage, export data.

Like the operations in ``append``, ``reads`` and ``history``, each query is a generator that
yields ``Query`` requests and never touches a driver; the statements are declared in
``statements``. Optional filters are bound as NULL-able parameters
(``:x IS NULL OR column = :x``), but the filter that should drive the index (a run, a
session, a tool, a user) picks a statement of its own, because a planner cannot choose an
index for a predicate that may or may not apply.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal, get_args

from ..domain import validate
from ..domain.model import (
    AnnotationStats,
    ModelResponse,
    Run,
    SessionInfo,
    SessionPage,
    SessionSummary,
    ToolCall,
    ToolStats,
    UsageRow,
)
from ..domain.prices import Price, Prices, cost_at
from ..domain.turns import BranchRef
from ..domain.units import kept_ms
from ..errors import ConflictError, InvalidOperationError, SessionNotFoundError
from . import catalogue_sql as C
from . import results as R
from . import statements as S
from . import turns
from . import usage_sql as U
from .adoption import supersede
from .annotations import stats_from_row
from .ops import All, Op
from .reads import session_info, with_items
from .tables import (
    RunRow,
    SessionRow,
    ToolCallRow,
    as_datetime,
    run_from_row,
    session_from_row,
    stored_time,
    tool_call_from_row,
    usage_from_row,
)
from .transfer import Chunk, read_chunk, session_annotations

__all__ = [
    "GROUPS",
    "ORDERS",
    "TIME_ORDERS",
    "ExportData",
    "SessionFilter",
    "count_sessions",
    "delete_session",
    "export_data",
    "list_sessions",
    "model_responses",
    "session_summaries",
    "tool_calls",
    "tool_stats",
    "usage",
]

SessionOrder = Literal["created_at", "updated_at", "runs", "tokens", "tool_calls", "failures"]
UsageGroup = Literal["session", "user", "model", "agent", "day", "run"]
ORDERS: tuple[SessionOrder, ...] = get_args(SessionOrder)
TIME_ORDERS: tuple[SessionOrder, ...] = ("created_at", "updated_at")
GROUPS: tuple[UsageGroup, ...] = get_args(UsageGroup)
if GROUPS != U.GROUPS:  # one list, spelt twice: as a type and as statements' keys
    raise TypeError(f"UsageGroup {GROUPS} differs from the statements' {U.GROUPS}")
if ORDERS != C.SESSION_ORDERS:  # one list, spelt twice: as a type and as statements' keys
    raise TypeError(f"SessionOrder {ORDERS} differs from the statements' {C.SESSION_ORDERS}")

# ---------------------------------------------------------------------------------------------
# The session catalogue


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """Which sessions a catalogue listing keeps (checked by ``Store.sessions``); None keeps
    any. Times are bound for the backend; ``metadata`` is the JSON of the pairs to match."""

    user_id: str | None = None
    metadata: str | None = None
    created_after: Any = None
    created_before: Any = None
    updated_after: Any = None
    updated_before: Any = None
    title: str | None = None  # a part of the title, any case
    agent_name: str | None = None  # a run answered by this agent
    model: str | None = None  # a run answered by this model
    run_status: str | None = None  # a run in this status (model.RunStatus)
    failed_tool_calls: bool = False  # a tool call that failed (toolcalls.call_failed)
    annotated: bool = False  # an annotation of a run, of ``annotation`` and the value range
    annotation: str | None = None  # of this name
    annotation_min: float | None = None  # a value at least this
    annotation_max: float | None = None  # a value at most this

    def params(self) -> dict[str, Any]:
        """The statement's parameters (user_id, unused unless the statement is by user)."""
        return {
            "user_id": self.user_id,
            "meta": self.metadata,
            "created_after": self.created_after,
            "created_before": self.created_before,
            "updated_after": self.updated_after,
            "updated_before": self.updated_before,
            "title": self.title,
            "agent": self.agent_name,
            "model": self.model,
            "run_status": self.run_status,
            "failed_calls": True if self.failed_tool_calls else None,
            "annotated": True if self.annotated else None,
            "annotation": self.annotation,
            "annotation_min": self.annotation_min,
            "annotation_max": self.annotation_max,
        }


def _encode_cursor(order: str, key: Any, session_id: str) -> str:
    if order in TIME_ORDERS:
        key = key if isinstance(key, str) else as_datetime(key).isoformat()
    data = json.dumps([order, key, session_id], ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str, order: str) -> tuple[Any, str]:
    try:
        data = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        kind, key, session_id = json.loads(data.decode("utf-8"))
        # Both are bound as parameters: a key that is not a time or a number (PostgreSQL
        # fails on it) or a lone surrogate (no driver encodes it) cannot be from a cursor of
        # ours.
        if kind in TIME_ORDERS:
            datetime.fromisoformat(key)
        elif type(key) is not int or not 0 <= key <= validate.MAX_INT:
            raise ValueError(key)
        session_id.encode("utf-8")
    except (ValueError, TypeError, AttributeError, binascii.Error, RecursionError):
        raise InvalidOperationError(f"not a sessions cursor: {validate.shown(cursor)}") from None
    if kind not in ORDERS:
        raise InvalidOperationError(f"not a sessions cursor: {validate.shown(cursor)}")
    if kind != order:
        raise InvalidOperationError(
            f"the cursor comes from a listing ordered by {kind}, not {order}"
        )
    return key, session_id


def session_summaries(session_ids: list[str]) -> Op[dict[str, SessionSummary]]:
    """What each session holds (a session without runs: zeros), in one query."""
    rows: list[R.SessionSummaryRow] = yield S.SESSION_SUMMARIES({"sids": json.dumps(session_ids)})
    found = {
        row.session_id: SessionSummary(
            runs=int(row.runs),
            branches=int(row.branches or 0),
            total_tokens=int(row.total_tokens or 0),
            failed_runs=int(row.failed_runs or 0),
            tool_calls=int(row.tool_calls),
            failed_tool_calls=int(row.failed_tool_calls),
        )
        for row in rows
    }
    return {sid: found.get(sid, SessionSummary()) for sid in session_ids}


def list_sessions(
    where: SessionFilter, *, order_by: SessionOrder, limit: int, after: str | None
) -> Op[SessionPage]:
    """One page of the sessions ``where`` keeps, newest (or largest) first by ``order_by``,
    after the cursor ``after``.

    Keyset pagination: the cursor is the last row's (sort key, session_id). Ordered by a time
    the page is read through its index, so page 1,000 costs what page 1 does; ordered by
    ``created_at`` (immutable) every session that existed when the listing began appears
    exactly once, and by ``updated_at`` a session written between two pages moves to the
    front and is not repeated. Ordered by a number (runs, tokens, tool calls, failures) each
    page adds up every kept session's rows, and a session whose number changes between two
    pages moves.
    """
    key, sid = _decode_cursor(after, order_by) if after is not None else (None, None)
    statement = C.SESSION_PAGES[order_by, where.user_id is not None]
    rows: list[R.SessionListRow] = yield statement(
        {
            **where.params(),
            "cursor_key": key,
            "cursor_sid": sid,
            "limit": limit + 1,  # one more, to know whether a next page exists
        }
    )
    sessions = [session_from_row(SessionRow(*row[:-1])) for row in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = _encode_cursor(order_by, _sort_key(order_by, last.sort_key), last.session_id)
    return SessionPage(sessions, next_cursor)


def _sort_key(order: SessionOrder, key: Any) -> Any:
    """A row's sort key as its cursor holds it: a time as stored, a number as an int."""
    return key if order in TIME_ORDERS else int(key)


def count_sessions(where: SessionFilter) -> Op[int]:
    """How many sessions ``where`` keeps."""
    statement = C.COUNT_SESSIONS_USER if where.user_id is not None else C.COUNT_SESSIONS
    count = yield statement(where.params())
    return int(count or 0)


def delete_session(session_id: str, now: Any, updated_before: Any = None) -> Op[None]:
    """Remove the session with all its rows (and supersede its SDK history not adopted yet);
    SessionNotFoundError if there is none. With ``updated_before`` (a bound time), only if its
    last write came before it: ConflictError if one came since."""
    superseded = yield from supersede(session_id, now)
    if updated_before is None:
        deleted: str | None = yield S.DELETE_SESSION_RETURNING({"sid": session_id})
    else:
        params = {"sid": session_id, "before": updated_before}
        deleted = yield S.DELETE_IDLE_SESSION_RETURNING(params)
        if deleted is None and (yield S.SESSION({"sid": session_id})) is not None:
            raise ConflictError(
                f"session {session_id!r} was written since {updated_before}: not deleted"
            )
    if deleted is None and not superseded:
        raise SessionNotFoundError(f"no session {session_id!r}")


# ---------------------------------------------------------------------------------------------
# Tool calls and model responses


_Driver = Literal["run", "session", "tool", "all"]


def _driver(run_id: int | None, session_id: str | None, tool_name: str | None) -> _Driver:
    """The filter whose index a tool-call query walks: the narrowest one given."""
    if run_id is not None:
        return "run"
    if session_id is not None:
        return "session"
    return "tool" if tool_name is not None else "all"


# Each family of statements, by the filter that drives it.
_TOOL_CALLS: Mapping[_Driver, All[ToolCallRow]] = {
    "run": S.TOOL_CALLS_BY_RUN,
    "session": S.TOOL_CALLS_BY_SESSION,
    "tool": S.TOOL_CALLS_BY_TOOL,
    "all": S.TOOL_CALLS_BY_ALL,
}
_SLOWEST_TOOL_CALLS: Mapping[_Driver, All[ToolCallRow]] = {
    "run": S.SLOWEST_TOOL_CALLS_BY_RUN,
    "session": S.SLOWEST_TOOL_CALLS_BY_SESSION,
    "tool": S.SLOWEST_TOOL_CALLS_BY_TOOL,
    "all": S.SLOWEST_TOOL_CALLS_BY_ALL,
}
_TOOL_STATS: Mapping[_Driver, All[R.ToolStatsRow]] = {
    "run": S.TOOL_STATS_BY_RUN,
    "session": S.TOOL_STATS_BY_SESSION,
    "tool": S.TOOL_STATS_BY_TOOL,
    "all": S.TOOL_STATS_BY_ALL,
}


def _session_of(run_id: int | None, session_id: str | None) -> Op[str | None]:
    """The session a query filtered by ``run_id`` reads: the given one, else the run's, so
    that the query reads one session's rows (one shard on Citus, by the (session_id, run_id)
    indexes) instead of looking the run up inside it. None for no such run: then
    ``session_id = NULL`` matches nothing."""
    if run_id is None or session_id is not None:
        return session_id
    found: str | None = yield S.SESSION_OF_RUN({"run_id": run_id})
    return found


def _call_params(
    session_id: str | None,
    run_id: int | None,
    tool_name: str | None,
    since: Any,
    until: Any,
) -> dict[str, Any]:
    return {
        "sid": session_id,
        "run_id": run_id,
        "tool_name": tool_name,
        "since": since,
        "until": until,
    }


def tool_calls(
    *,
    session_id: str | None,
    run_id: int | None,
    tool_name: str | None,
    status: str | None,
    since: Any,
    until: Any,
    limit: int,
    slowest: bool = False,
) -> Op[list[ToolCall]]:
    """The newest ``limit`` matching tool calls, oldest first (``slowest``: longest first).

    ``status="failed"`` matches every failed call: status failed or incomplete, or an error
    recorded (an MCP error, or an output that reports one); other statuses match exactly.
    ``slowest`` keeps only calls whose duration is known.
    """
    session_id = yield from _session_of(run_id, session_id)
    params = _call_params(session_id, run_id, tool_name, since, until)
    family = _SLOWEST_TOOL_CALLS if slowest else _TOOL_CALLS
    rows = yield family[_driver(run_id, session_id, tool_name)](
        {**params, "status": status, "limit": limit}
    )
    if not slowest:
        rows.reverse()
    return [tool_call_from_row(row) for row in rows]


def tool_stats(
    *,
    session_id: str | None,
    run_id: int | None,
    tool_name: str | None,
    since: Any,
    until: Any,
) -> Op[list[ToolStats]]:
    """Per tool: calls, failed calls, duration statistics (nearest-rank p50/p95); most used
    first."""
    session_id = yield from _session_of(run_id, session_id)
    params = _call_params(session_id, run_id, tool_name, since, until)
    rows = yield _TOOL_STATS[_driver(run_id, session_id, tool_name)](params)
    return [
        ToolStats(
            tool_name=row.tool_name,
            calls=int(row.calls),
            failed=int(row.failed),
            timed_calls=int(row.timed_calls),
            mean_ms=kept_ms(row.mean_ms),
            p50_ms=kept_ms(row.p50_ms),
            p95_ms=kept_ms(row.p95_ms),
            max_ms=kept_ms(row.max_ms),
        )
        for row in rows
    ]


def model_responses(
    *, session_id: str | None, run_id: int | None, limit: int
) -> Op[list[ModelResponse]]:
    """The newest ``limit`` recorded model calls, oldest first."""
    session_id = yield from _session_of(run_id, session_id)
    statement = (
        S.MODEL_RESPONSES_BY_RUN
        if run_id is not None
        else S.MODEL_RESPONSES_BY_SESSION
        if session_id
        else S.MODEL_RESPONSES_BY_ALL
    )
    rows = yield statement({"sid": session_id, "run_id": run_id, "limit": limit})
    rows.reverse()
    return [
        ModelResponse(
            id=row.id,
            session_id=row.session_id,
            run_id=row.run_id,
            agent_name=row.agent_name,
            model=row.model,
            response_id=row.response_id,
            request_id=row.request_id,
            usage=usage_from_row(row),
            started_at=stored_time(row.started_at, f"model call {row.id}'s started_at"),
            completed_at=stored_time(row.completed_at, f"model call {row.id}'s completed_at"),
            latency_ms=kept_ms(row.latency_ms),
        )
        for row in rows
    ]


# ---------------------------------------------------------------------------------------------
# Usage


def usage(
    group_by: UsageGroup,
    *,
    session_id: str | None,
    user_id: str | None,
    since: Any,
    until: Any,
    prices: Prices | None,
    annotation: str | None = None,
    branch: BranchRef | None = None,
    details: bool = False,
) -> Op[list[UsageRow]]:
    """Token usage summed per group, ordered by key (no key first; runs by id), with its cost
    at ``prices`` (none: ``cost`` None) computed from the tokens now, so a corrected table
    applies to history, and the annotations named ``annotation`` of the group's runs.

    Sessions, users, days and runs sum the runs' token columns (the SDK's cumulative run
    usage); models and agents sum the model calls that ``session.hooks`` recorded, and runs
    without such records count under the run's own ``model`` / ``agent_name`` (None without
    hooks). Days are UTC dates, ``YYYY-MM-DD``. Cost prices each recorded model call at its
    model on the day it completed, and a run without recorded calls at the run's model on
    the day it started; a group with tokens of an unpriced model has cost None and names the
    models in ``unpriced``. ``branch`` keeps the runs of that branch's path in the session;
    ``details`` sums each group's token details field by field (as its tokens).
    """
    run_ids = None
    if branch is not None and session_id is not None:
        run_ids = yield from turns.branch_run_ids(session_id, branch)
    params = {
        "sid": session_id,
        "user_id": user_id,
        "since": since,
        "until": until,
        "run_ids": run_ids,
    }
    rows = yield U.USAGE[group_by](params)
    costs: dict[str | None, tuple[float | None, tuple[str | None, ...]]] = {}
    if prices is not None:
        parts = yield U.USAGE_COST[group_by](params)
        costs = _priced(parts, prices)
    notes: dict[str | None, AnnotationStats] = {}
    if annotation is not None:
        found = yield U.USAGE_ANNOTATIONS[group_by]({**params, "name": annotation})
        notes = {note.key: note for note in map(stats_from_row, found)}
    summed: dict[str | None, tuple[dict[str, int], dict[str, int]]] = {}
    if details:
        fields: list[R.UsageDetailRow] = yield U.USAGE_DETAILS[group_by](params)
        for field in fields:
            sides = summed.setdefault(_key(field.key), ({}, {}))
            sides[field.side == "output"][field.name] = int(field.total)
    result = []
    for row in rows:
        key = _key(row.key)
        cost, unpriced = costs.get(key, (None, ()))
        usage = usage_from_row(row)
        if key in summed:
            inputs, outputs = summed[key]
            usage = dataclasses.replace(
                usage, input_tokens_details=inputs, output_tokens_details=outputs
            )
        result.append(
            UsageRow(
                key=key,
                runs=int(row.runs),
                usage=usage,
                cost=cost,
                unpriced=unpriced,
                annotation=None
                if annotation is None
                else notes.get(key, AnnotationStats(key, annotation, 0, 0, 0, None, None, None)),
            )
        )
    if group_by == "run":
        result.sort(key=lambda row: int(row.key or 0))
    else:
        result.sort(key=lambda row: (row.key is not None, row.key or ""))
    return result


def _key(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else str(value)


def _day(text: str) -> date | None:
    """A stored time's UTC day; None for a time another writer stored unreadably (its tokens'
    price is then unknown, as the viewer and CLI show such rows rather than fail)."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _priced(
    parts: list[R.UsageCostRow], prices: Prices
) -> dict[str | None, tuple[float | None, tuple[str | None, ...]]]:
    """Each group's cost (None if any of its tokens are unpriced) and its unpriced models."""
    totals: dict[str | None, float] = {}
    unpriced: dict[str | None, set[str | None]] = {}
    # Many parts (a run each, grouped by run) share a few models and days: each looked up once.
    found: dict[tuple[str | None, str], Price | None] = {}
    for part in parts:
        key = _key(part.key)
        where = (part.model, str(part.day))
        if where not in found:
            found[where] = prices.price(part.model, day) if (day := _day(where[1])) else None
        cost = cost_at(usage_from_row(part), found[where])
        totals.setdefault(key, 0.0)
        if cost is None:
            unpriced.setdefault(key, set()).add(part.model)
        else:
            totals[key] += cost
    return {
        key: (
            None if key in unpriced else total,
            tuple(sorted(unpriced.get(key, ()), key=lambda m: (m is not None, m or ""))),
        )
        for key, total in totals.items()
    }


# ---------------------------------------------------------------------------------------------
# Export


@dataclass(frozen=True, slots=True)
class ExportData:
    """What an export holds: the session, its runs (path or tree) with items and tool calls,
    and every row of those runs as ``turnstore copy`` reads them (``rows``: item times, tool
    calls with their items' places, model calls, spans, branch names)."""

    session: SessionInfo
    runs: list[tuple[Run, list[Any]]]
    tool_calls: dict[int, list[ToolCall]]
    all_branches: bool
    rows: Chunk


def export_data(session_id: str, all_branches: bool) -> Op[ExportData]:
    """Everything an export of ``session_id`` needs, read in one transaction: the rows of its
    runs as the copy reads them (``core.transfer.read_chunk``, one definition) with their
    annotations, of which the runs, items and tool calls are also made records."""
    info = yield from session_info(session_id)
    if info is None:
        raise SessionNotFoundError(f"no session {session_id!r}")
    statement = S.SESSION_RUNS if all_branches else S.PATH_RUNS
    run_rows: list[RunRow] = yield statement({"sid": session_id})
    rows = Chunk(run_rows, [], [], [], [], [])
    if run_rows:  # in id order (a path's runs too: a run is written after its parent)
        rows = yield from read_chunk(session_id, run_rows)
        notes = yield from session_annotations(session_id)
        rows = dataclasses.replace(rows, annotations=notes)
    if not all_branches:  # the path's range of ids holds other branches' runs too
        rows = rows.only(run_rows)
    runs = with_items([run_from_row(row) for row in run_rows], rows.items, session_id)
    calls: dict[int, list[ToolCall]] = {}
    for call_row in rows.tool_calls:
        call = tool_call_from_row(ToolCallRow._make(call_row[: len(ToolCallRow._fields)]))
        calls.setdefault(call.run_id, []).append(call)
    return ExportData(info, runs, calls, all_branches, rows)

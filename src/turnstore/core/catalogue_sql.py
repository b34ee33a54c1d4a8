"""The statements of the session catalogue's listing (``queries.list_sessions``): a page by
each order, of every session or of one user's, and the count of what the filters keep; and
the writes that keep each session's totals, which the orders by a number read.

Each dialect writes the listing's SQL (``sqlite/sql.py``, ``postgres/sql.py``): the filters
differ in their JSON and their casts. The totals' writes are written once
(``core/shared_sql.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .ops import All, Capability, Execute, One, Statement, Value
from .results import HeadRow, SessionListRow

__all__ = [
    "COUNT_ROWS",
    "COUNT_SESSIONS",
    "COUNT_SESSIONS_USER",
    "ENSURE_SESSION_COUNTED",
    "KNOWN_TOTALS",
    "RECOUNT_ROWS",
    "SESSION_ORDERS",
    "SESSION_PAGES",
    "SESSION_TOTALS",
    "SET_HEAD_COUNTED",
    "STATEMENTS",
    "TOTALS",
    "UPSERT_HEAD_COUNTED",
]

StatementT = TypeVar("StatementT", bound=Statement)

# The session catalogue, by (order, filtered by user): newest first by a time, or largest
# first by a number each session's runs or tool calls add up to (queries.SessionOrder).
SESSIONS_BY_CREATED_AT = All("sessions_by_created_at", row=SessionListRow)
SESSIONS_BY_CREATED_AT_USER = All("sessions_by_created_at_user", row=SessionListRow)
SESSIONS_BY_UPDATED_AT = All("sessions_by_updated_at", row=SessionListRow)
SESSIONS_BY_UPDATED_AT_USER = All("sessions_by_updated_at_user", row=SessionListRow)
SESSIONS_BY_RUNS = All("sessions_by_runs", row=SessionListRow)
SESSIONS_BY_RUNS_USER = All("sessions_by_runs_user", row=SessionListRow)
SESSIONS_BY_TOKENS = All("sessions_by_tokens", row=SessionListRow)
SESSIONS_BY_TOKENS_USER = All("sessions_by_tokens_user", row=SessionListRow)
SESSIONS_BY_TOOL_CALLS = All("sessions_by_tool_calls", row=SessionListRow)
SESSIONS_BY_TOOL_CALLS_USER = All("sessions_by_tool_calls_user", row=SessionListRow)
SESSIONS_BY_FAILURES = All("sessions_by_failures", row=SessionListRow)
SESSIONS_BY_FAILURES_USER = All("sessions_by_failures_user", row=SessionListRow)
SESSION_ORDERS = ("created_at", "updated_at", "runs", "tokens", "tool_calls", "failures")
SESSION_PAGES: dict[tuple[str, bool], All[SessionListRow]] = {
    (order, user): globals()[f"SESSIONS_BY_{order.upper()}{'_USER' if user else ''}"]
    for order in SESSION_ORDERS
    for user in (False, True)
}
# The orders by a session's total: its column (failure_count: its failed runs and failed tool
# calls), each indexed with session_id on both dialects (migration 18 / 17).
SESSION_TOTALS = {
    "runs": "run_count",
    "tokens": "total_tokens",
    "tool_calls": "tool_call_count",
    "failures": "failure_count",
}
# How many sessions the catalogue's filters keep (the same filters, by user or not).
COUNT_SESSIONS = Value("count_sessions", column="n", holds=int)
COUNT_SESSIONS_USER = Value("count_sessions_user", column="n", holds=int)

# Each session's totals (sessions.run_count, total_tokens, tool_call_count, failed_run_count,
# failed_call_count and failure_count, their sum: migration 18 / 17), kept by the write that
# changes them, in its transaction (core/lock.py, Tally): what it added (:runs, :tool_calls,
# :tokens) counted in, its failures recounted through their partial indexes (a status can
# come and go). Moving the head counts them in the same statement; a write that deleted rows
# recounts everything.
#
# A statement counting them assigns only the totals the write changed, grouped as TOTALS
# names them (a family of statements, one per set of groups): SQLite rewrites the index
# entry of every column an UPDATE assigns, changed or not, so assigning all of them cost
# each write a page of each order's index (sessions_runs, _tokens, _tool_calls, _failures).
TOTALS = ("runs", "tool_calls", "tokens", "failures")
# What an append counts before it reads the head (its tool calls and tokens: core/lock.py).
KNOWN_TOTALS = ("tool_calls", "tokens")


def _family(
    prefix: str, groups: tuple[str, ...], make: Callable[[str], StatementT]
) -> dict[tuple[str, ...], StatementT]:
    """One statement per non-empty subset of ``groups`` (in ``groups``' order), named
    ``prefix`` and the subset's groups."""
    subsets = [
        tuple(g for i, g in enumerate(groups) if mask >> i & 1)
        for mask in range(1, 1 << len(groups))
    ]
    return {subset: make(f"{prefix}_{'_'.join(subset)}") for subset in subsets}


COUNT_ROWS = _family("count_rows", TOTALS, Execute)
# ENSURE_SESSION / UPSERT_HEAD (core/lock.py) counting what an append is known to add before
# it reads the head (its tool calls and tokens, from its items and usage alone).
ENSURE_SESSION_COUNTED = _family("ensure_session_counted", KNOWN_TOTALS, Execute)
UPSERT_HEAD_COUNTED = _family(
    "upsert_head_counted",
    KNOWN_TOTALS,
    lambda name: One(name, needs=Capability.UPSERT_HEAD, row=HeadRow),
)
SET_HEAD_COUNTED = _family("set_head_counted", TOTALS, Execute)
RECOUNT_ROWS = Execute("recount_rows")

STATEMENTS: tuple[Statement, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Statement)
) + tuple(
    statement
    for family in (COUNT_ROWS, ENSURE_SESSION_COUNTED, UPSERT_HEAD_COUNTED, SET_HEAD_COUNTED)
    for statement in family.values()
)
"""The catalogue's statements, in declaration order."""

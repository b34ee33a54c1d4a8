"""The statements of the session catalogue's listing (``queries.list_sessions``): a page by
each order, of every session or of one user's, and the count of what the filters keep.

Each dialect writes their SQL (``sqlite/sql.py``, ``postgres/sql.py``): the filters differ in
their JSON and their casts, the numbers each order adds up in their aggregates.
"""

from __future__ import annotations

from .ops import All, Statement, Value
from .results import SessionListRow

__all__ = ["COUNT_SESSIONS", "COUNT_SESSIONS_USER", "SESSION_ORDERS", "SESSION_PAGES", "STATEMENTS"]

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
# How many sessions the catalogue's filters keep (the same filters, by user or not).
COUNT_SESSIONS = Value("count_sessions", column="n", holds=int)
COUNT_SESSIONS_USER = Value("count_sessions_user", column="n", holds=int)

STATEMENTS: tuple[Statement, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Statement)
)
"""The catalogue's statements, in declaration order."""

"""What the catalogue pages show: sessions and search, tool statistics, usage over time.

Each function reads the store for one page and returns the template's values; its query
parameters come checked by the viewer's edge (``params.Params``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple

from starlette.exceptions import HTTPException

from .. import Store
from ..domain.model import FIRST_PAGE, SearchResult, SessionInfo, SessionSummary, Usage
from .format import bar_chart, fill_days
from .params import Params

__all__ = ["Hit", "sessions_page", "tools_page", "usage_page"]

LIST_LIMIT = 20  # rows in the tools page's lists

# How the sessions page sorts: newest created or updated first across the catalogue (paged),
# or a page's sessions by one of their numbers.
PAGE_SORTS: dict[str, Callable[[SessionSummary], int]] = {
    "runs": lambda summary: summary.runs,
    "branches": lambda summary: summary.branches,
    "tokens": lambda summary: summary.total_tokens,
    "failed": lambda summary: summary.failed_runs + summary.failed_tool_calls,
}
SORTS = ("created", "updated", *PAGE_SORTS)


class Listed(NamedTuple):
    """One line of the sessions page: the session and its numbers."""

    info: SessionInfo
    summary: SessionSummary


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result with its snippet cut into (text, is_match) pieces, and its session.

    The template escapes each piece and wraps matches in <mark>: stored text never becomes
    markup."""

    result: SearchResult
    pieces: list[tuple[str, bool]]
    session: SessionInfo | None


async def sessions_page(store: Store, params: Params, page_size: int) -> dict[str, Any]:
    """Newest sessions first, a page at a time, or the items matching a search."""
    query, user, after = params.text("q"), params.key("user"), params.text("after")
    values: dict[str, Any] = {"q": query or "", "user": user or "", "hits": None, "page": None}
    if query is not None:
        results = await store.search(query, limit=page_size)
        sessions: dict[str, SessionInfo | None] = {}
        for result in results:
            if result.session_id not in sessions:
                sessions[result.session_id] = await store.session(result.session_id)
        values["hits"] = [
            Hit(result, result.pieces(), sessions[result.session_id])
            for result in results
            if user is None or ((info := sessions[result.session_id]) and info.user_id == user)
        ]
        return values
    sort = params.text("sort") or "created"
    if sort not in SORTS:
        raise HTTPException(400, f"sort is one of {', '.join(SORTS)}")
    page = await store.sessions(
        user_id=user,
        limit=page_size,
        after=FIRST_PAGE if after is None else after,
        order_by="updated_at" if sort == "updated" else "created_at",
    )
    summaries = await store.session_summaries([info.session_id for info in page])
    rows = [Listed(info, summaries[info.session_id]) for info in page]
    if sort in PAGE_SORTS:  # the page's sessions by a number, largest first
        rows.sort(key=lambda row: PAGE_SORTS[sort](row.summary), reverse=True)
    values.update(page=page, rows=rows, sort=sort, first_page=after is None)
    return values


def _range(params: Params) -> tuple[datetime | None, datetime | None]:
    """The page's date range (``since`` and ``until``, both days included), as the store's
    ``since``/``until`` filters take it."""
    return params.day("since"), params.day("until", end=True)


async def tools_page(store: Store, params: Params) -> dict[str, Any]:
    """Per-tool statistics, the slowest calls and the latest failing ones, in a date range."""
    session_id, tool = params.key("session"), params.text("tool")
    since, until = _range(params)
    stats = await store.tool_stats(session_id=session_id, tool_name=tool, since=since, until=until)
    failing = await store.tool_calls(
        session_id=session_id,
        tool_name=tool,
        status="failed",
        limit=LIST_LIMIT,
        since=since,
        until=until,
    )
    slowest = await store.slowest_tool_calls(
        session_id=session_id, tool_name=tool, limit=LIST_LIMIT, since=since, until=until
    )
    return {
        "session_id": session_id or "",
        "tool": tool or "",
        "since": params.text("since") or "",
        "until": params.text("until") or "",
        "stats": stats,
        "failing": list(reversed(failing)),  # newest first
        "slowest": slowest,
    }


def _total(usages: list[Usage]) -> Usage:
    return Usage(*(sum(getattr(u, name) for u in usages) for name in Usage.__slots__))


async def usage_page(store: Store, params: Params) -> dict[str, Any]:
    """Tokens per UTC day as a chart, with totals and a breakdown by model, in a date range."""
    user = params.key("user")
    since, until = _range(params)
    days = await store.usage("day", user_id=user, since=since, until=until)
    by_model = await store.usage("model", user_id=user, since=since, until=until)
    points = fill_days(
        [
            (date.fromisoformat(row.key), row.usage.input_tokens, row.usage.output_tokens)
            for row in days
            if row.key is not None
        ]
    )
    chart = bar_chart([(day.isoformat(), lower, upper) for day, lower, upper in points])
    return {
        "user": user or "",
        "since": params.text("since") or "",
        "until": params.text("until") or "",
        "days": list(reversed(days)),  # newest first in the table
        "by_model": by_model,
        "chart": chart if points else None,
        "total": _total([row.usage for row in days]),
        "runs": sum(row.runs for row in days),
    }

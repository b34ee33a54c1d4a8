"""What the catalogue pages show: sessions and search, tool statistics, usage over time.

Each function reads the store for one page and returns the template's values; its query
parameters come checked by the viewer's edge (``params.Params``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple

from starlette.exceptions import HTTPException

from .. import SessionOrder, Store
from ..domain.model import (
    FIRST_PAGE,
    RUN_STATUSES,
    SearchResult,
    SessionInfo,
    SessionSummary,
    Usage,
)
from ..domain.pairs import metadata_pairs
from ..domain.prices import Prices
from ..domain.tokens import usage_sum
from .format import bar_chart, fill_days
from .params import Params

__all__ = ["SEARCH_FILTERS", "Hit", "sessions_page", "tools_page", "usage_page"]

LIST_LIMIT = 20  # rows in the tools page's lists

# How the sessions page sorts (its ``sort`` parameter): newest created or updated first, or
# largest first by what each session's runs and tool calls add up to; across the whole
# catalogue (Store.sessions), never one page.
SORTS: dict[str, SessionOrder] = {
    "created": "created_at",
    "updated": "updated_at",
    "runs": "runs",
    "tokens": "tokens",
    "tools": "tool_calls",
    "failed": "failures",
}
# The sessions list's filters, as the page's query names them.
FILTERS = (
    "user",
    "title",
    "agent",
    "model",
    "status",
    "failed",
    "meta",
    "since",
    "until",
    "feedback",
    "annotated",
)

# The sessions page's feedback filter (``feedback=``): the thumbs (1 up, 0 down) of any run.
FEEDBACK: dict[str, dict[str, Any]] = {
    "negative": {"annotation": "thumbs", "annotation_max": 0},
    "positive": {"annotation": "thumbs", "annotation_min": 1},
}


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


# The search's filters, as the page's query parameters name them (the form's fields).
SEARCH_FILTERS = ("session", "agent", "model", "since", "until")


async def _search(
    store: Store, params: Params, query: str, user: str | None, page_size: int
) -> dict[str, Any]:
    """A page of the items matching a search (``page`` 1 is the first), with the count of
    every match and the filters, as the form and the page links carry them."""
    page = params.integer("page") or 1
    filters: dict[str, Any] = {
        "session_id": params.key("session"),
        "user_id": user,
        "agent": params.text("agent"),
        "model": params.text("model"),
        "since": params.day("since"),
        "until": params.day("until", end=True),
    }
    # One result more than a page says whether there is a next one.
    results = await store.search(
        query, **filters, limit=page_size + 1, offset=(page - 1) * page_size
    )
    count = await store.search_count(query, **filters)
    sessions: dict[str, SessionInfo | None] = {}
    for result in results[:page_size]:
        if result.session_id not in sessions:
            sessions[result.session_id] = await store.session(result.session_id)
    shown = {name: params.text(name) or "" for name in SEARCH_FILTERS}
    return {
        "hits": [
            Hit(result, result.pieces(), sessions[result.session_id])
            for result in results[:page_size]
        ],
        "count": count,
        "search_page": page,
        "first_hit": (page - 1) * page_size + 1,
        "next_page": page + 1 if len(results) > page_size else None,
        "filters": shown,
        "filtered": any(shown.values()),
    }


async def sessions_page(store: Store, params: Params, page_size: int) -> dict[str, Any]:
    """The sessions the filters keep, sorted across the catalogue, a page at a time with
    their total; or the items matching a search."""
    query, user = params.text("q"), params.key("user")
    values: dict[str, Any] = {"q": query or "", "user": user or "", "hits": None, "page": None}
    if query is not None:
        values.update(await _search(store, params, query, user, page_size))
        return values
    sort = params.text("sort") or "created"
    if sort not in SORTS:
        raise HTTPException(400, f"sort is one of {', '.join(SORTS)}")
    filters = _session_filters(params)
    after, start = params.text("after"), params.integer("start") or 0
    page = await store.sessions(
        **filters,
        order_by=SORTS[sort],
        limit=page_size,
        after=FIRST_PAGE if after is None else after,
    )
    summaries = await store.session_summaries([info.session_id for info in page])
    kept = {name: params.text(name) or "" for name in FILTERS}
    values.update(
        page=page,
        rows=[Listed(info, summaries[info.session_id]) for info in page],
        sort=sort,
        filters=kept,
        filtered=any(value for name, value in kept.items() if name != "user"),
        total=await store.count_sessions(**filters),
        start=start,
        first_page=after is None,
        statuses=RUN_STATUSES,
    )
    return values


def _session_filters(params: Params) -> dict[str, Any]:
    """The list's filters as ``Store.sessions`` takes them. A session is in the time range
    when it was active in it: written since ``since``, created before ``until``."""
    meta = params.text("meta")
    return {
        "user_id": params.key("user"),
        "title": params.text("title"),
        "agent_name": params.text("agent"),
        "model": params.text("model"),
        "run_status": params.text("status"),
        "failed_tool_calls": params.text("failed") is not None,
        "metadata": metadata_pairs([meta] if meta else [], "meta"),
        "updated_after": params.day("since"),
        "created_before": params.day("until", end=True),
        **_feedback_filter(params.text("feedback"), params.text("annotated")),
    }


def _feedback_filter(feedback: str | None, annotated: str | None) -> dict[str, Any]:
    """``Store.sessions``' annotation filters for the page's ``feedback`` (negative: any
    thumbs-down, positive: any thumbs-up) or ``annotated`` (a run annotated with that name)."""
    if feedback is not None and annotated is not None:
        raise HTTPException(400, "filter by feedback or by an annotation's name, not both")
    if annotated is not None:
        return {"annotation": annotated}
    if feedback is None:
        return {}
    if feedback not in FEEDBACK:
        raise HTTPException(400, f"feedback is one of {', '.join(FEEDBACK)}")
    return FEEDBACK[feedback]


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
    return usage_sum(usages)


async def usage_page(store: Store, params: Params, prices: Prices) -> dict[str, Any]:
    """Tokens per UTC day as a chart, with totals, costs and a breakdown by model, in a date
    range."""
    user = params.key("user")
    since, until = _range(params)
    days = await store.usage("day", user_id=user, since=since, until=until, prices=prices)
    by_model = await store.usage("model", user_id=user, since=since, until=until, prices=prices)
    costs = [row.cost for row in days]
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
        "cost": None if None in costs else sum(cost or 0.0 for cost in costs),
        "unpriced": sorted(
            {name for row in days for name in row.unpriced},
            key=lambda name: (name is not None, name or ""),
        ),
    }

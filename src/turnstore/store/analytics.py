"""Analytics across sessions: tool calls and their statistics, usage, model calls, search,
export."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..core import queries, search
from ..core.annotation_checks import annotation_name
from ..core.ops import Fetch, Op, Query
from ..core.queries import UsageGroup
from ..core.search import SearchOrder
from ..domain import validate
from ..domain.model import ModelResponse, SearchCount, SearchResult, ToolCall, ToolStats, UsageRow
from ..domain.prices import Prices
from ..domain.turns import BranchRef, branch_ref
from ..errors import InvalidOperationError
from ..formats import export
from ..formats.export import ExportFormat
from .base import NO_LIMIT, StoreBase, limit_arg

# How deep a search pages: a page past it would rank that many matches first.
MAX_SEARCH_OFFSET = 10_000

__all__ = ["AnalyticsMixin"]


class AnalyticsMixin(StoreBase):
    """Queries over every session: tool calls, usage, model responses, search, export."""

    async def tool_calls(
        self,
        *,
        session_id: str | None = None,
        run_id: int | None = None,
        tool_name: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = 100,
    ) -> list[ToolCall]:
        """The newest ``limit`` tool calls that match every filter given, oldest first.

        ``status="failed"`` matches every failed call: status ``failed`` or ``incomplete``,
        an MCP call's error, or an output that reports an error (the SDK's messages for a
        tool that raised or timed out, see ``turnstore.domain.toolcalls.reports_error``). Other
        statuses (``completed``, ``pending`` for a call with no output yet, …) match exactly.
        ``since`` is inclusive, ``until`` exclusive; ``limit=None`` returns every match.
        """
        filters = self._call_filters(session_id, run_id, tool_name, since, until)
        status = validate.optional_text(status, "status")
        size = limit_arg(limit) if limit is not None else NO_LIMIT
        return await self.backend.run(
            lambda: queries.tool_calls(**filters, status=status, limit=size), write=False
        )

    async def slowest_tool_calls(
        self,
        *,
        session_id: str | None = None,
        run_id: int | None = None,
        tool_name: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 10,
    ) -> list[ToolCall]:
        """The ``limit`` longest-running tool calls whose duration is known, longest first.

        Filters as in ``tool_calls``.
        """
        filters = self._call_filters(session_id, run_id, tool_name, since, until)
        status = validate.optional_text(status, "status")
        size = limit_arg(limit)
        return await self.backend.run(
            lambda: queries.tool_calls(**filters, status=status, limit=size, slowest=True),
            write=False,
        )

    async def tool_stats(
        self,
        *,
        session_id: str | None = None,
        run_id: int | None = None,
        tool_name: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[ToolStats]:
        """Per-tool calls, errors, error rate and p50/p95 duration; the most used tool first.

        Errors count as in ``tool_calls(status="failed")``. Durations are known for calls
        run under ``session.hooks``; the statistics ignore the others.
        """
        filters = self._call_filters(session_id, run_id, tool_name, since, until)
        return await self.backend.run(lambda: queries.tool_stats(**filters), write=False)

    def _call_filters(
        self,
        session_id: str | None,
        run_id: int | None,
        tool_name: str | None,
        since: datetime | None,
        until: datetime | None,
    ) -> dict[str, Any]:
        return {
            "session_id": validate.optional_key(session_id, "session_id"),
            "run_id": validate.filter_id(run_id, "run_id"),
            "tool_name": validate.optional_text(tool_name, "tool_name"),
            "since": self._bind_time(validate.optional_time(since, "since")),
            "until": self._bind_time(validate.optional_time(until, "until")),
        }

    async def model_responses(
        self, *, session_id: str | None = None, run_id: int | None = None, limit: int = 100
    ) -> list[ModelResponse]:
        """The newest ``limit`` model calls recorded by ``session.hooks``, oldest first."""
        session_id = validate.optional_key(session_id, "session_id")
        run_id = validate.filter_id(run_id, "run_id")
        size = limit_arg(limit)
        return await self.backend.run(
            lambda: queries.model_responses(session_id=session_id, run_id=run_id, limit=size),
            write=False,
        )

    async def usage(
        self,
        group_by: UsageGroup = "session",
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        prices: Prices | None = None,
        cost: bool = True,
        annotation: str | None = None,
        branch: str | int | None = None,
        details: bool = False,
    ) -> list[UsageRow]:
        """Requests, tokens and cost summed per session, user, model, agent, UTC day or run.

        Filters select runs (``since`` inclusive, ``until`` exclusive, on the run's start).
        By model or agent, each model call's tokens count under its own model or agent (a run
        without recorded calls: its totals under its own), and each run counts once in
        ``runs``, under the model or agent of its last model call (the agent that answered):
        a run with a handoff gives tokens to both agents but one run, so ``runs`` sums to the
        number of runs in every grouping. Without ``session.hooks`` runs carry no model or
        agent, and count under ``None``.

        Cost (USD, ``UsageRow.cost``) is computed now from the stored tokens at ``prices``
        (None: ``Prices.default()``, turnstore's shipped table), so a corrected table applies
        to history: each model call at its model's price on the day it completed, a run
        without recorded calls at its own model's on the day it started. A group with tokens
        of an unpriced model has cost None (unknown, never zero). ``cost=False`` skips the
        pricing query (cost None everywhere).

        ``annotation`` (a name: ``"thumbs"``) sets each row's ``annotation`` to the statistics
        of the annotations of that name on the group's runs (on the run or one of its tool
        calls): how many, on how many runs, their values' mean (for thumbs, 1 up and 0 down,
        the approval rate), minimum and maximum. Each run's annotations count under the run's
        group (by day: the day the run began; by model or agent: the run's own, as ``runs``).
        A name ``annotate`` would refuse (``""``) is refused here alike.

        ``branch`` (a name, or a run id: with ``session_id``) keeps the runs of that branch's
        path from the root, as it is when the query runs (the head stays where it is); the
        session's ``get_session_usage(branch=)`` counts a branch's own runs instead.

        ``details=True`` also sums the token details (``Usage.input_tokens_details``,
        ``output_tokens_details``: every field the SDK reported) field by field, grouped as the
        tokens are; a query more, which reads each run's details.
        """
        group_by = validate.choice(group_by, "group_by", queries.GROUPS)
        session_id = validate.optional_key(session_id, "session_id")
        where = _branch_of(session_id, branch)
        summed = validate.flag(details, "details")
        user_id = validate.optional_text(user_id, "user_id")
        start = self._bind_time(validate.optional_time(since, "since"))
        end = self._bind_time(validate.optional_time(until, "until"))
        name = None if annotation is None else annotation_name(annotation)
        table = None
        if validate.flag(cost, "cost"):
            table = (
                Prices.default() if prices is None else validate.instance(prices, "prices", Prices)
            )
        return await self.backend.run(
            lambda: queries.usage(
                group_by,
                session_id=session_id,
                user_id=user_id,
                since=start,
                until=end,
                prices=table,
                annotation=name,
                branch=where,
                details=summed,
            ),
            write=False,
        )

    def _search_filter(
        self,
        session_id: Any,
        user_id: Any,
        agent: Any,
        model: Any,
        since: Any,
        until: Any,
        roles: Any,
        types: Any,
        branch: Any,
    ) -> search.SearchFilter:
        filters = self._run_filters(session_id, user_id, agent, model, since, until)
        return search.SearchFilter(
            **filters,
            roles=validate.text_list(roles, "roles"),
            types=validate.text_list(types, "types"),
            branch=_branch_of(filters["session_id"], branch),
        )

    def _run_filters(
        self, session_id: Any, user_id: Any, agent: Any, model: Any, since: Any, until: Any
    ) -> dict[str, Any]:
        """The filters on runs that search and datasets share, checked (times bound)."""
        return {
            "session_id": validate.optional_key(session_id, "session_id"),
            "user_id": validate.optional_text(user_id, "user_id"),
            "agent": validate.optional_text(agent, "agent"),
            "model": validate.optional_text(model, "model"),
            "since": self._bind_time(validate.optional_time(since, "since")),
            "until": self._bind_time(validate.optional_time(until, "until")),
        }

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        roles: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
        order: SearchOrder = "relevance",
        branch: str | int | None = None,
    ) -> list[SearchResult]:
        """Full-text search over user and assistant text, tool arguments, tool outputs and
        tool calls' errors.

        The query is web-search style: words (all must occur), ``"an exact phrase"``,
        ``this OR that``, ``-excluded``, ``prefix*``; anything else is plain text, so no
        input is a syntax error. The matches are ranked in blocks of the newest
        ``WINDOW`` (200), newest block first: within a block, items holding the query's
        words as one exact phrase come first, then the rest by relevance (docs/queries.md
        says how it differs from ranking every match), so a search costs what its page
        does however many items match. ``roles`` (``"user"``, ``"assistant"``) and
        ``types`` (``"message"``, ``"function_call"``, ``"function_call_output"``, …) filter
        the items; every branch of every session is searched unless ``session_id`` (or
        ``user_id``: that user's sessions) is given; ``agent`` and ``model`` keep the items
        of runs by that agent or model, ``since`` (inclusive) and ``until`` (exclusive) those
        written in that time. A match in a tool call's error is its output item, with
        ``tool_error`` set. ``offset`` skips that many results (a later page; at most
        ``MAX_SEARCH_OFFSET``). ``branch`` (a name, or a run id: with ``session_id``) keeps
        the items of that branch's path (``find_turns_by_content(term, branch=)``).
        ``order="recent"`` orders each block newest first instead of by relevance.
        """
        order = validate.choice(order, "order", search.SEARCH_ORDERS)
        query = validate.text(query, "a search query")
        where = self._search_filter(
            session_id, user_id, agent, model, since, until, roles, types, branch
        )
        size = limit_arg(limit)
        skip = validate.count(offset, "offset")
        if skip > MAX_SEARCH_OFFSET:
            raise InvalidOperationError(
                f"offset must be at most {MAX_SEARCH_OFFSET:,} (a search pages that deep), "
                f"got {skip}"
            )
        return await self.backend.run(
            lambda: search.search(
                query,
                where=where,
                limit=min(size, NO_LIMIT - skip),
                offset=skip,
                order=order,
                feed=not self.backend.read_only,
            ),
            write=False,
        )

    async def search_count(
        self,
        query: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        roles: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        branch: str | int | None = None,
    ) -> SearchCount:
        """How many items ``search`` finds for ``query`` with these filters: exact up to a
        bound (1,000), beyond it ``SearchCount(1000, exact=False)`` ("more than 1,000"), so
        that counting costs what a page of results does."""
        query = validate.text(query, "a search query")
        where = self._search_filter(
            session_id, user_id, agent, model, since, until, roles, types, branch
        )
        return await self.backend.run(
            lambda: search.search_count(query, where=where, feed=not self.backend.read_only),
            write=False,
        )

    async def export(
        self, session_id: str, format: ExportFormat = "jsonl", *, all_branches: bool = False
    ) -> str:
        """The session as ``"jsonl"`` (one item a line), ``"json"`` (the tree), ``"markdown"``,
        ``"atif"`` (an ATIF trajectory) or ``"ui-messages"`` (Vercel AI SDK ``UIMessage``s).

        The active path by default; ``all_branches=True`` exports every run of the tree (not
        with ``atif`` or ``ui-messages``, which hold one course). See
        ``turnstore.formats.export`` for the formats; ``runs_from_jsonl`` reads JSONL back for
        ``add_runs``. Raises ``SessionNotFoundError`` for an unknown session.
        """
        sid = validate.key(session_id, "session_id")
        fmt = validate.choice(format, "format", export.FORMATS)
        every = validate.flag(all_branches, "all_branches")
        if every and fmt in export.LINEAR:
            raise InvalidOperationError(
                f"{fmt} holds one course of a conversation: export the active path "
                "(all_branches=False)"
            )
        data = await self.backend.run(lambda: queries.export_data(sid, every), write=False)
        # On a thread of its own: a long session's rendering does not hold up the event loop,
        # and the deepest item JSON can hold (see export._dumps) has the whole stack to render.
        return await asyncio.to_thread(export.render, data, fmt)

    async def read_sql(self, statement: str) -> tuple[list[str], list[Sequence[Any]]]:
        """Run one SQL statement over the tables (docs/queries.md) and return its column
        names and rows, as the driver returns them.

        Only on a store opened with ``read_only=True`` (``InvalidOperationError`` otherwise),
        so that nothing the statement says can write: a writing statement raises
        ``ReadOnlyError`` from the database itself (SQLite's ``mode=ro``, PostgreSQL's
        ``READ ONLY`` transaction, rolled back at its end).
        """
        if not self.read_only:
            raise InvalidOperationError(
                "read_sql runs on a store opened with read_only=True: "
                "Store.open(target, read_only=True)"
            )
        if not isinstance(statement, str):
            raise InvalidOperationError(
                f"statement must be a string, got {validate.shown(statement)}"
            )
        return await self.backend.run(lambda: _statement_rows(statement), write=False)


def _statement_rows(statement: str) -> Op[tuple[list[str], list[Sequence[Any]]]]:
    result: tuple[list[str], list[Sequence[Any]]] = yield Query(
        statement, fetch=Fetch.TABLE, raw=True
    )
    return result


def _branch_of(session_id: str | None, branch: Any) -> BranchRef | None:
    """A ``branch=`` filter, checked: a branch belongs to one session, so it needs one."""
    if branch is None:
        return None
    if session_id is None:
        raise InvalidOperationError("branch= filters one session's runs: give session_id too")
    return branch_ref(branch)

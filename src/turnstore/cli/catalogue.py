"""The catalogue of sessions: ``sessions``, a page at a time, filtered and sorted across the
whole store (``Store.sessions``, the viewer's sessions list too)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from typing import Annotated, Any

import typer
from rich.text import Text

from .. import SessionOrder
from ..domain import jsonout
from ..domain.model import FIRST_PAGE, RUN_STATUSES, SessionPage, SessionSummary
from ..domain.pairs import metadata_pairs
from .app import command
from .database import open_store, run_command
from .options import (
    CsvOption,
    DbOption,
    JsonOption,
    NdjsonOption,
    SchemaOption,
    TsvOption,
    agent_option,
    limit_option,
    model_option,
    output_format,
    parse_time,
    resolve_target,
    user_option,
    when_option,
)
from .output import (
    Format,
    make_console,
    make_table,
    one_line,
    print_json,
    print_records,
    printable,
    timestamp,
)

__all__ = ["failed_text", "sessions"]


def failed_text(summary: SessionSummary) -> str:
    """A session's failures in a cell: ``2 runs · 1 call``; empty when none failed."""
    parts = [
        f"{count:,} {noun}{'s' * (count != 1)}"
        for count, noun in ((summary.failed_runs, "run"), (summary.failed_tool_calls, "call"))
        if count
    ]
    return " · ".join(parts)


class SessionSortOption(str, Enum):
    """How ``sessions`` orders its listing: newest first, or largest first."""

    created = "created"
    updated = "updated"
    runs = "runs"
    tokens = "tokens"
    tool_calls = "tool-calls"
    failures = "failures"


# The store's order_by of each --sort.
_ORDER_BY: dict[SessionSortOption, SessionOrder] = {
    SessionSortOption.created: "created_at",
    SessionSortOption.updated: "updated_at",
    SessionSortOption.runs: "runs",
    SessionSortOption.tokens: "tokens",
    SessionSortOption.tool_calls: "tool_calls",
    SessionSortOption.failures: "failures",
}
RunStatusOption = Enum("RunStatusOption", {name: name for name in RUN_STATUSES}, type=str)  # type: ignore[misc]


def _session_filters(
    *,
    user: str | None,
    meta: Sequence[str],
    title: str | None,
    agent: str | None,
    model: str | None,
    status: str | None,
    failed_tools: bool,
    since: datetime | None,
    until: datetime | None,
) -> dict[str, Any]:
    """The ``Store.sessions`` filters of the command's options. A session is in the range
    from ``since`` to ``until`` when it was active in it: written since, created before."""
    return {
        "user_id": user,
        "metadata": metadata_pairs(meta, "--meta"),
        "title": title,
        "agent_name": agent,
        "model": model,
        "run_status": status,
        "failed_tool_calls": failed_tools,
        "updated_after": since,
        "created_before": until,
    }


@command(40)
def sessions(
    ctx: typer.Context,
    user: Annotated[str | None, user_option("Only this user's sessions.")] = None,
    meta: Annotated[
        list[str] | None,
        typer.Option(
            help="Only sessions whose metadata has KEY equal to VALUE (repeatable).",
            metavar="KEY=VALUE",
            show_default=False,
        ),
    ] = None,
    title: Annotated[
        str | None,
        typer.Option(
            help="Only sessions whose title holds TEXT (any case).",
            metavar="TEXT",
            show_default=False,
        ),
    ] = None,
    agent: Annotated[
        str | None, agent_option("Only sessions with a run answered by this agent.")
    ] = None,
    model: Annotated[
        str | None, model_option("Only sessions with a run answered by this model.")
    ] = None,
    status: Annotated[
        RunStatusOption | None,
        typer.Option(help="Only sessions with a run in this status.", show_default=False),
    ] = None,
    failed_tools: Annotated[
        bool,
        typer.Option("--failed-tools", help="Only sessions with a failed tool call.", metavar=""),
    ] = False,
    since: Annotated[
        str | None,
        when_option("--since", "Only sessions written at or after WHEN (a time, or 7d, 12h)."),
    ] = None,
    until: Annotated[
        str | None, when_option("--until", "Only sessions created before WHEN (a time, or 7d).")
    ] = None,
    sort: Annotated[
        SessionSortOption,
        typer.Option(
            "--sort",
            "--order",
            help="Newest first by creation or last write, or largest first by runs, tokens, "
            "tool calls or failures, across every session the filters keep.",
        ),
    ] = SessionSortOption.created,
    limit: Annotated[int, limit_option("Sessions per page.")] = 50,
    after: Annotated[
        str | None,
        typer.Option(
            help="The cursor printed under the previous page.", metavar="CURSOR", show_default=False
        ),
    ] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    ndjson: NdjsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
) -> None:
    """List sessions, newest first (or by --sort), a page at a time, with their total."""
    fmt = output_format(as_json=as_json, ndjson=ndjson, csv=csv, tsv=tsv)

    async def go() -> tuple[SessionPage, dict[str, SessionSummary], int]:
        filters = _session_filters(
            user=user,
            meta=meta or [],
            title=title,
            agent=agent,
            model=model,
            status=None if status is None else status.value,
            failed_tools=failed_tools,
            since=parse_time(since, "--since"),
            until=parse_time(until, "--until"),
        )
        async with open_store(resolve_target(ctx, db, schema)) as store:
            page = await store.sessions(
                **filters,
                order_by=_ORDER_BY[sort],
                limit=limit,
                after=FIRST_PAGE if after is None else after,
            )
            # One query for the page's numbers, not one per session.
            ids = [info.session_id for info in page]
            return page, await store.session_summaries(ids), await store.count_sessions(**filters)

    page, summaries, total = run_command(go())
    records = [
        {**jsonout.fields(info), **jsonout.fields(summaries[info.session_id])} for info in page
    ]
    if fmt is Format.json:
        print_json({"sessions": records, "total": total, "next_cursor": page.next_cursor})
        return
    if fmt is not Format.table:
        # A row a session; the next page's cursor on stderr, where it does not mix with rows.
        print_records(fmt, records)
        if page.next_cursor is not None:
            typer.echo(f"More: --after {page.next_cursor}", err=True)
        return
    _print_table(page, summaries, total)


def _print_table(page: SessionPage, summaries: dict[str, SessionSummary], total: int) -> None:
    # Paired before printable escapes the ids the summaries are keyed by.
    rows = printable([(info, summaries[info.session_id]) for info in page.sessions])
    table = make_table(
        None,
        [
            ("session", "id"),
            ("title", "left"),
            ("user", "left"),
            ("runs", "right"),
            ("branches", "right"),
            ("tokens", "right"),
            ("tools", "right"),
            ("failed", "right"),
            ("created", "left"),
            ("updated", "left"),
        ],
    )
    for info, summary in rows:
        table.add_row(
            Text(info.session_id),
            Text(one_line(info.title, 50)),
            Text(info.user_id or ""),
            f"{summary.runs:,}",
            f"{summary.branches:,}",
            f"{summary.total_tokens:,}",
            f"{summary.tool_calls:,}",
            failed_text(summary),
            timestamp(info.created_at),
            timestamp(info.updated_at),
        )
    console = make_console()
    if page.sessions:
        console.print(table)
        console.print(
            f"{len(page.sessions):,} of {total:,} session{'s' * (total != 1)}", style="dim"
        )
    else:
        console.print("No sessions.")
    if page.next_cursor is not None:
        console.print(f"More: --after {page.next_cursor}", style="dim")

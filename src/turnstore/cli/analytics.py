"""Analytics: ``tools`` (per-tool statistics, or the calls), ``search`` (full text, every
branch, or one) and ``usage`` (tokens, their details and their cost summed per group)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from ..domain import jsonout
from ..domain.model import (
    DETAIL_FIELDS,
    TOKEN_FIELDS,
    AnnotationStats,
    SearchCount,
    SearchResult,
    UsageRow,
)
from ..domain.prices import Prices, cost_text, unknown_cost_reason
from ..domain.toolcalls import TOOL_CALL_STATUSES
from ..domain.units import duration_text
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
    branch_option,
    limit_option,
    model_option,
    output_format,
    parse_branch,
    parse_time,
    resolve_target,
    session_option,
    user_option,
    when_option,
)
from .output import (
    Format,
    fail,
    make_console,
    make_table,
    one_line,
    print_records,
    printable,
    safe_text,
    say,
    status_style,
)

__all__ = ["search", "tools", "usage"]


@command(50)
def tools(
    ctx: typer.Context,
    session: Annotated[str | None, session_option("Only this session's calls.")] = None,
    tool: Annotated[
        str | None, typer.Option(help="Only this tool's calls.", metavar="NAME", show_default=False)
    ] = None,
    since: Annotated[
        str | None, when_option("--since", "Calls made at or after this ISO date/time.")
    ] = None,
    until: Annotated[
        str | None, when_option("--until", "Calls made before this ISO date/time.")
    ] = None,
    calls: Annotated[
        bool, typer.Option("--calls", help="List the calls themselves, not statistics.", metavar="")
    ] = False,
    status: Annotated[
        str | None,
        typer.Option(
            help="With --calls: only calls of this status (failed: every failed call).",
            metavar="STATUS",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None, limit_option("With --calls: the newest N calls (default 50).")
    ] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    ndjson: NdjsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
) -> None:
    """Per-tool statistics: calls, failed calls, failure rate, p50/p95 duration; or, with --calls,
    the calls with their arguments, output, status and duration."""
    fmt = output_format(as_json=as_json, ndjson=ndjson, csv=csv, tsv=tsv)
    if status is not None and status not in TOOL_CALL_STATUSES:
        known = ", ".join(sorted(TOOL_CALL_STATUSES))
        raise fail(f"--status takes one of {known}, not {status!r}", 2, "UsageError")
    if not calls and (status is not None or limit is not None):
        named = "--status" if status is not None else "--limit"
        raise fail(f"{named} lists calls: add --calls", 2, "UsageError")

    async def go() -> list[Any]:
        start, end = parse_time(since, "--since"), parse_time(until, "--until")
        async with open_store(resolve_target(ctx, db, schema)) as store:
            if calls:
                return list(
                    await store.tool_calls(
                        session_id=session,
                        tool_name=tool,
                        status=status,
                        since=start,
                        until=end,
                        limit=50 if limit is None else limit,
                    )
                )
            return list(
                await store.tool_stats(session_id=session, tool_name=tool, since=start, until=end)
            )

    rows = run_command(go())
    if fmt is not Format.table:
        print_records(
            fmt,
            rows
            if calls
            else [{**jsonout.fields(r), "failure_rate": r.failure_rate} for r in rows],
        )
        return
    rows = printable(rows)
    if not rows:
        say("No tool calls.")
        return
    if calls:
        table = make_table(
            None,
            [
                ("id", "right"),
                ("session", "id"),
                ("run", "right"),
                ("tool", "left"),
                ("arguments", "left"),
                ("output", "left"),
                ("status", "left"),
                ("duration", "right"),
            ],
        )
        for call in rows:
            table.add_row(
                str(call.id),
                Text(call.session_id),
                str(call.run_id),
                Text(call.tool_name or call.kind or ""),
                Text(one_line(call.arguments, 40)),
                Text(one_line(call.error or call.output, 40)),
                Text(call.status or "", style=status_style(call)),
                duration_text(call.duration_ms),
            )
    else:
        table = make_table(
            None,
            [
                ("tool", "left"),
                ("calls", "right"),
                ("failed", "right"),
                ("failure rate", "right"),
                ("timed", "right"),
                ("p50", "right"),
                ("p95", "right"),
                ("max", "right"),
            ],
        )
        for stat in rows:
            table.add_row(
                Text(stat.tool_name or "(unnamed)"),
                f"{stat.calls:,}",
                f"{stat.failed:,}",
                f"{stat.failure_rate:.1%}",
                f"{stat.timed_calls:,}",
                duration_text(stat.p50_ms),
                duration_text(stat.p95_ms),
                duration_text(stat.max_ms),
            )
    make_console().print(table)


def _snippet(hit: SearchResult) -> Text:
    """A search result's snippet on one line, with its matches in bold (and, as all stored
    text, passed through ``safe_text``: piece by piece, as the matches are offsets)."""
    text = Text()
    pieces = hit.pieces()
    for n, (piece, match) in enumerate(pieces):
        piece = re.sub(r"\s+", " ", safe_text(piece))
        if n == 0:
            piece = piece.lstrip()
        if n == len(pieces) - 1:
            piece = piece.rstrip()
        text.append(piece, style="bold yellow" if match else "")
    return text


class SearchRoleOption(str, Enum):
    """The roles of the messages ``search`` finds (tool calls and outputs have none)."""

    user = "user"
    assistant = "assistant"


@command(60)
def search(
    ctx: typer.Context,
    query: Annotated[
        str,
        typer.Argument(
            help='Words (all must occur), "an exact phrase", this OR that, -excluded, prefix*.',
            metavar="QUERY",
            show_default=False,
        ),
    ],
    session: Annotated[str | None, session_option("Search only this session.")] = None,
    branch: Annotated[
        str | None,
        branch_option("With --session: only the path of this branch (a name, or a run id)."),
    ] = None,
    user: Annotated[str | None, user_option("Search only this user's sessions.")] = None,
    role: Annotated[
        list[SearchRoleOption] | None,
        typer.Option(
            help="Only items of this role: user, assistant (repeatable).",
            metavar="ROLE",
            show_default=False,
        ),
    ] = None,
    type_: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            help="Only items of this type: message, function_call_output, … (repeatable).",
            metavar="TYPE",
            show_default=False,
        ),
    ] = None,
    agent: Annotated[str | None, agent_option("Only runs this agent answered.")] = None,
    model: Annotated[str | None, model_option("Only runs this model answered.")] = None,
    since: Annotated[
        str | None, when_option("--since", "Items written at or after this time (or 7d, 12h).")
    ] = None,
    until: Annotated[
        str | None, when_option("--until", "Items written before this time (or 7d, 12h).")
    ] = None,
    limit: Annotated[int, limit_option("At most N results.")] = 20,
    offset: Annotated[
        int, typer.Option(help="Skip the first N results (a later page).", metavar="N", min=0)
    ] = 0,
    count: Annotated[
        bool,
        typer.Option(
            "--count", help="Print how many items match (up to 1,000; beyond: more than)."
        ),
    ] = False,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    ndjson: NdjsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
) -> None:
    """Full-text search over user and assistant messages, tool arguments, outputs and tool
    errors, on every branch of every session (or, with --branch, one). Exact-phrase matches
    come first."""
    fmt = output_format(as_json=as_json, ndjson=ndjson, csv=csv, tsv=tsv)
    filters: dict[str, Any] = {
        "session_id": session,
        "branch": parse_branch(branch, session),
        "user_id": user,
        "agent": agent,
        "model": model,
        "since": parse_time(since, "--since"),
        "until": parse_time(until, "--until"),
        "roles": [r.value for r in role] if role else None,
        "types": type_ or None,
    }

    async def counted() -> SearchCount:
        async with open_store(resolve_target(ctx, db, schema)) as store:
            return await store.search_count(query, **filters)

    if count:
        matches = run_command(counted())
        if fmt is Format.table:
            say(f"{matches} {'match' if matches.matches == 1 and matches.exact else 'matches'}")
        else:
            print_records(fmt, [matches])
        return

    async def go() -> list[SearchResult]:
        async with open_store(resolve_target(ctx, db, schema)) as store:
            return await store.search(query, **filters, limit=limit, offset=offset)

    results = run_command(go())
    if fmt is not Format.table:
        print_records(fmt, results)
        return
    if not results:
        say("No matches.")
        return
    table = make_table(
        None, [("session", "id"), ("run", "right"), ("item", "left"), ("match", "left")]
    )
    for result in results:
        hit = printable(result)
        table.add_row(
            Text(hit.session_id),
            str(hit.run_id),
            Text(hit.role or hit.type if hit.type == "message" else hit.type),
            _snippet(result),
        )
    make_console().print(table)


class UsageGroupOption(str, Enum):
    """What ``usage`` sums over."""

    session = "session"
    user = "user"
    model = "model"
    agent = "agent"
    day = "day"
    run = "run"


class UsageSortOption(str, Enum):
    """How ``usage`` orders its groups: by key, or largest first by a figure."""

    key = "key"
    runs = "runs"
    requests = "requests"
    input = "input"
    output = "output"
    tokens = "tokens"
    cached = "cached"
    reasoning = "reasoning"
    cost = "cost"
    annotation = "annotation"


# The figure of a row each --sort orders by, largest first (an unknown cost, a group without
# a scored annotation: last).
_SORT_KEYS: dict[UsageSortOption, Callable[[UsageRow], float]] = {
    UsageSortOption.runs: lambda row: row.runs,
    UsageSortOption.requests: lambda row: row.usage.requests,
    UsageSortOption.input: lambda row: row.usage.input_tokens,
    UsageSortOption.output: lambda row: row.usage.output_tokens,
    UsageSortOption.tokens: lambda row: row.usage.total_tokens,
    UsageSortOption.cached: lambda row: row.usage.cached_tokens,
    UsageSortOption.reasoning: lambda row: row.usage.reasoning_tokens,
    UsageSortOption.cost: lambda row: -1.0 if row.cost is None else row.cost,
    UsageSortOption.annotation: lambda row: (
        -math.inf if row.annotation is None or row.annotation.mean is None else row.annotation.mean
    ),
}


def _sorted(rows: list[UsageRow], sort: UsageSortOption) -> list[UsageRow]:
    """``rows`` in ``sort``'s order; ties (and ``key``) keep the store's order, by key."""
    figure = _SORT_KEYS.get(sort)
    return rows if figure is None else sorted(rows, key=figure, reverse=True)


@command(70)
def usage(
    ctx: typer.Context,
    by: Annotated[
        UsageGroupOption,
        typer.Option(help="Sum per session, user, model, agent, UTC day or run (its id)."),
    ] = UsageGroupOption.session,
    session: Annotated[str | None, session_option("Only this session's runs.")] = None,
    branch: Annotated[
        str | None,
        branch_option("With --session: only the runs of this branch's path (a name, or a run id)."),
    ] = None,
    user: Annotated[str | None, user_option("Only this user's runs.")] = None,
    since: Annotated[
        str | None, when_option("--since", "Runs started at or after this ISO date/time.")
    ] = None,
    until: Annotated[
        str | None, when_option("--until", "Runs started before this ISO date/time.")
    ] = None,
    sort: Annotated[
        UsageSortOption,
        typer.Option(
            help="Order by key, or largest first by runs, requests, input, output, tokens "
            "(total), cached, reasoning, cost (unknown last) or annotation (the mean of "
            "--annotation NAME; none last).",
        ),
    ] = UsageSortOption.key,
    prices: Annotated[
        Path | None,
        typer.Option(
            help="A JSON price file layered over turnstore's prices (docs/cli.md).",
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
    annotation: Annotated[
        str | None,
        typer.Option(
            help="Add the count and mean value of the annotations NAME of each group's runs "
            "(thumbs: the mean is the approval rate).",
            metavar="NAME",
            show_default=False,
        ),
    ] = None,
    details: Annotated[
        bool,
        typer.Option(
            "--details",
            help="Add the token details (every field the SDK reported) summed per group.",
            metavar="",
        ),
    ] = False,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    ndjson: NdjsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
) -> None:
    """Token usage (requests, input, output, total, cached, reasoning) and its cost in USD,
    summed per group; a cost is ? (null in --json) where a model has no price. With
    --annotation NAME, the annotations NAME of the group's runs beside them; with --details,
    the token details in a table of their own (columns of their own in --csv and --tsv)."""
    fmt = output_format(as_json=as_json, ndjson=ndjson, csv=csv, tsv=tsv)
    path = parse_branch(branch, session)
    if sort is UsageSortOption.annotation and annotation is None:
        raise fail(
            "--sort annotation orders by the mean of --annotation NAME: give it too",
            2,
            "UsageError",
        )

    async def go() -> list[UsageRow]:
        table = Prices.default()
        if prices is not None:
            table = table.with_entries(Prices.load(prices))
        async with open_store(resolve_target(ctx, db, schema)) as store:
            return await store.usage(
                by.value,
                session_id=session,
                user_id=user,
                since=parse_time(since, "--since"),
                until=parse_time(until, "--until"),
                prices=table,
                annotation=annotation,
                branch=path,
                details=details,
            )

    rows = _sorted(run_command(go()), sort)
    if details:
        rows = _every_detail(rows)
    if fmt is not Format.table:
        print_records(fmt, rows, spread=details)
        return
    rows = printable(rows)
    if not rows:
        say("No runs.")
        return
    table = make_table(
        None,
        [
            (by.value, "left"),
            ("runs", "right"),
            ("requests", "right"),
            ("input", "right"),
            ("output", "right"),
            ("total", "right"),
            ("cached", "right"),
            ("reasoning", "right"),
            ("cost", "right"),
            *(((safe_text(annotation), "right"), ("mean", "right")) if annotation else ()),
        ],
    )
    totals = [0] * (1 + len(TOKEN_FIELDS))
    for row in rows:
        values = [row.runs, *(getattr(row.usage, name) for name in TOKEN_FIELDS)]
        totals = [a + b for a, b in zip(totals, values, strict=True)]
        table.add_row(
            Text(row.key if row.key is not None else "(none)"),
            *(f"{v:,}" for v in values),
            _cost(row.cost),
            *_notes([row.annotation]),
        )
    if len(rows) > 1:
        costs = [row.cost for row in rows]
        total = None if None in costs else sum(cost or 0.0 for cost in costs)
        table.add_section()
        table.add_row(
            "total",
            *(f"{v:,}" for v in totals),
            _cost(total),
            *_notes([row.annotation for row in rows]),
            style="bold",
        )
    make_console().print(table)
    if details:
        _print_details(by.value, rows)
    unpriced = {name for row in rows for name in row.unpriced}
    if unpriced:
        names = sorted(unpriced, key=lambda name: (name is not None, name or ""))
        say(f"cost ?: {unknown_cost_reason(names)} (add prices with --prices FILE)")


def _cost(usd: float | None) -> str:
    return "?" if usd is None else cost_text(usd)


def _notes(stats: list[AnnotationStats | None]) -> list[str]:
    """The annotation columns of a usage row (none without --annotation): how many, and
    their mean value, of ``stats`` together."""
    if stats[0] is None:
        return []
    kept = [row for row in stats if row is not None]
    scored = sum(row.scored for row in kept)
    total = sum((row.mean or 0.0) * row.scored for row in kept)
    return [f"{sum(row.count for row in kept):,}", f"{total / scored:.3g}" if scored else ""]


def _every_detail(rows: list[UsageRow]) -> list[UsageRow]:
    """``rows`` with the token details of every field any of them reports (0 where a group
    has none), so that every record has one shape: CSV's header is the first row's."""
    names = {
        side: sorted({n for row in rows for n in getattr(row.usage, side)})
        for side in DETAIL_FIELDS
    }

    def filled(row: UsageRow) -> UsageRow:
        sides: dict[str, Any] = {
            side: {n: getattr(row.usage, side).get(n, 0) for n in names[side]}
            for side in DETAIL_FIELDS
        }
        return replace(row, usage=replace(row.usage, **sides))

    return [filled(row) for row in rows]


def _print_details(group: str, rows: list[UsageRow]) -> None:
    """The token details of each group as a table of their own, a field a line: as columns
    beside the usage's they would not fit 80 columns (their names are the SDK's, and many)."""
    table = make_table(
        "token details", [(group, "left"), ("side", "left"), ("field", "left"), ("tokens", "right")]
    )
    for row in rows:
        for side in DETAIL_FIELDS:
            for name, total in getattr(row.usage, side).items():
                table.add_row(
                    Text(row.key if row.key is not None else "(none)"),
                    side.removesuffix("_tokens_details"),
                    Text(name),
                    f"{total:,}",
                )
    if table.row_count:
        make_console().print(table)
    else:
        say("No token details.")

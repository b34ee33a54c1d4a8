"""Annotations: ``annotate`` (judge a run) and ``annotations`` (list them, or their
statistics per agent, model, tool, day, branch, session or user)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

import typer
from rich.text import Text

from ..domain.model import Annotation, AnnotationStats
from .app import command
from .database import open_store, run_command
from .options import (
    CsvOption,
    DbOption,
    JsonOption,
    NdjsonOption,
    SchemaOption,
    TsvOption,
    limit_option,
    output_format,
    parse_time,
    resolve_target,
    session_option,
    value_option,
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
    say,
    timestamp,
)

__all__ = ["annotate", "annotation_text", "list_annotations"]


class SourceOption(str, Enum):
    """Who made an annotation (``model.ANNOTATION_SOURCES``)."""

    user = "user"
    human = "human"
    model = "model"
    code = "code"


class StatsGroupOption(str, Enum):
    """What ``annotations --by`` groups over (``Store.annotation_stats``)."""

    agent = "agent"
    model = "model"
    tool = "tool"
    day = "day"
    branch = "branch"
    session = "session"
    user = "user"


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def annotation_text(note: Annotation, width: int | None = 80) -> Text:
    """An annotation on one line: ``✎ name value [label] “comment” · source author``."""
    text = Text("✎ ", style="yellow")
    text.append(note.name, style="bold yellow")
    if note.value is not None:
        text.append(f" {_number(note.value)}")
    if note.label is not None:
        text.append(f" [{one_line(note.label, width)}]", style="yellow")
    if note.comment is not None:
        text.append(f" “{one_line(note.comment, width)}”")
    who = " ".join(part for part in (note.source, note.author) if part)
    text.append(f"  {who}", style="dim")
    return text


@command(45)
def annotate(
    ctx: typer.Context,
    run: Annotated[int, typer.Argument(help="The run's id.", metavar="RUN")],
    name: Annotated[str, typer.Argument(help="What is judged: thumbs, correctness…")],
    value: Annotated[
        float | None,
        typer.Option(help="A score (thumbs: 1 up, 0 down).", metavar="NUMBER", show_default=False),
    ] = None,
    label: Annotated[
        str | None, typer.Option(help="A label, e.g. hallucinated.", show_default=False)
    ] = None,
    comment: Annotated[str | None, typer.Option(help="A note.", show_default=False)] = None,
    source: Annotated[
        SourceOption, typer.Option(help="Who judges: user, human, model or code.")
    ] = SourceOption.human,
    author: Annotated[str | None, typer.Option(help="Who, by name.", show_default=False)] = None,
    tool_call: Annotated[
        int | None,
        typer.Option(
            "--tool-call", help="Judge this tool call of the run.", metavar="ID", show_default=False
        ),
    ] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
) -> None:
    """Annotate a run: feedback, a score, a label or a note (each call adds one)."""

    async def go() -> Annotation:
        async with open_store(resolve_target(ctx, db, schema), write=True) as store:
            return await store.annotate(
                run,
                name,
                value=value,
                label=label,
                comment=comment,
                source=source.value,
                author=author,
                tool_call_id=tool_call,
            )

    note = run_command(go())
    if as_json:
        print_json(note)
        return
    say(f"Annotation {note.id} on run {note.run_id} of session {note.session_id}.")


@command(46, "annotations")
def list_annotations(
    ctx: typer.Context,
    session: Annotated[str | None, session_option("Only this session's annotations.")] = None,
    run: Annotated[
        int | None,
        typer.Option(help="Only this run's annotations.", metavar="RUN", show_default=False),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Only this name.", show_default=False)] = None,
    label: Annotated[str | None, typer.Option(help="Only this label.", show_default=False)] = None,
    source: Annotated[
        SourceOption | None, typer.Option(help="Only this source.", show_default=False)
    ] = None,
    min_value: Annotated[float | None, value_option("--min", "Values at least this.")] = None,
    max_value: Annotated[float | None, value_option("--max", "Values at most this.")] = None,
    since: Annotated[
        str | None, when_option("--since", "Made at or after this ISO date/time.")
    ] = None,
    until: Annotated[str | None, when_option("--until", "Made before this ISO date/time.")] = None,
    by: Annotated[
        StatsGroupOption | None,
        typer.Option(
            help="Statistics per agent, model, tool, day, branch (of --session), session or "
            "user instead.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[int, limit_option("The newest N annotations.")] = 100,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    ndjson: NdjsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
) -> None:
    """List annotations (oldest first) with filters; or, with --by, their counts and mean,
    minimum and maximum values per group and name."""
    fmt = output_format(as_json=as_json, ndjson=ndjson, csv=csv, tsv=tsv)
    filters: dict[str, Any] = {
        "session_id": session,
        "name": name,
        "label": label,
        "source": None if source is None else source.value,
        "since": parse_time(since, "--since"),
        "until": parse_time(until, "--until"),
    }

    async def go() -> list[Any]:
        async with open_store(resolve_target(ctx, db, schema)) as store:
            if by is not None:
                return list(await store.annotation_stats(by.value, **filters))
            return list(
                await store.annotations(
                    **filters, run_id=run, min_value=min_value, max_value=max_value, limit=limit
                )
            )

    rows = run_command(go())
    if fmt is not Format.table:
        print_records(fmt, rows)
        return
    rows = printable(rows)
    if not rows:
        say("No annotations.")
        return
    make_console().print(_stats_table(rows, by.value) if by is not None else _table(rows))


def _table(rows: list[Annotation]) -> Any:
    table = make_table(
        None,
        [
            ("id", "right"),
            ("session", "id"),
            ("run", "right"),
            ("name", "left"),
            ("value", "right"),
            ("label", "left"),
            ("comment", "left"),
            ("source", "left"),
            ("made", "left"),
        ],
    )
    for note in rows:
        table.add_row(
            str(note.id),
            Text(note.session_id),
            str(note.run_id) + ("" if note.tool_call_id is None else f" ⚙{note.tool_call_id}"),
            Text(note.name),
            _number(note.value),
            Text(one_line(note.label, 30)),
            Text(one_line(note.comment, 40)),
            Text(" ".join(part for part in (note.source, note.author) if part)),
            timestamp(note.created_at),
        )
    return table


def _stats_table(rows: list[AnnotationStats], by: str) -> Any:
    columns = [(by, "left"), ("name", "left"), ("count", "right"), ("runs", "right")]
    table = make_table(None, [*columns, ("mean", "right"), ("min", "right"), ("max", "right")])
    for row in rows:
        table.add_row(
            Text(row.key if row.key is not None else "(none)"),
            Text(row.name),
            f"{row.count:,}",
            f"{row.runs:,}",
            "" if row.mean is None else f"{row.mean:.3g}",
            _number(row.minimum),
            _number(row.maximum),
        )
    return table

"""``dataset``: the runs that filters select, written as JSONL for evaluation or fine-tuning
(``Store.write_dataset``; docs/datasets.md)."""

from __future__ import annotations

import io
import sys
from enum import Enum
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.markup import escape

from .annotating import SourceOption
from .app import command
from .data import refuse_database_output
from .database import open_store, run_command
from .options import (
    AnnotatedOption,
    DbOption,
    JsonOption,
    SchemaOption,
    agent_option,
    annotated_filters,
    limit_option,
    model_option,
    parse_time,
    resolve_target,
    session_option,
    user_option,
    value_option,
    when_option,
)
from .output import fail, json_safe, print_json, say

__all__ = ["dataset"]


class DatasetFormatOption(str, Enum):
    """What ``dataset`` writes (``turnstore.DatasetFormat``)."""

    turnstore = "turnstore"
    openai_chat = "openai-chat"
    plain = "plain"


class _Terminal(io.StringIO):
    """stdout on a terminal: each line as ``json_safe`` writes it (the same data), kept
    nowhere."""

    def write(self, text: str) -> int:
        return sys.stdout.write(json_safe(text))


@command(95)
def dataset(
    ctx: typer.Context,
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            help="The JSONL file to write (written whole, or left as it was); - for stdout.",
            metavar="FILE",
            show_default=False,
        ),
    ],
    fmt: Annotated[
        DatasetFormatOption,
        typer.Option(
            "--format",
            "-f",
            help="turnstore: lossless (items as stored, tool calls, annotations, the run); "
            "openai-chat: {messages} for OpenAI chat fine-tuning and evals; plain: "
            "{input, output, metadata}.",
        ),
    ] = DatasetFormatOption.turnstore,
    session: Annotated[str | None, session_option("Only this session's runs.")] = None,
    user: Annotated[str | None, user_option("Only this user's runs.")] = None,
    agent: Annotated[str | None, agent_option("Only runs this agent answered.")] = None,
    model: Annotated[str | None, model_option("Only runs this model answered.")] = None,
    since: Annotated[
        str | None, when_option("--since", "Runs begun at or after this (ISO date/time or 7d).")
    ] = None,
    until: Annotated[
        str | None, when_option("--until", "Runs begun before this (ISO date/time or 12h).")
    ] = None,
    failed: Annotated[
        bool, typer.Option("--failed", help="Only runs with a failed tool call.", metavar="")
    ] = False,
    annotated: AnnotatedOption = None,
    label: Annotated[
        str | None,
        typer.Option(help="Only runs with an annotation of this label.", show_default=False),
    ] = None,
    source: Annotated[
        SourceOption | None,
        typer.Option(help="Only runs with an annotation from this source.", show_default=False),
    ] = None,
    min_value: Annotated[
        float | None, value_option("--min", "Only runs with an annotation valued at least this.")
    ] = None,
    max_value: Annotated[
        float | None, value_option("--max", "Only runs with an annotation valued at most this.")
    ] = None,
    search: Annotated[
        str | None,
        typer.Option(
            help="Only runs with an item this search finds (as `turnstore search`).",
            metavar="QUERY",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[int | None, limit_option("At most N records.")] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write the runs the filters select as JSONL, one record per run: the input the model
    had, the output it gave, tool calls, annotations and ids (docs/datasets.md). To a file, a
    summary is printed (as JSON with --json)."""
    if as_json and output == "-":
        raise fail("--json prints a summary of the dataset, so it needs --output FILE")
    target = resolve_target(ctx, db, schema)
    path = None if output == "-" else Path(output)

    async def go() -> int:
        filters: dict[str, Any] = {
            "session_id": session,
            "user_id": user,
            "agent": agent,
            "model": model,
            "since": parse_time(since, "--since"),
            "until": parse_time(until, "--until"),
            "failed": failed,
            "search": search,
            "limit": limit,
            "label": label,
            "source": None if source is None else source.value,
            "min_value": min_value,
            "max_value": max_value,
            **annotated_filters(annotated, label=label, min_value=min_value, max_value=max_value),
        }
        if path is not None:
            refuse_database_output(target, path)
        async with open_store(target) as store:
            out: IO[str] | Path = path if path is not None else _stdout()
            return await store.write_dataset(out, fmt.value, **filters)

    count = run_command(go())
    if path is None:
        return
    if as_json:
        print_json({"records": count, "format": fmt.value, "output": str(path)})
    else:
        noun = "record" if count == 1 else "records"
        say(f"Wrote {count:,} {noun} ({fmt.value}) to {escape(str(path))}.")


def _stdout() -> IO[str]:
    """stdout; on a terminal, with stored text unable to drive it."""
    return _Terminal() if sys.stdout.isatty() else sys.stdout

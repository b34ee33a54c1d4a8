"""Trace data: ``otel``, a session's turns and spans as OpenTelemetry data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from .. import otel
from ..domain import jsonout
from .app import command
from .data import refuse_database_output
from .database import open_store, run_command
from .options import DbOption, JsonOption, SchemaOption, resolve_target
from .output import json_safe, print_json, say

__all__ = ["otel_command"]


@command(100, "otel")
def otel_command(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(metavar="SESSION", show_default=False)],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the OTLP/JSON file here instead of stdout.",
            metavar="FILE",
            show_default=False,
            dir_okay=False,
        ),
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            help="Send to this OTLP/HTTP collector (its /v1/traces URL) instead of writing "
            "a file; needs turnstore[otel].",
            metavar="URL",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
) -> None:
    """A session's turns and trace spans as OpenTelemetry data (OTLP/JSON, GenAI semantic
    conventions), or sent to a collector with --endpoint."""

    async def go() -> dict[str, Any]:
        target = resolve_target(ctx, db, schema)
        if output is not None:
            refuse_database_output(target, output)
        async with open_store(target) as store:
            if endpoint is not None:
                sent = await otel.send(store, session, endpoint)
                return {"session": session, "spans": sent, "endpoint": endpoint}
            request = await otel.otlp_traces(store, session)
        text = jsonout.dumps(request)
        if output is None:
            typer.echo(json_safe(text))
        else:
            output.write_text(text, encoding="utf-8")
        spans = sum(len(s["spans"]) for r in request["resourceSpans"] for s in r["scopeSpans"])
        return {"session": session, "spans": spans, "output": str(output)}

    summary = run_command(go())
    if output is None and endpoint is None:
        return
    if as_json:
        print_json(summary)
    elif endpoint is not None:
        say(f"Sent {summary['spans']} spans of {escape(session)} to {escape(endpoint)}.")
    else:
        say(f"Wrote {summary['spans']} spans of {escape(session)} to {escape(str(output))}.")

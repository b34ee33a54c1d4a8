"""``demo`` (writes the demo conversation) and ``serve`` (the web viewer)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from .. import Store
from ..domain.extras import require
from ..domain.model import Run
from ..domain.prices import Prices
from ..errors import TurnstoreError
from .app import command
from .database import check_database, open_store, run_command
from .options import DbOption, JsonOption, SchemaOption, display_target, resolve_target
from .output import fail, print_json, say

__all__ = ["demo", "serve"]


@command(160)
def demo(
    ctx: typer.Context,
    session: Annotated[
        str, typer.Option(help="The session id to write.", metavar="SESSION")
    ] = "demo",
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace a session of that id that the demo did not write (else refused).",
            metavar="",
        ),
    ] = False,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write the demo conversation (tool calls, a handoff) into the database; it replaces a
    session only if an earlier demo wrote it (or with --force).

    Needs the agents extra: pip install 'turnstore\\[agents]'.

    Without OPENAI_API_KEY, the SDK's ScriptedModel answers."""
    target = resolve_target(ctx, db, schema)

    async def go() -> list[Run]:
        require("agents", "turnstore demo")
        from ..agents.demo import run_demo

        check_database(target, create=True)
        # The demo narrates on stdout; with --json that would spoil the JSON.
        redirect = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
        with redirect:
            await run_demo(target, session, force=force)
        async with open_store(target) as store:
            return await store.runs(session)

    written = run_command(go())
    if as_json:
        print_json({"database": display_target(target), "session_id": session, "runs": written})
    else:
        shown = escape(display_target(target))
        say(
            f"Wrote session {escape(session)} ({len(written)} runs) to {shown}. "
            f"Try: turnstore show {escape(session)} --db {shown}"
        )


@command(170)
def serve(
    ctx: typer.Context,
    db: DbOption = None,
    schema: SchemaOption = None,
    host: Annotated[
        str, typer.Option(help="Address to listen on; loopback unless you choose otherwise.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    writable: Annotated[
        bool,
        typer.Option(
            "--writable",
            help="Allow making a branch the active one, naming branches and annotating runs "
            "(else read-only).",
        ),
    ] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="A host name the viewer may be reached by (repeatable); requests naming "
            "any other are refused, so that a web page cannot reach it by DNS rebinding.",
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            help="A JSON price file layered over turnstore's prices for the costs shown "
            "(as usage --prices takes it).",
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Browse the conversations in a web page: sessions, branches, tool calls, usage.

    Needs the web extra: pip install 'turnstore\\[web]'. Stop it with Ctrl+C."""
    target = resolve_target(ctx, db, schema)
    try:
        check_database(target, create=False)
        # Opened once now, as the server will open it, so that what would stop the server at
        # start (a schema too old to read without migrating) is one line here.
        Store.open(target, read_only=not writable).close()
        # Without a file the viewer prices with the shipped table itself.
        table = None if prices is None else Prices.default().with_entries(Prices.load(prices))
        require("web", "turnstore serve")
        from ..web import serve as serve_web

        serve_web(
            target,
            host=host,
            port=port,
            read_only=not writable,
            allow_hosts=allow_host or [],
            prices=table,
        )
    except TurnstoreError as exc:
        raise fail(str(exc)) from None

"""Moving data: ``export``, ``import``, ``migrate`` and ``adopt`` (the commands that write,
but ``export``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from .. import Store, adopt_sdk_sessions
from .. import importers as _importers
from .. import migrate as migrate_database
from ..domain.targets import sqlite_file
from ..errors import InvalidOperationError, SessionNotFoundError
from .app import command
from .database import check_database, open_store, run_command
from .options import DbOption, JsonOption, SchemaOption, display_target, resolve_target
from .output import fail, json_safe, print_json, progress, safe_text, say

__all__ = ["adopt", "export", "import_", "migrate"]


class ExportFormatOption(str, Enum):
    """What ``export`` writes."""

    jsonl = "jsonl"
    json = "json"
    markdown = "markdown"
    atif = "atif"
    ui_messages = "ui-messages"


# One JSON document per session: several sessions are written as an array of them.
_DOCUMENTS = (ExportFormatOption.json, ExportFormatOption.atif, ExportFormatOption.ui_messages)


@command(90)
def export(
    ctx: typer.Context,
    sessions_: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="SESSION",
            help="The sessions to export (default: every session).",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[
        ExportFormatOption,
        typer.Option(
            "--format",
            "-f",
            help="jsonl: one item a line, each run's rows on its first line; json: each "
            "session's tree (an array for several sessions); both carry every row copy carries, "
            "which `turnstore import` writes back; markdown: for reading (not imported); "
            "atif: an ATIF trajectory; ui-messages: Vercel AI SDK UIMessages (both: the "
            "active path only).",
        ),
    ] = ExportFormatOption.jsonl,
    active: Annotated[
        bool,
        typer.Option("--active", help="Only the active path, not every branch.", metavar=""),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write to this file instead of stdout.",
            metavar="FILE",
            show_default=False,
            dir_okay=False,
        ),
    ] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export sessions: every branch unless --active (atif and ui-messages: the active path).
    With --output, a summary is printed (as JSON with --json)."""
    if as_json and output is None:
        raise fail("--json prints a summary of the export, so it needs --output FILE")

    async def go() -> dict[str, Any]:
        if output is not None:
            refuse_database_output(resolve_target(ctx, db, schema), output)
        async with open_store(resolve_target(ctx, db, schema)) as store:
            wanted = list(dict.fromkeys(sessions_ or []))  # a session named twice: once
            if not wanted:
                wanted = await _all_session_ids(store)
            for sid in wanted:  # every name checked before anything is written
                if await store.session(sid) is None:
                    raise SessionNotFoundError(f"no session {sid!r}")
            with contextlib.ExitStack() as stack:
                out = (
                    stack.enter_context(output.open("w", encoding="utf-8"))
                    if output is not None
                    else sys.stdout
                )
                advance = stack.enter_context(progress(output is not None, "exporting"))
                advance(0, len(wanted))
                # On a terminal, stored text must not drive it (JSON stays the same data).
                terminal = output is None and sys.stdout.isatty()
                array = fmt in _DOCUMENTS and len(wanted) != 1
                linear = active or fmt in (ExportFormatOption.atif, ExportFormatOption.ui_messages)
                out.write("[\n" if array else "")
                for index, sid in enumerate(wanted):
                    text = await store.export(sid, fmt.value, all_branches=not linear)
                    if terminal:
                        markdown = fmt is ExportFormatOption.markdown
                        text = safe_text(text) if markdown else json_safe(text)
                    if fmt is not ExportFormatOption.jsonl and index:
                        out.write(",\n" if array else "\n")
                    out.write(text)
                    advance(1, None)
                out.write("]\n" if array else "")
            return {"sessions": len(wanted), "format": fmt.value, "output": str(output)}

    summary = run_command(go())
    if output is None:
        return
    if as_json:
        print_json(summary)
    else:
        n = summary["sessions"]
        say(f"Exported {n} session{'s' * (n != 1)} as {fmt.value} to {escape(str(output))}.")


def refuse_database_output(target: str, output: Path) -> None:
    """Refuse an --output that is the database or a file SQLite keeps beside it: opening it
    for writing would truncate the database. Compared as files (by inode, through links and
    ``..``), and by resolved path for one that does not exist yet."""
    database = sqlite_file(target)
    if database is None:
        return
    resolved = os.path.realpath(output)
    # SQLite keeps its -wal, -shm and -journal beside the file a symlinked path names.
    real = os.path.realpath(database)
    for suffix in ("", "-wal", "-shm", "-journal"):
        own = Path(f"{real}{suffix}")
        same = resolved == os.path.realpath(own) or (
            own.exists() and output.exists() and os.path.samefile(output, own)
        )
        if same:
            what = "the database" if not suffix else f"the database's {suffix[1:]} file"
            raise InvalidOperationError(
                f"--output {output} is {what} ({own}): writing it would destroy the database; "
                "choose another file"
            )


async def _all_session_ids(store: Store) -> list[str]:
    """Every session id, oldest first."""
    ids = [info.session_id async for info in store.iter_sessions(page_size=1000)]
    return ids[::-1]


class SourceKind(str, Enum):
    """What ``import`` reads."""

    auto = "auto"
    sqlite = "sqlite"
    sqlalchemy = "sqlalchemy"
    jsonl = "jsonl"
    json = "json"
    langchain = "langchain"
    pydantic_ai = "pydantic-ai"
    adk = "adk"


@command(110, "import")
def import_(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="A SQLite file of the SDK's SQLiteSession or AdvancedSQLiteSession, a "
            "SQLAlchemy URL of SQLAlchemySession tables, a turnstore export (jsonl, json), or "
            "a JSON file of LangChain, Pydantic AI or ADK histories (--from).",
            show_default=False,
        ),
    ],
    kind: Annotated[
        SourceKind, typer.Option("--from", help="What SOURCE is (auto: guess).")
    ] = SourceKind.auto,
    messages_table: Annotated[
        str | None,
        typer.Option(
            "--messages-table",
            help="The SDK's messages table, if not agent_messages (found by itself for "
            "AdvancedSQLiteSession). Only this table is read: the sessions table holds no items.",
            metavar="TABLE",
            show_default=False,
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--session",
            help="Import only this session (repeatable).",
            metavar="SESSION",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import conversations without loss: every item verbatim, branches as the run tree,
    usage onto runs. Idempotent: what is already stored is recognised and not added again,
    so a second import adds nothing and an interrupted one can simply be run again."""

    async def go() -> _importers.ImportSummary:
        src = _importers.open_source(source, kind.value, messages_table=messages_table)
        try:
            async with open_store(
                resolve_target(ctx, db, schema), write=True, create=True
            ) as store:
                with progress(not as_json, "importing") as advance:
                    advance(0, await src.total_items())
                    return await _importers.import_source(
                        store, src, session_ids=only, on_items=lambda n: advance(n, None)
                    )
        finally:
            await src.aclose()

    summary = run_command(go())
    if as_json:
        print_json(summary)
        return
    say(
        f"Imported {summary.sessions} session{'s' * (summary.sessions != 1)} from "
        f"{escape(summary.source)} ({summary.kind}): {summary.new_sessions} new, "
        f"{summary.updated_sessions} updated; {summary.runs:,} runs and {summary.items:,} "
        f"items added, {summary.unchanged_items:,} items already present"
        + (f"; {summary.skipped:,} unreadable rows skipped" if summary.skipped else "")
        + (
            f"; {summary.skipped_sessions:,} sessions refused by the store"
            if summary.skipped_sessions
            else ""
        )
        + "."
    )


@command(130)
def migrate(
    ctx: typer.Context,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create the database, or bring its schema up to this turnstore's version.

    Each migration and its version row land in one transaction; concurrent runs are safe."""
    target = resolve_target(ctx, db, schema)

    async def go() -> tuple[int | None, int | None]:
        check_database(target, create=True)
        before = await asyncio.to_thread(migrate_database, target)
        async with open_store(target):  # as every read command will open it
            pass
        return before, (await asyncio.to_thread(Store.inspect, target)).schema_version

    before, version = run_command(go())
    if as_json:
        print_json(
            {"database": display_target(target), "from_version": before, "schema_version": version}
        )
        return
    if before == version:
        change = f"already at version {version}"
    elif before is None:
        change = f"created at version {version}"
    else:
        change = f"migrated from version {before} to {version}"
    say(f"{escape(display_target(target))}: schema {change}, up to date.")


@command(140)
def adopt(
    ctx: typer.Context,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
) -> None:
    """Adopt every conversation the SDK's SQLiteSession wrote into this file, in place.

    What StructuredSession does to each session at its first use, for all at once, so that
    every command and the viewer show them; the SDK's own tables are only read."""
    target = resolve_target(ctx, db, schema)

    async def go() -> int:
        async with open_store(target, write=True, sdk=True) as store:
            return await adopt_sdk_sessions(store)

    adopted = run_command(go())
    if as_json:
        print_json({"database": display_target(target), "adopted_sessions": adopted})
        return
    say(
        f"{escape(display_target(target))}: {adopted} session{'s' if adopted != 1 else ''} adopted."
    )

"""``copy``: every conversation (or a selection) from one turnstore database to another."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from .. import CopySummary, Store
from .. import copy as copy_sessions
from ..domain.targets import sqlite_file
from ..errors import ConnectionFailedError
from .app import command
from .database import check_database, run_command
from .options import (
    JsonOption,
    display_target,
    parse_time,
    root_options,
    session_option,
    user_option,
    when_option,
)
from .output import fail, print_json, progress, say

__all__ = ["copy"]


@command(120)
def copy(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="The turnstore database to copy from (a SQLite path or a postgresql:// URL).",
            show_default=False,
        ),
    ],
    target: Annotated[
        str,
        typer.Argument(
            metavar="TARGET",
            help="The turnstore database to copy into (created if missing).",
            show_default=False,
        ),
    ],
    only: Annotated[list[str] | None, session_option("Only this session (repeatable).")] = None,
    user: Annotated[str | None, user_option("Only this user's sessions.")] = None,
    since: Annotated[
        str | None, when_option("--since", "Only sessions created after this ISO date/time.")
    ] = None,
    until: Annotated[
        str | None, when_option("--until", "Only sessions created before this ISO date/time.")
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Replace sessions the target holds that differ from the source's (else they "
            "are reported and left alone).",
            metavar="",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Copy conversations between turnstore databases without loss: SQLite to PostgreSQL and
    back. Everything is copied (catalogue fields, every branch and the head, items byte for
    byte, tool calls with timing, model calls, usage, compaction); ids are new. Run it again
    to resume a copy that stopped: what the target holds already is not copied twice."""

    if any(option is not None for option in root_options(ctx)):
        # copy names both databases as SOURCE and TARGET; --db and --schema (given before the
        # command's name) would name neither, and were silently ignored.
        raise typer.BadParameter(
            "copy names its databases as SOURCE and TARGET, not by --db or --schema: name a "
            "PostgreSQL schema in the URL (postgresql://…?schema=NAME)",
            param_hint="--db/--schema",
        )

    async def go() -> CopySummary:
        if sqlite_file(source) is not None and Store.inspect(source).kind == "missing":
            raise ConnectionFailedError(f"no database at {source} to copy from")
        check_database(source, create=False)
        check_database(target, create=True)
        with progress(not as_json, "copying") as advance:
            return await copy_sessions(
                source,
                target,
                session_ids=only,
                user_id=user,
                created_after=parse_time(since, "--since"),
                created_before=parse_time(until, "--until"),
                replace=replace,
                on_items=advance,
            )

    summary = run_command(go())
    if as_json:
        print_json(summary)
    else:
        say(
            f"Copied {summary.sessions} session{'s' * (summary.sessions != 1)} from "
            f"{escape(display_target(source))} to {escape(display_target(target))}: "
            f"{summary.copied} new, {summary.resumed} resumed, {summary.replaced} replaced, "
            f"{summary.unchanged} already there; {summary.runs:,} runs and "
            f"{summary.items:,} items written."
        )
    problems = []
    if summary.conflicts:
        problems.append(
            f"{len(summary.conflicts)} session(s) differ in the target and were left alone "
            f"({', '.join(map(repr, summary.conflicts[:5]))}"
            f"{', …' if len(summary.conflicts) > 5 else ''}): copy with --replace to replace them"
        )
    for sid, why in list(summary.failed.items())[:5]:
        problems.append(f"session {sid!r} was not copied: {why}")
    if problems:
        raise fail("; ".join(problems))

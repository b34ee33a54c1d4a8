"""``prune``: retention as a command. Conversations idle longer than ``--idle-for`` are
deleted whole, with the loop docs/scaling.md ("Retention by time") gives for Python: listed a
page at a time, shown with a question on a terminal (``--yes`` skips it; a script must pass
it), then each deleted if still idle; ``--dry-run`` lists them and deletes nothing."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import Annotated, Any

import typer
from rich.text import Text

from ..domain.model import SessionInfo
from ..errors import ConflictError, SessionNotFoundError
from .app import command
from .database import command_errors, open_store, run_command
from .options import (
    CsvOption,
    DbOption,
    JsonOption,
    NdjsonOption,
    SchemaOption,
    TsvOption,
    output_format,
    parse_duration,
    resolve_target,
)
from .output import (
    Format,
    fail,
    make_console,
    make_table,
    one_line,
    print_records,
    printable,
    progress,
    safe_text,
    say,
    timestamp,
)

__all__ = ["prune"]

# What the question before a delete shows: this many ids, then how many more. And how many
# sessions one summary read counts the runs of (Store.session_summaries takes a page).
_SHOWN = 5
_SUMMARY_PAGE = 500


def _sessions(count: int) -> str:
    return f"{count:,} session{'s' * (count != 1)}"


@command(150)
def prune(
    ctx: typer.Context,
    idle_for: Annotated[
        str,
        typer.Option(
            "--idle-for",
            help="Delete sessions with no write for this long: 90d, 12h, 30m, 2w.",
            metavar="DURATION",
            show_default=False,
        ),
    ],
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="List what would be deleted; delete nothing.", metavar=""),
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Delete without asking (needed where no terminal can answer: a script, cron).",
            metavar="",
        ),
    ] = False,
    batch: Annotated[
        int, typer.Option("--batch", help="Sessions read per page.", metavar="N", min=1)
    ] = 500,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    ndjson: NdjsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
) -> None:
    """Delete whole conversations idle longer than --idle-for (no write since), after showing
    how many and asking; --yes deletes without asking, --dry-run lists them instead. A
    session written meanwhile is kept."""
    fmt = output_format(as_json=as_json, ndjson=ndjson, csv=csv, tsv=tsv)
    with command_errors():
        cutoff = datetime.now(timezone.utc) - parse_duration(idle_for, "--idle-for")
    ask = not (yes or dry_run)
    if ask and not sys.stdin.isatty():
        raise fail(
            "prune asks before it deletes, and there is no terminal to answer: pass --yes to "
            "delete without asking (or --dry-run to list what it would delete)",
            2,
            "UsageError",
        )
    target = resolve_target(ctx, db, schema)
    idle, runs = run_command(_idle(target, cutoff, batch, write=not dry_run, count_runs=ask))
    if ask and idle and not _confirmed(idle, runs, idle_for):
        raise fail("nothing deleted", 1, "Aborted")
    pruned = idle if dry_run else run_command(_delete(target, idle, cutoff, fmt is Format.table))
    if fmt is not Format.table:
        print_records(fmt, pruned)
        return
    verb = "Would delete" if dry_run else "Deleted"
    if pruned:
        table = make_table(
            None, [("session", "id"), ("user", "left"), ("title", "left"), ("updated", "left")]
        )
        for info in printable(pruned):
            table.add_row(
                Text(info.session_id),
                Text(info.user_id or ""),
                Text(one_line(info.title, 50)),
                timestamp(info.updated_at),
            )
        make_console().print(table)
    say(f"{verb} {_sessions(len(pruned))} idle for {idle_for} or more.")


async def _idle(
    target: str, cutoff: datetime, batch: int, *, write: bool, count_runs: bool
) -> tuple[list[SessionInfo], int]:
    """The sessions idle since ``cutoff``, read a page of ``batch`` at a time, and (when
    ``count_runs``) how many runs they hold together."""
    idle: list[SessionInfo] = []
    async with open_store(target, write=write) as store:
        # The first page names no cursor; each next one, the cursor its last gave.
        cursor: dict[str, Any] = {}
        while True:
            page = await store.sessions(
                updated_before=cutoff, order_by="updated_at", limit=batch, **cursor
            )
            idle.extend(page.sessions)
            if page.next_cursor is None:
                break
            cursor = {"after": page.next_cursor}
        runs = 0
        for start in range(0, len(idle) if count_runs else 0, _SUMMARY_PAGE):
            ids = [info.session_id for info in idle[start : start + _SUMMARY_PAGE]]
            runs += sum(summary.runs for summary in (await store.session_summaries(ids)).values())
    return idle, runs


def _confirmed(idle: list[SessionInfo], runs: int, idle_for: str) -> bool:
    """Whether the person at the terminal, shown what goes, answers yes (on stderr: stdout
    stays the command's output). Read outside the event loop, so that Ctrl-C ends it."""
    shown = ", ".join(safe_text(one_line(info.session_id, 40)) for info in idle[:_SHOWN])
    more = f" and {len(idle) - _SHOWN:,} more" if len(idle) > _SHOWN else ""
    typer.echo(
        f"{_sessions(len(idle))} ({runs:,} run{'s' * (runs != 1)}) idle for {idle_for} or more "
        f"will be deleted: {shown}{more}.",
        err=True,
    )
    typer.echo("Delete them? [y/N] ", err=True, nl=False)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


async def _delete(
    target: str, idle: list[SessionInfo], cutoff: datetime, show_progress: bool
) -> list[SessionInfo]:
    """Delete each of ``idle`` that is still idle since ``cutoff``; the ones deleted."""
    done: list[SessionInfo] = []
    async with open_store(target, write=True) as store:
        with progress(show_progress, "Pruning") as advance:
            advance(0, len(idle))
            for info in idle:
                # Only if still idle, checked by the delete itself: one written since it was
                # listed is kept.
                try:
                    await store.delete_session(info.session_id, updated_before=cutoff)
                except (ConflictError, SessionNotFoundError):  # written, or deleted by
                    continue  # someone else, meanwhile
                finally:
                    advance(1, None)
                done.append(info)
    return done

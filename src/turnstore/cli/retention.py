"""``prune``: retention as a command. Conversations idle longer than ``--idle-for`` are
deleted whole, a page at a time, with the loop docs/scaling.md ("Retention by time") gives
for Python; ``--dry-run`` lists them and deletes nothing."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

import typer
from rich.text import Text

from ..errors import ConflictError, InvalidOperationError, SessionNotFoundError
from ..model import SessionInfo
from .app import command
from .database import open_store, run_command
from .options import (
    CsvOption,
    DbOption,
    JsonOption,
    NdjsonOption,
    SchemaOption,
    TsvOption,
    output_format,
    resolve_target,
)
from .output import (
    Format,
    make_console,
    make_table,
    one_line,
    print_records,
    printable,
    progress,
    say,
    timestamp,
)

__all__ = ["parse_duration", "prune"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"([0-9]{1,9})([smhdw])")
# The longest duration whose cutoff a datetime can hold (it reaches back from now).
_LONGEST = timedelta(days=365 * 1000)


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``30m``, ``2w``, ``45s`` as a timedelta (more than zero, at most a
    thousand years)."""
    match = _DURATION.fullmatch(text.strip())
    seconds = 0 if match is None else int(match.group(1)) * _UNITS[match.group(2)]
    if not 0 < seconds <= _LONGEST.total_seconds():
        raise InvalidOperationError(
            f"--idle-for takes a duration of more than zero and at most 1000 years, such as "
            f"90d, 12h, 30m or 2w (s, m, h, d, w), not {text!r}"
        )
    return timedelta(seconds=seconds)


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
    """Delete whole conversations idle longer than --idle-for (no write since), a page at a
    time; --dry-run lists them instead. A session written meanwhile is kept."""
    fmt = output_format(as_json=as_json, ndjson=ndjson, csv=csv, tsv=tsv)

    async def go() -> list[SessionInfo]:
        cutoff = datetime.now(timezone.utc) - parse_duration(idle_for)
        done: list[SessionInfo] = []
        async with open_store(resolve_target(ctx, db, schema), write=not dry_run) as store:
            with progress(fmt is Format.table, "Pruning") as advance:
                # The first page names no cursor; each next one, the cursor its last gave.
                cursor: dict[str, Any] = {}
                while True:
                    page = await store.sessions(
                        updated_before=cutoff, order_by="updated_at", limit=batch, **cursor
                    )
                    for info in page.sessions:
                        if not dry_run:
                            # Only if still idle, checked by the delete itself: one written
                            # since the page was read is kept.
                            try:
                                await store.delete_session(info.session_id, updated_before=cutoff)
                            except (ConflictError, SessionNotFoundError):  # written, or
                                continue  # deleted by someone else, meanwhile
                        done.append(info)
                        advance(1, None)
                    if page.next_cursor is None:
                        return done
                    cursor = {"after": page.next_cursor}

    pruned = run_command(go())
    if fmt is not Format.table:
        print_records(fmt, pruned)
        return
    verb = "Would delete" if dry_run else "Deleted"
    if pruned:
        table = make_table(
            None, [("session", "left"), ("user", "left"), ("title", "left"), ("updated", "left")]
        )
        for info in printable(pruned):
            table.add_row(
                Text(info.session_id),
                Text(info.user_id or ""),
                Text(one_line(info.title, 50)),
                timestamp(info.updated_at),
            )
        make_console().print(table)
    say(f"{verb} {len(pruned):,} session{'s' * (len(pruned) != 1)} idle for {idle_for} or more.")

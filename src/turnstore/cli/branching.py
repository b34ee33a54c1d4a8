"""``branches``: where each branch forks, how, its handle, name and counts; naming one,
switching to one by name and deleting one, as AdvancedSQLiteSession's named branches."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from ..domain.model import Branch
from ..domain.turns import RunRef, parse_run
from ..errors import InvalidOperationError, SessionNotFoundError
from .app import command
from .database import open_store, run_command
from .options import (
    CsvOption,
    DbOption,
    JsonOption,
    NdjsonOption,
    SchemaOption,
    SessionArg,
    TsvOption,
    output_format,
    resolve_target,
)
from .output import (
    Format,
    fail,
    make_console,
    make_table,
    one_line,
    print_json,
    print_records,
    printable,
)

__all__ = ["branches"]


@command(30)
def branches(
    ctx: typer.Context,
    session: SessionArg,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            metavar="NAME",
            show_default=False,
            help="Name the branch --run RUN is on (default: the head's); renames a named one.",
        ),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            metavar="RUN",
            show_default=False,
            help="With --name or --unname: a run of the branch (its start, its newest run, or "
            "one between): a run id, or turn:N / turn:N@BRANCH.",
        ),
    ] = None,
    unname: Annotated[
        bool, typer.Option("--unname", help="Remove the name of --run RUN's branch.", metavar="")
    ] = False,
    switch: Annotated[
        str | None,
        typer.Option(
            "--switch",
            metavar="NAME",
            show_default=False,
            help="Move the head to the newest run of the branch called NAME.",
        ),
    ] = None,
    delete: Annotated[
        str | None,
        typer.Option(
            "--delete",
            metavar="BRANCH",
            show_default=False,
            help="Delete the branch called BRANCH (or the runs below a run id, turn:N): what "
            "no other branch reaches.",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="With --delete: delete the active branch too.", metavar=""),
    ] = False,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    ndjson: NdjsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
) -> None:
    """List a session's branches, oldest first: name, the run each starts at (its stable
    handle) and forks from, edit or regenerate, its newest run and last user message; name,
    unname, switch to or delete one."""
    fmt = output_format(as_json=as_json, ndjson=ndjson, csv=csv, tsv=tsv)
    actions = sum((name is not None, unname, switch is not None, delete is not None))
    if actions > 1:
        raise fail("--name, --unname, --switch and --delete are separate changes: give one", 2)
    if force and delete is None:
        raise fail("--force goes with --delete", 2)
    chosen: RunRef | None = None if run is None else parse_run(run)
    doomed: RunRef | str | None = delete
    if delete is not None and (delete.isdigit() or delete.startswith("turn:")):
        doomed = parse_run(delete)  # a run id or a turn; anything else names a branch
    if run is not None and not (name is not None or unname):
        raise fail("--run says which branch --name or --unname changes: give one of them", 2)
    if unname and run is None:
        raise fail("--unname needs --run RUN: the branch to unname", 2)

    async def go() -> list[Branch]:
        async with open_store(resolve_target(ctx, db, schema), write=actions > 0) as store:
            info = await store.session(session)
            if info is None:
                raise SessionNotFoundError(f"no session {session!r}")
            if switch is not None:
                await store.switch_to_branch(session, switch)
            elif doomed is not None:
                await store.delete_branch(session, doomed, force=force)
            elif name is not None or unname:
                target = chosen if chosen is not None else info.head_run_id
                if target is None:
                    raise InvalidOperationError(
                        f"session {session!r} has no head run: name a branch with --run RUN"
                    )
                await store.name_branch(session, target, None if unname else name)
            return await store.branches(session)

    found = run_command(go())
    if fmt is Format.json:
        print_json(found)
        return
    if fmt is not Format.table:
        print_records(fmt, found)
        return
    found = printable(found)
    table = make_table(
        None,
        [
            ("", "left"),
            ("name", "left"),
            ("starts at", "right"),
            ("forks from", "right"),
            ("made by", "left"),
            ("newest run", "right"),
            ("runs", "right"),
            ("messages", "right"),
            ("user turns", "right"),
            ("last user message", "left"),
        ],
    )
    for branch in found:
        table.add_row(
            Text("●", style="green") if branch.active else "",
            Text(branch.name or "", style="bold"),
            str(branch.fork_run_id),
            "" if branch.forks_from is None else str(branch.forks_from),
            branch.origin or "",
            str(branch.leaf_run_id),
            f"{branch.depth + 1:,}",
            f"{branch.message_count:,}",
            f"{branch.user_turns:,}",
            Text(one_line(branch.last_user_message, 60)),
        )
    make_console().print(table if found else "No branches.")

"""``query``: one read-only SQL statement over the database, its rows printed as a table or
as data (as sqlite-utils and Datasette offer).

Nothing it runs can write: the database is opened read-only (SQLite's ``mode=ro``; on
PostgreSQL a ``READ ONLY`` transaction, rolled back at its end) and one statement is taken, so
that none can end the transaction to run another. Writing statements are refused by the
database itself (``ReadOnlyError``). What PostgreSQL runs outside any transaction (signalling
a backend, reloading its configuration) is left to the role's privileges: docs/cli.md.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from ..errors import InvalidOperationError
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
    resolve_target,
)
from .output import Format, fail, make_console, make_table, print_records, safe_text, say

__all__ = ["query"]


_JSON_SCALARS = (str, bool, int, float, datetime, type(None))


def _value(value: Any) -> Any:
    """A value the drivers return, as JSON can hold it (datetimes stay: JSON writes them).

    What JSON has no literal for is written as PostgreSQL's ``to_json`` writes it: a number
    that is not finite as the text ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``; a value of
    any other type (an interval, an address, a range) as its text."""
    if isinstance(value, (float, Decimal)) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_value(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _value(item) for key, item in value.items()}
    return str(value)  # uuid.UUID, timedelta, ipaddress, psycopg's Range, …


def _names(columns: Sequence[str]) -> list[str]:
    """The column names, each once: a repeated name gets ``_2``, ``_3``, … (as in a CSV)."""
    seen: dict[str, int] = {}
    names = []
    for column in columns:
        seen[column] = seen.get(column, 0) + 1
        names.append(column if seen[column] == 1 else f"{column}_{seen[column]}")
    return names


def _statement(sql: str | None, file: str | None) -> str:
    """The statement: the argument, or what ``--file`` holds; ``-`` for either reads stdin
    (read before the command runs, so that Ctrl-C ends a wait for it at once)."""
    source = file if file is not None else sql
    if source is None or (sql is not None and file is not None):
        given = "no SQL" if source is None else "both SQL and --file"
        raise fail(
            f"{given}: give the statement as SQL or in --file FILE (- reads stdin)",
            2,
            "UsageError",
        )
    if file is None and source != "-":
        return source
    with command_errors():
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        try:
            return data.decode("utf-8-sig")  # an editor's byte-order mark is not SQL
        except UnicodeDecodeError:
            name = "stdin" if source == "-" else source
            raise InvalidOperationError(f"{name} is not UTF-8 text") from None


@command(80)
def query(
    ctx: typer.Context,
    sql: Annotated[
        str | None,
        typer.Argument(
            metavar="SQL",
            help="One SQL statement that reads (SELECT, WITH …, EXPLAIN, PRAGMA on SQLite); "
            "- reads it from stdin. One that starts with a -- comment is taken as SQL.",
            show_default=False,
        ),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option(
            "--file",
            "-f",
            metavar="FILE",
            help="Read the statement from FILE (- for stdin) instead.",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    ndjson: NdjsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
) -> None:
    """Run one read-only SQL statement and print its rows (the tables: docs/queries.md).

    The statement is the SQL argument, or read from --file FILE; - reads stdin.

    The database is opened read-only: a statement that writes is refused."""
    fmt = output_format(as_json=as_json, ndjson=ndjson, csv=csv, tsv=tsv)
    statement = _statement(sql, file)

    async def go() -> tuple[list[str], list[Sequence[Any]]]:
        if not statement.strip():
            raise InvalidOperationError("the SQL statement is empty")
        async with open_store(resolve_target(ctx, db, schema)) as store:
            return await store.read_sql(statement)

    columns, rows = run_command(go())
    names = _names(columns)
    if fmt is not Format.table:
        print_records(fmt, [dict(zip(names, map(_value, row), strict=True)) for row in rows])
        return
    if not names:
        say("The statement returned no rows.")
        return
    table = make_table(None, [(escape(safe_text(name)), "left") for name in names])
    for row in rows:
        table.add_row(*(Text(safe_text("" if v is None else str(_value(v)))) for v in row))
    make_console().print(table)
    say(f"{len(rows):,} row{'s' * (len(rows) != 1)}.")

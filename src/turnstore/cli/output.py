"""What the commands print: safe text for a terminal, JSON, NDJSON, CSV or TSV for scripts,
tables, progress, and errors (one line, or a JSON object after ``--json``).

Stored text is written by models and tools: printed raw, it could drive the terminal. Every
human-readable output goes through ``safe_text`` (via ``printable``, ``say`` and ``fail``);
machine-readable output stays exact (JSON escapes what a terminal would act on).

A table printed to a pipe or a file is not wrapped at 80 columns (a terminal's width is
unknown there): each row stays one line, for grep and cut. ``COLUMNS`` still wins.
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import dataclasses
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar, cast

import typer
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..domain import jsonout
from ..domain.model import ToolCall, Usage

__all__ = [
    "Format",
    "clip",
    "error_text",
    "fail",
    "json_errors",
    "json_requested",
    "json_safe",
    "make_console",
    "make_table",
    "one_line",
    "print_json",
    "print_records",
    "printable",
    "progress",
    "safe_text",
    "say",
    "status_style",
    "timestamp",
    "usage_text",
]

T = TypeVar("T")

# What must not reach a terminal raw: C0 controls (but tab and newline), DEL and C1 controls
# (ESC and CSI start the sequences that clear the screen, set the title or plant links), and
# the bidirectional overrides that make text read other than it is stored.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """``text`` fit for a terminal: each control character shown as its escape (``\\x1b``).

    Stored text is written by models and tools: printed raw, it could drive the terminal. Every
    human-readable output goes through this (via ``printable``, ``say`` and ``fail``);
    ``--json`` output stays exact.
    """
    return _UNSAFE.sub(_escape_char, text)


def json_safe(text: str) -> str:
    """JSON text with the control characters JSON leaves raw (DEL, C1, bidi overrides) written
    as ``\\u`` escapes: the same data when parsed, and safe for a terminal."""
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def printable(value: T) -> T:
    """``value`` (records, lists, dicts of them) with every string passed through
    ``safe_text``: what the human-readable output of a command is made from."""
    result: Any = value
    if isinstance(value, str):
        result = safe_text(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: printable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        result = dataclasses.replace(value, **fields)
    elif isinstance(value, (list, tuple)):
        result = type(value)(printable(v) for v in value)
    elif isinstance(value, dict):
        result = {k: printable(v) for k, v in value.items()}
    return cast(T, result)


# Whether the command line asked for JSON, set by the root command before any parsing.
_JSON_ERRORS: contextvars.ContextVar[bool] = contextvars.ContextVar("json_errors", default=False)


def json_errors(args: Sequence[str]) -> None:
    """Note whether ``args`` (the whole command line) ask for JSON, so that an error, even
    one found while parsing them, is written as JSON too."""
    words = list(args)
    if "--" in words:
        words = words[: words.index("--")]
    _JSON_ERRORS.set("--json" in words or "--ndjson" in words)


def json_requested() -> bool:
    """Whether the command line asked for JSON (``json_errors``)."""
    return _JSON_ERRORS.get()


def error_text(message: str, kind: str) -> str:
    """The one line on stderr for an error: ``error: …``, or after ``--json``/``--ndjson`` a
    JSON object ``{"error": {"type": …, "message": …}}``."""
    if json_requested():
        return json_safe(jsonout.dumps({"error": {"type": kind, "message": message}}))
    return f"error: {safe_text(message)}"


def fail(message: str, code: int = 1, kind: str = "error") -> typer.Exit:
    """Print ``message`` as the command's one line on stderr (``error_text``; ``kind`` names
    the error for JSON); the exit to raise."""
    typer.echo(error_text(message, kind), err=True)
    return typer.Exit(code)


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (exact data, safe for a terminal)."""
    typer.echo(json_safe(jsonout.dumps(value, indent=2)))


# The width of a table printed to a pipe or file: wide enough that no row wraps.
_UNWRAPPED = 100_000


def make_console() -> Console:
    """The console of stdout: the terminal's width, else (piped) no wrapping."""
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = _UNWRAPPED
    return console


def say(message: str) -> None:
    """A sentence for people, never wrapped (so paths and commands stay copyable)."""
    make_console().print(safe_text(message), soft_wrap=True)


def clip(text: str | None, width: int | None) -> str:
    if text is None:
        return ""
    if width is not None and len(text) > width:
        return text[: width - 1] + "…"
    return text


def one_line(text: str | None, width: int | None) -> str:
    """One line of ``text``: whitespace collapsed, clipped to ``width``."""
    return clip(" ".join(text.split()) if text else text, width)


def usage_text(usage: Usage) -> str:
    """A run's usage in a phrase: requests, total tokens and their kinds."""
    if not (usage.total_tokens or usage.requests):
        return ""
    parts = [f"{usage.input_tokens:,} in", f"{usage.output_tokens:,} out"]
    if usage.cached_tokens:
        parts.append(f"{usage.cached_tokens:,} cached")
    if usage.reasoning_tokens:
        parts.append(f"{usage.reasoning_tokens:,} reasoning")
    requests = f"{usage.requests} request{'s' if usage.requests != 1 else ''} · "
    return f"{requests}{usage.total_tokens:,} tokens ({', '.join(parts)})"


def timestamp(value: datetime | None) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


class _WholeIdsTable(Table):
    """A table whose no-wrap columns (ids, numbers) are as wide as their widest cell: when
    the terminal is narrow, the text columns give up their width, never an id."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for column in self.columns:
            if column.no_wrap:
                # The cells only: a header may wrap, a value may not.
                column.min_width = max((cell_len(str(cell)) for cell in column.cells), default=1)
        yield from super().__rich_console__(console, options)


def make_table(title: str | None, columns: Sequence[tuple[str, str]]) -> Table:
    """A table whose columns are (name, "left" | "right" | "id").

    An ``id`` column (a session id, the column a user copies into the next command) and a
    ``right`` one (numbers, run ids) never wrap nor lose a character: on a narrow terminal
    the text columns give up their width instead."""
    result = _WholeIdsTable(title=escape(title) if title else None, title_justify="left")
    for name, justify in columns:
        whole = justify in ("right", "id")
        result.add_column(
            name,
            justify="right" if justify == "right" else "left",
            no_wrap=whole,
        )
    return result


def _no_progress(n: int, total: int | None = None) -> None:
    """``advance`` where no bar is shown."""


@contextlib.contextmanager
def progress(enabled: bool, description: str) -> Iterator[Callable[[int, int | None], None]]:
    """A progress bar on stderr (only on a terminal); yields ``advance(n, total)``."""
    stderr = Console(stderr=True)
    if not (enabled and stderr.is_terminal):
        # No Progress at all: a disabled one still writes a newline when it stops (rich 13.0).
        yield _no_progress
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)

        def advance(n: int, total: int | None = None) -> None:
            if total is not None:
                bar.update(task, total=total)
            bar.advance(task, n)

        yield advance


_STATUS_STYLE = {"completed": "green", "pending": "yellow", "in_progress": "yellow"}


def status_style(call: ToolCall) -> str:
    """The colour of a tool call's status: red when it failed."""
    if call.failed:
        return "red"
    return _STATUS_STYLE.get(call.status or "", "yellow")


class Format(str, Enum):
    """How a command prints its rows: a table for people, or data for scripts."""

    table = "table"
    json = "json"
    ndjson = "ndjson"
    csv = "csv"
    tsv = "tsv"


def _flat(record: Any, prefix: str = "", *, spread: bool = False) -> dict[str, Any]:
    """A record (a dataclass or a dict) as one flat row: a nested record's fields become
    ``outer.inner`` columns; with ``spread`` a nested mapping's keys too (else it is one
    JSON cell)."""
    values = jsonout.fields(record) if dataclasses.is_dataclass(record) else dict(record)
    row: dict[str, Any] = {}
    for key, value in values.items():
        nested = dataclasses.is_dataclass(value) and not isinstance(value, type)
        if nested or (spread and isinstance(value, Mapping)):
            row.update(_flat(value, f"{prefix}{key}.", spread=spread))
        else:
            row[f"{prefix}{key}"] = value
    return row


def _cell(value: Any) -> str:
    """A value as a CSV cell: text as stored, None empty, lists and mappings as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (int, float)):
        return str(value)
    return jsonout.dumps(value)


def print_records(fmt: Format, records: Sequence[Any], *, spread: bool = False) -> None:
    """``records`` (dataclasses or dicts of one shape) on stdout as JSON (an array), NDJSON
    (an object a line), CSV or TSV (a header, then a row each: nested records flattened;
    ``spread``: nested mappings too, as ``usage --details`` spreads the token details).
    Not for ``Format.table``: each command draws its own."""
    if fmt is Format.json:
        print_json(list(records))
        return
    if fmt is Format.ndjson:
        for record in records:
            typer.echo(json_safe(jsonout.dumps(record)))
        return
    rows = [_flat(record, spread=spread) for record in records]
    # Exact text for a program; on a terminal, stored text must not drive it (``safe_text``).
    shown = safe_text if sys.stdout.isatty() else str
    dialect = "excel-tab" if fmt is Format.tsv else "excel"
    writer = csv.writer(sys.stdout, dialect=dialect, lineterminator="\n")
    if rows:
        writer.writerow([shown(name) for name in rows[0]])
    for row in rows:
        writer.writerow([shown(_cell(value)) for value in row.values()])

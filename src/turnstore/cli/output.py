"""What the commands print: safe text for a terminal, JSON for scripts, tables, progress.

Stored text is written by models and tools: printed raw, it could drive the terminal. Every
human-readable output goes through ``safe_text`` (via ``printable``, ``say`` and ``fail``);
``--json`` output stays exact.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from .. import jsonout
from ..model import ToolCall, Usage

__all__ = [
    "clip",
    "fail",
    "json_safe",
    "make_console",
    "make_table",
    "milliseconds",
    "one_line",
    "print_json",
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


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``message`` as the command's one line on stderr; the exit to raise."""
    typer.echo(f"error: {safe_text(message)}", err=True)
    return typer.Exit(code)


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (exact data, safe for a terminal)."""
    typer.echo(json_safe(jsonout.dumps(value, indent=2)))


def make_console() -> Console:
    return Console(highlight=False)


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


def milliseconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


def make_table(title: str | None, columns: Sequence[tuple[str, str]]) -> Table:
    """A table whose columns are (name, "left" | "right")."""
    result = Table(title=escape(title) if title else None, title_justify="left")
    for name, justify in columns:
        result.add_column(name, justify="right" if justify == "right" else "left")
    return result


@contextlib.contextmanager
def progress(enabled: bool, description: str) -> Iterator[Callable[[int, int | None], None]]:
    """A progress bar on stderr (only on a terminal); yields ``advance(n, total)``."""
    stderr = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
        disable=not (enabled and stderr.is_terminal),
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

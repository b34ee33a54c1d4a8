"""``diff``: two courses of a conversation compared, side by side when the terminal is wide
enough, else one under the other; ``--json`` for scripts."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..domain.diff import CALL_FIELDS, BranchDiff, RunDiff, ToolCallDiff, word_changes
from ..domain.model import Run, ToolCall
from ..domain.units import duration_text
from .app import command
from .database import open_store, run_command
from .options import DbOption, JsonOption, SchemaOption, resolve_target
from .output import make_console, print_json, safe_text

__all__ = ["diff"]

# A terminal at least this wide shows the two courses side by side.
SIDE_BY_SIDE = 120
_CALL_LABELS = {
    "tool_name": "name",
    "arguments": "arguments",
    "output": "output",
    "status": "status",
    "duration_ms": "duration",
}
_STYLES = {"equal": "", "delete": "red strike", "insert": "green underline"}


def _side(value: str | None, session: str | None) -> int | str | None:
    """A side as ``Store.diff`` takes it: digits are a run id; else a branch name (with
    --session) or a session id; nothing is the active path (with --session)."""
    if value is None:
        return None
    return int(value) if value.isascii() and value.isdigit() else value


def _marked(a: str, b: str, keep: str) -> Text:
    """One side of a changed text, its changed words styled (``keep``: the tag it shows)."""
    text = Text()
    for tag, piece in word_changes(a, b):
        if tag in ("equal", keep):
            text.append(safe_text(piece), style=_STYLES[tag])
    return text


def _run_title(run: Run | None) -> str:
    return "—" if run is None else f"run {run.id}"


def _call_text(call: ToolCall | None, field: str) -> str:
    if call is None:
        return ""
    value: Any = getattr(call, field)
    if field == "duration_ms":
        return duration_text(value)
    return "" if value is None else str(value)


def _text(run: Run | None, field: str) -> str:
    value = None if run is None else getattr(run, field)
    return value or ""


def _fields(pair: RunDiff) -> list[tuple[str, str, str, bool]]:
    """(label, side a, side b, changed) for each line of an aligned pair."""
    a, b = pair.a, pair.b
    lines = [
        (
            "user",
            (a and a.user_message) or "",
            (b and b.user_message) or "",
            pair.user_message_changed,
        ),
        (
            "answer",
            (a and a.assistant_message) or "",
            (b and b.assistant_message) or "",
            pair.answer_changed,
        ),
    ]
    for call in pair.tool_calls:
        lines.extend(_call_lines(call))
    tokens_changed = pair.tokens_a != pair.tokens_b
    lines.append(("tokens", str(pair.tokens_a), str(pair.tokens_b), tokens_changed))
    return lines


def _call_lines(call: ToolCallDiff) -> list[tuple[str, str, str, bool]]:
    label = f"tool {call.index + 1}"
    return [
        (
            f"{label} {_CALL_LABELS[field]}",
            _call_text(call.a, field),
            _call_text(call.b, field),
            field in call.changed,
        )
        for field in CALL_FIELDS
    ]


def _side_by_side(console: Console, result: BranchDiff) -> None:
    for pair in result.runs:
        table = Table(title=f"{_run_title(pair.a)}  ↔  {_run_title(pair.b)}", title_justify="left")
        table.add_column("", style="bold", no_wrap=True)
        table.add_column(f"A ({safe_text(result.session_a)})", ratio=1)
        table.add_column(f"B ({safe_text(result.session_b)})", ratio=1)
        for label, a, b, changed in _fields(pair):
            if not (a or b):
                continue
            if changed:
                table.add_row(label, _marked(a, b, "delete"), _marked(a, b, "insert"))
            else:
                table.add_row(label, Text(safe_text(a)), Text(safe_text(b)), style="dim")
        console.print(table)


def _unified(console: Console, result: BranchDiff) -> None:
    for pair in result.runs:
        console.print(Text(f"@@ {_run_title(pair.a)} ↔ {_run_title(pair.b)}", style="cyan"))
        for label, a, b, changed in _fields(pair):
            if not changed:
                if a:
                    console.print(Text(f"  {label}: ") + Text(safe_text(a), style="dim"))
                continue
            if a:
                console.print(Text(f"- {label}: ", style="red") + _marked(a, b, "delete"))
            if b:
                console.print(Text(f"+ {label}: ", style="green") + _marked(a, b, "insert"))


@command(33)
def diff(
    ctx: typer.Context,
    a: Annotated[
        str,
        typer.Argument(
            metavar="A",
            help="A run id, a branch name (with --session) or a session id.",
            show_default=False,
        ),
    ],
    b: Annotated[
        str | None,
        typer.Argument(
            metavar="[B]",
            help="The same kinds as A; with --session, left out: the active path.",
            show_default=False,
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            "-s",
            metavar="SESSION",
            show_default=False,
            help="The session whose runs and branches A and B name.",
        ),
    ] = None,
    unified: Annotated[
        bool,
        typer.Option(
            "--unified", "-u", help="One course under the other, even on a wide terminal."
        ),
    ] = False,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
) -> None:
    """Compare two courses of a conversation: the runs they share, where they fork, then the
    runs after it one by one (user message, answer, tool calls, tokens), the changed words
    marked."""

    async def go() -> BranchDiff:
        async with open_store(resolve_target(ctx, db, schema)) as store:
            return await store.diff(_side(a, session), _side(b, session), session_id=session)

    result = run_command(go())
    if as_json:
        print_json(result)
        return
    console = make_console()
    shared = len(result.common)
    fork = "none" if result.fork_run_id is None else f"after run {result.fork_run_id}"
    console.print(
        f"{shared} run{'s' * (shared != 1)} in common, the fork {fork}; "
        f"{len(result.runs)} aligned after it."
    )
    if result.identical:
        console.print("The two courses are the same.")
        return
    if console.is_terminal and console.width >= SIDE_BY_SIDE and not unified:
        _side_by_side(console, result)
    else:
        _unified(console, result)

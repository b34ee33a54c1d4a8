"""The ``turnstore`` command line: inspect, search, export, import and migrate conversations.

A thin layer over ``Store``: each command opens the database named by ``--db`` (or the
``TURNSTORE_DB`` environment variable, else ``turnstore.db``), calls the library, and prints
tables and trees for people or, with ``--json``, JSON for scripts. Errors are one line on
stderr and a non-zero exit status. Read commands open the database read-only: they never
create, migrate or write it, and work on a file or directory they cannot write.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from . import _importers, jsonout
from ._adopt import adopt_sdk_sessions
from .core.queries import SNIPPET_MARKS
from .errors import (
    ConfigurationError,
    ConnectionFailedError,
    InvalidOperationError,
    SchemaError,
    SessionNotFoundError,
    TurnstoreError,
)
from .inspection import sqlite_file
from .model import Run, SearchResult, SessionInfo, SessionPage, ToolCall, Usage, UsageRow
from .store import Store
from .store import migrate as migrate_database

__all__ = ["app", "main"]

T = TypeVar("T")

DEFAULT_DB = "turnstore.db"
ENV_DB = "TURNSTORE_DB"

app = typer.Typer(
    name="turnstore",
    help=(
        "Inspect, search, export, import and migrate agent conversations stored by turnstore.\n\n"
        f"The database is --db (before or after the command), else ${ENV_DB}, else "
        f"./{DEFAULT_DB}: a SQLite path or a postgresql:// URL."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="PATH|URL",
        help=f"Database: a SQLite path or a postgresql:// URL (else ${ENV_DB}, else {DEFAULT_DB}).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).", metavar="")]
SessionArg = Annotated[
    str, typer.Argument(metavar="SESSION", help="The session id.", show_default=False)
]


# ---------------------------------------------------------------------------------------------
# Plumbing: the database, errors, output


@app.callback()
def _root(ctx: typer.Context, db: DbOption = None) -> None:
    ctx.obj = db


def _target(ctx: typer.Context, db: str | None) -> str:
    """The database: the command's --db, the global --db, $TURNSTORE_DB, or the default."""
    root = ctx.find_root().obj
    return db or (root if isinstance(root, str) else None) or os.environ.get(ENV_DB) or DEFAULT_DB


def _shown(target: str) -> str:
    """``target`` fit to print: a URL's password masked."""
    parts = urlsplit(target) if "://" in target else None
    if parts is None or parts.password is None:
        return target
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _check_database(target: str, *, create: bool, sdk: bool = False) -> None:
    """Refuse, before opening, a missing file (unless ``create``), a file that is not a
    database, and a database of another kind (which opening would add tables to), which
    includes a file of the SDK's ``SQLiteSession`` unless the command adopts it (``sdk``).
    A server's database is left to the open to judge."""
    if sqlite_file(target) is None:
        return
    info = Store.inspect(target)
    if info.kind == "turnstore" or (create and info.kind in ("missing", "empty")):
        return
    if info.kind == "missing":
        raise ConnectionFailedError(
            f"no database at {target}: name one with --db or ${ENV_DB}, or create one with "
            "`turnstore demo` or `turnstore import`"
        )
    if info.kind == "empty":
        raise SchemaError(f"{target} is an empty database, not a turnstore database")
    listed = ", ".join(info.tables[:6]) + (", …" if len(info.tables) > 6 else "")
    if info.kind == "sdk-advanced":
        raise SchemaError(
            f"{target} is an AdvancedSQLiteSession database (tables {listed}), not a turnstore "
            f"database: copy its conversations into another with `turnstore import {target}`"
        )
    if info.kind == "sdk-sessions" and sdk:
        return
    if info.kind == "sdk-sessions":
        raise SchemaError(
            f"{target} is an Agents SDK session database (tables {listed}), not a turnstore "
            f"database: adopt its conversations in place with `turnstore adopt --db {target}` "
            f"or copy them into another with `turnstore import {target}`"
        )
    raise SchemaError(f"{target} is a database of another kind (tables {listed})")


@contextlib.asynccontextmanager
async def _open(target: str, *, create: bool = False) -> AsyncIterator[Store]:
    """The store at ``target``: read-only (never migrated) unless the command ``create``s."""
    _check_database(target, create=create)
    store = Store.open(target, read_only=not create)
    try:
        yield store
    finally:
        await store.aclose()


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
    human-readable output goes through this (via ``_printable``, ``_say`` and ``_fail``);
    ``--json`` output stays exact.
    """
    return _UNSAFE.sub(_escape_char, text)


def _json_safe(text: str) -> str:
    """JSON text with the control characters JSON leaves raw (DEL, C1, bidi overrides) written
    as ``\\u`` escapes: the same data when parsed, and safe for a terminal."""
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _printable(value: T) -> T:
    """``value`` (records, lists, dicts of them) with every string passed through
    ``safe_text``: what the human-readable output of a command is made from."""
    result: Any = value
    if isinstance(value, str):
        result = safe_text(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _printable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        result = dataclasses.replace(value, **fields)
    elif isinstance(value, (list, tuple)):
        result = type(value)(_printable(v) for v in value)
    elif isinstance(value, dict):
        result = {k: _printable(v) for k, v in value.items()}
    return cast(T, result)


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"error: {safe_text(message)}", err=True)
    return typer.Exit(code)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; an error becomes one line on stderr and exit status 1."""
    try:
        return asyncio.run(coro)
    except TurnstoreError as exc:
        raise _fail(str(exc)) from None
    except UnicodeEncodeError as exc:  # a non-UTF-8 argument (decoded with surrogates)
        text = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else exc.object
        raise _fail(f"{text!r} is not valid UTF-8 text: is an argument not UTF-8?", 2) from None
    except OSError as exc:  # e.g. an --output file that cannot be written
        raise _fail(
            f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc)
        ) from None
    except KeyboardInterrupt:
        raise _fail("interrupted", 130) from None


def _print_json(value: Any) -> None:
    typer.echo(_json_safe(jsonout.dumps(value, indent=2)))


def _console() -> Console:
    return Console(highlight=False)


def _say(message: str) -> None:
    """A sentence for people, never wrapped (so paths and commands stay copyable)."""
    _console().print(safe_text(message), soft_wrap=True)


def _clip(text: str | None, width: int | None) -> str:
    if text is None:
        return ""
    if width is not None and len(text) > width:
        return text[: width - 1] + "…"
    return text


def _line(text: str | None, width: int | None) -> str:
    """One line of ``text``: whitespace collapsed, clipped to ``width``."""
    return _clip(" ".join(text.split()) if text else text, width)


def _tokens(usage: Usage) -> str:
    if not (usage.total_tokens or usage.requests):
        return ""
    parts = [f"{usage.input_tokens:,} in", f"{usage.output_tokens:,} out"]
    if usage.cached_tokens:
        parts.append(f"{usage.cached_tokens:,} cached")
    if usage.reasoning_tokens:
        parts.append(f"{usage.reasoning_tokens:,} reasoning")
    requests = f"{usage.requests} request{'s' if usage.requests != 1 else ''} · "
    return f"{requests}{usage.total_tokens:,} tokens ({', '.join(parts)})"


def _time(value: datetime | None) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def _ms(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


# ---------------------------------------------------------------------------------------------
# show, runs


_STATUS_STYLE = {"completed": "green", "pending": "yellow", "in_progress": "yellow"}


def _status_style(call: ToolCall) -> str:
    if call.failed:
        return "red"
    return _STATUS_STYLE.get(call.status or "", "yellow")


def _call_text(call: ToolCall, width: int | None) -> Text:
    status = call.status or "?"
    failed = call.failed
    text = Text("⚙ ", style="cyan")
    text.append(call.tool_name or call.kind or "tool", style="bold cyan")
    if call.arguments:
        text.append(" " + _line(call.arguments, width and width // 2))
    if call.output is not None:
        text.append(" → ")
        text.append(_line(call.output, width and width // 2), style="red" if failed else "")
    text.append("  ")
    text.append(status, style=_status_style(call))
    if call.duration_ms is not None:
        text.append(f" · {_ms(call.duration_ms)}", style="dim")
    if call.error and call.error != call.output:
        text.append(f"\n  error: {_line(call.error, width)}", style="red")
    return text


def _run_label(run: Run, *, active: bool, head: bool) -> Text:
    text = Text("● " if active else "○ ", style="green" if active else "dim")
    text.append(f"run {run.id}", style="bold")
    details = [_time(run.created_at)]
    if run.agent_name:
        details.append(run.agent_name)
    if run.model:
        details.append(run.model)
    tokens = _tokens(run.usage)
    if tokens:
        details.append(tokens)
    text.append("  " + " · ".join(d for d in details if d), style="dim")
    if head:
        text.append("  ← head", style="bold green")
    return text


def _add_run(
    parent: Tree,
    run: Run,
    calls: Sequence[ToolCall],
    *,
    active: bool,
    head: bool,
    width: int | None,
) -> None:
    node = parent.add(_run_label(run, active=active, head=head))
    if run.user_message is not None:
        node.add(Text("user: ", style="bold blue").append(_clip(run.user_message, width)))
    for call in calls:
        node.add(_call_text(call, width))
    if run.assistant_message is not None:
        node.add(
            Text("assistant: ", style="bold magenta").append(_clip(run.assistant_message, width))
        )


def _render_tree(
    title: Text,
    runs: Sequence[Run],
    calls: dict[int, list[ToolCall]],
    active_ids: set[int],
    head_id: int | None,
    width: int | None,
) -> Tree:
    """The session as a tree that only nests at forks: a single child continues the line."""
    children: dict[int | None, list[Run]] = {}
    for run in runs:
        children.setdefault(run.parent_id, []).append(run)
    root = Tree(title)

    # A stack, not recursion: edits of edits nest forks without limit.
    stack: list[tuple[Tree, list[Run]]] = [(root, children.get(None, []))]
    while stack:
        node, siblings = stack.pop()
        while len(siblings) == 1:
            run = siblings[0]
            _add_run(
                node,
                run,
                calls.get(run.id, []),
                active=run.id in active_ids,
                head=run.id == head_id,
                width=width,
            )
            siblings = children.get(run.id, [])
        if siblings:
            fork = node.add(Text(f"⑂ {len(siblings)} branches", style="bold yellow"))
            branches = []
            for index, run in enumerate(siblings, 1):
                label = Text(f"branch {index}/{len(siblings)}", style="yellow")
                if run.id in active_ids:
                    label.append("  active", style="bold green")
                branches.append((fork.add(label), [run]))
            stack.extend(reversed(branches))
    return root


async def _session_runs(
    store: Store, session_id: str
) -> tuple[SessionInfo, list[Run], dict[int, list[ToolCall]], set[int]]:
    """The session's catalogue entry, every run, each run's tool calls, the active path."""
    info = await store.session(session_id)
    if info is None:
        raise SessionNotFoundError(f"no session {session_id!r}")
    runs = [run for run, _ in await store.tree(session_id)]
    calls: dict[int, list[ToolCall]] = {}
    for call in await store.tool_calls(session_id=session_id, limit=None):
        calls.setdefault(call.run_id, []).append(call)
    active = {run.id for run in await store.runs(session_id)}
    return info, runs, calls, active


@app.command()
def show(
    ctx: typer.Context,
    session: SessionArg,
    full: Annotated[
        bool, typer.Option("--full", help="Print messages and tool data unabridged.", metavar="")
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session as its run tree: every branch, each run's user and assistant message,
    tool calls with status and duration, and token usage. ● marks the active path."""

    async def go() -> None:
        async with _open(_target(ctx, db)) as store:
            info, runs, calls, active = await _session_runs(store, session)
        if not as_json:
            info, runs, calls = _printable((info, runs, calls))
        if as_json:
            _print_json(
                {
                    "session": info,
                    "runs": [
                        {
                            **jsonout.fields(run),
                            "active": run.id in active,
                            "tool_calls": calls.get(run.id, []),
                        }
                        for run in runs
                    ],
                }
            )
            return
        leaves = {r.id for r in runs} - {r.parent_id for r in runs}
        title = Text(info.session_id, style="bold")
        if info.title:
            title.append(f"  “{_line(info.title, 60)}”")
        total = sum(run.usage.total_tokens for run in runs)
        title.append(
            f"  {len(runs)} run{'s' * (len(runs) != 1)} · {len(leaves)} "
            f"branch{'es' * (len(leaves) != 1)} · {total:,} tokens",
            style="dim",
        )
        width = None if full else 300
        _console().print(_render_tree(title, runs, calls, active, info.head_run_id, width))

    _run(go())


@app.command()
def runs(
    ctx: typer.Context,
    session: SessionArg,
    all_branches: Annotated[
        bool,
        typer.Option(
            "--all", help="Every run of every branch, not only the active path.", metavar=""
        ),
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a session's runs (the active path, oldest first): user message, answer, tokens."""

    async def go() -> None:
        async with _open(_target(ctx, db)) as store:
            if await store.session(session) is None:
                raise SessionNotFoundError(f"no session {session!r}")
            if all_branches:
                listed = [run for run, _ in await store.tree(session)]
            else:
                listed = await store.runs(session)
        if as_json:
            _print_json(listed)
            return
        listed = _printable(listed)
        table = _table(
            f"runs of {safe_text(session)}",
            [
                ("id", "right"),
                ("parent", "right"),
                ("user", "left"),
                ("assistant", "left"),
                ("items", "right"),
                ("tokens", "right"),
                ("created", "left"),
            ],
        )
        for run in listed:
            table.add_row(
                str(run.id),
                "" if run.parent_id is None else str(run.parent_id),
                Text(_line(run.user_message, 60)),
                Text(_line(run.assistant_message, 60)),
                str(run.item_count),
                f"{run.usage.total_tokens:,}",
                _time(run.created_at),
            )
        _console().print(table)

    _run(go())


# ---------------------------------------------------------------------------------------------
# sessions, tools, search, usage, export


def _table(title: str | None, columns: Sequence[tuple[str, str]]) -> Table:
    """A table whose columns are (name, "left" | "right")."""
    table = Table(title=escape(title) if title else None, title_justify="left")
    for name, justify in columns:
        table.add_column(name, justify="right" if justify == "right" else "left")
    return table


def _parse_time(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise InvalidOperationError(
            f"{option} takes an ISO 8601 date or time (2025-01-31, 2025-01-31T12:00), not {value!r}"
        ) from None


def _metadata_filter(pairs: Sequence[str]) -> dict[str, Any] | None:
    """``KEY=VALUE`` pairs; a value that reads as JSON (42, true, null) is that value."""
    if not pairs:
        return None
    result: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise InvalidOperationError(f"--meta takes KEY=VALUE, not {pair!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        result[key] = value if isinstance(value, (str, int, float, bool, type(None))) else raw
    return result


class SessionOrderOption(str, Enum):
    """How ``sessions`` orders its listing."""

    created = "created"
    updated = "updated"


@app.command()
def sessions(
    ctx: typer.Context,
    user: Annotated[
        str | None,
        typer.Option(help="Only this user's sessions.", metavar="USER", show_default=False),
    ] = None,
    meta: Annotated[
        list[str] | None,
        typer.Option(
            help="Only sessions whose metadata has KEY equal to VALUE (repeatable).",
            metavar="KEY=VALUE",
            show_default=False,
        ),
    ] = None,
    order: Annotated[
        SessionOrderOption, typer.Option(help="Newest first by creation or by last write.")
    ] = SessionOrderOption.created,
    limit: Annotated[int, typer.Option(help="Sessions per page.", metavar="N", min=1)] = 50,
    after: Annotated[
        str | None,
        typer.Option(
            help="The cursor printed under the previous page.", metavar="CURSOR", show_default=False
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List sessions, newest first, a page at a time."""

    async def go() -> SessionPage:
        async with _open(_target(ctx, db)) as store:
            return await store.sessions(
                user_id=user,
                metadata=_metadata_filter(meta or []),
                order_by="created_at" if order is SessionOrderOption.created else "updated_at",
                limit=limit,
                after=after,
            )

    page = _run(go())
    if as_json:
        _print_json(page)
        return
    page = _printable(page)
    table = _table(
        None,
        [
            ("session", "left"),
            ("title", "left"),
            ("user", "left"),
            ("head", "right"),
            ("created", "left"),
            ("updated", "left"),
        ],
    )
    for info in page.sessions:
        table.add_row(
            Text(info.session_id),
            Text(_line(info.title, 50)),
            Text(info.user_id or ""),
            "" if info.head_run_id is None else str(info.head_run_id),
            _time(info.created_at),
            _time(info.updated_at),
        )
    console = _console()
    if page.sessions:
        console.print(table)
    else:
        console.print("No sessions.")
    if page.next_cursor is not None:
        console.print(f"More: --after {page.next_cursor}", style="dim")


@app.command()
def tools(
    ctx: typer.Context,
    session: Annotated[
        str | None,
        typer.Option(help="Only this session's calls.", metavar="SESSION", show_default=False),
    ] = None,
    tool: Annotated[
        str | None, typer.Option(help="Only this tool's calls.", metavar="NAME", show_default=False)
    ] = None,
    calls: Annotated[
        bool, typer.Option("--calls", help="List the calls themselves, not statistics.", metavar="")
    ] = False,
    status: Annotated[
        str | None,
        typer.Option(
            help="With --calls: only calls of this status (failed: every failed call).",
            metavar="STATUS",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option(help="With --calls: the newest N calls.", metavar="N", min=1)
    ] = 50,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Per-tool statistics: calls, errors, error rate, p50/p95 duration; or, with --calls,
    the calls with their arguments, output, status and duration."""

    async def go() -> list[Any]:
        async with _open(_target(ctx, db)) as store:
            if calls:
                return list(
                    await store.tool_calls(
                        session_id=session, tool_name=tool, status=status, limit=limit
                    )
                )
            return list(await store.tool_stats(session_id=session, tool_name=tool))

    rows = _run(go())
    if as_json:
        _print_json(
            rows if calls else [{**jsonout.fields(r), "error_rate": r.error_rate} for r in rows]
        )
        return
    rows = _printable(rows)
    if not rows:
        _say("No tool calls.")
        return
    if calls:
        table = _table(
            None,
            [
                ("id", "right"),
                ("session", "left"),
                ("run", "right"),
                ("tool", "left"),
                ("arguments", "left"),
                ("output", "left"),
                ("status", "left"),
                ("duration", "right"),
            ],
        )
        for call in rows:
            table.add_row(
                str(call.id),
                Text(call.session_id),
                str(call.run_id),
                Text(call.tool_name or call.kind or ""),
                Text(_line(call.arguments, 40)),
                Text(_line(call.error or call.output, 40)),
                Text(call.status or "", style=_status_style(call)),
                _ms(call.duration_ms),
            )
    else:
        table = _table(
            None,
            [
                ("tool", "left"),
                ("calls", "right"),
                ("errors", "right"),
                ("error rate", "right"),
                ("timed", "right"),
                ("p50", "right"),
                ("p95", "right"),
                ("max", "right"),
            ],
        )
        for stat in rows:
            table.add_row(
                Text(stat.tool_name or "(unnamed)"),
                f"{stat.calls:,}",
                f"{stat.errors:,}",
                f"{stat.error_rate:.1%}",
                f"{stat.timed_calls:,}",
                _ms(stat.p50_ms),
                _ms(stat.p95_ms),
                _ms(stat.max_ms),
            )
    _console().print(table)


def _snippet(snippet: str) -> Text:
    """A search snippet with its matches (between the search's marks) in bold."""
    opening, closing = SNIPPET_MARKS
    text = Text()
    rest = " ".join(snippet.split())
    while True:
        start = rest.find(opening)
        end = rest.find(closing, start + len(opening)) if start >= 0 else -1
        if start < 0 or end < 0:
            text.append(rest)
            return text
        text.append(rest[:start])
        text.append(rest[start + len(opening) : end], style="bold yellow")
        rest = rest[end + len(closing) :]


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[
        str,
        typer.Argument(
            help='Words (all must occur), "an exact phrase", this OR that, -excluded, prefix*.',
            metavar="QUERY",
            show_default=False,
        ),
    ],
    session: Annotated[
        str | None,
        typer.Option(help="Search only this session.", metavar="SESSION", show_default=False),
    ] = None,
    role: Annotated[
        list[str] | None,
        typer.Option(
            help="Only items of this role: user, assistant (repeatable).",
            metavar="ROLE",
            show_default=False,
        ),
    ] = None,
    type_: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            help="Only items of this type: message, function_call_output, … (repeatable).",
            metavar="TYPE",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="At most N results.", metavar="N", min=1)] = 20,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Full-text search over user and assistant messages, tool arguments and outputs, on
    every branch of every session. Exact-phrase matches come first."""

    async def go() -> list[SearchResult]:
        async with _open(_target(ctx, db)) as store:
            return await store.search(
                query, session_id=session, roles=role or None, types=type_ or None, limit=limit
            )

    results = _run(go())
    if as_json:
        _print_json(results)
        return
    results = _printable(results)
    if not results:
        _say("No matches.")
        return
    table = _table(
        None, [("session", "left"), ("run", "right"), ("item", "left"), ("match", "left")]
    )
    for hit in results:
        table.add_row(
            Text(hit.session_id),
            str(hit.run_id),
            Text(hit.role or hit.type if hit.type == "message" else hit.type),
            _snippet(hit.snippet),
        )
    _console().print(table)


class UsageGroupOption(str, Enum):
    """What ``usage`` sums over."""

    session = "session"
    user = "user"
    model = "model"
    agent = "agent"
    day = "day"


@app.command()
def usage(
    ctx: typer.Context,
    by: Annotated[
        UsageGroupOption, typer.Option(help="Sum per session, user, model, agent or UTC day.")
    ] = UsageGroupOption.session,
    session: Annotated[
        str | None,
        typer.Option(help="Only this session's runs.", metavar="SESSION", show_default=False),
    ] = None,
    user: Annotated[
        str | None, typer.Option(help="Only this user's runs.", metavar="USER", show_default=False)
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="Runs started at or after this ISO date/time.", metavar="WHEN", show_default=False
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            help="Runs started before this ISO date/time.", metavar="WHEN", show_default=False
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Token usage (requests, input, output, total, cached, reasoning) summed per group."""

    async def go() -> list[UsageRow]:
        async with _open(_target(ctx, db)) as store:
            return await store.usage(
                by.value,
                session_id=session,
                user_id=user,
                since=_parse_time(since, "--since"),
                until=_parse_time(until, "--until"),
            )

    rows = _run(go())
    if as_json:
        _print_json(rows)
        return
    rows = _printable(rows)
    if not rows:
        _say("No runs.")
        return
    table = _table(
        None,
        [
            (by.value, "left"),
            ("runs", "right"),
            ("requests", "right"),
            ("input", "right"),
            ("output", "right"),
            ("total", "right"),
            ("cached", "right"),
            ("reasoning", "right"),
        ],
    )
    totals = [0] * 7
    for row in rows:
        values = [row.runs, *dataclasses.astuple(row.usage)]
        totals = [a + b for a, b in zip(totals, values, strict=True)]
        table.add_row(
            Text(row.key if row.key is not None else "(none)"), *(f"{v:,}" for v in values)
        )
    if len(rows) > 1:
        table.add_section()
        table.add_row("total", *(f"{v:,}" for v in totals), style="bold")
    _console().print(table)


class ExportFormatOption(str, Enum):
    """What ``export`` writes."""

    jsonl = "jsonl"
    json = "json"
    markdown = "markdown"


@app.command()
def export(
    ctx: typer.Context,
    sessions_: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="SESSION",
            help="The sessions to export (default: every session; jsonl and markdown only).",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[
        ExportFormatOption,
        typer.Option(
            "--format",
            "-f",
            help="jsonl: one item a line (what `turnstore import` reads back); json: one "
            "session's tree with usage and tool calls; markdown: for reading.",
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
    as_json: JsonOption = False,
) -> None:
    """Export sessions: every branch unless --active. With --output, a summary is printed
    (as JSON with --json)."""
    if as_json and output is None:
        raise _fail("--json prints a summary of the export, so it needs --output FILE")

    async def go() -> dict[str, Any]:
        if output is not None:
            _refuse_database_output(_target(ctx, db), output)
        async with _open(_target(ctx, db)) as store:
            wanted = list(sessions_ or [])
            if not wanted:
                wanted = await _all_session_ids(store)
            if fmt is ExportFormatOption.json and len(wanted) != 1:
                raise InvalidOperationError(
                    f"the json format holds one session, not {len(wanted)}: name one, or use jsonl"
                )
            for sid in wanted:  # every name checked before anything is written
                if await store.session(sid) is None:
                    raise SessionNotFoundError(f"no session {sid!r}")
            with contextlib.ExitStack() as stack:
                out = (
                    stack.enter_context(output.open("w", encoding="utf-8"))
                    if output is not None
                    else sys.stdout
                )
                advance = stack.enter_context(_progress(output is not None, "exporting"))
                advance(0, len(wanted))
                # On a terminal, stored text must not drive it (JSON stays the same data).
                terminal = output is None and sys.stdout.isatty()
                for index, sid in enumerate(wanted):
                    text = await store.export(sid, fmt.value, all_branches=not active)
                    if terminal:
                        markdown = fmt is ExportFormatOption.markdown
                        text = safe_text(text) if markdown else _json_safe(text)
                    if fmt is ExportFormatOption.markdown and index:
                        out.write("\n")
                    out.write(text)
                    advance(1, None)
            return {"sessions": len(wanted), "format": fmt.value, "output": str(output)}

    summary = _run(go())
    if output is None:
        return
    if as_json:
        _print_json(summary)
    else:
        n = summary["sessions"]
        _say(f"Exported {n} session{'s' * (n != 1)} as {fmt.value} to {escape(str(output))}.")


def _refuse_database_output(target: str, output: Path) -> None:
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
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page = await store.sessions(limit=1000, after=cursor)
        ids.extend(info.session_id for info in page.sessions)
        cursor = page.next_cursor
        if cursor is None:
            return ids[::-1]


# ---------------------------------------------------------------------------------------------
# import, migrate, demo


class SourceKind(str, Enum):
    """What ``import`` reads."""

    auto = "auto"
    sqlite = "sqlite"
    sqlalchemy = "sqlalchemy"
    jsonl = "jsonl"
    json = "json"


@contextlib.contextmanager
def _progress(enabled: bool, description: str) -> Iterator[Callable[[int, int | None], None]]:
    """A progress bar on stderr (only on a terminal); yields ``advance(n, total)``."""
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not (enabled and console.is_terminal),
    ) as progress:
        task = progress.add_task(description, total=None)

        def advance(n: int, total: int | None = None) -> None:
            if total is not None:
                progress.update(task, total=total)
            progress.advance(task, n)

        yield advance


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="A SQLite file of the SDK's SQLiteSession or AdvancedSQLiteSession, a "
            "SQLAlchemy URL of SQLAlchemySession tables, or a turnstore export (jsonl, json).",
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
    as_json: JsonOption = False,
) -> None:
    """Import conversations without loss: every item verbatim, branches as the run tree,
    usage onto runs. Idempotent: what is already stored is recognised and not added again,
    so a second import adds nothing and an interrupted one can simply be run again."""

    async def go() -> _importers.ImportSummary:
        src = _importers.open_source(source, kind.value, messages_table=messages_table)
        try:
            async with _open(_target(ctx, db), create=True) as store:
                with _progress(not as_json, "importing") as advance:
                    advance(0, await src.total_items())
                    return await _importers.import_source(
                        store, src, session_ids=only, on_items=lambda n: advance(n, None)
                    )
        finally:
            await src.aclose()

    summary = _run(go())
    if as_json:
        _print_json(summary)
        return
    _say(
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


@app.command()
def migrate(ctx: typer.Context, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Create the database, or bring its schema up to this turnstore's version.

    Each migration and its version row land in one transaction; concurrent runs are safe."""
    target = _target(ctx, db)

    async def go() -> tuple[int | None, int | None]:
        _check_database(target, create=True)
        before = await asyncio.to_thread(migrate_database, target)
        async with _open(target):  # readable now, as every command will open it
            pass
        return before, (await asyncio.to_thread(Store.inspect, target)).schema_version

    before, version = _run(go())
    if as_json:
        _print_json({"database": _shown(target), "from_version": before, "schema_version": version})
        return
    if before == version:
        change = f"already at version {version}"
    elif before is None:
        change = f"created at version {version}"
    else:
        change = f"migrated from version {before} to {version}"
    _say(f"{escape(_shown(target))}: schema {change}, up to date.")


@app.command()
def adopt(ctx: typer.Context, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Adopt every conversation the SDK's SQLiteSession wrote into this file, in place.

    What StructuredSession does to each session at its first use, for all at once, so that
    every command and the viewer show them; the SDK's own tables are only read."""
    target = _target(ctx, db)

    async def go() -> int:
        _check_database(target, create=False, sdk=True)
        store = Store.open(target)
        try:
            return await adopt_sdk_sessions(store)
        finally:
            await store.aclose()

    adopted = _run(go())
    if as_json:
        _print_json({"database": _shown(target), "adopted_sessions": adopted})
        return
    _say(f"{escape(_shown(target))}: {adopted} session{'s' if adopted != 1 else ''} adopted.")


@app.command()
def demo(
    ctx: typer.Context,
    session: Annotated[
        str, typer.Option(help="The session id to write.", metavar="SESSION")
    ] = "demo",
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write the demo conversation (tool calls, a handoff) into the database.

    Needs the agents extra. Without OPENAI_API_KEY the SDK's ScriptedModel answers."""
    target = _target(ctx, db)

    async def go() -> list[Run]:
        try:
            from .demo import run_demo
        except ImportError as exc:  # pragma: no cover - the agents extra is missing
            raise ConfigurationError("the demo needs the agents extra") from exc
        _check_database(target, create=True)
        # The demo narrates on stdout; with --json that would spoil the JSON.
        redirect = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
        with redirect:
            await run_demo(target, session)
        async with _open(target) as store:
            return await store.runs(session)

    written = _run(go())
    if as_json:
        _print_json({"database": _shown(target), "session_id": session, "runs": written})
    else:
        shown = escape(_shown(target))
        _say(
            f"Wrote session {escape(session)} ({len(written)} runs) to {shown}. "
            f"Try: turnstore show {escape(session)} --db {shown}"
        )


@app.command()
def serve(
    ctx: typer.Context,
    db: DbOption = None,
    host: Annotated[
        str, typer.Option(help="Address to listen on; loopback unless you choose otherwise.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    writable: Annotated[
        bool,
        typer.Option("--writable", help="Allow making a branch the active one (else read-only)."),
    ] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="A host name the viewer may be reached by (repeatable); requests naming "
            "any other are refused, so that a web page cannot reach it by DNS rebinding.",
        ),
    ] = None,
) -> None:
    """Browse the conversations in a web page: sessions, branches, tool calls, usage.

    Needs the web extra (pip install 'turnstore[web]'). Stop it with Ctrl+C."""
    target = _target(ctx, db)
    try:
        _check_database(target, create=False)
        # Opened once now, as the server will open it, so that what would stop the server at
        # start (a schema too old to read without migrating) is one line here.
        Store.open(target, read_only=not writable).close()
        from .web import serve as serve_web

        serve_web(
            target, host=host, port=port, read_only=not writable, allow_hosts=allow_host or []
        )
    except TurnstoreError as exc:
        raise _fail(str(exc)) from None


def main() -> None:
    """Entry point of the ``turnstore`` command."""
    app()


if __name__ == "__main__":
    main()

"""Reading conversations: ``show`` (a session's run tree) and ``runs`` (its runs as a table);
the catalogue of sessions is ``catalogue``'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer
from rich.text import Text
from rich.tree import Tree

from .. import Store
from ..domain import jsonout
from ..domain.model import (
    Annotation,
    Branch,
    Run,
    SessionInfo,
    ToolCall,
)
from ..domain.turns import turn_number
from ..domain.units import duration_text
from ..errors import SessionNotFoundError
from .annotating import annotation_text
from .app import command
from .database import open_store, run_command
from .options import (
    AnnotatedOption,
    CsvOption,
    DbOption,
    JsonOption,
    NdjsonOption,
    SchemaOption,
    SessionArg,
    TsvOption,
    annotated_filters,
    output_format,
    resolve_target,
)
from .output import (
    Format,
    clip,
    make_console,
    make_table,
    one_line,
    print_json,
    print_records,
    printable,
    safe_text,
    status_style,
    timestamp,
    usage_text,
)
from .window import FromOption, LastOption, PageLimitOption, Window, on_terminal, window

__all__ = ["runs", "show"]


def _call_text(call: ToolCall, width: int | None) -> Text:
    status = call.status or "?"
    failed = call.failed
    text = Text("⚙ ", style="cyan")
    text.append(call.tool_name or call.kind or "tool", style="bold cyan")
    if call.arguments:
        text.append(" " + one_line(call.arguments, width and width // 2))
    if call.output is not None:
        text.append(" → ")
        text.append(one_line(call.output, width and width // 2), style="red" if failed else "")
    text.append("  ")
    text.append(status, style=status_style(call))
    if call.duration_ms is not None:
        text.append(f" · {duration_text(call.duration_ms)}", style="dim")
    if call.error and call.error != call.output:
        text.append(f"\n  error: {one_line(call.error, width)}", style="red")
    return text


def _run_label(run: Run, *, active: bool, head: bool) -> Text:
    text = Text("● " if active else "○ ", style="green" if active else "dim")
    text.append(f"run {run.id}", style="bold")
    details = [f"turn {turn_number(run.depth)}", timestamp(run.created_at)]
    if run.agent_name:
        details.append(run.agent_name)
    if run.model:
        details.append(run.model)
    tokens = usage_text(run.usage)
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
    notes: Sequence[Annotation],
    *,
    active: bool,
    head: bool,
    width: int | None,
) -> None:
    node = parent.add(_run_label(run, active=active, head=head))
    if run.user_message is not None:
        node.add(Text("user: ", style="bold blue").append(clip(run.user_message, width)))
    for call in calls:
        node.add(_call_text(call, width))
    if run.assistant_message is not None:
        node.add(
            Text("assistant: ", style="bold magenta").append(clip(run.assistant_message, width))
        )
    for note in notes:
        node.add(annotation_text(note, width))


def _render_tree(
    title: Text,
    runs: Sequence[Run],
    calls: dict[int, list[ToolCall]],
    notes: dict[int, list[Annotation]],
    active_ids: set[int],
    head_id: int | None,
    width: int | None,
    names: dict[int, list[str]],
) -> Tree:
    """The session as a tree that only nests at forks: a single child continues the line.
    Each branch of a fork shows the names of the named branches that go through it."""
    shown = {run.id for run in runs}
    children: dict[int | None, list[Run]] = {}
    for run in runs:  # a window's first run hangs at the top, as a root does
        children.setdefault(run.parent_id if run.parent_id in shown else None, []).append(run)
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
                notes.get(run.id, []),
                active=run.id in active_ids,
                head=run.id == head_id,
                width=width,
            )
            siblings = children.get(run.id, [])
        if siblings:
            after = siblings[0].parent_id
            where = "" if after is None else f" after run {after}"
            fork = node.add(Text(f"⑂ fork{where}: {len(siblings)} branches", style="bold yellow"))
            branches = []
            for index, run in enumerate(siblings, 1):
                label = Text(f"branch {index}/{len(siblings)}", style="yellow")
                if run.id in names:
                    label.append(f"  {', '.join(names[run.id])}", style="bold")
                if run.id in active_ids:
                    label.append("  active", style="bold green")
                branches.append((fork.add(label), [run]))
            stack.extend(reversed(branches))
    return root


async def _session_runs(
    store: Store, session_id: str
) -> tuple[
    SessionInfo, list[Run], dict[int, list[ToolCall]], dict[int, list[Annotation]], set[int]
]:
    """The session's catalogue entry, every run, each run's tool calls and annotations, the
    active path."""
    info = await store.session(session_id)
    if info is None:
        raise SessionNotFoundError(f"no session {session_id!r}")
    runs = [run for run, _ in await store.tree(session_id)]
    calls: dict[int, list[ToolCall]] = {}
    for call in await store.tool_calls(session_id=session_id, limit=None):
        calls.setdefault(call.run_id, []).append(call)
    notes: dict[int, list[Annotation]] = {}
    for note in await store.annotations(session_id=session_id, limit=None):
        notes.setdefault(note.run_id, []).append(note)
    active = {run.id for run in await store.runs(session_id)}
    return info, runs, calls, notes, active


def _branch_names(runs: Sequence[Run], named: Sequence[Branch]) -> dict[int, list[str]]:
    """Each run's named branches: those whose path from the root goes through it."""
    parent = {run.id: run.parent_id for run in runs}
    through: dict[int, list[str]] = {}
    for branch in named:
        run_id: int | None = branch.leaf_run_id
        while run_id is not None:
            through.setdefault(run_id, []).append(safe_text(branch.name or ""))
            run_id = parent.get(run_id)
    return through


def _tree_window(runs: list[Run], path: list[Run], chosen: Window) -> list[Run]:
    """The runs of the tree that ``chosen`` (a window of the active ``path``) shows: every
    branch below its first run, down to its last run's depth unless it reaches the head."""
    if chosen.whole:
        return runs
    top = chosen.runs[0]
    end = chosen.runs[-1].depth if chosen.runs[-1].id != path[-1].id else None
    below: dict[int | None, list[Run]] = {}
    for run in runs:
        below.setdefault(run.parent_id, []).append(run)
    kept, stack = [], [top]
    while stack:
        run = stack.pop()
        kept.append(run)
        if end is None or run.depth < end:
            stack.extend(below.get(run.id, []))
    return sorted(kept, key=lambda run: run.id)


@command(10)
def show(
    ctx: typer.Context,
    session: SessionArg,
    full: Annotated[
        bool, typer.Option("--full", help="Print messages and tool data unabridged.", metavar="")
    ] = False,
    last: LastOption = None,
    start_at: FromOption = None,
    limit: PageLimitOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session as its run tree: every branch, each run's user and assistant message,
    tool calls with status and duration, and token usage. ● marks the active path. A long
    session shows from a run of the active path on (--last, --from, --limit), with every
    branch below it; on a terminal the newest 50 runs by default."""

    async def go() -> None:
        async with open_store(resolve_target(ctx, db, schema)) as store:
            info, runs, calls, notes, active = await _session_runs(store, session)
            path = await store.runs(session)
            named = [b for b in await store.branches(session) if b.name is not None]
        chosen = window(
            path,
            last=last,
            start_at=start_at,
            limit=limit,
            default_page=on_terminal() and not as_json,
            what="the active path",
        )
        footer = chosen.footer("the active path")
        every, runs = runs, _tree_window(runs, path, chosen)
        names = _branch_names(every, named)
        if not as_json:
            info, runs, calls, notes = printable((info, runs, calls, notes))
        if as_json:
            print_json(
                {
                    "session": info,
                    "runs": [
                        {
                            **jsonout.fields(run),
                            "active": run.id in active,
                            "tool_calls": calls.get(run.id, []),
                            "annotations": notes.get(run.id, []),
                        }
                        for run in runs
                    ],
                }
            )
            return
        # The title counts the whole session; the footer says which part is shown.
        leaves = {r.id for r in every} - {r.parent_id for r in every}
        title = Text(info.session_id, style="bold")
        if info.title:
            title.append(f"  “{one_line(info.title, 60)}”")
        total = sum(run.usage.total_tokens for run in every)
        title.append(
            f"  {len(every)} run{'s' * (len(every) != 1)} · {len(leaves)} "
            f"branch{'es' * (len(leaves) != 1)} · {total:,} tokens",
            style="dim",
        )
        width = None if full else 300
        console = make_console()
        console.print(
            _render_tree(title, runs, calls, notes, active, info.head_run_id, width, names)
        )
        if footer:
            console.print(footer, style="dim", soft_wrap=True)

    run_command(go())


@command(20)
def runs(
    ctx: typer.Context,
    session: SessionArg,
    all_branches: Annotated[
        bool,
        typer.Option(
            "--all", help="Every run of every branch, not only the active path.", metavar=""
        ),
    ] = False,
    annotated: AnnotatedOption = None,
    last: LastOption = None,
    start_at: FromOption = None,
    limit: PageLimitOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    ndjson: NdjsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
) -> None:
    """List a session's runs (the active path, oldest first): user message, answer, tokens.
    A long session a window at a time (--last, --from, --limit); on a terminal the newest 50
    by default."""
    fmt = output_format(as_json=as_json, ndjson=ndjson, csv=csv, tsv=tsv)

    async def go() -> None:
        async with open_store(resolve_target(ctx, db, schema)) as store:
            if await store.session(session) is None:
                raise SessionNotFoundError(f"no session {session!r}")
            if all_branches:
                listed = [run for run, _ in await store.tree(session)]
            else:
                listed = await store.runs(session)
            if annotated is not None:
                chosen_ids = await _annotated_runs(store, session, annotated)
                listed = [run for run in listed if run.id in chosen_ids]
            what = "the session" if all_branches else "the active path"
            chosen = window(
                listed,
                last=last,
                start_at=start_at,
                limit=limit,
                default_page=on_terminal() and fmt is Format.table,
                what=what,
            )
            listed = chosen.runs
            if fmt is not Format.table:  # the page's annotations: one query
                notes = await store.annotations_of_runs(session, [run.id for run in listed])
        if fmt is not Format.table:
            print_records(
                fmt,
                [{**jsonout.fields(run), "annotations": notes.get(run.id, [])} for run in listed],
            )
            return
        listed = printable(listed)
        table = make_table(
            f"runs of {safe_text(session)}",
            [
                ("id", "right"),
                ("turn", "right"),
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
                str(turn_number(run.depth)),
                "" if run.parent_id is None else str(run.parent_id),
                Text(one_line(run.user_message, 60)),
                Text(one_line(run.assistant_message, 60)),
                str(run.item_count),
                f"{run.usage.total_tokens:,}",
                timestamp(run.created_at),
            )
        console = make_console()
        console.print(table)
        if footer := chosen.footer(what):
            console.print(footer, style="dim", soft_wrap=True)

    run_command(go())


async def _annotated_runs(store: Store, session_id: str, annotated: str) -> set[int]:
    """The runs of the session with an annotation as ``--annotated`` names it."""
    chosen = annotated_filters(annotated)
    name = chosen.pop("annotation")
    notes = await store.annotations(session_id=session_id, name=name, limit=None, **chosen)
    return {note.run_id for note in notes}

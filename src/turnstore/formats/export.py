"""Export a session as JSONL of items, as JSON with its tree, or as Markdown; read JSONL back.

Pure rendering over ``queries.ExportData`` (read in one transaction by ``Store.export``).
JSONL and JSON carry everything ``turnstore copy`` carries, so that ``turnstore import``
writes a session new to the store exactly as it was exported; Markdown is for reading only.

- **jsonl**: one line per item, in tree order (a run's parent always comes before it)::

      {"session_id": "s1", "run_id": 7, "parent_id": 3, "position": 0,
       "created_at": "2025-01-01T12:00:00+00:00", "item": {...the verbatim item...}}

  A run's first line also carries its ``"usage"`` (requests and tokens) and ``"run"``: the
  run's record (``exchange.run_record``: its columns, item times, tool calls, model calls,
  spans, branch name, annotations). A session's first line also carries ``"session"``, its
  catalogue entry (user, title, metadata, head, times); a session without runs is that one
  line, without ``"run_id"`` or ``"item"``. ``runs_from_jsonl`` turns these lines back into
  ``NewRun`` objects for ``Store.add_runs``, which rebuilds the same tree (with new run ids)
  in another session or store.
- **json**: one object (``"version"`` ``VERSION``): the session's catalogue entry, its head,
  and its runs, each the run's record (as above) with ``children`` and ``items``.
- **markdown**: for reading: each run's user message, tool calls (arguments, output, status,
  duration), and answer; with every branch, runs in depth-first order, each fork labelled.
- **atif**, **ui-messages**: the active path as an ATIF trajectory or as the Vercel AI SDK's
  ``UIMessage`` list (``formats.trajectories``); one course only, never every branch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ..core.queries import ExportData
from ..domain import validate
from ..domain.jsonout import dumps
from ..domain.model import NewRun, Run, ToolCall, Usage
from ..errors import InvalidItemError
from .rows import rows_by_run, run_record
from .trajectories import atif, ui_messages

__all__ = [
    "FORMATS",
    "LINEAR",
    "VERSION",
    "ExportFormat",
    "JsonlSession",
    "is_run_key",
    "render",
    "runs_from_jsonl",
]

VERSION = 3
"""The JSON document's ``version``: 2 adds the rows of each run that copy carries (1: items,
tree, usage and catalogue only), 3 each run's annotations; an import reads every one."""

ExportFormat = Literal["jsonl", "json", "markdown", "atif", "ui-messages"]
FORMATS: tuple[ExportFormat, ...] = ("jsonl", "json", "markdown", "atif", "ui-messages")
LINEAR: tuple[ExportFormat, ...] = ("atif", "ui-messages")
"""The formats that hold one course, not a tree (``formats.trajectories``)."""


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


# Lone surrogates cannot be written as UTF-8; Markdown, for reading, shows them as U+FFFD.
_SURROGATE = re.compile("[\ud800-\udfff]")


def render(data: ExportData, fmt: ExportFormat) -> str:
    """``data`` in the format ``fmt`` (see the module docstring)."""
    if fmt == "jsonl":
        return _jsonl(data)
    if fmt == "json":
        return _json(data)
    if fmt == "atif":
        return dumps(atif(data), indent=2)
    if fmt == "ui-messages":
        return dumps(ui_messages(data), indent=2)
    return _markdown(data)


def _run_records(data: ExportData) -> list[dict[str, Any]]:
    """Each run's record (``exchange.run_record``), in the export's order."""
    rows = rows_by_run(data.rows)
    return [run_record(run, rows[run.id]) for run, _ in data.runs]


def _jsonl(data: ExportData) -> str:
    lines: list[str] = []
    for (run, items), full in zip(data.runs, _run_records(data), strict=True):
        for position, item in enumerate(items):
            record = {
                "session_id": run.session_id,
                "run_id": run.id,
                "parent_id": run.parent_id,
                "position": position,
                "created_at": run.created_at,
                "item": item,
            }
            if position == 0:  # the run's tokens and the rest of its rows, once
                record["usage"] = run.usage
                record["run"] = full
            if not lines:  # the session's catalogue entry, on its first line
                record["session"] = data.session
            lines.append(dumps(record))
    if not lines:  # a session without runs: a line of its catalogue entry alone
        lines.append(dumps({"session_id": data.session.session_id, "session": data.session}))
    return "".join(line + "\n" for line in lines)


def _json(data: ExportData) -> str:
    children: dict[int | None, list[int]] = {}
    for run, _ in data.runs:
        children.setdefault(run.parent_id, []).append(run.id)
    runs = []
    for (run, items), record in zip(data.runs, _run_records(data), strict=True):
        record["children"] = children.get(run.id, [])
        record["items"] = items
        runs.append(record)
    document = {
        "format": "turnstore-export",
        "version": VERSION,
        "all_branches": data.all_branches,
        "session": data.session,
        "roots": children.get(None, []),
        "runs": runs,
    }
    return dumps(document, indent=2) + "\n"


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines() or [""])


def _fence(text: str) -> str:
    # A fence longer than any backtick run inside, so content can never close it early.
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _usage_line(usage: Usage) -> str | None:
    if not usage.requests and not usage.total_tokens:
        return None
    return (
        f"*{usage.requests} requests, {usage.input_tokens} in / {usage.output_tokens} out "
        f"/ {usage.total_tokens} total tokens*"
    )


def _markdown_run(run: Run, calls: list[ToolCall], label: str) -> list[str]:
    lines = [f"## {label}", ""]
    if run.user_message is not None:
        lines += ["**User:**", "", _quote(run.user_message), ""]
    for call in calls:
        status = call.status or "?"
        if call.duration_ms is not None:
            status += f", {call.duration_ms:.0f} ms"
        lines.append(f"**Tool call** `{call.tool_name}` ({status})")
        lines.append("")
        if call.arguments:
            lines += [_fence(call.arguments), ""]
        if call.output is not None:
            lines += ["Output:", "", _fence(call.output), ""]
    if run.assistant_message is not None:
        agent = f" ({run.agent_name})" if run.agent_name else ""
        lines += [f"**Assistant{agent}:**", "", _quote(run.assistant_message), ""]
    usage = _usage_line(run.usage)
    if usage:
        lines += [usage, ""]
    return lines


def _markdown(data: ExportData) -> str:
    info = data.session
    lines = [f"# {info.title or info.session_id}", ""]
    facts = [f"session `{info.session_id}`"]
    if info.user_id is not None:
        facts.append(f"user `{info.user_id}`")
    facts.append(f"created {_time(info.created_at)}")
    lines += [" · ".join(facts), ""]
    runs = {run.id: (run, items) for run, items in data.runs}
    children: dict[int | None, list[int]] = {}
    for run, _ in data.runs:
        children.setdefault(run.parent_id, []).append(run.id)

    def label(run: Run) -> str:
        text = f"Run {run.id}"
        siblings = children.get(run.parent_id, [])
        if data.all_branches and len(siblings) > 1:
            text += f" (version {siblings.index(run.id) + 1} of {len(siblings)})"
        if run.id == info.head_run_id:
            text += " ← head"
        return text

    # Depth first, so that each branch reads on from the run it leaves.
    stack = list(reversed(children.get(None, [])))
    while stack:
        run, _ = runs[stack.pop()]
        lines += _markdown_run(run, data.tool_calls.get(run.id, []), label(run))
        stack.extend(reversed(children.get(run.id, [])))
    return _SURROGATE.sub("\ufffd", "\n".join(lines).rstrip("\n") + "\n")


def runs_from_jsonl(lines: Iterable[str]) -> list[NewRun]:
    """The runs of a JSONL export, ready for ``Store.add_runs`` (parents before children).

    Raises ``InvalidItemError`` naming the line for a line that is not an export record.
    """
    return read_jsonl(lines, strict=True).runs


def is_run_key(value: Any) -> bool:
    """Whether ``value`` can be a run's id in an export (its ``run_id``, ``id``, links)."""
    # Run ids are ints in turnstore's exports; any JSON scalar that can key a dict is taken.
    return isinstance(value, (int, str))


def _usage(counts: Any) -> Usage | None:
    """A line's ``"usage"``: None when it has none; TypeError when it is not one."""
    if counts is None:
        return None

    usage = validate.checked_usage(counts) if isinstance(counts, dict) else None
    if usage is None:
        raise TypeError(f"usage is not a set of counts: {validate.shown(counts)}")
    return usage


@dataclass
class JsonlSession:
    """What ``read_jsonl`` read of one session's lines."""

    runs: list[NewRun] = field(default_factory=list)  # parents first
    keys: list[Any] = field(default_factory=list)  # each run's id in the export
    records: list[Any] = field(default_factory=list)  # each run's "run" (None: not there)
    session: Any = None  # the session's "session" record (None: not there)
    skipped: int = 0  # lines skipped (strict=False)


def read_jsonl(lines: Iterable[str], *, strict: bool) -> JsonlSession:
    """``runs_from_jsonl``, with each run's id and ``"run"`` record and the ``"session"``
    record; with ``strict=False`` lines that are not export records, and the lines of runs
    whose parent is not in the export, are skipped and counted instead.
    """
    read = JsonlSession()
    index_of: dict[Any, int] = {}
    items: dict[Any, list[Any]] = {}
    parents: dict[Any, Any] = {}
    created: dict[Any, datetime | None] = {}
    usage: dict[Any, Usage | None] = {}
    records: dict[Any, Any] = {}
    placed: dict[Any, dict[int, Any]] = {}  # each run's items by their "position"
    order: list[Any] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if type(record) is dict and "session" in record and "item" not in record:
                read.session = record["session"]  # a session without runs
                continue
            run_id, item = record["run_id"], record["item"]
            parent_id = record.get("parent_id")
            if not is_run_key(run_id) or not (parent_id is None or is_run_key(parent_id)):
                raise TypeError("run_id and parent_id must be ids")
            if not isinstance(item, Mapping):
                raise TypeError("item is not an object")
            stamp = record.get("created_at")
            when = validate.iso_time(stamp, "created_at") if isinstance(stamp, str) else None
            counts = _usage(record.get("usage"))
        except (ValueError, TypeError, KeyError) as exc:
            if not strict:
                read.skipped += 1
                continue
            raise InvalidItemError(
                f"line {number} is not a turnstore export record: {exc}"
            ) from None
        if run_id not in items:
            order.append(run_id)
            items[run_id] = []
            parents[run_id] = parent_id
            created[run_id] = when
            placed[run_id] = {}
        if counts is not None:
            usage[run_id] = counts
        if "run" in record:
            records[run_id] = record["run"]
        if "session" in record:
            read.session = record["session"]
        position = record.get("position")
        if type(position) is int:
            # A line read before (exports of one session concatenated, the later one grown):
            # the same item is taken once; another item at the same place is skipped.
            earlier = placed[run_id].get(position)
            if earlier is not None:
                if earlier != item and strict:
                    raise InvalidItemError(
                        f"line {number} puts another item at run {run_id}'s position {position}"
                    )
                read.skipped += earlier != item
                continue
            placed[run_id][position] = item
        items[run_id].append(item)
    for run_id in order:
        parent = parents[run_id]
        if parent is not None and parent not in index_of:
            if not strict:
                read.skipped += len(items[run_id])
                continue
            raise InvalidItemError(f"run {run_id}'s parent {parent} is not in the export")
        index_of[run_id] = len(read.runs)
        read.runs.append(
            NewRun(
                items=items[run_id],
                parent=index_of[parent] if parent is not None else None,
                usage=usage.get(run_id),
                created_at=created[run_id],
            )
        )
        read.keys.append(run_id)
        read.records.append(records.get(run_id))
    return read

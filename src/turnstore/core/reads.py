"""Reading and viewing: the active path, the tree, a session's catalogue row, runs by id.

Viewing is what the web viewer reads: one branch a window at a time (``path_view``), runs and
tool calls by id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import NotFoundError, RunNotFoundError, SessionNotFoundError
from ..model import Branch, Fork, PathView, Run, SessionInfo, ToolCall
from .codec import decode_items
from .ops import Fetch, Op, Query
from .rows import RUN_COLUMNS, as_datetime, run_from_row, session_from_row, tool_call_from_row

__all__ = [
    "branches",
    "find_run",
    "get_items",
    "get_run",
    "get_tool_call",
    "path_runs",
    "path_view",
    "run_items",
    "session_info",
    "session_tree",
    "siblings",
]


# ---------------------------------------------------------------------------------------------
# Reading


def get_items(session_id: str, limit: int | None) -> Op[list[Any]]:
    """The newest ``limit`` items of the active path (all when None), oldest first."""
    if limit is None:
        rows = yield Query("path_items", {"sid": session_id}, Fetch.ALL)
    else:  # newest first
        rows = yield Query("path_items_tail", {"sid": session_id, "limit": limit}, Fetch.ALL)
        rows.reverse()
    return decode_items(rows, session_id)


def path_runs(session_id: str) -> Op[list[Run]]:
    """The runs of the active path, root first."""
    rows = yield Query("path_runs", {"sid": session_id}, Fetch.ALL)
    return [run_from_row(row) for row in rows]


def find_run(session_id: str, run_id: int) -> Op[Run]:
    """The run ``run_id`` of this session (looked up by session, so that a sharded store
    reads one shard); RunNotFoundError if it is unknown or another session's."""
    row = yield Query("session_run", {"sid": session_id, "id": run_id}, Fetch.ONE)
    if row is None:
        yield from get_run(run_id)  # raises if there is no such run at all
        raise RunNotFoundError(f"run {run_id} belongs to another session, not {session_id!r}")
    return run_from_row(row)


def siblings(session_id: str, run_id: int) -> Op[list[Run]]:
    """The runs that share ``run_id``'s parent (itself included), in creation order."""
    run = yield from find_run(session_id, run_id)
    rows = yield Query("children", {"sid": session_id, "parent_id": run.parent_id}, Fetch.ALL)
    return [run_from_row(row) for row in rows]


def branches(session_id: str) -> Op[list[Branch]]:
    """Every leaf of the session's tree, oldest first; ``active`` where the head lies on it."""
    rows = yield Query("leaves", {"sid": session_id}, Fetch.ALL)
    active = yield Query("head_leaves", {"sid": session_id}, Fetch.ALL)
    active_ids = {row[0] for row in active}
    return [
        Branch(
            leaf_run_id=row[0],
            depth=row[1],
            last_user_message=row[2],
            active=row[0] in active_ids,
            created_at=as_datetime(row[3]),
        )
        for row in rows
    ]


def session_info(session_id: str) -> Op[SessionInfo | None]:
    """The session's catalogue row, or None."""
    row = yield Query("session", {"sid": session_id}, Fetch.ONE)
    return session_from_row(row) if row is not None else None


def session_tree(session_id: str) -> Op[list[tuple[Run, list[Any]]]]:
    """Every run of the session (all branches) in creation order, each with its items."""
    rows = yield Query("session_runs", {"sid": session_id}, Fetch.ALL)
    item_rows = yield Query("session_items", {"sid": session_id}, Fetch.ALL)
    by_run: dict[int, list[Sequence[Any]]] = {}
    for row in item_rows:  # run_id, id, data
        by_run.setdefault(row[0], []).append(row[1:])
    return [
        (run, decode_items(by_run.get(run.id, []), session_id))
        for run in (run_from_row(row) for row in rows)
    ]


# ---------------------------------------------------------------------------------------------
# Viewing: what the web viewer reads (one branch a window at a time, runs and calls by id)


def get_run(run_id: int) -> Op[Run]:
    """The run ``run_id``, whatever its session."""
    row = yield Query("run", {"id": run_id}, Fetch.ONE)
    if row is None:
        raise RunNotFoundError(f"no run {run_id}")
    return run_from_row(row)


def get_tool_call(call_id: int) -> Op[ToolCall]:
    """The tool call row ``call_id`` (the row id, not the model's ``call_id`` string)."""
    row = yield Query("tool_call", {"id": call_id}, Fetch.ONE)
    if row is None:
        raise NotFoundError(f"no tool call {call_id}")
    return tool_call_from_row(row)


def run_items(run_id: int) -> Op[list[Any]]:
    """The items of one run, verbatim, in order."""
    run = yield from get_run(run_id)
    rows = yield Query(
        "run_items_before",
        {"sid": run.session_id, "run_id": run.id, "position": run.item_count},
        Fetch.ALL,
    )
    return decode_items(rows, run.session_id)


def path_view(
    session_id: str,
    through: int | None,
    start: int | None,
    stop: int | None,
    limit: int,
) -> Op[PathView]:
    """At most ``limit`` consecutive runs of the branch through ``through`` (default: the head).

    The branch through a run follows the head when the head lies below it, else its newest
    run. The window is the runs of depth ``start`` and after when ``start`` is given, of depth
    ``stop`` and before when ``stop`` is given, else the branch's last runs (or, with
    ``through``, the runs from just above ``through``). The cost is the window's size plus the
    distance from its end to the leaf, never the size of the session.
    """
    if through is None:
        info = yield from session_info(session_id)
        if info is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        if info.head_run_id is None:
            return PathView(session_id, None, -1, [], {}, {})
        head = yield from find_run(session_id, info.head_run_id)
        leaf_id, leaf_depth = head.id, head.depth
    else:
        anchor = yield from find_run(session_id, through)
        leaf_id, leaf_depth = yield Query(
            "descend", {"sid": session_id, "id": anchor.id}, Fetch.ONE
        )
    if start is not None:
        lo = max(0, start)
        hi = min(leaf_depth, lo + limit - 1)
    elif stop is not None:
        hi = min(leaf_depth, stop)
        lo = max(0, hi - limit + 1)
    elif through is not None:
        # A little context above the chosen run, the rest of the window below it.
        lo = max(0, anchor.depth - limit // 5)
        hi = min(leaf_depth, lo + limit - 1)
    else:
        hi = leaf_depth
        lo = max(0, hi - limit + 1)
    rows = yield Query(
        "path_window", {"sid": session_id, "leaf": leaf_id, "lo": lo, "hi": hi}, Fetch.ALL
    )
    runs: list[Run] = []
    forks: dict[int, Fork] = {}
    width = len(RUN_COLUMNS.split(","))
    for row in rows:
        run = run_from_row(row)
        runs.append(run)
        count, index, previous_id, next_id = row[width:]
        if count > 1:
            forks[run.id] = Fork(index, count, previous_id, next_id)
    calls: dict[int, list[ToolCall]] = {}
    if runs:
        call_rows = yield Query(
            "tool_calls_of_runs",
            {"sid": session_id, "run_ids": json.dumps([run.id for run in runs])},
            Fetch.ALL,
        )
        for call_row in call_rows:
            call = tool_call_from_row(call_row)
            calls.setdefault(call.run_id, []).append(call)
    return PathView(session_id, leaf_id, leaf_depth, runs, forks, calls)

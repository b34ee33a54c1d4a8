"""Reading and viewing: the active path, the tree, a session's catalogue row, runs by id.

Viewing is what the web viewer reads: one branch a window at a time (``path_view``), runs and
tool calls by id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..domain.model import Fork, PathView, Run, SessionInfo, ToolCall
from ..errors import NotFoundError, RunNotFoundError, SessionNotFoundError
from . import results as R
from . import statements as S
from .codec import decode_data, decode_items
from .collector import pause_for
from .ops import Op, last
from .tables import (
    PathWindowRow,
    RunRow,
    SessionRow,
    ToolCallRow,
    run_from_row,
    session_from_row,
    tool_call_from_row,
)

__all__ = [
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
    "with_items",
]


# ---------------------------------------------------------------------------------------------
# Reading


def get_items(session_id: str, limit: int | None) -> Op[list[Any]]:
    """The newest ``limit`` items of the active path (all when None), oldest first."""
    if limit is None:
        data: list[object] = yield last(S.PATH_ITEMS({"sid": session_id}))
        return decode_data(data, session_id)
    rows: list[R.ItemRow] = yield last(
        S.PATH_ITEMS_TAIL({"sid": session_id, "limit": limit})
    )  # newest first
    rows.reverse()
    return decode_items(rows, session_id)


def path_runs(session_id: str) -> Op[list[Run]]:
    """The runs of the active path, root first."""
    rows: list[RunRow] = yield S.PATH_RUNS({"sid": session_id})
    return [run_from_row(row) for row in rows]


def find_run(session_id: str, run_id: int) -> Op[Run]:
    """The run ``run_id`` of this session (looked up by session, so that a sharded store
    reads one shard); RunNotFoundError if it is unknown or another session's."""
    row: RunRow | None = yield S.SESSION_RUN({"sid": session_id, "id": run_id})
    if row is None:
        yield from get_run(run_id)  # raises if there is no such run at all
        raise RunNotFoundError(f"run {run_id} belongs to another session, not {session_id!r}")
    return run_from_row(row)


def siblings(session_id: str, run_id: int) -> Op[list[Run]]:
    """The runs that share ``run_id``'s parent (itself included), in creation order."""
    run = yield from find_run(session_id, run_id)
    rows: list[RunRow] = yield S.CHILDREN({"sid": session_id, "parent_id": run.parent_id})
    return [run_from_row(row) for row in rows]


def session_info(session_id: str) -> Op[SessionInfo | None]:
    """The session's catalogue row, or None."""
    row: SessionRow | None = yield S.SESSION({"sid": session_id})
    return session_from_row(row) if row is not None else None


def session_tree(session_id: str) -> Op[list[tuple[Run, list[Any]]]]:
    """Every run of the session (all branches) in creation order, each with its items."""
    rows: list[RunRow] = yield S.SESSION_RUNS({"sid": session_id})
    item_rows: list[R.RunItemRow] = yield S.SESSION_ITEMS({"sid": session_id})
    return with_items([run_from_row(row) for row in rows], item_rows, session_id)


def with_items(
    runs: list[Run], rows: Sequence[R.RunItemRow | R.CopyItemRow], session_id: str
) -> list[tuple[Run, list[Any]]]:
    """Each run with its items, decoded from ``rows`` (the runs' items, in order)."""
    by_run: dict[int, list[R.RunItemRow | R.CopyItemRow]] = {}
    for row in rows:
        by_run.setdefault(row.run_id, []).append(row)
    # One pause of the collector for the whole session (exports, the viewer), not per run.
    with pause_for(len(rows)):
        return [(run, decode_items(by_run.get(run.id, []), session_id)) for run in runs]


# ---------------------------------------------------------------------------------------------
# Viewing: what the web viewer reads (one branch a window at a time, runs and calls by id)


def get_run(run_id: int) -> Op[Run]:
    """The run ``run_id``, whatever its session."""
    row: RunRow | None = yield S.RUN({"id": run_id})
    if row is None:
        raise RunNotFoundError(f"no run {run_id}")
    return run_from_row(row)


def get_tool_call(call_id: int) -> Op[ToolCall]:
    """The tool call row ``call_id`` (the row id, not the model's ``call_id`` string)."""
    row: ToolCallRow | None = yield S.TOOL_CALL({"id": call_id})
    if row is None:
        raise NotFoundError(f"no tool call {call_id}")
    return tool_call_from_row(row)


def run_items(run_id: int) -> Op[list[Any]]:
    """The items of one run, verbatim, in order."""
    run = yield from get_run(run_id)
    rows: list[R.ItemRow] = yield S.RUN_ITEMS_BEFORE(
        {"sid": run.session_id, "run_id": run.id, "position": run.item_count}
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
        leaf: R.RunDepthRow | None = yield S.DESCEND({"sid": session_id, "id": anchor.id})
        if leaf is None:  # the anchor itself, at least, unless it is gone
            raise RunNotFoundError(f"no run {through} in session {session_id!r}")
        leaf_id, leaf_depth = leaf.id, leaf.depth
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
    rows: list[PathWindowRow] = yield S.PATH_WINDOW(
        {"sid": session_id, "leaf": leaf_id, "lo": lo, "hi": hi}
    )
    runs: list[Run] = []
    forks: dict[int, Fork] = {}
    for row in rows:
        run = run_from_row(row)
        runs.append(run)
        if row.sibling_count > 1:
            forks[run.id] = Fork(row.sibling_index, row.sibling_count, row.previous_id, row.next_id)
    calls: dict[int, list[ToolCall]] = {}
    if runs:
        call_rows: list[ToolCallRow] = yield S.TOOL_CALLS_OF_RUNS(
            {"sid": session_id, "run_ids": json.dumps([run.id for run in runs])}
        )
        for call_row in call_rows:
            call = tool_call_from_row(call_row)
            calls.setdefault(call.run_id, []).append(call)
    return PathView(session_id, leaf_id, leaf_depth, runs, forks, calls)

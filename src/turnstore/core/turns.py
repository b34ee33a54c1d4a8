"""Addressing by branch and turn: a ``BranchRef`` or ``Turn`` resolved to a run, inside the
transaction of the operation that uses it (``domain/turns.py`` says what they name)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from ..domain.model import Run
from ..domain.turns import BranchRef, RunRef, Turn
from ..errors import RunNotFoundError, SessionNotFoundError
from . import results as R
from . import statements as S
from .branches import branch_tree
from .codec import decode_data, decode_items
from .ops import Op, last
from .reads import find_run, session_info
from .tables import PathWindowRow, RunRow, run_from_row

__all__ = [
    "at",
    "branch_end",
    "branch_items",
    "branch_leaf",
    "branch_run_ids",
    "branch_runs",
    "resolve",
]

T = TypeVar("T")


def branch_end(session_id: str, branch: BranchRef | None) -> Op[int | None]:
    """The run a branch's path ends at: ``branch_leaf``, or for None the head (None for an
    empty session; for a name, None while the session has no runs: ``end_named``)."""
    if branch is None:
        info = yield from session_info(session_id)
        if info is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        return info.head_run_id
    if isinstance(branch, str):
        tree = yield from branch_tree(session_id)
        return tree.end_named(session_id, branch)
    return (yield from branch_leaf(session_id, branch))


def branch_leaf(session_id: str, branch: BranchRef) -> Op[int]:
    """The leaf of the branch named ``branch``, or the run ``branch`` (a run id). Raises
    ``NotFoundError`` (``RunNotFoundError``)."""
    if isinstance(branch, str):
        tree = yield from branch_tree(session_id)
        return tree.leaf_of(tree.fork_named(session_id, branch))
    run = yield from find_run(session_id, branch)
    return run.id


def resolve(session_id: str, ref: RunRef) -> Op[int]:
    """The run id ``ref`` names: itself, or the run of its turn. Raises ``RunNotFoundError``."""
    if not isinstance(ref, Turn):
        return ref
    end = yield from branch_end(session_id, ref.branch)
    rows: list[PathWindowRow] = []
    if end is not None:
        depth = ref.number - 1
        params = {"sid": session_id, "leaf": end, "lo": depth, "hi": depth}
        rows = yield S.PATH_WINDOW(params)
    if not rows:
        raise RunNotFoundError(f"session {session_id!r} has no {ref}")
    return rows[0].id


def at(session_id: str, ref: RunRef, op: Callable[[int], Op[T]]) -> Op[T]:
    """``op`` of the run ``ref`` names, resolved in the same transaction."""
    run_id = yield from resolve(session_id, ref)
    return (yield from op(run_id))


def branch_items(session_id: str, branch: BranchRef, limit: int | None) -> Op[list[Any]]:
    """The newest ``limit`` items (all when None) a branch's path shows the model, oldest
    first: ``get_items`` of that branch, the head left where it is."""
    end = yield from branch_end(session_id, branch)
    if end is None:
        return []
    if limit is None:
        data: list[object] = yield last(S.PATH_ITEMS_AT({"sid": session_id, "leaf": end}))
        return decode_data(data, session_id)
    rows: list[R.ItemRow] = yield last(
        S.PATH_ITEMS_TAIL_AT({"sid": session_id, "leaf": end, "limit": limit})
    )  # newest first
    rows.reverse()
    return decode_items(rows, session_id)


def branch_runs(session_id: str, branch: BranchRef | None) -> Op[list[Run]]:
    """The runs of a branch's path (None: the active path), root first: its transcript."""
    end = yield from branch_end(session_id, branch)
    if end is None:
        return []
    rows: list[RunRow] = yield S.PATH_RUNS_AT({"sid": session_id, "leaf": end})
    return [run_from_row(row) for row in rows]


def branch_run_ids(session_id: str, branch: BranchRef) -> Op[str]:
    """The ids of the runs of a branch's path (from the root: the runs a compaction replaced
    included), as the JSON list of strings the filters of usage and search bind
    (``:run_ids``). Raises ``NotFoundError``."""
    end = yield from branch_leaf(session_id, branch)
    rows: list[RunRow] = yield S.PATH_RUNS_AT({"sid": session_id, "leaf": end})
    return json.dumps([str(row.id) for row in rows])

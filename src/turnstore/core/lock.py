"""The session's head: every write locks it first, and moves it last."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import StorageError
from . import append_sql as A
from . import statements as S
from .ops import Capability, Group, Op, supports
from .results import HeadRow

__all__ = ["Head", "lock_session", "set_head"]


@dataclass(slots=True)
class Head:
    """What an append needs to know of the session before it writes."""

    id: int | None
    depth: int = -1
    item_count: int = 0
    # The run above the head in the model's view: its parent, or a compaction run's prior run.
    parent_id: int | None = None
    has_children: bool = False
    # Through which item id the search index is fed, where a backend feeds it in batches
    # (SQLite); read with the lock, so that an append knows whether to feed it.
    indexed_through: int | None = None
    # The head run's status, read with the lock: an append below a run still in progress
    # marks it failed, and needs no statement for any other.
    status: str | None = None
    # The id of the append's first new run, had with the lock where ids come ahead
    # (Capability.IDS_AHEAD, asked for with ``new_run``); None: its insert returns it.
    next_run_id: int | None = None


def lock_session(
    session_id: str,
    now: Any,
    title: str | None = None,
    *,
    create: bool = True,
    new_run: bool = False,
) -> Op[Head]:
    """Create the session if new, lock it for this transaction, and read its head.

    With ``create=False`` a session that does not exist is left uncreated (its head reads as
    empty): popping from, or adding nothing to, an unknown session must not catalogue it.
    ``new_run``: the write will start a run, whose id the head brings where ids come ahead.
    """
    row: HeadRow | None = None
    next_run_id: int | None = None
    # PostgreSQL locks first and reads the head after, in a statement of its own: one that
    # waited for the lock would read the head's run from the snapshot taken before it waited
    # (a run the writer it waited for may have deleted). SQLite's BEGIN IMMEDIATE holds the
    # lock already, so it creates and reads in one statement where it can.
    if not create:
        yield S.LOCK_SESSION({"sid": session_id})
    elif supports(Capability.UPSERT_HEAD):
        row = yield S.UPSERT_HEAD({"sid": session_id, "now": now, "title": title})
    else:
        yield S.ENSURE_SESSION({"sid": session_id, "now": now, "title": title})
    if row is None and new_run and supports(Capability.IDS_AHEAD):
        row, next_run_id = yield Group([S.LOCK_HEAD({"sid": session_id}), A.NEXT_RUN_ID()])
    elif row is None:
        row = yield S.LOCK_HEAD({"sid": session_id})
    if row is None:
        return Head(None)
    if row.id is None:
        return Head(None, indexed_through=row.indexed_through, next_run_id=next_run_id)
    if row.depth is None or row.item_count is None:
        raise StorageError(
            f"the head of session {session_id!r} names run {row.id}, which does not exist"
        )
    return Head(
        row.id,
        row.depth,
        row.item_count,
        row.parent_id,
        bool(row.has_children),
        row.indexed_through,
        row.status,
        next_run_id,
    )


def set_head(session_id: str, head_id: int | None, now: Any) -> Op[None]:
    yield S.SET_HEAD({"sid": session_id, "head": head_id, "now": now})

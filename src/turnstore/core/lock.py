"""The session's head: every write locks it first, and moves it last, counting what it
changed of the session's totals (``Tally``) in the same statement."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..domain.validate import MAX_INT
from ..errors import StorageError
from . import append_sql as A
from . import catalogue_sql as C
from . import statements as S
from .ops import Capability, Group, Op, supports
from .results import HeadRow

__all__ = [
    "ANY_HEAD",
    "ExpectedHead",
    "Head",
    "Tally",
    "count_rows",
    "lock_session",
    "set_head",
]


class _AnyHead(Enum):
    ANY = 0


ANY_HEAD = _AnyHead.ANY
"""``expected_head`` default: move the head wherever it is."""

# What a writer expects the head (or a branch's end) to be: a run id, None (an empty path),
# or ANY_HEAD (no check). Re-exported by ``history``, whose writes check it.
ExpectedHead = int | None | _AnyHead


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
    counted: Tally | None = None,
) -> Op[Head]:
    """Create the session if new, lock it for this transaction, and read its head.

    With ``create=False`` a session that does not exist is left uncreated (its head reads as
    empty): popping from, or adding nothing to, an unknown session must not catalogue it.
    ``new_run``: the write will start a run, whose id the head brings where ids come ahead.
    ``counted``: the tool calls and tokens the write will add, counted in the session's totals
    by the same statement (an append's, whose items and usage say them before the head).
    """
    row: HeadRow | None = None
    next_run_id: int | None = None
    # PostgreSQL locks first and reads the head after, in a statement of its own: one that
    # waited for the lock would read the head's run from the snapshot taken before it waited
    # (a run the writer it waited for may have deleted). SQLite's BEGIN IMMEDIATE holds the
    # lock already, so it creates and reads in one statement where it can.
    params = {"sid": session_id, "now": now, "title": title}
    groups: tuple[str, ...] = ()
    if counted is not None and (groups := counted.groups):
        params.update(counted.params(session_id))
    if not create:
        yield S.LOCK_SESSION({"sid": session_id})
    elif supports(Capability.UPSERT_HEAD):
        row = yield (C.UPSERT_HEAD_COUNTED[groups] if groups else S.UPSERT_HEAD)(params)
    else:
        yield (C.ENSURE_SESSION_COUNTED[groups] if groups else S.ENSURE_SESSION)(params)
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


@dataclass(slots=True)
class Tally:
    """What a write changed of its session's totals (the columns the sessions list sorts by:
    catalogue_sql's COUNT_ROWS), gathered as it writes and counted in with its last statement.

    The rule it keeps: each total is what the session's rows add up to (every run of every
    branch, compaction runs and compacted runs included; ``queries.SESSION_SUMMARIES`` computes
    them from scratch).
    """

    runs: int = 0  # runs inserted
    tool_calls: int = 0  # tool calls inserted
    tokens: int = 0  # tokens added to its runs
    failed_runs: int = 0  # runs that became failed (inserted so, or failed from in_progress)
    failed_calls: int = 0  # tool calls inserted failed
    # A stored run's or call's status or error was written, what it was unknown: the failures
    # are recounted (through the partial indexes of failed runs and calls: the session's).
    failures: bool = False
    # Rows were deleted or a run's tokens replaced: every total is recounted from the rows.
    recount: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.recount or self.groups)

    @property
    def groups(self) -> tuple[str, ...]:
        """The groups of totals (catalogue_sql.TOTALS) it changes, in that order: what the
        statement counting them assigns."""
        groups: tuple[str, ...] = ("runs",) if self.runs else ()
        if self.tool_calls:
            groups += ("tool_calls",)
        if self.tokens:
            groups += ("tokens",)
        if self.failures or self.failed_runs or self.failed_calls:
            groups += ("failures",)
        return groups

    def params(self, session_id: str) -> dict[str, Any]:
        """COUNT_ROWS's parameters (the tokens capped as a run's are)."""
        return {
            "sid": session_id,
            "runs": self.runs,
            "tool_calls": self.tool_calls,
            "tokens": min(self.tokens, MAX_INT),
            "max": MAX_INT,
            "failed_runs": self.failed_runs,
            "failed_calls": self.failed_calls,
            "failures": self.failures,
        }


def set_head(
    session_id: str, head_id: int | None, now: Any, tally: Tally | None = None
) -> Op[None]:
    """Move the head to ``head_id``, counting in what ``tally`` says the write changed."""
    if tally is not None and not tally.recount and (groups := tally.groups):
        yield C.SET_HEAD_COUNTED[groups]({**tally.params(session_id), "head": head_id, "now": now})
    else:
        yield S.SET_HEAD({"sid": session_id, "head": head_id, "now": now})
        if tally is not None:
            yield from count_rows(session_id, tally)


def count_rows(session_id: str, tally: Tally) -> Op[None]:
    """Count in what ``tally`` says a write changed, leaving the head and updated_at as they
    are (a pop that keeps its head, a copy's rows, a trace's tool-call outcomes)."""
    if tally.recount:
        yield C.RECOUNT_ROWS({"sid": session_id})
    elif groups := tally.groups:
        yield C.COUNT_ROWS[groups](tally.params(session_id))

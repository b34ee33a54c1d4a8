"""Compaction: replace the model's view of a conversation's newest items, keeping the transcript.

The Agents SDK's ``OpenAIResponsesCompactionSession`` replaces older history with a compacted
summary. Here that replacement is part of the tree and changes nothing that was written: one
compaction run (``kind`` ``'compaction'``) is added below the head, holding the compacted
items, and the model's view of the path (``get_items``) continues above it at its
``prior_run_id``, skipping the runs it replaced. Those stay where they were, as the
compaction run's ancestors, with their items, tool calls and usage; they are marked
``status = 'compacted'`` and ``compacted_by`` the compaction run. So the model sees exactly
what ``SQLiteSession`` would hold after the same replacement, while the transcript (``runs``,
the viewer, analytics, search, export) keeps every original run.

A compaction writes what the SDK writes (the compacted items) plus one run row and an update
of the replaced runs' rows; it copies nothing else, except when the replaced suffix begins
inside a run: then that run's earlier items, which the model keeps seeing, are copied to the
front of the compaction run (the SDK's automatic compaction starts at a user message, which
always begins a run, so it never does this).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..domain.model import HistoryTail
from . import results as R
from . import statements as S
from .append import insert_item
from .codec import PreparedItem, decode_items, loads_item
from .codec import prepare_items as prepare
from .lock import Tally, lock_session, set_head
from .ops import Op
from .reads import find_run

__all__ = ["compact", "history_tail"]


def _tail_rows(session_id: str, limit: int) -> Op[list[tuple[Any, ...]]]:
    """The newest ``limit`` (id, data) rows of the model view, oldest first (plain tuples:
    ``HistoryTail.rows`` hands them to the caller, who hands them back to ``compact``)."""
    rows: list[R.ItemRow] = yield S.PATH_ITEMS_TAIL({"sid": session_id, "limit": limit})
    return [(row.id, row.data) for row in reversed(rows)]


def history_tail(session_id: str, limit: int) -> Op[HistoryTail | None]:
    """The newest ``limit`` items of the model view; None if one of them is corrupt.

    (A corrupt row would be skipped by ``get_items``, and the items would no longer line up
    with the rows a compaction replaces.)
    """
    rows = yield from _tail_rows(session_id, limit + 1)
    complete = len(rows) <= limit
    rows = rows[-limit:]
    items = []
    for _, data in rows:
        try:
            item = loads_item(data)
        except (ValueError, TypeError, RecursionError):
            return None
        if type(item) is not dict:
            return None
        items.append(item)
    return HistoryTail(items, complete, tuple(rows))


def compact(
    session_id: str,
    batch: Sequence[PreparedItem],
    now: Any,
    replaced: Sequence[tuple[Any, ...]] | None,
) -> Op[bool]:
    """Replace the model view's rows ``replaced`` (its newest ones), or all of it, by ``batch``.

    Returns False, changing nothing, when ``replaced`` are no longer the newest rows of the
    view. ``replaced=None`` replaces the whole view (the SDK's whole-history replacement).
    """
    head = yield from lock_session(session_id, now, create=False)
    if replaced is not None:
        if not replaced:
            return False
        current = yield from _tail_rows(session_id, len(replaced))
        if current != list(replaced):
            return False
    if head.id is None:  # nothing to replace: the compacted items start the history
        if not batch:
            return True
        head = yield from lock_session(session_id, now)
    copied: list[PreparedItem] = []
    if replaced is None:
        depth, prior = 0, None  # every run of the view is replaced
    else:
        first_id, _ = replaced[0]
        place: R.ItemPlaceRow | None = yield S.ITEM_PLACE({"sid": session_id, "id": first_id})
        if place is None:  # no longer there: not the newest rows any more
            return False
        first = yield from find_run(session_id, place.run_id)
        depth = first.depth
        prior = first.parent_id if first.kind is None else first.prior_run_id
        if place.position > 0:  # the suffix begins inside ``first``: the model keeps its start
            rows: list[R.ItemRow] = yield S.RUN_ITEMS_BEFORE(
                {"sid": session_id, "run_id": first.id, "position": place.position}
            )
            copied = prepare(decode_items(rows, session_id))
    items = [*copied, *batch]
    compaction_id: int | None = None
    if items:
        inserted: int = yield S.INSERT_COMPACTION_RUN(
            {
                "sid": session_id,
                "parent_id": head.id,
                "depth": head.depth + 1,
                "item_count": len(items),
                "prior_run_id": prior,
                "now": now,
            }
        )
        compaction_id = inserted
        for position, prepared in enumerate(items):
            yield from insert_item(session_id, inserted, position, prepared, now, want_id=False)
    if head.id is not None:
        yield S.MARK_COMPACTED({"sid": session_id, "depth": depth, "by": compaction_id})
    # With nothing to hold, no compaction run: the view ends where the replaced runs began.
    # The compaction run counts as a run; a failed run it replaced is compacted now.
    tally = Tally(runs=int(compaction_id is not None), failures=head.id is not None)
    yield from set_head(
        session_id, compaction_id if compaction_id is not None else prior, now, tally
    )
    return True

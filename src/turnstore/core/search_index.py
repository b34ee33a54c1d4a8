"""Feeding the search index where a backend feeds it in batches (SQLite's FTS5)."""

from __future__ import annotations

from . import statements as S
from .ops import Capability, Op, supports

__all__ = ["INDEX_BATCH", "copy_backlog", "feed_index", "index_backlog"]


# How many new items wait before a backend that indexes for search in batches (SQLite's FTS5:
# each writing transaction costs it as much as the rest of an SDK turn) feeds them in.
INDEX_BATCH = 64


def index_backlog() -> Op[None]:
    """Feed the search index every item it lacks.

    Searches call it first, so they see every committed item; appends call it once
    ``INDEX_BATCH`` items wait. A backend whose index keeps up on its own has no statements
    for it.
    """
    if not supports(Capability.SEARCH_BACKLOG):
        return
    # A search runs in a read transaction: only a backlog makes it write.
    if (yield S.INDEX_PENDING()):
        yield from feed_index()


def copy_backlog() -> Op[bool]:
    """For a store that must not write: copy the items the search index lacks into a private
    index of the connection's own; True when there are any (search them too).

    Ranks in that small index are only comparable to the main index's roughly, and the copy
    is remade for each search, which costs as much as feeding the index would.
    """
    if not supports(Capability.SEARCH_BACKLOG):
        return False
    if not (yield S.INDEX_PENDING()):
        return False
    yield S.CREATE_BACKLOG_COPY()
    yield S.CLEAR_BACKLOG_COPY()
    yield S.COPY_BACKLOG()
    return True


def feed_index() -> Op[None]:
    yield S.INDEX_BACKLOG()
    yield S.MARK_INDEXED()

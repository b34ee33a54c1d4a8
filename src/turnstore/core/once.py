"""Exactly-once writes: every write operation carries a key the database remembers.

A write's key (its ``operation_id``) is claimed in the write's own transaction, in the
``operations`` table under a unique (session_id, op_id) key. So the key is stored if and only
if the write committed, and running the operation again with the same key finds it and does
nothing but return the first run's result (kept in the same row). That makes a re-run always
safe: after a connection lost while COMMIT was in flight (when nobody can say whether the
server committed), the backend simply runs the operation again with its key; a caller told
that the outcome is unknown (``OutcomeUnknownError``) may do the same. The check needs no
transaction status, which a sharded database (Citus) cannot give.

A key is 12 hex digits of milliseconds since the epoch and 20 random ones, so keys sort by
time within a session and a write forgets its session's keys older than ``KEEP_MS`` with one
range delete (on SQLite only when its claim finds some: most writes need no delete). A key
older than that cannot be retried safely and is refused.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..domain import validate
from ..errors import InvalidOperationError
from . import statements as S
from .ops import Fetch, Group, Op, Query, Unchanged
from .results import ClaimRow

__all__ = ["HEAD", "KEEP_MS", "NEW_RUN", "check_operation_id", "new_operation_id", "once"]

T = TypeVar("T")

HEAD: Any = object()
"""``once``'s ``likely``: the write's result is most likely the session's head run (its id)."""

NEW_RUN: Any = object()
"""``once``'s ``likely``: the write's result is most likely the first run it inserts (its id,
where the backend knows it at the claim: SQLite's AUTOINCREMENT counter, under its lock)."""

KEEP_MS = 24 * 3600 * 1000
"""How long a write's key is remembered: a retry within a day of the first try is safe."""

_KEY = re.compile(r"[0-9a-f]{32}")


def _millis() -> int:
    return time.time_ns() // 1_000_000


def new_operation_id() -> str:
    """A fresh write key: unique, and sortable by the time it was made."""
    return f"{_millis():012x}{secrets.token_hex(10)}"


def check_operation_id(operation_id: Any) -> str:
    """``operation_id`` if it is a key turnstore made less than a day ago, else refuse it."""
    if not isinstance(operation_id, str) or not _KEY.fullmatch(operation_id):
        raise InvalidOperationError(
            f"operation_id must be a key from turnstore.new_operation_id() (or from an "
            f"OutcomeUnknownError), got {validate.shown(operation_id)}"
        )
    if int(operation_id[:12], 16) < _millis() - KEEP_MS:
        raise InvalidOperationError(
            f"operation_id {operation_id} is more than a day old: whether it was applied is no "
            "longer remembered, so a retry could apply it twice; look at the session instead"
        )
    return operation_id


def once(
    session_id: str,
    key: str,
    op: Op[T],
    keep: Callable[[T], Any] | None = None,
    replay: Callable[[Any], Op[T]] | None = None,
    *,
    ends_session: bool = False,
    likely: Any = None,
) -> Op[T]:
    """Run ``op`` unless the write ``key`` of ``session_id`` already committed.

    ``keep`` maps the result to what is stored for a replay (JSON; None stores nothing), the
    result itself by default; ``replay`` rebuilds the result from it (e.g. reads a run back by
    its id), the stored value itself by default. An operation that ``ends_session`` (clear,
    delete) forgets the session's older keys too, so a deleted session leaves one key behind.
    ``likely`` is what ``keep`` will most likely give (None: no guess; ``HEAD``: the session's
    head run as the claim finds it, ``NEW_RUN``: the first run the write inserts, where the
    backend reads them there): it is stored with the claim, and the result is stored again
    only when it turns out otherwise.
    """
    params = {"sid": session_id, "key": key}
    cutoff = max(int(key[:12], 16) - KEEP_MS, 0)
    before = f"{cutoff:012x}"
    head, new_run = likely is HEAD, likely is NEW_RUN
    claim_query = S.CLAIM_OPERATION(
        {
            **params,
            "before": before,
            "result": None if head or new_run else _stored(likely),
            "head": head,
            "new_run": new_run,
        }
    )
    # The write's first statements go with the claim, up to the first whose result it needs
    # (the session's lock and head): one round trip on PostgreSQL, not two. Should the key be
    # found, they ran for nothing, and the transaction is rolled back (Unchanged).
    leading: list[Query] = []
    ended = False
    result: T
    try:
        query = next(op)
        while query.fetch is Fetch.NONE:
            leading.append(query)
            query = op.send(None)
    except StopIteration as stop:
        ended, result = True, stop.value
    # The first that needs its result may be a group itself: its members join this one.
    needed = () if ended else query.queries if isinstance(query, Group) else (query,)
    answers = yield Group([claim_query, *leading, *needed])
    claim: ClaimRow | None = answers[0]
    if claim is None:  # committed before: answer as the first run did, change nothing
        result_json: str | None = yield S.OPERATION_RESULT(params)
        stored: Any = json.loads(result_json) if result_json is not None else None
        raise Unchanged(stored if replay is None else (yield from replay(stored)))
    if claim.stale:  # the session's keys of more than a day ago: a range of the key index
        yield S.FORGET_OPERATIONS({"sid": session_id, "before": before})
    if not ended:
        answer = answers[-len(needed) :] if isinstance(query, Group) else answers[-1]
        try:
            while True:
                answer = yield op.send(answer)
        except StopIteration as stop:
            result = stop.value
    if ends_session:
        # Every other key, not only older ones: keys written in the same millisecond as this
        # one order by their random part.
        yield S.FORGET_OTHER_OPERATIONS(params)
    kept = _stored(keep(result) if keep is not None else result)
    if kept != claim.result:  # the claim's row holds the guess (None: nothing)
        yield S.KEEP_OPERATION_RESULT({**params, "result": kept})
    return result


def _stored(value: Any) -> str | None:
    """``value`` as the operations row stores it (None: nothing)."""
    # ASCII JSON: a popped item holding a lone surrogate stores and decodes unchanged.
    return None if value is None else json.dumps(value)

"""Adopting a file of the SDK's ``SQLiteSession``: its sessions' history, imported on first use.

A SQLite file that holds the SDK's ``agent_messages`` table (``SQLiteSession`` wrote it, then
the application switched to ``StructuredSession``) keeps its conversations: the first time a
process uses a session of it, the session's SDK history is imported into turnstore's tables
by the importer of ``turnstore import`` (``_importers``), and marked adopted (``sdk_adopted``)
in the same transaction. The mark is claimed first in that transaction, so two processes
adopting one session at once import it once (the second finds the mark and adds nothing), and
the import happens once ever: what turnstore does to the session later (pop, compaction, a
clear) is never undone by importing again. The SDK's tables are only read.

Each store lists once which of the file's SDK sessions are not adopted yet; after that a
session's first use costs a lookup in that set, and so does every later call.
"""

from __future__ import annotations

import weakref
from typing import Any

from ._importers import SourceSession, open_source, plan_merge
from .backends.append import GraftRun, graft
from .backends.base import Fetch, Op, Query, prepare_items, set_head
from .backends.reads import session_info, session_tree
from .backends.sqlite import SQLiteBackend
from .errors import InvalidItemError
from .store import Store

__all__ = ["adopt", "adopt_sdk_sessions"]

# Per store: the ids of the file's SDK sessions it has not adopted (empty: nothing to adopt).
_pending: weakref.WeakKeyDictionary[Store, set[str]] = weakref.WeakKeyDictionary()


async def adopt(store: Store, session_id: str) -> bool:
    """Import ``session_id``'s history from the SDK's tables of the store's file, if it has
    some that no process has adopted yet; whether this call imported it."""
    pending = await _pending_of(store)
    if session_id not in pending:
        return False
    backend = store.backend
    assert isinstance(backend, SQLiteBackend)  # only SQLite files have pending sessions
    source = open_source(backend.path, "sqlite")
    try:
        session = await source.load(session_id)
    finally:
        await source.aclose()
    now = backend.now()
    adopted = await backend.run(lambda: _adopt(store, session, now), write=True)
    pending.discard(session_id)
    return adopted


async def adopt_sdk_sessions(store: Store) -> int:
    """Adopt every session of the SDK's tables in the store's file now; returns how many this
    call imported (not those another process adopted first).

    ``StructuredSession`` adopts a session when it is first used; until then the catalogue
    (``Store.sessions``), search, analytics, the CLI and the viewer do not show it. This takes
    over the whole file at once (each session in a transaction of its own). A no-op for a
    database without the SDK's tables, and on PostgreSQL.
    """
    pending = await _pending_of(store)
    return sum([await adopt(store, session_id) for session_id in sorted(pending)])


async def _pending_of(store: Store) -> set[str]:
    pending = _pending.get(store)
    if pending is None:
        # Concurrent first uses may both list: they find the same sessions.
        pending = _pending[store] = await _unadopted(store)
    return pending


async def _unadopted(store: Store) -> set[str]:
    """The SDK sessions of the store's file that are not adopted yet."""
    backend = store.backend
    if not isinstance(backend, SQLiteBackend) or backend.path == ":memory:" or store.read_only:
        return set()
    adopted = await backend.run(_adopted_ids, write=False)
    if adopted is None:
        return set()
    source = open_source(backend.path, "sqlite")
    try:
        return set(await source.session_ids()) - adopted
    finally:
        await source.aclose()


def _adopted_ids() -> Op[set[str] | None]:
    """The adopted session ids; None when the file has no SDK messages table."""
    if (yield Query("sdk_messages_table", fetch=Fetch.ONE)) is None:
        return None
    rows = yield Query("sdk_adopted_ids", fetch=Fetch.ALL)
    return {sid for (sid,) in rows}


def _adopt(store: Store, source: SourceSession, now: Any) -> Op[bool]:
    """Claim the session's adoption and import what the store lacks; False if adopted before.

    A session that turnstore already holds (written before adoption existed, or brought in by
    ``turnstore import``) gains the SDK runs it lacks as runs of its tree, and keeps its head
    unless it has none.
    """
    sid = source.session_id
    claimed = yield Query("claim_sdk_adoption", {"sid": sid, "now": now}, Fetch.ONE)
    if claimed is None:
        return False
    info = yield from session_info(sid)
    plan = plan_merge(source, (yield from session_tree(sid)) if info is not None else ())
    follow = info is None or info.head_run_id is None
    if plan.runs:
        try:
            batches = [prepare_items(run.items) for run in plan.runs]
        except InvalidItemError as exc:
            raise InvalidItemError(
                f"session {sid!r} of the SDK's agent_messages table cannot be adopted: {exc}"
            ) from exc
        grafts = [
            GraftRun(
                batch,
                run.parent_id,
                run.parent,
                run.usage,
                store._bind_time(run.created_at) if run.created_at is not None else None,
            )
            for run, batch in zip(plan.runs, batches, strict=True)
        ]
        yield from graft(sid, grafts, plan.head if follow else None, now)
    if follow and plan.stored_head is not None:
        yield from set_head(sid, plan.stored_head, now)
    return True

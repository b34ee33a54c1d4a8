"""Adopting a file of the SDK's ``SQLiteSession``: its sessions' history, imported on first use.

A SQLite file that holds the SDK's ``agent_messages`` table (``SQLiteSession`` wrote it, then
the application switched to ``StructuredSession``) keeps its conversations: the first time a
process uses a session of it, the session's SDK history is imported into turnstore's tables
by the importer of ``turnstore import`` (``merge.plan_merge``), and marked adopted (``sdk_adopted``)
in the same transaction. The mark is claimed first in that transaction, so two processes
adopting one session at once import it once (the second finds the mark and adds nothing), and
the import happens once ever: what turnstore does to the session later (pop, compaction, a
clear) is never undone by importing again. The SDK's tables are only read.

Each store checks once whether its file holds the SDK's tables; in one that does, a session's
first use in a ``StructuredSession`` costs one indexed lookup (is it in the SDK's table and not
adopted?), so a session the SDK wrote after the store opened is adopted too. A read-only
store cannot adopt: using an unadopted session through it is a ReadOnlyError, not an empty
history. Sessions whose id turnstore cannot hold (NUL, lone surrogates, over 1024 bytes) stay
in the SDK's tables only, as ``turnstore import`` leaves them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .. import validate
from ..core.append import GraftRun, graft
from ..core.codec import prepare_items
from ..core.lock import set_head
from ..core.ops import Fetch, Op, Query
from ..core.reads import session_info, session_tree
from ..errors import InvalidItemError, InvalidOperationError, ReadOnlyError
from ..sqlite import SQLiteBackend
from ..store import Store
from ..store.base import StoreBase
from .base import SourceSession
from .merge import plan_merge
from .sources import open_source

__all__ = ["adopt", "adopt_sdk_sessions"]

# Per store: whether its file holds the SDK's messages table (checked at the store's first use).
_sdk_files: weakref.WeakKeyDictionary[StoreBase, bool] = weakref.WeakKeyDictionary()


async def adopt(store: StoreBase, session_id: str) -> bool:
    """Import ``session_id``'s history from the SDK's tables of the store's file, if it has
    some that no process has adopted yet; whether this call imported it."""
    if not await _holds_sdk_tables(store) or not await _unadopted(store, session_id):
        return False
    backend = store.backend
    assert isinstance(backend, SQLiteBackend)  # only SQLite files hold the SDK's tables
    if store.read_only:
        raise ReadOnlyError(
            f"session {session_id!r} of the SDK's agent_messages table in {backend.path} is not "
            "adopted yet, and a read-only store cannot adopt it: use it once through a writable "
            "store (or run turnstore.adopt_sdk_sessions on one)"
        )
    source = open_source(backend.path, "sqlite")
    try:
        session = await source.load(session_id)
    finally:
        await source.aclose()
    now = backend.now()
    return await backend.run(lambda: _adopt(store, session, now), write=True)


async def adopt_sdk_sessions(store: Store) -> int:
    """Adopt every session of the SDK's tables in the store's file now; returns how many this
    call imported (not those another process adopted first).

    ``StructuredSession`` adopts a session when it is first used; until then the catalogue
    (``Store.sessions``), search, analytics, the CLI and the viewer do not show it. This takes
    over the whole file at once (each session in a transaction of its own). A no-op for a
    database without the SDK's tables, and on PostgreSQL. Sessions whose id turnstore cannot
    hold are left out (as ``turnstore import`` leaves them).
    """
    if not await _holds_sdk_tables(store):
        return 0
    backend = store.backend
    assert isinstance(backend, SQLiteBackend)
    adopted = await backend.run(_adopted_ids, write=False)
    source = open_source(backend.path, "sqlite")
    try:
        listed = await source.session_ids()
    finally:
        await source.aclose()
    pending = sorted(sid for sid in set(listed) - adopted if _holdable(sid))
    return sum([await adopt(store, session_id) for session_id in pending])


async def _holds_sdk_tables(store: StoreBase) -> bool:
    held = _sdk_files.get(store)
    if held is None:
        backend = store.backend
        held = isinstance(backend, SQLiteBackend) and bool(
            await backend.run(_query_of("sdk_messages_table", {}), write=False)
        )
        _sdk_files[store] = held
    return held


async def _unadopted(store: StoreBase, session_id: str) -> bool:
    """Whether the SDK's table holds rows of ``session_id`` and no process adopted it yet."""
    query = _query_of("sdk_unadopted", {"sid": session_id})
    return bool(await store.backend.run(query, write=False))


def _query_of(name: str, params: dict[str, Any]) -> Callable[[], Op[Any]]:
    """An operation running one query and returning its one row (None: no row)."""

    def op() -> Op[Any]:
        return (yield Query(name, params, Fetch.ONE))

    return op


def _holdable(session_id: str) -> bool:
    """Whether turnstore can hold a session of this id (StructuredSession refuses the others)."""
    try:
        validate.key(session_id, "session_id")
    except InvalidOperationError:
        return False
    return True


def _adopted_ids() -> Op[set[str]]:
    """The adopted session ids."""
    rows = yield Query("sdk_adopted_ids", fetch=Fetch.ALL)
    return {sid for (sid,) in rows}


def _adopt(store: StoreBase, source: SourceSession, now: Any) -> Op[bool]:
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

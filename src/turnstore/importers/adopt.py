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
from collections.abc import Sequence
from typing import Any

from ..core.append import GraftRun
from ..core.codec import prepare_items
from ..domain import validate
from ..domain.model import Run
from ..errors import InvalidItemError, InvalidOperationError, ReadOnlyError, SchemaError
from ..store import Store, adoption
from ..store.adoption import AdoptionPlan
from ..store.base import StoreBase
from .base import SourceSession
from .merge import plan_merge
from .sdk_sqlite import SQLiteSource

__all__ = ["adopt", "adopt_sdk_sessions", "is_plain", "take_up"]

# Per store: whether its file holds the SDK's messages table (checked at the store's first use).
_sdk_files: weakref.WeakKeyDictionary[StoreBase, bool] = weakref.WeakKeyDictionary()


async def adopt(store: StoreBase, session_id: str) -> bool:
    """Import ``session_id``'s history from the SDK's tables of the store's file, if it has
    some that no process has adopted yet; whether this call imported it."""
    if not await _holds_sdk_tables(store) or not await adoption.unadopted(store, session_id):
        return False
    path = store.label  # a SQLite file's path: only those hold the SDK's tables
    if store.read_only:
        raise ReadOnlyError(
            f"session {session_id!r} of the SDK's agent_messages table in {path} is not "
            "adopted yet, and a read-only store cannot adopt it: use it once through a writable "
            "store (or run turnstore.adopt_sdk_sessions on one)"
        )
    source = _source(path)
    try:
        session = await source.load(session_id)
    finally:
        await source.aclose()
    return await adoption.adopt(
        store, session_id, lambda tree: _plan(store, session, tree), source.last_id
    )


async def take_up(store: StoreBase, session_id: str) -> bool:
    """Append what the SDK's classes wrote to the adopted ``session_id`` since it was taken
    over, at the head (as ``add_items`` would); whether this call did. An AdvancedSQLiteSession
    that wrote to another branch than the head's raises ``SchemaError``: never unseen."""
    if not await _holds_sdk_tables(store):
        return False
    seen = await adoption.behind(store, session_id)
    if seen is None:
        return False
    if store.read_only:
        raise ReadOnlyError(
            f"the SDK wrote to session {session_id!r} in {store.label} after turnstore adopted "
            "it, and a read-only store cannot take those items up: use the session once "
            "through a writable store"
        )
    source = _source(store.label)
    try:
        items, through, branches = await source.rows_after(session_id, seen)
    finally:
        await source.aclose()
    if through is None:
        return False
    if len(branches) > 1:
        raise SchemaError(
            f"AdvancedSQLiteSession wrote to branches {', '.join(sorted(branches))} of session "
            f"{session_id!r} after turnstore adopted it: turnstore cannot tell which of its "
            "branches each continues; write through StructuredSession only"
        )
    try:
        batch = prepare_items(items)
    except InvalidItemError as exc:
        raise InvalidItemError(
            f"what the SDK wrote to session {session_id!r} after its adoption cannot be taken "
            f"up: {exc}"
        ) from exc
    branch = next(iter(branches), None)
    return await adoption.take_up(store, session_id, seen, through, batch, branch)


def is_plain(store: StoreBase) -> bool:
    """Whether the store's database is known to hold none of the SDK's tables (nothing to
    adopt or take up, ever)."""
    return _sdk_files.get(store) is False


def _source(path: str) -> SQLiteSource:
    return SQLiteSource(path, None)  # the SDK's default tables: adoption reads no others


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
    adopted = await adoption.adopted_ids(store)
    source = _source(store.label)
    try:
        listed = await source.session_ids()
    finally:
        await source.aclose()
    pending = sorted(sid for sid in set(listed) - adopted if _holdable(sid))
    return sum([await adopt(store, session_id) for session_id in pending])


async def _holds_sdk_tables(store: StoreBase) -> bool:
    held = _sdk_files.get(store)
    if held is None:
        held = _sdk_files[store] = await adoption.sdk_tables_held(store)
    return held


def _holdable(session_id: str) -> bool:
    """Whether turnstore can hold a session of this id (StructuredSession refuses the others)."""
    try:
        validate.key(session_id, "session_id")
    except InvalidOperationError:
        return False
    return True


def _plan(
    store: StoreBase, source: SourceSession, tree: Sequence[tuple[Run, list[Any]]]
) -> AdoptionPlan:
    """The runs of ``source`` the stored ``tree`` lacks, prepared to be written (run inside
    the adopting transaction, on what the store holds then)."""
    plan = plan_merge(source, tree)
    try:
        batches = [prepare_items(run.items) for run in plan.runs]
    except InvalidItemError as exc:
        raise InvalidItemError(
            f"session {source.session_id!r} of the SDK's agent_messages table cannot be "
            f"adopted: {exc}"
        ) from exc
    grafts = [
        GraftRun(
            batch,
            run.parent_id,
            run.parent,
            run.usage,
            store._bind_time(run.created_at),
        )
        for run, batch in zip(plan.runs, batches, strict=True)
    ]
    return AdoptionPlan(grafts, plan.head, plan.stored_head, plan.named_runs)

"""The store's side of adopting a ``SQLiteSession`` file: an internal API for
``turnstore.importers.adopt``, which decides what to adopt and reads the SDK's rows.

Each function runs one operation of ``core.adoption`` in a transaction of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core import adoption
from ..core.adoption import AdoptionPlan
from ..core.codec import PreparedItem
from ..core.ops import Capability
from ..domain.model import Run
from .base import StoreBase

__all__ = [
    "AdoptionPlan",
    "adopt",
    "adopted_ids",
    "behind",
    "keep_names",
    "sdk_tables_held",
    "take_up",
    "unadopted",
]


async def sdk_tables_held(store: StoreBase) -> bool:
    """Whether the store's database holds the SDK's tables (only a SQLite file can)."""
    if Capability.SDK_ADOPTION not in store.backend.capabilities:
        return False
    return await store.backend.run(adoption.sdk_tables_held, write=False)


async def unadopted(store: StoreBase, session_id: str) -> bool:
    """Whether the SDK's table holds rows of ``session_id`` and no process adopted it yet."""
    return await store.backend.run(lambda: adoption.unadopted(session_id), write=False)


async def adopted_ids(store: StoreBase) -> set[str]:
    """The ids of the sessions adopted so far."""
    return await store.backend.run(adoption.adopted_ids, write=False)


async def adopt(
    store: StoreBase,
    session_id: str,
    plan: Callable[[Sequence[tuple[Run, list[Any]]]], AdoptionPlan],
    through: int | None,
) -> bool:
    """Claim ``session_id``'s adoption and add what ``plan`` makes of its stored tree (the
    SDK's rows up to ``through``), in one transaction; False (adding nothing) if a process
    adopted it before."""
    now = store.backend.now()
    return await store.backend.run(
        lambda: adoption.adopt(session_id, plan, through, now), write=True
    )


async def behind(store: StoreBase, session_id: str) -> int | None:
    """The SDK's last row taken over for ``session_id``, if the SDK wrote rows after it."""
    return await store.backend.run(lambda: adoption.behind(session_id), write=False)


async def take_up(
    store: StoreBase,
    session_id: str,
    seen: int,
    through: int,
    batch: Sequence[PreparedItem],
    branch: str | None,
) -> bool:
    """Append the SDK's rows after ``seen`` (``batch``, up to row ``through``) at the head, in
    one transaction (``core.adoption.take_up``)."""
    now = store.backend.now()
    return await store.backend.run(
        lambda: adoption.take_up(session_id, seen, through, batch, branch, now), write=True
    )


async def keep_names(store: StoreBase, session_id: str, names: Sequence[tuple[int, str]]) -> None:
    """Name the branches of ``names`` (run id, name) that have no name, with names no other
    branch has, in one transaction (``turnstore import`` of an AdvancedSQLiteSession)."""
    if names:
        now = store.backend.now()
        await store.backend.run(lambda: adoption.keep_names(session_id, names, now), write=True)

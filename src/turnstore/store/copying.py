"""The store's side of ``turnstore copy``: a session's rows read by ranges of runs, and
written exactly once (an internal API for ``turnstore.importers.copy``, and for the import of an
export, which holds them whole: ``write_session``). Each function runs one operation of
``core.transfer`` in a transaction of its own."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..core import transfer
from ..core.annotation_sql import CopyAnnotationRow
from ..core.ops import Capability, Op
from ..core.tables import RunRow, SessionRow
from ..core.transfer import Chunk, IdMap, Time, time_binder
from ..errors import TurnstoreError
from .base import StoreBase
from .chunks import ranges

__all__ = [
    "chunk_cuts",
    "database_identity",
    "read_range",
    "refresh_statistics",
    "same_database",
    "session_annotations",
    "session_items",
    "session_rows",
    "time_of",
    "write_rows",
    "write_session",
]

log = logging.getLogger("turnstore")


async def session_rows(store: StoreBase, sid: str) -> tuple[SessionRow | None, list[RunRow]]:
    """The session's row and its runs, parents first (None: no such session)."""
    return await store.backend.run(lambda: transfer.session_rows(sid), write=False)


async def session_items(store: StoreBase) -> dict[str, int]:
    """How many items each session holds."""
    return await store.backend.run(transfer.session_items, write=False)


async def database_identity(store: StoreBase) -> str:
    """What tells the database apart, however it was named (``core.transfer``)."""
    return await store.backend.run(transfer.database_identity, write=False)


async def chunk_cuts(store: StoreBase, sid: str, runs: Sequence[RunRow]) -> set[int]:
    """Where the session's runs may be cut into chunks (``core.transfer.chunk_cuts``)."""
    return await store.backend.run(functools.partial(transfer.chunk_cuts, sid, runs), write=False)


async def read_range(store: StoreBase, sid: str, first: int, last: int) -> Chunk:
    """The rows of the session's runs ``first`` to ``last`` (ids), as they are now."""
    return await store.backend.run(
        functools.partial(transfer.read_range, sid, first, last), write=False
    )


async def session_annotations(store: StoreBase, sid: str) -> list[CopyAnnotationRow]:
    """Every annotation of the session, in id order, as a copy writes them."""
    return await store.backend.run(lambda: transfer.session_annotations(sid), write=False)


async def same_database(a: StoreBase, b: StoreBase) -> bool:
    """Whether two stores are on one database, however each was named: a SQLite file by a
    link or ``./``; a PostgreSQL server as localhost and 127.0.0.1, by a socket or a proxy."""
    one, other = a.backend, b.backend
    if one is other:
        return True
    if one.dialect != other.dialect:
        return False
    first, second = await database_identity(a), await database_identity(b)
    if one.dialect == "sqlite":
        # Each ':memory:' (no file) is a database of its own.
        return bool(first and second) and await asyncio.to_thread(os.path.samefile, first, second)
    return first == second


async def refresh_statistics(store: StoreBase, runs: int) -> bool:
    """The end of a bulk load (a copy, an import) that wrote ``runs`` runs: the planner's
    statistics taken again if the load outgrew them (``core.transfer.refresh_statistics``);
    whether they were. The rows are written whatever happens here: a failure (a lost
    connection, a timeout) is logged as a warning that says what to run, not raised."""
    if not runs or Capability.STATISTICS not in store.backend.capabilities:
        return False  # nothing written, or no statistics to take (SQLite: no transaction)
    try:
        return await store.backend.run(
            functools.partial(transfer.refresh_statistics, runs), write=True
        )
    except TurnstoreError as exc:
        log.warning(
            "%s: the rows are written, but analysing the tables failed (%s): until autovacuum "
            "analyses them, reads of the new sessions may take a slow plan; run ANALYZE on "
            "the schema's tables",
            store.label,
            exc,
        )
        return False


def time_of(store: StoreBase) -> Time:
    """How the store binds the times a copy writes."""
    return time_binder(store.backend.bind_time)


async def write_rows(
    store: StoreBase,
    session: SessionRow,
    metadata: str,
    chunk: Chunk | None,
    ids: IdMap,
    time: Time,
    *,
    first: bool,
    last: bool,
    annotations: Sequence[CopyAnnotationRow] = (),
) -> IdMap:
    """``core.transfer.write_chunk`` in one transaction, under a write key: a commit whose
    reply was lost is not written twice when the backend runs it again."""

    def keep(result: IdMap) -> Any:
        # What this chunk added to the map (the map itself grows with the session).
        added = [
            [source, target] for source, target in result.runs.items() if source not in ids.runs
        ]
        return {"added": added, "waiting": [[k, v] for k, v in result.waiting.items()]}

    def replay(kept: Any) -> Op[IdMap]:
        yield from ()  # nothing to read: the map is rebuilt from what was kept
        runs = {**ids.runs, **{source: target for source, target in kept["added"]}}
        return IdMap(runs, {source: list(targets) for source, targets in kept["waiting"]})

    return await store._write(
        session.session_id,
        lambda: transfer.write_chunk(
            session, metadata, chunk, ids, time, first=first, last=last, annotations=annotations
        ),
        None,
        keep,
        replay,
    )


async def write_session(
    store: StoreBase,
    session: SessionRow,
    metadata: str,
    rows: Chunk,
    ids: IdMap,
    *,
    chunk_items: int,
    on_items: Callable[[int], None] | None = None,
) -> None:
    """A whole session's ``rows`` (run ids in order, parents first; every other table's rows
    in id order, ids from 1) written as ``copy`` writes them, about ``chunk_items`` items a
    transaction, cut only where every table's rows keep their order
    (``core.transfer.order_cuts``); but for the runs ``ids`` maps, which the store holds
    already (an import that stopped part way: ``match_runs``)."""
    time = time_of(store)
    done = len(ids.runs)
    slices = ranges(
        [run.item_count for run in rows.runs[done:]],
        chunk_items,
        cuts=transfer.order_cuts(rows.runs[done:], transfer.row_bounds(rows)),
    )
    notes = rows.annotations
    if not slices:  # no runs: the session's row (and annotations) is all there is
        await write_rows(
            store, session, metadata, None, ids, time, first=not done, last=True, annotations=notes
        )
        return
    for index, (start, stop) in enumerate(slices):
        part = _part(rows, done + start, done + stop)
        first, last = not done and not index, index == len(slices) - 1
        ids = await write_rows(
            store,
            session,
            metadata,
            part,
            ids,
            time,
            first=first,
            last=last,
            annotations=notes if last else (),
        )
        if on_items is not None:
            on_items(len(part.items))


def _part(rows: Chunk, start: int, stop: int) -> Chunk:
    """The rows of ``rows.runs[start:stop]``, as ``read_chunk`` reads a range (a tool call
    goes with the run ``core.transfer.written_with`` names)."""
    runs = rows.runs[start:stop]
    first, last = runs[0].id, runs[-1].id

    def within(run_id: int) -> bool:
        return first <= run_id <= last

    return Chunk(
        runs,
        [row for row in rows.items if within(row.run_id)],
        [call for call in rows.tool_calls if within(transfer.written_with(call))],
        [row for row in rows.responses if within(row.run_id)],
        [row for row in rows.spans if within(row.run_id)],
        [row for row in rows.branch_names if within(row.run_id)],
    )

"""Copying conversations from one turnstore database to another, losslessly: ``copy``.

Any backend to any backend (a SQLite file to PostgreSQL and back), every session or those a
filter of the catalogue selects. Everything a session holds is copied as the source holds it
(``core.transfer``): its catalogue fields, every run of its tree and its head, every item
byte for byte, tool calls with their timing, model calls, usage, compaction links, the trace
spans of ``turnstore.tracing`` and branch names. Ids are new in the target; every link
follows them.

A session is written a range of runs at a time (about ``chunk_items`` items, one transaction
each, the next range read while the last one is written), so memory stays bounded and a copy
that stops (an error, a dropped connection, Ctrl-C) continues where it stopped when run again:
a session the target holds is compared with the source, run by run — as far as the target
goes, it must be the source's; what follows is copied. A session the target holds whole is
skipped, so a second copy writes nothing. One that differs (written in the target since, or
changed in the source) is left alone and reported in ``CopySummary.conflicts``, unless
``replace=True`` deletes it from the target and copies it anew.

A copy into PostgreSQL ends by analysing the tables it wrote when it outgrew their planner
statistics (``store.copying.refresh_statistics``), as autovacuum would later: a failure there
is a warning, the rows being written.

Not copied: the keys of exactly-once writes (``operations``: their results name the source's
ids) and the marks of adopted SDK sessions (``sdk_adopted``, of the SQLite file alone).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..core.annotation_sql import CopyAnnotationRow
from ..core.tables import RunRow, SessionRow, as_datetime, stored_metadata
from ..core.transfer import Chunk, IdMap, match_runs
from ..domain import validate
from ..errors import (
    ClosedError,
    ConnectionFailedError,
    InvalidOperationError,
    ReadOnlyError,
    SessionNotFoundError,
    TurnstoreError,
)
from ..store import Store, copying
from ..store.chunks import overlapped, ranges
from ..store.copying import write_rows

__all__ = ["CopySummary", "copy"]


@dataclass
class CopySummary:
    """What a copy did."""

    source: str = ""
    target: str = ""
    sessions: int = 0  # sessions selected in the source
    copied: int = 0  # new in the target
    resumed: int = 0  # continued from an interrupted copy (or grown in the source since)
    unchanged: int = 0  # already in the target, as in the source: nothing written
    replaced: int = 0  # differed in the target, deleted there and copied anew (replace=True)
    conflicts: list[str] = field(default_factory=list)  # differ in the target: left alone
    failed: dict[str, str] = field(default_factory=dict)  # refused by the target: why
    runs: int = 0  # runs written
    items: int = 0  # items written


async def copy(
    source: Store | str | os.PathLike[str],
    target: Store | str | os.PathLike[str],
    *,
    session_ids: Sequence[str] | None = None,
    user_id: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    updated_after: datetime | None = None,
    updated_before: datetime | None = None,
    replace: bool = False,
    chunk_items: int = 2000,
    on_items: Callable[[int, int | None], None] | None = None,
) -> CopySummary:
    """Copy sessions from ``source`` to ``target`` (each a ``Store``, a path or a URL); see
    the module's docstring.

    Every session, or those named by ``session_ids`` (each must exist), further filtered by
    ``user_id`` and the catalogue's time bounds (as ``Store.sessions``). A path or URL is
    opened here (the source read-only; the target created if need be) and closed after.
    ``on_items(n, total)`` reports progress: first ``(0, total items)``, then items done.
    Raises ``InvalidOperationError`` when source and target are one database, and
    ``ReadOnlyError`` when the target cannot be written (opened read-only, a file it may not
    write): the copy stops there rather than reporting every session failed.
    """
    session_ids = _names(session_ids)
    replace = validate.flag(replace, "replace")
    chunk_items = validate.count(chunk_items, "chunk_items", minimum=1)
    async with _opened(source, read_only=True) as src:
        # The selection is checked before the target is opened (which may create it).
        wanted = await _selected(
            src,
            session_ids,
            user_id=user_id,
            created_after=created_after,
            created_before=created_before,
            updated_after=updated_after,
            updated_before=updated_before,
        )
        async with _opened(target, read_only=False) as dst:
            if await copying.same_database(src, dst):
                raise InvalidOperationError(
                    f"the source and the target are one database ({src.label}): copy into another"
                )
            summary = CopySummary(source=src.label, target=dst.label, sessions=len(wanted))
            counts = await copying.session_items(src)
            report = on_items or (lambda n, total: None)
            report(0, sum(counts.get(sid, 0) for sid in wanted))
            copier = _Copier(src, dst, summary, chunk_items, report)
            for sid in wanted:
                await copier.session(sid, replace=replace)
            await copying.refresh_statistics(dst, summary.runs)
            return summary


def _names(session_ids: Sequence[str] | None) -> list[str] | None:
    if session_ids is None:
        return None
    if isinstance(session_ids, str) or not isinstance(session_ids, (list, tuple)):
        raise InvalidOperationError("session_ids must be a list of session ids")
    return [validate.key(sid, "session_id") for sid in session_ids]


@contextlib.asynccontextmanager
async def _opened(
    store: Store | str | os.PathLike[str], *, read_only: bool
) -> AsyncIterator[Store]:
    if isinstance(store, Store):
        yield store
        return
    opened = Store.open(store, read_only=read_only)
    try:
        yield opened
    finally:
        await opened.aclose()


async def _selected(store: Store, session_ids: list[str] | None, **filters: Any) -> list[str]:
    """The ids of the sessions to copy, oldest first (the catalogue's filters applied)."""
    listed = [info.session_id async for info in store.iter_sessions(page_size=1000, **filters)]
    listed.reverse()
    if session_ids is None:
        return listed
    for sid in session_ids:
        if await store.session(sid) is None:
            raise SessionNotFoundError(f"{store.label} holds no session {sid!r}")
    chosen = set(session_ids)
    return [sid for sid in listed if sid in chosen]


class _Copier:
    """Copies one session at a time from ``source`` into ``target``, adding to ``summary``."""

    def __init__(
        self,
        source: Store,
        target: Store,
        summary: CopySummary,
        chunk_items: int,
        report: Callable[[int, int | None], None],
    ) -> None:
        self.source, self.target = source, target
        self.summary = summary
        self.chunk_items = chunk_items
        self.report = report
        self.time = copying.time_of(target)

    async def session(self, sid: str, *, replace: bool) -> None:
        session, runs = await copying.session_rows(self.source, sid)
        if session is None:  # deleted in the source since it was listed
            return
        if stored_metadata(session.metadata)[1] is not None:
            self.summary.failed[sid] = (
                "its metadata is not a JSON object (written by hand, or by a version before "
                "issue 26): a copy carries every value exactly, so the session is not copied; "
                "set the source's metadata with update_session(metadata=...) and copy again"
            )
            return
        stored, stored_runs = await copying.session_rows(self.target, sid)
        ids = IdMap()
        state = "copied"
        if stored is not None:
            matched = match_runs(runs, stored_runs)
            if (
                matched is not None
                and len(stored_runs) == len(runs)
                and self._same(session, stored, matched)
                and await self._same_annotations(sid, matched)
            ):
                self.summary.unchanged += 1
                self.report(sum(run.item_count for run in runs), None)
                return
            if matched is None and not replace:
                self.summary.conflicts.append(sid)
                self.report(sum(run.item_count for run in runs), None)
                return
            if matched is None:
                await self.target.delete_session(sid)
                state = "replaced"
            else:
                ids, state = matched, "resumed"
                self.report(sum(run.item_count for run in stored_runs), None)
        done = len(ids.runs)
        try:
            await self._write(session, runs[done:], ids, first=stored is None or not done)
        except (ConnectionFailedError, ClosedError, ReadOnlyError):
            raise  # the next session would fail alike: stop (a new copy resumes)
        except TurnstoreError as exc:
            # What the target refuses of this session's data; the others are copied.
            self.summary.failed[sid] = str(exc)
            return
        setattr(self.summary, state, getattr(self.summary, state) + 1)

    def _same(self, session: SessionRow, stored: SessionRow, ids: IdMap) -> bool:
        head = ids.runs.get(session.head_run_id) if session.head_run_id is not None else None
        return (
            stored.head_run_id == head
            and (stored.user_id, stored.title) == (session.user_id, session.title)
            and stored_metadata(stored.metadata) == stored_metadata(session.metadata)
            and as_datetime(stored.created_at) == as_datetime(session.created_at)
            and as_datetime(stored.updated_at) == as_datetime(session.updated_at)
        )

    async def _same_annotations(self, sid: str, ids: IdMap) -> bool:
        """Whether the target holds the source's annotations of the session (``ids`` maps
        every run): what a copy writes of them, compared."""
        source, target = [
            await copying.session_annotations(store, sid) for store in (self.source, self.target)
        ]
        return [_annotation_key(row, ids.runs.get(row.run_id)) for row in source] == [
            _annotation_key(row, row.run_id) for row in target
        ]

    async def _write(
        self, session: SessionRow, runs: Sequence[RunRow], ids: IdMap, *, first: bool
    ) -> None:
        sid = session.session_id
        metadata = session.metadata
        cuts = await copying.chunk_cuts(self.source, sid, runs)
        slices = ranges([run.item_count for run in runs], self.chunk_items, cuts)
        last = len(slices) - 1

        async def read(index: int) -> tuple[int, Chunk | None]:
            start, stop = slices[index]
            # The runs as they are now (the listing may be older: the source is live).
            first_id, last_id = runs[start].id, runs[stop - 1].id
            chunk = await copying.read_range(self.source, sid, first_id, last_id)
            if index == last:  # the last write carries the session's annotations
                notes = await copying.session_annotations(self.source, sid)
                chunk = dataclasses.replace(chunk, annotations=notes)
            return index, chunk

        async def write(value: tuple[int, Chunk | None]) -> None:
            nonlocal ids
            index, chunk = value
            ids = await write_rows(
                self.target,
                session,
                metadata,
                chunk,
                ids,
                self.time,
                first=first and index <= 0,
                last=index == last,
                annotations=[] if chunk is None else chunk.annotations,
            )
            if chunk is not None:
                self.summary.runs += len(chunk.runs)
                self.summary.items += len(chunk.items)
                self.report(len(chunk.items), None)

        if not slices:  # no runs left: the session's row, head and annotations are all to write
            notes = await copying.session_annotations(self.source, sid)
            await write((-1, Chunk([], [], [], [], [], [], notes)))
        else:
            await overlapped(range(len(slices)), read, write)


def _annotation_key(row: CopyAnnotationRow, run_id: int | None) -> tuple[Any, ...]:
    """What a copy carries of an annotation, its run ``run_id`` in the target."""
    return (
        run_id,
        row.tool_call_index,
        row.name,
        row.value,
        row.label,
        row.comment,
        row.source,
        row.author,
        as_datetime(row.created_at),
        None if row.updated_at is None else as_datetime(row.updated_at),
    )

"""Merging a source session into the store's session of the same id, and importing a
whole source (see the package's docstring for the merge rule).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import transfer
from ..core.append import GraftRun
from ..core.codec import PreparedItem, dumps_item, prepare_items
from ..core.transfer import IdMap
from ..domain.model import NewRun, Run
from ..errors import (
    ConfigurationError,
    InvalidItemError,
    InvalidOperationError,
    ReadOnlyError,
    SessionNotFoundError,
)
from ..formats.rows import ExactSession
from ..store import Store, adoption, copying
from ..store.chunks import overlapped, ranges
from ..store.copying import write_session
from ..store.tree import graft
from .base import Source, SourceRun, SourceSession

__all__ = [
    "ImportSummary",
    "MergePlan",
    "MergeResult",
    "import_source",
    "merge_session",
    "plan_merge",
]


@dataclass
class ImportSummary:
    """What an import did."""

    source: str = ""
    kind: str = ""
    sessions: int = 0  # sessions read from the source
    new_sessions: int = 0  # of which the store did not have before
    updated_sessions: int = 0  # of which the store had, and that gained runs or items
    runs: int = 0  # runs added (extensions of stored runs count too)
    items: int = 0  # items added
    unchanged_items: int = 0  # items the store already held
    skipped: int = 0  # source rows that cannot be imported (corrupt JSON or usage, not objects)
    skipped_sessions: int = 0  # sessions the store refused (e.g. an id it cannot store)


@dataclass(eq=False)
class _Stored:
    """A run already in the store, as the merge compares it."""

    run_id: int
    items: list[Any]
    has_children: bool = False
    _texts: list[str] | None = None

    @property
    def texts(self) -> list[str]:
        # The store's own serialisation, so that equal items compare equal as text (and the
        # order of keys, which the store keeps, counts).
        if self._texts is None:
            self._texts = [dumps_item(item) for item in self.items]
        return self._texts


async def merge_session(
    store: Store,
    source: SourceSession,
    *,
    chunk_items: int = 5000,
    on_items: Callable[[int], None] | None = None,
) -> MergeResult:
    """Merge ``source`` into the store's session of the same id.

    Writes go in transactions of about ``chunk_items`` items; ``on_items(n)`` reports
    progress. A session new to the store is written exactly as the source's rows say, if it
    has them (``SourceSession.exact``: a turnstore export), and so is the rest of one whose
    first runs the store holds exactly so (an import of it that stopped part way); else a
    new session takes the source's catalogue fields, if it has any.
    The head follows the source's when anything was added (or the session had none);
    otherwise it stays where it is.
    """
    sid = source.session_id
    info = await store.session(sid)
    if source.exact is not None:
        written = await _write_exact(store, source.exact, info is not None, chunk_items, on_items)
        if written is not None:
            return written
    fields = {k: v for k, v in (source.catalogue or {}).items() if v is not None}
    if info is None and fields:
        # A new session takes the source's user, title and metadata (a stored one keeps its).
        await store.update_session(sid, **fields)
    plan = plan_merge(source, await store.tree(sid) if info is not None else ())
    if on_items is not None and plan.present:
        on_items(plan.present)
    follow = bool(plan.runs) or info is None or info.head_run_id is None
    ids = await _write(
        store, sid, plan.runs, chunk_items, on_items, head=plan.head if follow else None
    )
    if follow and plan.stored_head is not None:
        await store.move_head(sid, plan.stored_head, to_parent=False)
    await adoption.keep_names(store, sid, plan.named_runs(ids))
    return MergeResult(
        existed=info is not None,
        runs=len(plan.runs),
        items=sum(len(r.items) for r in plan.runs),
        present=plan.present,
    )


async def _write_exact(
    store: Store,
    exact: ExactSession,
    stored: bool,
    chunk_items: int,
    on_items: Callable[[int], None] | None,
) -> MergeResult | None:
    """Write the session's rows as copy writes them, when the store lacks it, or holds the
    first of its runs exactly so (an import that stopped part way, or an export that has
    grown since) and not all of them; None: merge it instead."""
    rows = exact.chunk
    ids = IdMap()
    if stored:
        sid = exact.session.session_id
        _, held = await copying.session_rows(store, sid)
        matched = transfer.match_runs(rows.runs, held) if held else None
        if matched is None or len(held) == len(rows.runs):
            return None
        ids = matched
    present = sum(run.item_count for run in rows.runs[: len(ids.runs)])
    if on_items is not None and present:
        on_items(present)
    await write_session(
        store,
        exact.session,
        exact.metadata,
        rows,
        ids,
        chunk_items=chunk_items,
        on_items=on_items,
    )
    return MergeResult(
        existed=stored,
        runs=len(rows.runs) - len(ids.runs),
        items=sum(run.item_count for run in rows.runs[len(ids.runs) :]),
        present=present,
    )


@dataclass(frozen=True)
class MergePlan:
    """What merging a source session into a stored one adds (``plan_merge``)."""

    runs: list[NewRun]  # the runs to add, parents first
    head: int | None  # the index in ``runs`` of the source's head, if it is a new run
    stored_head: int | None  # else the stored run that holds it
    present: int  # items the store already holds
    # The source's branch names: (index in ``runs`` or None, stored run id or None, name).
    names: list[tuple[int | None, int | None, str]] = field(default_factory=list)

    def named_runs(self, ids: Sequence[int]) -> list[tuple[int, str]]:
        """The names as (run id, name), given the ids the new ``runs`` were written with."""
        named = []
        for new, stored, name in self.names:
            run_id = ids[new] if new is not None else stored
            if run_id is not None:
                named.append((run_id, name))
        return named


def plan_merge(source: SourceSession, tree: Iterable[tuple[Run, list[Any]]]) -> MergePlan:
    """The runs of ``source`` that the stored session ``tree`` (``Store.tree``) lacks.

    A run already stored at the same place with the same items is reused, a stored leaf run
    whose items are a prefix of the source run's is extended, anything else is new.
    """
    children: dict[int | None, list[_Stored]] = {}
    for stored_run, items in tree:
        children.setdefault(stored_run.parent_id, []).append(_Stored(stored_run.id, items))
    for stored_list in children.values():
        for stored in stored_list:
            stored.has_children = stored.run_id in children

    new_runs: list[NewRun] = []
    at_stored: dict[int, int] = {}  # id(source run) -> stored run id
    at_new: dict[int, int] = {}  # id(source run) -> index in new_runs
    consumed: set[int] = set()
    present = 0
    for run, parent in source.walk():
        if parent is not None and id(parent) in at_new:
            at_new[id(run)] = len(new_runs)
            new_runs.append(
                NewRun(
                    run.items, parent=at_new[id(parent)], usage=run.usage, created_at=run.created_at
                )
            )
            continue
        parent_id = at_stored[id(parent)] if parent is not None else None
        match, extend = _match(children.get(parent_id, ()), run, consumed)
        if match is not None and not extend:
            at_stored[id(run)] = match.run_id
            present += len(run.items)
            continue
        at_new[id(run)] = len(new_runs)
        if match is not None:  # a stored leaf holding the start of this run: extend it
            present += len(match.items)
            new_runs.append(
                NewRun(
                    run.items[len(match.items) :],
                    parent_id=match.run_id,
                    usage=run.usage,
                    created_at=run.created_at,
                )
            )
        else:
            new_runs.append(
                NewRun(run.items, parent_id=parent_id, usage=run.usage, created_at=run.created_at)
            )
    head = id(source.head) if source.head is not None else None
    names = [
        (at_new.get(id(run)), at_stored.get(id(run)), run.branch_name)
        for run, _ in source.walk()
        if run.branch_name is not None
    ]
    return MergePlan(
        new_runs,
        at_new.get(head) if head is not None else None,
        at_stored.get(head) if head is not None else None,
        present,
        names,
    )


@dataclass(frozen=True)
class MergeResult:
    """What ``merge_session`` did to one session."""

    existed: bool  # the store had the session before
    runs: int  # runs added (an extension of a stored run counts as one)
    items: int  # items added
    present: int  # items the store already held


def _match(
    candidates: Iterable[_Stored], run: SourceRun, consumed: set[int]
) -> tuple[_Stored | None, bool]:
    """The stored sibling that holds ``run`` (exact), or a leaf holding its start (extend).

    Each stored run matches one source run at most, so equal siblings stay two runs.
    """
    texts: list[str] | None = None
    prefix: _Stored | None = None
    for stored in candidates:
        if stored.run_id in consumed or len(stored.items) > len(run.items):
            continue
        if texts is None:
            texts = [dumps_item(item) for item in run.items]
        if stored.texts == texts:
            consumed.add(stored.run_id)
            return stored, False
        if (
            prefix is None
            and not stored.has_children
            and stored.texts == texts[: len(stored.items)]
        ):
            prefix = stored
    if prefix is not None:
        consumed.add(prefix.run_id)
        return prefix, True
    return None, False


async def _write(
    store: Store,
    session_id: str,
    runs: Sequence[NewRun],
    chunk_items: int,
    on_items: Callable[[int], None] | None,
    *,
    head: int | None = None,
) -> list[int]:
    """Add ``runs`` in transactions of about ``chunk_items`` items; their ids in order.

    The head moves to ``runs[head]`` (with the chunk that writes it), or stays.

    Chunks keep each transaction (and the write lock) short and let progress show; an import
    interrupted between chunks resumes by merging again. Each chunk's items are checked and
    classified here while the store's thread writes the previous chunk.
    """
    ids: list[int] = []

    async def prepare(chunk: tuple[int, int]) -> tuple[int, int, list[list[PreparedItem]]]:
        start, stop = chunk
        return start, stop, [prepare_items(run.items) for run in runs[start:stop]]

    async def write(prepared: tuple[int, int, list[list[PreparedItem]]]) -> None:
        start, stop, batches = prepared
        grafts = []
        for run, batch in zip(runs[start:stop], batches, strict=True):
            parent, parent_id = run.parent, run.parent_id
            if parent is not None:
                # A parent written by an earlier chunk is a stored run by now.
                parent, parent_id = (
                    (None, ids[parent]) if parent < start else (parent - start, None)
                )
            grafts.append(GraftRun(batch, parent_id, parent, run.usage, run.created_at))
        local_head = head - start if head is not None and start <= head < stop else None
        ids.extend(await graft(store, session_id, grafts, local_head))
        if on_items is not None:
            on_items(sum(len(batch) for batch in batches))

    chunks = ranges([len(run.items) for run in runs], chunk_items)
    await overlapped(chunks, prepare, write)
    return ids


async def import_source(
    store: Store,
    source: Source,
    *,
    session_ids: Sequence[str] | None = None,
    on_items: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Merge every session of ``source`` (or only ``session_ids``) into ``store``.

    A session the store refuses (its id, its items) is counted and the import goes on; a
    store that cannot be written raises ``ReadOnlyError`` (every session would be refused).
    On PostgreSQL, the tables it outgrew are analysed at the end, as ``copy``'s are.
    """
    summary = ImportSummary(source=source.location, kind=source.kind)
    available = await source.session_ids()
    if session_ids:
        missing = [sid for sid in session_ids if sid not in set(available)]
        if missing:
            raise SessionNotFoundError(
                f"{source.location} holds no session {', '.join(map(repr, missing))}"
            )
        available = [sid for sid in available if sid in set(session_ids)]
    summary.skipped += source.skipped
    for sid in available:
        session = await source.load(sid)
        try:
            merged = await merge_session(store, session, on_items=on_items)
        except ReadOnlyError:
            raise  # the target cannot be written: every session would be refused alike
        except (ConfigurationError, InvalidOperationError, InvalidItemError):
            # What the store refuses in this session's data; the rest of the import goes on.
            summary.skipped_sessions += 1
            summary.skipped += session.skipped + sum(len(run.items) for run, _ in session.walk())
            continue
        summary.sessions += 1
        summary.new_sessions += not merged.existed
        summary.updated_sessions += merged.existed and merged.runs > 0
        summary.runs += merged.runs
        summary.items += merged.items
        summary.unchanged_items += merged.present
        summary.skipped += session.skipped
    await copying.refresh_statistics(store, summary.runs)
    return summary

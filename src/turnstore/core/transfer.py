"""Copying a session's rows from one database to another (``turnstore.importers.copy`` drives it).

Row for row, not item by item: what a write derives from items (runs, statuses, tool calls)
is copied as the source holds it, together with what no item says (tokens, timings, model
calls, agent attribution, compaction links, catalogue fields). A session is read and written a
range of runs at a time (``Chunk``), in the source's id order, so parents come before their
children; ids are new in the target, and every link is mapped: run parents, the head, a
compaction run's ``prior_run_id`` and ``compacted_by``, each tool call's items (found again by
their run and position), each model call's and trace span's run, each branch name's fork run.
Ids keep their order, table by table: a range ends only where every row it writes is older
than every row of its table a later range writes (``chunk_cuts``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..domain import validate
from ..errors import StorageError
from . import annotation_sql as A
from . import statements as S
from .annotation_sql import CopyAnnotationRow
from .lock import Tally, count_rows
from .ops import Capability, Op, supports
from .results import BranchNameRow, CopyItemRow, ModelResponseRow, SpanRow
from .search_index import index_backlog
from .tables import (
    DETAIL_COLUMNS,
    CopyToolCallRow,
    RunRow,
    SessionRow,
    as_datetime,
    stored_details,
)

__all__ = [
    "Bounds",
    "Chunk",
    "IdMap",
    "chunk_cuts",
    "database_identity",
    "mapped",
    "match_runs",
    "order_cuts",
    "read_chunk",
    "read_range",
    "row_bounds",
    "session_annotations",
    "session_items",
    "session_rows",
    "time_binder",
    "write_chunk",
    "written_with",
]

Time = Callable[[Any], Any]
"""A source timestamp (a datetime, or SQLite's text) as the target binds it."""


def time_binder(bind: Callable[[datetime], Any]) -> Time:
    """The ``Time`` of a target whose backend binds a datetime with ``bind``."""
    return lambda value: None if value is None else bind(as_datetime(value))


@dataclass(frozen=True, slots=True)
class Chunk:
    """A range of a session's runs (in the source's id order) and the rows that hang on them."""

    runs: Sequence[RunRow]
    items: list[CopyItemRow]
    tool_calls: list[CopyToolCallRow]
    responses: list[ModelResponseRow]
    spans: list[SpanRow]
    branch_names: list[BranchNameRow]
    # The session's annotations (of these runs, in id order), where a reader holds them (an
    # export's, an import's); a copy writes a session's all with its last chunk (write_chunk).
    annotations: list[CopyAnnotationRow] = field(default_factory=list)

    def only(self, runs: Sequence[RunRow]) -> Chunk:
        """The rows of ``runs`` alone (some of this chunk's runs: a branch of a range)."""
        ids = {run.id for run in runs}
        return Chunk(
            runs,
            [row for row in self.items if row.run_id in ids],
            [row for row in self.tool_calls if row.run_id in ids],
            [row for row in self.responses if row.run_id in ids],
            [row for row in self.spans if row.run_id in ids],
            [row for row in self.branch_names if row.run_id in ids],
            [row for row in self.annotations if row.run_id in ids],
        )


@dataclass(slots=True)
class IdMap:
    """Source run id -> target run id, for one session; and the copied runs whose
    ``compacted_by`` names a compaction run not copied yet (source id -> target runs)."""

    runs: dict[int, int] = field(default_factory=dict)
    waiting: dict[int, list[int]] = field(default_factory=dict)

    def copy(self) -> IdMap:
        return IdMap(dict(self.runs), {key: list(ids) for key, ids in self.waiting.items()})


def session_rows(session_id: str) -> Op[tuple[SessionRow | None, list[RunRow]]]:
    """A session's catalogue row and its runs, in id order (the runs without their items)."""
    session = yield S.SESSION({"sid": session_id})
    if session is None:
        return None, []
    runs = yield S.SESSION_RUNS({"sid": session_id})
    return session, runs


def database_identity() -> Op[str]:
    """What tells the store's database from any other (``statements.DATABASE_IDENTITY``)."""
    identity = yield S.DATABASE_IDENTITY()
    return str(identity or "")


def refresh_statistics(runs: int) -> Op[bool]:
    """After a bulk load that wrote ``runs`` runs: the planner's statistics of the tables it
    wrote taken again, as autovacuum would later, when the load outgrew them
    (``statements.STATISTICS_BEHIND`` says when); whether they were. Statistics taken while a
    session was small or absent make PostgreSQL walk its runs through runs_session_totals, a
    scan of the session at every step (a delete_branch of 100,000 runs took 13 minutes, not
    10 s). A no-op on a backend whose planner keeps none (``Capability.STATISTICS``)."""
    if not supports(Capability.STATISTICS):
        return False
    behind = yield S.STATISTICS_BEHIND({"runs": runs})
    if behind:
        yield S.ANALYZE_TABLES()
    return bool(behind)


def session_items() -> Op[dict[str, int]]:
    """How many items each session holds."""
    rows = yield S.ITEMS_PER_SESSION()
    return {row.session_id: int(row.items or 0) for row in rows}


Bounds = Mapping[int, tuple[int, int]]
"""The first and last id of a table's rows that each run's range writes (by run id; a run
that writes none is absent)."""


def chunk_cuts(session_id: str, runs: Sequence[RunRow]) -> Op[set[int]]:
    """The indices of ``runs`` (in id order) where a copy may start a new chunk: in every
    table, each row the runs before write is older than each row the runs from there on write,
    so writing chunk after chunk numbers every table's rows in the source's order."""
    tables = []
    for statement in (S.RUN_ITEM_IDS, S.RUN_TOOL_CALL_IDS, S.RUN_RESPONSE_IDS, S.RUN_SPAN_IDS):
        rows = yield statement({"sid": session_id})
        tables.append({row.run_id: (row.first, row.last) for row in rows})
    return order_cuts(runs, tables)


def row_bounds(chunk: Chunk) -> list[Bounds]:
    """``chunk``'s ``Bounds``, table by table (what ``chunk_cuts`` reads from a database)."""
    keyed = (
        [(item.run_id, item.id) for item in chunk.items],
        [(written_with(call), call.id) for call in chunk.tool_calls],
        [(row.run_id, row.id) for row in chunk.responses],
        [(row.run_id, row.id) for row in chunk.spans],
    )
    tables: list[Bounds] = []
    for rows in keyed:
        bounds: dict[int, tuple[int, int]] = {}
        for run_id, row_id in rows:
            first, last = bounds.get(run_id, (row_id, row_id))
            bounds[run_id] = (min(first, row_id), max(last, row_id))
        tables.append(bounds)
    return tables


def written_with(call: CopyToolCallRow) -> int:
    """The run whose range writes ``call``: the last of its run and its items' runs (an
    output can land in a later run than its call's), as ``statements.copy_tool_calls_sql``."""
    return max(call.run_id, call.call_item_run or 0, call.output_item_run or 0)


def order_cuts(runs: Sequence[RunRow], tables: Sequence[Bounds]) -> set[int]:
    """``chunk_cuts`` from the ``Bounds`` of each table."""
    cuts = set(range(len(runs)))
    for bounds in tables:
        cuts &= _order_cuts(runs, bounds)
    return cuts


def _order_cuts(runs: Sequence[RunRow], bounds: Bounds) -> set[int]:
    cuts: set[int] = set()
    newest = 0  # the newest row before index i (ids start at 1)
    oldest: list[float] = [float("inf")] * (len(runs) + 1)  # the oldest row from index i on
    for index in range(len(runs) - 1, -1, -1):
        first = bounds.get(runs[index].id, (float("inf"), 0))[0]
        oldest[index] = min(oldest[index + 1], first)
    for index, run in enumerate(runs):
        if newest < oldest[index]:
            cuts.add(index)
        newest = max(newest, bounds.get(run.id, (0, 0))[1])
    return cuts


def session_annotations(session_id: str) -> Op[list[CopyAnnotationRow]]:
    """Every annotation of the session, in id order, as a copy writes them."""
    rows: list[CopyAnnotationRow] = yield A.COPY_ANNOTATIONS({"sid": session_id})
    return rows


def read_range(session_id: str, first: int, last: int) -> Op[Chunk]:
    """The session's runs with ids ``first`` to ``last`` as they are now, with their rows, in
    one transaction: a run written since the session's runs were listed (the head run gaining
    items) comes with every item it holds, never a count that disagrees with them."""
    runs = yield S.COPY_RUNS({"sid": session_id, "first": first, "last": last})
    if not runs:  # deleted in the source since they were listed
        return Chunk([], [], [], [], [], [])
    return (yield from read_chunk(session_id, runs))


def read_chunk(session_id: str, runs: Sequence[RunRow]) -> Op[Chunk]:
    """The rows of ``runs`` (consecutive runs of the session, in id order)."""
    bounds = {"sid": session_id, "first": runs[0].id, "last": runs[-1].id}
    items = yield S.COPY_ITEMS(bounds)
    calls = yield S.COPY_TOOL_CALLS(bounds)
    responses = yield S.COPY_MODEL_RESPONSES(bounds)
    spans = yield S.COPY_SPANS(bounds)
    names = yield S.COPY_BRANCH_NAMES(bounds)
    return Chunk(runs, items, calls, responses, spans, names)


def write_chunk(
    session: SessionRow,
    metadata: str,
    chunk: Chunk | None,
    ids: IdMap,
    time: Time,
    *,
    first: bool,
    last: bool,
    annotations: Sequence[CopyAnnotationRow] = (),
) -> Op[IdMap]:
    """Write ``chunk`` (None: a session without runs) into the target; returns the id map
    with its runs added (``ids`` itself is left as it was: a retried transaction starts over).

    The first chunk creates the session (without a head); the last one gives it its head and
    the source's catalogue fields, so a session that reads complete is complete, and the
    session's annotations (``annotations``: written anew, so that a copy made again carries
    them as the source holds them then; one of a run not copied is left out).
    """
    sid = session.session_id
    ids = ids.copy()
    if first:
        yield from _put_session(session, metadata, None, time)
    if chunk is not None:
        for run in chunk.runs:
            yield from _copy_run(sid, run, ids, time)
        # Every column a row was read with is bound (the id among them, unused); the ids it
        # names and its times are replaced by the target's.
        for item in chunk.items:
            yield S.STORE_ITEM(
                {
                    **item._asdict(),
                    "sid": sid,
                    "run_id": ids.runs[item.run_id],
                    "now": time(item.created_at),
                }
            )
        for call in chunk.tool_calls:
            yield S.COPY_TOOL_CALL(
                {
                    **call._asdict(),
                    "sid": sid,
                    "run_id": ids.runs[call.run_id],
                    "call_item_run": mapped(ids.runs, call.call_item_run),
                    "output_item_run": mapped(ids.runs, call.output_item_run),
                    **_times(call, time, "tool call", "created_at", "completed_at", "started_at"),
                }
            )
        for response in chunk.responses:
            yield S.INSERT_MODEL_RESPONSE(
                {
                    **response._asdict(),
                    "sid": sid,
                    "run_id": ids.runs[response.run_id],
                    **_times(response, time, "model call", "started_at", "completed_at"),
                }
            )
        for span in chunk.spans:
            yield S.INSERT_SPAN(
                {
                    **span._asdict(),
                    "sid": sid,
                    "run_id": ids.runs[span.run_id],
                    **_times(span, time, "span", "started_at", "ended_at"),
                }
            )
        for branch in chunk.branch_names:
            # A name's run is its branch's fork run, copied with this chunk or an earlier one.
            yield S.NAME_BRANCH({"sid": sid, "id": ids.runs[branch.run_id], "name": branch.name})
        yield from index_backlog()
        added = Tally(
            runs=len(chunk.runs),
            tool_calls=len(chunk.tool_calls),
            tokens=sum(run.total_tokens for run in chunk.runs),
            failures=True,
        )
        yield from count_rows(sid, added)
    if last:
        head = ids.runs.get(session.head_run_id) if session.head_run_id is not None else None
        yield from _put_session(session, metadata, head, time)
        yield from _copy_annotations(sid, annotations, ids, time)
    return ids


def _copy_annotations(
    sid: str, annotations: Sequence[CopyAnnotationRow], ids: IdMap, time: Time
) -> Op[None]:
    yield A.CLEAR_ANNOTATIONS({"sid": sid})
    for row in annotations:
        run_id = ids.runs.get(row.run_id)
        if run_id is None:  # a run written in the source since its runs were listed
            continue
        yield A.COPY_ANNOTATION(
            {
                **row._asdict(),
                "sid": sid,
                "run_id": run_id,
                "has_tool_call": int(row.tool_call_index is not None),
                "tool_call_offset": row.tool_call_index or 0,
                **_times(row, time, "annotation", "created_at", "updated_at"),
            }
        )


# The columns of runs (RunRow holds them all) compared as they are; the links are compared
# through the id map, times as times, token details as JSON.
_LINKS = ("id", "session_id", "parent_id", "prior_run_id", "compacted_by")
_TIMES = ("created_at", "updated_at")
_PLAIN = tuple(name for name in RunRow._fields if name not in _LINKS + _TIMES + DETAIL_COLUMNS)


def match_runs(runs: Sequence[RunRow], stored: Sequence[RunRow]) -> IdMap | None:
    """The id map of the runs a target session holds, when they are the source's first runs
    (what a copy writes, in order); None when they are not."""
    if len(stored) > len(runs):
        return None
    pairs = list(zip(runs[: len(stored)], stored, strict=True))
    ids = IdMap({run.id: copied.id for run, copied in pairs})
    for run, copied in pairs:
        if (
            any(getattr(run, name) != getattr(copied, name) for name in _PLAIN)
            or any(
                as_datetime(getattr(run, name)) != as_datetime(getattr(copied, name))
                for name in _TIMES
            )
            # JSON as each database spells it (jsonb reorders and respaces)
            or any(
                stored_details(getattr(run, name)) != stored_details(getattr(copied, name))
                for name in DETAIL_COLUMNS
            )
        ):
            return None
        for name in ("parent_id", "prior_run_id"):
            if mapped(ids.runs, getattr(run, name)) != getattr(copied, name):
                return None
        if run.compacted_by is not None and run.compacted_by not in ids.runs:
            if copied.compacted_by is not None:
                return None
            ids.waiting.setdefault(run.compacted_by, []).append(copied.id)
        elif mapped(ids.runs, run.compacted_by) != copied.compacted_by:
            return None
    return ids


def _put_session(session: SessionRow, metadata: str, head: int | None, time: Time) -> Op[None]:
    yield S.PUT_SESSION(
        {
            "sid": session.session_id,
            "user_id": session.user_id,
            "title": session.title,
            "metadata": metadata,
            "head": head,
            "created_at": time(session.created_at),
            "updated_at": time(session.updated_at),
        }
    )


def mapped(ids: Mapping[int, int], source_id: int | None) -> int | None:
    """The target id of the source run ``source_id`` (None: no link, or a run not copied)."""
    # A link to a run the source no longer holds (a compaction run popped since) holds nothing.
    return ids.get(source_id) if source_id is not None else None


def _times(row: Any, time: Time, what: str, *names: str) -> dict[str, Any]:
    """The times ``names`` of ``row`` (a ``what`` of the source) as the target binds them."""
    times = {}
    for name in names:
        value = getattr(row, name)
        try:
            times[name] = time(value)
        except (TypeError, ValueError):  # text that is no time, in a SQLite source
            raise StorageError(
                f"the source's {what} {row.id} holds a {name} that is not a time "
                f"({validate.shown(value)}): a copy carries every value exactly, so the "
                "copy of this session stops there; correct the value in the source and copy "
                "again (it resumes)"
            ) from None
    return times


def _copy_run(sid: str, run: RunRow, ids: IdMap, time: Time) -> Op[None]:
    compacted_by = mapped(ids.runs, run.compacted_by)
    new_id = yield S.COPY_RUN(
        {
            **run._asdict(),
            "sid": sid,
            "parent_id": mapped(ids.runs, run.parent_id),
            "prior_run_id": mapped(ids.runs, run.prior_run_id),
            "compacted_by": compacted_by,
            **_times(run, time, "run", "created_at", "updated_at"),
        }
    )
    ids.runs[run.id] = new_id
    if run.compacted_by is not None and compacted_by is None:
        # Compacted by a later run: linked when that one is written.
        ids.waiting.setdefault(run.compacted_by, []).append(new_id)
    for compacted in ids.waiting.pop(run.id, []):
        yield S.SET_COMPACTED_BY({"sid": sid, "id": compacted, "by": new_id})

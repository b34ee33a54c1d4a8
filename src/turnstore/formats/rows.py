"""What an export carries of a session besides its items and tree, and how an import reads it
back: the rows ``turnstore copy`` carries (``core.transfer.Chunk``), as JSON values.

One definition: the columns are those of the copy's row types (``RunRow``,
``CopyToolCallRow``, ``ModelResponseRow``, ``SpanRow``), written by name and read back checked
by each column's declared type (``int``, ``str``, ``float``, a time; ``| None`` when it may be
null), so a column the copy gains is exported and imported with it. Each run of an export
(``run_record``) holds:

- the run's columns (``Run``'s fields: ``usage`` holds the token columns), links by the run ids
  of the export (``parent_id``, ``prior_run_id``, ``compacted_by``);
- ``item_times``: each item's ``created_at``, by position;
- ``tool_calls``: every column of the tool call, and where its items are: ``call_item_run``,
  ``call_item_position``, ``output_item_run``, ``output_item_position`` (a run id of the export
  and a position in it; null: no such item);
- ``model_responses`` and ``spans``: every column but ``session_id`` and ``run_id`` (their
  run is the one they sit in); a span's ``data`` is its JSON text as stored;
- ``branch_name``: the name given to the branch this run forks (null: none);
- ``annotations``: every column of each annotation of the run but ``session_id`` and
  ``run_id``; its tool call is ``tool_call_index``, its place among the run's tool calls
  (null: the run itself); an export written before annotations holds none.

A tool call's, model call's or span's ``id`` is the source's: it is read back for the rows'
order in their table alone (as an item's time is); an export without them keeps its order.

``exact_session`` reads them back into the rows the copy's writer writes (run ids are the
runs' places in the export, 0 first); a value the database would not store exactly (a wrong
type, a number out of range, NUL or a lone surrogate in text, a time that is not ISO 8601, an
unknown run status) raises ``InvalidOperationError`` naming it, and a link to a run the export
does not hold is left out and counted (as copy leaves out a link to a run its source no longer
holds).
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar, get_args

from ..core import annotation_checks
from ..core.annotation_sql import CopyAnnotationRow
from ..core.codec import prepare_items
from ..core.results import BranchNameRow, CopyItemRow, ModelResponseRow, SpanRow
from ..core.tables import (
    CopyToolCallRow,
    DetailsText,
    RunRow,
    SessionRow,
    as_datetime,
    details_param,
    stored_details,
    stored_time,
)
from ..core.transfer import Chunk
from ..domain import validate
from ..domain.jsonout import fields
from ..domain.model import TOKEN_FIELDS, Run, RunStatus, Usage
from ..domain.tokens import is_count
from ..errors import InvalidOperationError

__all__ = ["ExactSession", "ExportedRun", "RunRows", "exact_session", "rows_by_run", "run_record"]

R = TypeVar("R")

# What a nested row's place says: it is left out of the export, and not read back.
_PLACE = ("session_id", "run_id")
# The columns of a tool call that name items by their place.
_ITEM_RUNS = ("call_item_run", "output_item_run")
_TOKENS = TOKEN_FIELDS
_STATUSES = frozenset(get_args(RunStatus))
_KINDS = (None, "compaction")  # a run's kinds (core/compaction.py writes compaction runs)


# ---------------------------------------------------------------------------------------------
# Export


@dataclass
class RunRows:
    """The rows of one run, as ``core.transfer.read_chunk`` read them."""

    items: list[CopyItemRow] = field(default_factory=list)
    tool_calls: list[CopyToolCallRow] = field(default_factory=list)
    responses: list[ModelResponseRow] = field(default_factory=list)
    spans: list[SpanRow] = field(default_factory=list)
    branch_name: str | None = None
    annotations: list[CopyAnnotationRow] = field(default_factory=list)


def rows_by_run(chunk: Chunk) -> dict[int, RunRows]:
    """``chunk``'s rows by the run they belong to (a tool call: the run of its call)."""
    runs: dict[int, RunRows] = {run.id: RunRows() for run in chunk.runs}
    for item in chunk.items:
        runs[item.run_id].items.append(item)
    for call in chunk.tool_calls:
        runs[call.run_id].tool_calls.append(call)
    for response in chunk.responses:
        runs[response.run_id].responses.append(response)
    for span in chunk.spans:
        runs[span.run_id].spans.append(span)
    for name in chunk.branch_names:
        runs[name.run_id].branch_name = name.name
    for note in chunk.annotations:
        runs[note.run_id].annotations.append(note)
    return runs


def run_record(run: Run, rows: RunRows) -> dict[str, Any]:
    """``run``'s fields and the rows that hang on it, as an export writes them (the module's
    docstring); times are datetimes, which ``jsonout.dumps`` writes as ISO 8601."""
    record = fields(run)
    record["item_times"] = [as_datetime(item.created_at) for item in rows.items]
    record["tool_calls"] = [_row_record(call, "tool call", ()) for call in rows.tool_calls]
    record["model_responses"] = [_row_record(row, "model call", _PLACE) for row in rows.responses]
    record["spans"] = [_row_record(span, "span", _PLACE) for span in rows.spans]
    record["branch_name"] = rows.branch_name
    record["annotations"] = [_row_record(row, "annotation", _PLACE) for row in rows.annotations]
    return record


def _row_record(row: NamedTuple, what: str, leave: Sequence[str]) -> dict[str, Any]:
    """``row``'s columns but ``leave``, times as datetimes (``what`` names the row in a log)."""
    columns = _columns(type(row))
    return {
        name: _exported(value, columns[name].check, row, what, name)
        for name, value in row._asdict().items()
        if name not in leave
    }


def _exported(value: Any, check: Check, row: Any, what: str, name: str) -> Any:
    """A column's value as an export writes it. A time or number that is none (SQL by hand,
    a record stored unchecked before issue 26) is written null, as the store reads it: the
    export stays JSON (no NaN), and the rest of the row is kept."""
    if value is None:
        return None
    if check is validate.iso_time:
        return stored_time(value, f"{what} {row.id}'s {name}")
    if check is _details:  # an object, as the run's usage holds them
        return stored_details(value)
    if check is _number and not (isinstance(value, (int, float)) and math.isfinite(value)):
        return None
    return value


# ---------------------------------------------------------------------------------------------
# Import: each column checked by its declared type

Check = Callable[[Any, str], Any]


def _int(value: Any, name: str) -> int:
    return validate.count(value, name)


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidOperationError(f"{name} must be a finite number, got {validate.shown(value)}")
    return float(value)


def _details(value: Any, name: str) -> str | None:
    """Token details (an object of counts) as the column's JSON text."""
    if not isinstance(value, Mapping) or not all(
        isinstance(key, str) and is_count(count) for key, count in value.items()
    ):
        raise InvalidOperationError(
            f"{name} must be an object of counts, got {validate.shown(value)}"
        )
    return details_param(dict(value))


_BY_TYPE: dict[Any, Check] = {
    int: _int,
    str: validate.text,
    float: _number,
    Any: validate.iso_time,
    DetailsText: _details,
}


@dataclass(frozen=True)
class _Column:
    check: Check
    optional: bool

    def __call__(self, value: Any, name: str) -> Any:
        return None if value is None and self.optional else self.check(value, name)


_COLUMNS: dict[type, dict[str, _Column]] = {}


def _columns(row_type: type) -> dict[str, _Column]:
    """Each column of ``row_type``, checked by its declared type (``Any``: a time)."""
    if row_type not in _COLUMNS:
        columns = {}
        for name, hint in typing.get_type_hints(row_type).items():
            kinds = get_args(hint) or (hint,)
            plain = [kind for kind in kinds if kind is not type(None)]
            columns[name] = _Column(_BY_TYPE[plain[0]], len(plain) < len(kinds))
        _COLUMNS[row_type] = columns
    return _COLUMNS[row_type]


def _row(row_type: type[R], record: Any, what: str, **given: Any) -> R:
    """A ``row_type`` of ``record``'s values (each checked), ``given`` taking precedence."""
    if not isinstance(record, Mapping):
        raise InvalidOperationError(f"{what} must be an object, got {type(record).__name__}")
    values = {
        name: given[name] if name in given else check(record.get(name), f"{what}: {name}")
        for name, check in _columns(row_type).items()
    }
    if "requests" in values:  # the store's limits of token counts (requests fit INTEGER)
        validate.optional_usage(Usage(**{name: values[name] for name in _TOKENS}), what)
    return row_type(**values)


@dataclass(frozen=True)
class ExactSession:
    """A session's rows as an export carries them, checked: what ``core.transfer.write_chunk``
    writes. Run ids are the runs' places in the export (0 first), parents first."""

    session: SessionRow
    metadata: str  # the catalogue's metadata as JSON text
    chunk: Chunk
    dropped: int  # links to runs the export does not hold, left out


@dataclass(frozen=True)
class ExportedRun:
    """A run as an export's reader found it: its id in the export, its parent's place (None:
    a root), its record and its items."""

    key: Any
    parent: int | None
    record: Any
    items: list[dict[str, Any]]


def exact_session(session_id: str, session: Any, runs: Sequence[ExportedRun]) -> ExactSession:
    """The rows of a session read from an export (the module's docstring); raises
    ``InvalidOperationError`` naming the first value that is not what the database stores."""
    places = {run.key: index for index, run in enumerate(runs)}
    dropped = 0

    def link(value: Any) -> int | None:
        nonlocal dropped
        if value is None:
            return None
        place = places.get(value) if isinstance(value, (int, str)) else None
        dropped += place is None
        return place

    if not isinstance(session, Mapping):
        raise InvalidOperationError(f"session {session_id!r}'s record must be an object")
    metadata = validate.metadata(session.get("metadata") or {})
    head = link(session.get("head_run_id"))
    catalogue = _row(
        SessionRow,
        session,
        f"session {session_id!r}",
        session_id=session_id,
        metadata=metadata,
        head_run_id=head,
        user_id=validate.optional_key(session.get("user_id"), "user_id"),
    )
    rows: list[RunRow] = []
    items: list[CopyItemRow] = []
    calls: list[CopyToolCallRow] = []
    responses: list[ModelResponseRow] = []
    spans: list[SpanRow] = []
    names: list[BranchNameRow] = []
    notes: list[CopyAnnotationRow] = []
    for place, run in enumerate(runs):
        what = f"run {validate.shown(run.key)}"
        record = run.record
        if not isinstance(record, Mapping) or not isinstance(record.get("usage"), Mapping):
            raise InvalidOperationError(f"{what} must be an object with its usage")
        row = _row(
            RunRow,
            {**record, **record["usage"]},
            what,
            id=place,
            session_id=session_id,
            parent_id=run.parent,
            depth=0 if run.parent is None else rows[run.parent].depth + 1,
            item_count=len(run.items),
            prior_run_id=link(record.get("prior_run_id")),
            compacted_by=link(record.get("compacted_by")),
        )
        if row.status is not None and row.status not in _STATUSES:
            raise InvalidOperationError(
                f"{what}: status {validate.shown(row.status)} is not a run status"
            )
        if row.kind not in _KINDS:
            raise InvalidOperationError(
                f"{what}: kind {validate.shown(row.kind)} is not a kind of run"
            )
        rows.append(row)
        items.extend(_items(run, place, what, compaction=row.kind is not None))
        for n, call in enumerate(_list(record, "tool_calls", what)):
            places_of = {
                name: link(call.get(name)) if isinstance(call, Mapping) else None
                for name in _ITEM_RUNS
            }
            calls.append(
                _placed(
                    CopyToolCallRow, call, f"{what}'s tool call {n}", session_id, place, **places_of
                )
            )
        responses.extend(
            _placed(ModelResponseRow, response, f"{what}'s model response {n}", session_id, place)
            for n, response in enumerate(_list(record, "model_responses", what))
        )
        spans.extend(
            _placed(SpanRow, span, f"{what}'s span {n}", session_id, place)
            for n, span in enumerate(_list(record, "spans", what))
        )
        name = record.get("branch_name")
        if name is not None:
            names.append(BranchNameRow(place, validate.branch_name(name)))
        notes.extend(
            _annotation(note, f"{what}'s annotation {n}", session_id, place)
            for n, note in enumerate(_list(record, "annotations", what))
        )
    chunk = Chunk(
        rows,
        _numbered(items, lambda item: item.created_at),
        _numbered(calls, _source_id),
        _numbered(responses, _source_id),
        _numbered(spans, _source_id),
        names,
        _numbered(notes, _source_id),
    )
    return ExactSession(catalogue, metadata, chunk, dropped)


def _placed(
    row_type: type[R], record: Any, what: str, session_id: str, place: int, **given: Any
) -> R:
    """A ``row_type`` of a run's ``record`` (a tool call, model call or span) in the run at
    ``place``; its id is the one it had in the source, which says its order in its table (-1:
    none; an export written before model calls and spans carried theirs holds none of them)."""
    value = record.get("id") if isinstance(record, Mapping) else None
    order = -1 if value is None else validate.count(value, f"{what}: id")
    return _row(row_type, record, what, id=order, session_id=session_id, run_id=place, **given)


def _annotation(record: Any, what: str, session_id: str, place: int) -> CopyAnnotationRow:
    """An annotation of the run at ``place``, checked as ``Store.annotate`` checks one."""
    row = _placed(CopyAnnotationRow, record, what, session_id, place)
    try:
        annotation_checks.annotation_fields(
            name=row.name,
            value=row.value,
            label=row.label,
            comment=row.comment,
            source=row.source,
            author=row.author,
        )
    except InvalidOperationError as exc:
        raise InvalidOperationError(f"{what}: {exc}") from None
    return row


def _source_id(row: CopyToolCallRow | ModelResponseRow | SpanRow | CopyAnnotationRow) -> int:
    return row.id


N = TypeVar("N", CopyItemRow, CopyToolCallRow, ModelResponseRow, SpanRow, CopyAnnotationRow)


def _numbered(rows: list[N], order: Callable[[N], Any]) -> list[N]:
    """``rows`` (in run order) in the order the source numbered them, each with its number as
    its id (from 1). The source's order is ``order`` of each row: an export holds each item's
    time, not its id (an item added to an older branch after newer runs is newer than their
    items, and a store writes items in time order; ties: those of one write, in run and
    position order); a tool call, model call or span carries its id in the source (those of
    an export that carries none keep its order, run by run)."""
    ordered = sorted(rows, key=order)  # stable: ties keep their order
    return [row._replace(id=number) for number, row in enumerate(ordered, 1)]


def _list(record: Mapping[str, Any], name: str, what: str) -> list[Any]:
    value = record.get(name, [])
    if not isinstance(value, list):
        raise InvalidOperationError(f"{what}: {name} must be a list, got {type(value).__name__}")
    return value


def _items(run: ExportedRun, place: int, what: str, *, compaction: bool) -> list[CopyItemRow]:
    times = _list(run.record, "item_times", what)
    if len(times) != len(run.items):
        raise InvalidOperationError(
            f"{what}: item_times holds {len(times)} times for {len(run.items)} items"
        )
    prepared_items = prepare_items(run.items)
    for position, prepared in enumerate(prepared_items):
        # A user message starts a run (a compaction run holds whatever replaced the history).
        if position and prepared.info.starts_run and not compaction:
            raise InvalidOperationError(
                f"{what}: item {position} is a user message, which starts a run of its own"
            )
    return [
        CopyItemRow(
            0,
            place,
            position,
            prepared.info.type,
            prepared.info.role,
            prepared.info.call_id,
            prepared.info.name,
            prepared.info.text,
            prepared.data,
            validate.iso_time(when, f"{what}: item_times[{position}]"),
        )
        for position, (prepared, when) in enumerate(zip(prepared_items, times, strict=True))
    ]

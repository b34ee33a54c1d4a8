"""Datasets: the runs that filters select, each as what the model had and what it gave.

A page of runs is read in (session, run) order after the last one of the previous page, then
each run's record: the items of the model's view from the run up (its ancestors' items, a
compaction run in place of the runs it replaced, then its own), cut after its user message;
its tool calls and annotations. One page is one read transaction; memory holds one page.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from itertools import groupby
from typing import Any

from ..domain.model import Annotation, DatasetRecord, ToolCall
from . import dataset_sql as D
from . import statements as S
from .annotations import filter_params, of_runs
from .codec import decode_items
from .dataset_sql import DatasetRunRow
from .ops import Op
from .tables import RunRow, ToolCallRow, run_from_row, tool_call_from_row

__all__ = ["FIRST", "Cursor", "dataset_page", "run_filters", "split_at_user_message"]

Cursor = tuple[str, int]
"""The (session id, run id) of the last run a page read."""
FIRST: Cursor = ("", 0)
"""Before every run."""


def run_filters(
    *,
    session_id: str | None,
    user_id: str | None,
    agent: str | None,
    model: str | None,
    since: Any,
    until: Any,
    failed: bool,
    annotation: Mapping[str, Any] | None,
    now: Any,
) -> dict[str, Any]:
    """The filters as ``DATASET_RUNS`` binds them: each value (a placeholder of its type when
    absent, unread) and its flag; ``annotation``: the bound filters of
    ``core.annotations.filter_params`` (None: no annotation needed)."""
    given = {
        "sid": (session_id, ""),
        "user": (user_id, ""),
        "agent": (agent, ""),
        "model": (model, ""),
        "run_since": (since, now),
        "run_until": (until, now),
    }
    params: dict[str, Any] = {}
    for key, (value, placeholder) in given.items():
        params[key] = placeholder if value is None else value
        params[f"{key}_given"] = int(value is not None)
    params["failed_given"] = int(failed)
    params["annotated_given"] = int(annotation is not None)
    if annotation is None:
        # Unread (its flag is 0), but bound: every placeholder needs a value.
        annotation = filter_params(
            name=None,
            source=None,
            label=None,
            min_value=None,
            max_value=None,
            since=None,
            until=None,
            now=now,
        )
    return {**params, **annotation}


def split_at_user_message(items: Sequence[Any]) -> int:
    """Where a run's items divide into input and output: after its first user message (0 if
    it has none: all of it is output)."""
    for place, item in enumerate(items):
        if (
            isinstance(item, Mapping)
            and item.get("role") == "user"
            and item.get("type", "message") == "message"
        ):
            return place + 1
    return 0


def dataset_page(
    filters: Mapping[str, Any],
    after: Cursor,
    size: int,
    keep: Collection[Cursor] | None,
) -> Op[tuple[list[DatasetRecord], Cursor | None]]:
    """The records of at most ``size`` runs that match after ``after`` (with ``keep``: only
    those it holds), and the cursor of the next page (None: none follows)."""
    rows: list[DatasetRunRow] = yield D.DATASET_RUNS(
        {**filters, "after_sid": after[0], "after_id": after[1], "limit": size}
    )
    cursor = None if len(rows) < size else (rows[-1].session_id, rows[-1].id)
    if keep is not None:
        rows = [row for row in rows if (row.session_id, row.id) in keep]
    records: list[DatasetRecord] = []
    for session_id, group in groupby(rows, key=lambda row: row.session_id):
        runs = list(group)
        calls = yield from _tool_calls(session_id, [row.id for row in runs])
        notes = yield from of_runs(session_id, runs[0].id, runs[-1].id)
        for row in runs:
            records.append((yield from _record(row, calls.get(row.id, []), notes.get(row.id, []))))
    return records, cursor


def _tool_calls(session_id: str, run_ids: list[int]) -> Op[dict[int, list[ToolCall]]]:
    rows: list[ToolCallRow] = yield S.TOOL_CALLS_OF_RUNS(
        {"sid": session_id, "run_ids": json.dumps(run_ids)}
    )
    calls: dict[int, list[ToolCall]] = {}
    for row in rows:
        calls.setdefault(row.run_id, []).append(tool_call_from_row(row))
    return calls


def _record(
    row: DatasetRunRow, calls: list[ToolCall], notes: list[Annotation]
) -> Op[DatasetRecord]:
    item_rows = yield D.DATASET_ITEMS({"sid": row.session_id, "run_id": row.id})
    own_from = next(
        (place for place, item in enumerate(item_rows) if item.run_id == row.id), len(item_rows)
    )
    items = decode_items(item_rows, row.session_id)
    cut = own_from + split_at_user_message(items[own_from:])
    return DatasetRecord(
        run=run_from_row(RunRow._make(row[: len(RunRow._fields)])),
        user_id=row.user_id,
        input=items[:cut],
        output=items[cut:],
        tool_calls=calls,
        annotations=notes,
    )

"""Annotations: judgements of a run, or of one tool call of it (feedback, scores, labels).

An annotation belongs to its run, not to a path: a run that an edit or a compaction moves off
the active path keeps its annotations, and they go only with the run (a deleted branch or
session: the rows cascade) or with their tool call (a pop that drops it). Several of one name
on one run are kept side by side (two reviewers); a correction names the annotation by id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Literal

from ..domain.model import Annotation, AnnotationStats
from ..errors import NotFoundError, RunNotFoundError
from . import annotation_sql as A
from . import statements as S
from .annotation_sql import AnnotationRow, AnnotationStatsRow
from .branches import branch_tree
from .lock import lock_session
from .ops import All, Op
from .reads import find_run
from .tables import as_datetime

__all__ = [
    "STATS_GROUPS",
    "AnnotationGroup",
    "annotate",
    "annotation",
    "annotation_from_row",
    "delete_annotation",
    "filter_params",
    "list_annotations",
    "of_runs",
    "session_of_annotation",
    "session_of_run",
    "stats",
    "stats_from_row",
    "update_annotation",
]

AnnotationGroup = Literal["agent", "model", "tool", "day", "branch", "session", "user"]
STATS_GROUPS: tuple[AnnotationGroup, ...] = (
    "agent",
    "model",
    "tool",
    "day",
    "branch",
    "session",
    "user",
)


def annotation_from_row(row: AnnotationRow) -> Annotation:
    """Build an ``Annotation`` from a row of ``annotations``."""
    return Annotation(
        id=row.id,
        session_id=row.session_id,
        run_id=row.run_id,
        tool_call_id=row.tool_call_id,
        name=row.name,
        value=None if row.value is None else float(row.value),
        label=row.label,
        comment=row.comment,
        source=row.source,
        author=row.author,
        created_at=as_datetime(row.created_at),
        updated_at=None if row.updated_at is None else as_datetime(row.updated_at),
    )


def annotate(
    session_id: str,
    run_id: int | None,
    tool_call_id: int | None,
    fields: Mapping[str, Any],
    now: Any,
) -> Op[Annotation]:
    """Annotate the run ``run_id`` of the session (None: its head run) with ``fields``
    (checked: ``annotation_checks.annotation_fields``); with ``tool_call_id``, one tool call
    of it."""
    # Locked against a delete of the run (a branch, the session) between the check and the
    # insert; an unknown session is left uncreated.
    head = yield from lock_session(session_id, now, create=False)
    if run_id is None:
        if head.id is None:
            raise RunNotFoundError(
                f"session {session_id!r} has no run to annotate: annotate a run by its id"
            )
        run_id = head.id
    yield from find_run(session_id, run_id)
    if tool_call_id is not None:
        call_run = yield A.TOOL_CALL_RUN({"sid": session_id, "id": tool_call_id})
        if call_run != run_id:
            raise NotFoundError(f"no tool call {tool_call_id} in run {run_id}")
    new_id = yield A.INSERT_ANNOTATION(
        {**fields, "sid": session_id, "run_id": run_id, "tool_call_id": tool_call_id, "now": now}
    )
    return (yield from annotation(session_id, new_id))


def annotation(session_id: str, annotation_id: int) -> Op[Annotation]:
    """The annotation ``annotation_id`` of the session; NotFoundError if there is none."""
    row = yield A.ANNOTATION({"sid": session_id, "id": annotation_id})
    if row is None:
        raise NotFoundError(f"no annotation {annotation_id}")
    return annotation_from_row(row)


def session_of_annotation(annotation_id: int) -> Op[str]:
    """The session of the annotation ``annotation_id``; NotFoundError if there is none."""
    session_id = yield A.SESSION_OF_ANNOTATION({"id": annotation_id})
    if session_id is None:
        raise NotFoundError(f"no annotation {annotation_id}")
    return str(session_id)


def session_of_run(run_id: int) -> Op[str | None]:
    """The session of the run ``run_id`` (None: no such run)."""
    session_id = yield S.SESSION_OF_RUN({"run_id": run_id})
    return None if session_id is None else str(session_id)


def update_annotation(
    session_id: str, annotation_id: int, changes: Mapping[str, Any], now: Any
) -> Op[Annotation]:
    """Set the fields ``changes`` names (the others stay) of an annotation; returns it."""
    current = yield from annotation(session_id, annotation_id)
    fields = {
        name: changes.get(name, getattr(current, name))
        for name in ("name", "value", "label", "comment", "source", "author")
    }
    yield A.UPDATE_ANNOTATION({**fields, "sid": session_id, "id": annotation_id, "now": now})
    return (yield from annotation(session_id, annotation_id))


def delete_annotation(session_id: str, annotation_id: int) -> Op[None]:
    """Delete an annotation; NotFoundError if there is none."""
    yield from annotation(session_id, annotation_id)
    yield A.DELETE_ANNOTATION({"sid": session_id, "id": annotation_id})


def filter_params(
    *,
    name: str | None,
    source: str | None,
    label: str | None,
    min_value: float | None,
    max_value: float | None,
    since: Any,
    until: Any,
    now: Any,
) -> dict[str, Any]:
    """The optional filters as ``annotation_sql`` binds them: each value (a placeholder of
    its type when absent, unread) and its flag."""
    given = {
        "name": (name, ""),
        "source": (source, ""),
        "label": (label, ""),
        "min": (min_value, 0.0),
        "max": (max_value, 0.0),
        "since": (since, now),
        "until": (until, now),
    }
    params: dict[str, Any] = {}
    for key, (value, placeholder) in given.items():
        column = f"{key}_value" if key in ("min", "max") else key
        params[column] = placeholder if value is None else value
        params[f"{key}_given"] = int(value is not None)
    return params


def list_annotations(
    *, session_id: str | None, run_id: int | None, filters: dict[str, Any], limit: int
) -> Op[list[Annotation]]:
    """The newest ``limit`` annotations that match, oldest first."""
    statement: All[AnnotationRow] = A.ANNOTATIONS_BY_ALL
    params = {**filters, "sid": session_id, "run_id": run_id, "limit": limit}
    if run_id is not None:
        # A run's rows are read on its session's (one shard on Citus).
        run_session = yield S.SESSION_OF_RUN({"run_id": run_id})
        if run_session is None or (session_id is not None and run_session != session_id):
            return []
        statement, params["sid"] = A.ANNOTATIONS_BY_RUN, run_session
    elif session_id is not None:
        statement = A.ANNOTATIONS_BY_SESSION
    elif filters["name_given"]:
        statement = A.ANNOTATIONS_BY_NAME
    rows = yield statement(params)
    return [annotation_from_row(row) for row in reversed(rows)]


def of_runs(session_id: str, first: int, last: int) -> Op[dict[int, list[Annotation]]]:
    """The annotations of the session's runs ``first`` to ``last`` (ids), by run, each run's
    in the order they were made: a page's in one query."""
    rows: list[AnnotationRow] = yield A.ANNOTATIONS_OF_RUN_RANGE(
        {"sid": session_id, "first": first, "last": last}
    )
    notes: dict[int, list[Annotation]] = {}
    for row in rows:
        notes.setdefault(row.run_id, []).append(annotation_from_row(row))
    return notes


_STATS: Mapping[AnnotationGroup, All[AnnotationStatsRow]] = {
    "agent": A.ANNOTATION_STATS_BY_AGENT,
    "model": A.ANNOTATION_STATS_BY_MODEL,
    "tool": A.ANNOTATION_STATS_BY_TOOL,
    "day": A.ANNOTATION_STATS_BY_DAY,
    "branch": A.ANNOTATION_STATS_BY_RUN,
    "session": A.ANNOTATION_STATS_BY_SESSION,
    "user": A.ANNOTATION_STATS_BY_USER,
}


def stats(
    group_by: AnnotationGroup, *, session_id: str | None, filters: dict[str, Any]
) -> Op[list[AnnotationStats]]:
    """Counts and values of annotations per group and name, by key (no key first), then name.

    A branch (``session_id`` given) is its fork run's name, or ``#`` and its fork run's id:
    the runs' figures summed by the branch each run is on.
    """
    rows = yield _STATS[group_by](
        {**filters, "sid": session_id or "", "sid_given": int(session_id is not None)}
    )
    if group_by == "branch" and session_id is not None:
        tree = yield from branch_tree(session_id)

        def branch_of(run_id: int) -> str:
            fork = tree.fork_of[run_id]
            return tree.names.get(fork, f"#{fork}")

        rows = _summed(rows, branch_of)
    result = [stats_from_row(row) for row in rows]
    result.sort(key=lambda row: (row.key is not None, row.key or "", row.name))
    return result


def stats_from_row(row: AnnotationStatsRow) -> AnnotationStats:
    """Build an ``AnnotationStats`` from a row of a statistics statement (its key as text)."""
    return AnnotationStats(
        key=None if row.key is None else str(row.key),
        name=row.name,
        count=int(row.annotations),
        scored=int(row.scored),
        runs=int(row.runs),
        mean=None if row.total is None or not row.scored else float(row.total) / int(row.scored),
        minimum=None if row.minimum is None else float(row.minimum),
        maximum=None if row.maximum is None else float(row.maximum),
    )


def _summed(rows: list[AnnotationStatsRow], key_of: Any) -> list[AnnotationStatsRow]:
    """Rows by run summed by ``key_of(run_id)``: each run is in one group, so runs add up."""
    groups: dict[tuple[str, str], list[AnnotationStatsRow]] = defaultdict(list)
    for row in rows:
        groups[key_of(int(row.key)), row.name].append(row)
    summed = []
    for (key, name), members in groups.items():
        values = [row for row in members if row.scored]
        summed.append(
            AnnotationStatsRow(
                key=key,
                name=name,
                annotations=sum(int(row.annotations) for row in members),
                scored=sum(int(row.scored) for row in members),
                # Each of ``values`` has a value, so its sums are numbers.
                total=sum(float(row.total or 0) for row in values) if values else None,
                minimum=min(float(row.minimum or 0) for row in values) if values else None,
                maximum=max(float(row.maximum or 0) for row in values) if values else None,
                runs=sum(int(row.runs) for row in members),
            )
        )
    return summed

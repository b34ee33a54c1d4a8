"""The SQL of annotations (``core.annotations``), declared once: rows, statements, the view.

Every statement here runs alike on every dialect but ``ANNOTATION_STATS_BY_DAY``, whose day
each dialect writes (``annotation_stats_sql``). Optional filters are bound with a flag each
(``name_given``: 0 or 1) rather than tested for NULL, so that no dialect needs a cast to
type a parameter that is sometimes NULL.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .ops import All, Execute, Insert, One, Statement, Value

__all__ = [
    "FILTERS",
    "RUN_ANNOTATIONS_VIEW",
    "STATEMENTS",
    "AnnotationRow",
    "AnnotationStatsRow",
    "CopyAnnotationRow",
    "annotation_stats_sql",
]


class AnnotationRow(NamedTuple):
    """A row of ``annotations``."""

    id: int
    session_id: str
    run_id: int
    tool_call_id: int | None
    name: str
    value: float | None
    label: str | None
    comment: str | None
    source: str
    author: str | None
    created_at: Any
    updated_at: Any | None


class CopyAnnotationRow(NamedTuple):
    """An annotation as a copy reads it (``AnnotationRow`` + 1): its tool call named by its
    place among its run's tool calls (0 first; None: the run itself), which a copy finds
    again under its new id."""

    id: int
    session_id: str
    run_id: int
    tool_call_id: int | None
    name: str
    value: float | None
    label: str | None
    comment: str | None
    source: str
    author: str | None
    created_at: Any
    updated_at: Any | None
    tool_call_index: int | None


class AnnotationStatsRow(NamedTuple):
    """Annotations of one name summed over one group (a NULL sum: none with a value)."""

    key: Any
    name: str
    annotations: int
    scored: int
    total: float | None
    minimum: float | None
    maximum: float | None
    runs: int


_COLUMNS = ", ".join(f"a.{name}" for name in AnnotationRow._fields)

# The view a SQL user reads (schema step 13 of both dialects creates it; never edit it: a
# change is a new step that replaces it): each annotation with its run, session and tool.
RUN_ANNOTATIONS_VIEW = """CREATE VIEW run_annotations AS
        SELECT a.id AS annotation_id, a.session_id, s.user_id, a.run_id, a.tool_call_id,
            t.tool_name, a.name, a.value, a.label, a.comment, a.source, a.author,
            a.created_at, a.updated_at, r.agent_name, r.model, r.status AS run_status,
            r.user_message, r.assistant_message, r.created_at AS run_created_at,
            r.id = s.head_run_id AS is_head
        FROM annotations a
        JOIN runs r ON r.session_id = a.session_id AND r.id = a.run_id
        JOIN sessions s ON s.session_id = a.session_id
        LEFT JOIN tool_calls t ON t.session_id = a.session_id AND t.id = a.tool_call_id"""

# The optional filters of a listing and of the statistics (a flag each: see the docstring).
FILTERS = """
          AND (:name_given = 0 OR a.name = :name)
          AND (:source_given = 0 OR a.source = :source)
          AND (:label_given = 0 OR a.label = :label)
          AND (:min_given = 0 OR a.value >= :min_value)
          AND (:max_given = 0 OR a.value <= :max_value)
          AND (:since_given = 0 OR a.created_at >= :since)
          AND (:until_given = 0 OR a.created_at < :until)"""

INSERT_ANNOTATION = Insert(
    "insert_annotation",
    """
        INSERT INTO annotations (session_id, run_id, tool_call_id, name, value, label, comment,
                                 source, author, created_at)
        VALUES (:sid, :run_id, :tool_call_id, :name, :value, :label, :comment, :source,
                :author, :now)""",
)
ANNOTATION = One(
    "annotation",
    f"SELECT {_COLUMNS} FROM annotations a WHERE a.session_id = :sid AND a.id = :id",
    row=AnnotationRow,
)
# The session of an annotation named by id alone (update and delete then run on that
# session's rows).
SESSION_OF_ANNOTATION = Value(
    "session_of_annotation",
    "SELECT session_id FROM annotations WHERE id = :id",
    column="session_id",
    holds=str,
)
UPDATE_ANNOTATION = Execute(
    "update_annotation",
    """
        UPDATE annotations SET name = :name, value = :value, label = :label,
            comment = :comment, source = :source, author = :author, updated_at = :now
        WHERE session_id = :sid AND id = :id""",
)
DELETE_ANNOTATION = Execute(
    "delete_annotation", "DELETE FROM annotations WHERE session_id = :sid AND id = :id"
)
TOOL_CALL_RUN = Value(
    "tool_call_run",
    "SELECT run_id FROM tool_calls WHERE session_id = :sid AND id = :id",
    column="run_id",
    holds=int,
)

# Listings, each by the filter whose index drives it: run, session, name, or none; the
# newest first (the caller turns them oldest first).
_LIST = f"""
        SELECT {_COLUMNS} FROM annotations a
        WHERE {{condition}} {FILTERS}
        ORDER BY a.created_at DESC, a.id DESC LIMIT :limit"""
ANNOTATIONS_BY_RUN = All(
    "annotations_by_run",
    _LIST.format(condition="a.session_id = :sid AND a.run_id = :run_id"),
    row=AnnotationRow,
)
ANNOTATIONS_BY_SESSION = All(
    "annotations_by_session", _LIST.format(condition="a.session_id = :sid"), row=AnnotationRow
)
ANNOTATIONS_BY_NAME = All(
    "annotations_by_name", _LIST.format(condition="a.name = :name"), row=AnnotationRow
)
ANNOTATIONS_BY_ALL = All("annotations_by_all", _LIST.format(condition="1 = 1"), row=AnnotationRow)
# The annotations of a page of one session's runs (a range of its run ids: the caller keeps
# those of the runs it shows), in the order they were made: one query for a page.
ANNOTATIONS_OF_RUN_RANGE = All(
    "annotations_of_run_range",
    f"""
        SELECT {_COLUMNS} FROM annotations a
        WHERE a.session_id = :sid AND a.run_id >= :first AND a.run_id <= :last
        ORDER BY a.run_id, a.created_at, a.id""",
    row=AnnotationRow,
)


# The conditions of Store.annotation_stats: its optional session, and the filters.
_STATS_FILTERS = f"(:sid_given = 0 OR a.session_id = :sid) {FILTERS}"


def annotation_stats_sql(key: str, where: str = _STATS_FILTERS) -> str:
    """Annotation statistics grouped by ``key`` (an expression over the annotation ``a``, its
    run ``r``, its session ``s`` and its tool call ``t``) and the annotation's name, of the
    annotations ``where`` keeps (by default, ``Store.annotation_stats``'s)."""
    return f"""
        SELECT {key} AS key, a.name, count(*) AS annotations, count(a.value) AS scored,
            sum(a.value) AS total, min(a.value) AS minimum, max(a.value) AS maximum,
            count(DISTINCT a.run_id) AS runs
        FROM annotations a
        JOIN runs r ON r.session_id = a.session_id AND r.id = a.run_id
        JOIN sessions s ON s.session_id = a.session_id
        LEFT JOIN tool_calls t ON t.session_id = a.session_id AND t.id = a.tool_call_id
        WHERE {where}
        GROUP BY {key}, a.name"""


ANNOTATION_STATS_BY_AGENT = All(
    "annotation_stats_by_agent", annotation_stats_sql("r.agent_name"), row=AnnotationStatsRow
)
ANNOTATION_STATS_BY_MODEL = All(
    "annotation_stats_by_model", annotation_stats_sql("r.model"), row=AnnotationStatsRow
)
ANNOTATION_STATS_BY_TOOL = All(
    "annotation_stats_by_tool", annotation_stats_sql("t.tool_name"), row=AnnotationStatsRow
)
ANNOTATION_STATS_BY_SESSION = All(
    "annotation_stats_by_session", annotation_stats_sql("a.session_id"), row=AnnotationStatsRow
)
ANNOTATION_STATS_BY_USER = All(
    "annotation_stats_by_user", annotation_stats_sql("s.user_id"), row=AnnotationStatsRow
)
# By run: what the statistics by branch sum up (core.annotations.stats).
ANNOTATION_STATS_BY_RUN = All(
    "annotation_stats_by_run", annotation_stats_sql("a.run_id"), row=AnnotationStatsRow
)
ANNOTATION_STATS_BY_DAY = All("annotation_stats_by_day", row=AnnotationStatsRow)

# Copying (core.transfer): a session's annotations, in id order, each tool call by its place
# in its run; written anew with the copy's last transaction (CLEAR_ANNOTATIONS first, so that
# a copy made again carries them as the source holds them then).
COPY_ANNOTATIONS = All(
    "copy_annotations",
    f"""
        SELECT {_COLUMNS},
            CASE WHEN a.tool_call_id IS NULL THEN NULL ELSE (
                SELECT count(*) FROM tool_calls t
                WHERE t.session_id = :sid AND t.run_id = a.run_id AND t.id < a.tool_call_id)
            END AS tool_call_index
        FROM annotations a WHERE a.session_id = :sid ORDER BY a.id""",
    row=CopyAnnotationRow,
)
CLEAR_ANNOTATIONS = Execute("clear_annotations", "DELETE FROM annotations WHERE session_id = :sid")
COPY_ANNOTATION = Execute(
    "copy_annotation",
    """
        INSERT INTO annotations (session_id, run_id, tool_call_id, name, value, label, comment,
                                 source, author, created_at, updated_at)
        SELECT :sid, :run_id,
            CASE WHEN :has_tool_call = 1 THEN (
                SELECT id FROM tool_calls WHERE session_id = :sid AND run_id = :run_id
                ORDER BY id LIMIT 1 OFFSET :tool_call_offset)
            END,
            :name, :value, :label, :comment, :source, :author, :created_at, :updated_at""",
)

STATEMENTS: tuple[Statement, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Statement)
)
"""The statements of annotations, in declaration order."""

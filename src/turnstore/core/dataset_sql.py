"""The SQL of datasets (``core.dataset``), declared once: the runs a dataset selects, and what
each record reads beside its items.

``DATASET_RUNS`` runs alike on every dialect; ``DATASET_ITEMS`` (a
walk up the model's view from one run) each dialect writes in its own shape (``sqlite/sql.py``,
``postgres/sql.py``). Optional filters are bound with a flag each, as ``core.annotation_sql``
binds them (so that no dialect needs a cast to type a parameter that is sometimes absent).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..domain.toolcalls import failed_sql
from .annotation_sql import FILTERS
from .ops import All, Statement
from .results import RunItemRow
from .tables import DetailsText, RunRow, check_extends, columns

__all__ = ["STATEMENTS", "DatasetRunRow"]


class DatasetRunRow(NamedTuple):
    """A run a dataset selects (``RunRow`` + 1): with its session's user."""

    id: int
    session_id: str
    parent_id: int | None
    depth: int
    user_message: str | None
    assistant_message: str | None
    agent_name: str | None
    model: str | None
    status: str | None
    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    input_tokens_details: DetailsText | None
    output_tokens_details: DetailsText | None
    item_count: int
    created_at: Any
    updated_at: Any
    kind: str | None
    prior_run_id: int | None
    compacted_by: int | None
    user_id: str | None


check_extends(DatasetRunRow, RunRow, ("user_id",))


# Conversation runs only (a compaction run is no model turn), in (session, run) order after
# the last one of the previous page: a keyset, so that a page costs the same however deep.
DATASET_RUNS = All(
    "dataset_runs",
    f"""
        SELECT {columns(RunRow, "r")}, s.user_id
        FROM runs r JOIN sessions s ON s.session_id = r.session_id
        WHERE r.kind IS NULL
          AND (r.session_id > :after_sid OR (r.session_id = :after_sid AND r.id > :after_id))
          AND (:sid_given = 0 OR r.session_id = :sid)
          AND (:user_given = 0 OR s.user_id = :user)
          AND (:agent_given = 0 OR r.agent_name = :agent)
          AND (:model_given = 0 OR r.model = :model)
          AND (:run_since_given = 0 OR r.created_at >= :run_since)
          AND (:run_until_given = 0 OR r.created_at < :run_until)
          AND (:failed_given = 0 OR EXISTS (
              SELECT 1 FROM tool_calls t
              WHERE t.session_id = r.session_id AND t.run_id = r.id
                AND {failed_sql("t.status", "t.error")}))
          AND (:annotated_given = 0 OR EXISTS (
              SELECT 1 FROM annotations a
              WHERE a.session_id = r.session_id AND a.run_id = r.id {FILTERS}))
        ORDER BY r.session_id, r.id LIMIT :limit""",
    row=DatasetRunRow,
)
# The items of the model's view from the run ``:run_id`` up: its own and those of every run
# above it (a compaction run in place of the runs it replaced), oldest first.
DATASET_ITEMS = All("dataset_items", row=RunItemRow)

STATEMENTS: tuple[Statement, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Statement)
)
"""The statements of datasets, in declaration order."""

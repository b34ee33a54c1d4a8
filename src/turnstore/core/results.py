"""The row types of the statements' results (those of whole tables are in ``rows``).

A statement names its row type (``core.statements``); a dialect checks once that the database
returns the columns the type names, and builds each row as that type (``core.dialect``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .tables import DetailsText


class HeadRow(NamedTuple):
    """A session's head run, as an append needs it (``lock.Head``)."""

    id: int | None
    depth: int | None
    item_count: int | None
    parent_id: int | None  # in the model's view: a compaction run's prior run
    has_children: Any  # a boolean (0/1 on SQLite)
    indexed_through: int | None  # SQLite's search-index watermark; NULL elsewhere
    status: str | None  # the head run's (model.RunStatus): an append fails one in progress


class ClaimRow(NamedTuple):
    """A write key just claimed (``once``): the row exists only when the key is new."""

    claimed: int
    # Whether the session may hold keys older than a day to forget (0/1 on SQLite, which
    # looks; PostgreSQL always says so, see its CLAIM_OPERATION).
    stale: Any
    result: str | None  # the result stored with the claim (once's guess), as JSON


class ItemRow(NamedTuple):
    """A stored item: its id and JSON (bytes or text)."""

    id: int
    data: Any


class RunItemRow(NamedTuple):
    """A stored item with its run."""

    run_id: int
    id: int
    data: Any


class LastItemRow(NamedTuple):
    id: int
    position: int
    call_id: str | None
    data: Any


class ItemPlaceRow(NamedTuple):
    run_id: int
    position: int


class LeafRow(NamedTuple):
    id: int
    depth: int
    user_message: str | None
    created_at: Any


class RunLinkRow(NamedTuple):
    """A run's place in the tree, and what tells an edit from a regenerate."""

    id: int
    parent_id: int | None
    user_message: str | None
    kind: str | None
    item_count: int


class BranchNameRow(NamedTuple):
    run_id: int
    name: str


class SessionSummaryRow(NamedTuple):
    session_id: str
    runs: int
    branches: Any
    total_tokens: Any
    failed_runs: Any
    tool_calls: int
    failed_tool_calls: int


class SessionListRow(NamedTuple):
    """A row of ``sessions`` in a catalogue listing, with the value it is sorted by (a time,
    or a number: runs, tokens, …), which the next page's cursor carries."""

    session_id: str
    user_id: str | None
    title: str | None
    metadata: str  # JSON text (tables.SESSION_COLUMNS)
    head_run_id: int | None
    created_at: Any
    updated_at: Any
    sort_key: Any


class AncestorRow(NamedTuple):
    id: int
    parent_id: int | None
    children: int


class RunDepthRow(NamedTuple):
    id: int
    depth: int


class OpenCallRow(NamedTuple):
    call_id: str
    id: int


class ToolStatsRow(NamedTuple):
    tool_name: str | None
    calls: int
    failed: int
    timed_calls: int
    mean_ms: Any
    p50_ms: Any
    p95_ms: Any
    max_ms: Any


class ModelResponseRow(NamedTuple):
    id: int
    session_id: str
    run_id: int
    agent_name: str | None
    model: str | None
    response_id: str | None
    request_id: str | None
    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    input_tokens_details: DetailsText | None
    output_tokens_details: DetailsText | None
    started_at: Any | None
    completed_at: Any
    latency_ms: float | None


class SpanRow(NamedTuple):
    """A row of ``spans``."""

    id: int
    session_id: str
    run_id: int
    trace_id: str
    span_id: str
    parent_span_id: str | None
    kind: str
    name: str | None
    started_at: Any | None
    ended_at: Any | None
    duration_ms: float | None
    error: str | None
    data: str


class UsageSumRow(NamedTuple):
    """Token usage summed over one group (a NULL sum: no runs with tokens)."""

    key: Any
    runs: int
    requests: Any
    input_tokens: Any
    output_tokens: Any
    total_tokens: Any
    cached_tokens: Any
    reasoning_tokens: Any


class UsageDetailRow(NamedTuple):
    """One field of one group's token details (``side``: ``input`` or ``output``), summed."""

    key: Any
    side: str
    name: str
    total: Any


class UsageCostRow(NamedTuple):
    """Token usage of one group by model and UTC day (``YYYY-MM-DD``), to be priced."""

    key: Any
    model: str | None
    day: Any
    requests: Any
    input_tokens: Any
    output_tokens: Any
    total_tokens: Any
    cached_tokens: Any
    reasoning_tokens: Any


class CopyItemRow(NamedTuple):
    """An item as a copy reads it: every column but the derived ones (the search index)."""

    id: int
    run_id: int
    position: int
    type: str
    role: str | None
    call_id: str | None
    name: str | None
    text: str | None
    data: str
    created_at: Any


class SessionItemsRow(NamedTuple):
    session_id: str
    items: int


class RunIdsRow(NamedTuple):
    """The id range of a run's rows in one table."""

    run_id: int
    first: int
    last: int


class SearchRow(NamedTuple):
    id: int
    session_id: str
    run_id: int
    type: str
    role: str | None
    created_at: Any
    snippet: str | None
    rank: float
    exact: bool


class SearchHeadRow(NamedTuple):
    id: int
    hit: bool
    window: bool

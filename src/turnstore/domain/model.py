"""The typed values turnstore returns: runs, tool calls, branches, usage, sessions."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Literal, get_args

from .toolcalls import call_failed

__all__ = [
    "ANNOTATION_SOURCES",
    "COMPACTED",
    "COMPLETED",
    "DETAIL_FIELDS",
    "FAILED",
    "FIRST_PAGE",
    "INTERRUPTED",
    "IN_PROGRESS",
    "RUN_STATUSES",
    "TOKEN_FIELDS",
    "Annotation",
    "AnnotationSource",
    "AnnotationStats",
    "Branch",
    "BranchOrigin",
    "DatasetRecord",
    "HistoryTail",
    "ModelResponse",
    "NewRun",
    "PageCursor",
    "ResponseRecord",
    "Run",
    "RunStatus",
    "SearchCount",
    "SearchResult",
    "SessionInfo",
    "SessionPage",
    "SessionPatch",
    "SessionSummary",
    "Telemetry",
    "ToolCall",
    "ToolStats",
    "ToolTiming",
    "TraceSpan",
    "Usage",
    "UsageRow",
]

# How a branch was made: ``"edit"`` (a sibling with another user message: Store.fork with a new
# input, or a message sent after a rewind), ``"regenerate"`` (a sibling with the same user
# message), ``"compaction"`` (a compaction of a run that already had children).
BranchOrigin = Literal["edit", "regenerate", "compaction"]

# A run's ``status``: how the writes so far have left it (written with each write).
RunStatus = Literal["in_progress", "completed", "interrupted", "failed", "compacted"]
IN_PROGRESS: RunStatus = "in_progress"  # under way: the model has yet to answer
COMPLETED: RunStatus = "completed"  # the newest write ended with the answer
INTERRUPTED: RunStatus = "interrupted"  # a tool call awaits its output (an approval)
FAILED: RunStatus = "failed"  # a new question came below it before its answer
COMPACTED: RunStatus = "compacted"  # a compaction replaced it in the model's view
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)

# A tool call's statuses, and what makes one failed: ``turnstore.domain.toolcalls``.

# Who made an annotation: the conversation's ``user`` (a thumbs button), a ``human`` reviewer,
# a ``model`` judge, a ``code`` check.
AnnotationSource = Literal["user", "human", "model", "code"]
ANNOTATION_SOURCES: tuple[AnnotationSource, ...] = ("user", "human", "model", "code")


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of a run (or a sum of runs).

    ``input_tokens_details`` and ``output_tokens_details`` are the token details as the SDK
    reports them (``cached_tokens``, ``cache_write_tokens``, ``reasoning_tokens`` and any
    field a later SDK or provider adds; a nested object's counts under dotted names, e.g.
    ``cache_write_tokens_details.ttl_30m_tokens``), each summed over the run's model requests
    (or the runs summed); empty when nothing reported them. ``cached_tokens`` and
    ``reasoning_tokens`` repeat the two the price table uses, as columns of their own.
    """

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    input_tokens_details: dict[str, int] = field(default_factory=dict)
    output_tokens_details: dict[str, int] = field(default_factory=dict)


TOKEN_FIELDS: tuple[str, ...] = (
    "requests",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cached_tokens",
    "reasoning_tokens",
)
"""``Usage``'s counts, in order (its columns of ints)."""
DETAIL_FIELDS: tuple[str, ...] = ("input_tokens_details", "output_tokens_details")
"""``Usage``'s token details (JSON objects of counts, stored as they are reported)."""


@dataclass(frozen=True, slots=True)
class Run:
    """One user message and everything the agent did in answer.

    A compaction (see README, "Compaction") adds a run of ``kind`` ``"compaction"`` holding
    what the model sees instead of the runs it replaced; its ``prior_run_id`` is the run the
    model's history continues from above it (None: the compaction starts the history). The
    replaced runs stay, with ``status`` ``"compacted"`` and ``compacted_by`` naming it.

    ``status`` (a ``RunStatus``) is where the session's writes have left the run:
    ``"in_progress"`` while the model has yet to answer (the user message, or tool outputs
    it has not answered yet); ``"completed"`` once a write ends with an assistant message;
    ``"interrupted"`` when a write leaves a tool call without its output (the Runner stopped
    for an approval; resuming continues the run); ``"failed"`` when a new user message
    arrived below it while it was in progress, so its Runner call ended without an answer
    (it raised: an error, a tripped guardrail, too many turns); ``"compacted"`` (above), which
    no later write changes. None for compaction runs and for runs stored before turnstore
    wrote it.
    """

    id: int
    session_id: str
    parent_id: int | None
    depth: int
    user_message: str | None
    assistant_message: str | None
    agent_name: str | None
    model: str | None
    status: str | None
    usage: Usage
    item_count: int
    created_at: datetime
    updated_at: datetime
    kind: str | None = None
    prior_run_id: int | None = None
    compacted_by: int | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call paired with its output (hosted tools: one item that is both)."""

    id: int
    session_id: str
    run_id: int
    call_id: str | None
    tool_name: str | None
    kind: str | None
    arguments: str | None
    output: str | None
    status: str | None
    error: str | None
    created_at: datetime
    completed_at: datetime | None
    duration_ms: float | None
    # When the tool began to run, as reported by ``session.hooks`` (None without them).
    started_at: datetime | None = None

    @property
    def failed(self) -> bool:
        """The call failed: status failed/incomplete, or an error was recorded."""
        return call_failed(self.status, self.error)


@dataclass(frozen=True, slots=True)
class Branch:
    """A path from the root to a leaf run.

    ``fork_run_id`` is the branch's stable handle: its first run that is on no older branch
    (the first branch's: its root), which stays as the branch grows while ``leaf_run_id``
    moves. ``forks_from`` is the run it forks from (the fork run's parent; None for a branch
    that starts at a root), ``origin`` how it was made (None for the first branch), ``name``
    the name given with ``Store.name_branch``. ``message_count`` is the items of its whole
    path (the runs a compaction replaced and the compaction's own included), ``user_turns``
    the runs of its path that hold a user message (AdvancedSQLiteSession's ``list_branches``
    counts).
    """

    leaf_run_id: int
    depth: int
    last_user_message: str | None
    active: bool
    created_at: datetime
    fork_run_id: int
    forks_from: int | None
    origin: BranchOrigin | None
    name: str | None
    message_count: int = 0
    user_turns: int = 0


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session's catalogue entry.

    ``unreadable_metadata`` is None, but for metadata stored that is not a JSON object within
    the limits of metadata (written by SQL by hand, or a ``SessionPatch`` stored unchecked by
    a version before issue 26): then it holds the stored text and ``metadata`` is ``{}``.
    ``update_session(metadata=...)`` replaces it.
    """

    session_id: str
    user_id: str | None
    title: str | None
    head_run_id: int | None
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    unreadable_metadata: str | None = None


@dataclass(frozen=True, slots=True)
class SessionPatch:
    """Catalogue fields to set on a session (``Store.patch_session``, ``add_items(info=...)``);
    None leaves a field as it is.

    Checked as the keyword arguments of ``update_session`` are (``validate.patch_record``):
    ``user_id`` at most 1,024 bytes, text without NUL or lone surrogates; ``metadata`` the JSON
    text of an object, within the limits of metadata, stored as ``update_session`` would
    store that object.
    """

    user_id: str | None = None
    title: str | None = None
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    """One model call seen by ``session.hooks``, written with ``add_items(telemetry=...)``.

    Times are datetimes (naive ones are UTC); ``latency_ms`` a finite number of milliseconds
    from 0 (checked by ``validate.telemetry_record``).
    """

    agent_name: str | None
    model: str | None
    response_id: str | None
    request_id: str | None
    usage: Usage
    started_at: datetime | None
    completed_at: datetime
    latency_ms: float | None


@dataclass(frozen=True, slots=True)
class ToolTiming:
    """When one tool call (by the model's ``call_id``) ran, as seen by ``session.hooks``.

    Times are datetimes (naive ones are UTC); ``duration_ms`` a finite number of milliseconds
    from 0.
    """

    call_id: str
    started_at: datetime
    completed_at: datetime
    duration_ms: float


@dataclass(slots=True)
class Telemetry:
    """What ``session.hooks`` recorded since the session last wrote: lists of
    ``ResponseRecord`` and ``ToolTiming``."""

    responses: list[ResponseRecord] = field(default_factory=list)
    tools: list[ToolTiming] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.responses or self.tools)


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run to add with ``Store.add_runs`` (bulk writes, such as imports).

    ``parent`` is the index of an earlier ``NewRun`` of the same call; ``parent_id`` a stored
    run; with neither the run is a root. Items that start with a user message make a child of
    the parent; other items join (extend) the parent run itself. ``usage`` becomes the run's
    token columns; ``created_at`` (default: now) dates the run and its items.
    """

    items: Sequence[Any]
    parent_id: int | None = None
    parent: int | None = None
    usage: Usage | None = None
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class HistoryTail:
    """The newest items of a conversation as the model sees them (``Store.history_tail``).

    ``items`` are oldest first; ``complete`` says that no older item precedes them. ``rows``
    identify the stored items, so that ``Store.compact`` can refuse when the history changed.
    """

    items: list[Any]
    complete: bool
    rows: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True, slots=True)
class Fork:
    """Where a run stands among its siblings (the runs that share its parent)."""

    index: int  # 1-based, in creation order
    count: int
    previous_id: int | None
    next_id: int | None


@dataclass(frozen=True, slots=True)
class PathView:
    """A window of consecutive runs on one branch (the path root → ``leaf_run_id``).

    ``runs`` is root-first; ``forks`` holds every run of the window that has siblings;
    ``tool_calls`` each run's calls in order. Runs outside the window are above
    ``runs[0].depth`` (``has_earlier``) or below ``runs[-1].depth`` (``has_later``).
    """

    session_id: str
    leaf_run_id: int | None
    leaf_depth: int
    runs: list[Run]
    forks: dict[int, Fork]
    tool_calls: dict[int, list[ToolCall]]

    @property
    def has_earlier(self) -> bool:
        """Runs of the branch come before the window."""
        return bool(self.runs) and self.runs[0].depth > 0

    @property
    def has_later(self) -> bool:
        """Runs of the branch come after the window."""
        return bool(self.runs) and self.runs[-1].depth < self.leaf_depth


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What a session holds, for a catalogue listing: its runs on every branch, its branches
    (leaves), their total tokens, the runs that failed (``Run.status``), the tool calls
    that failed (``ToolCall.failed``) and all its tool calls."""

    runs: int = 0
    branches: int = 0
    total_tokens: int = 0
    failed_runs: int = 0
    failed_tool_calls: int = 0
    tool_calls: int = 0


# ---------------------------------------------------------------------------------------------
# Query and analytics results (``Store.sessions``, ``tool_stats``, ``usage``, ``search``, …)


class _FirstPage(Enum):
    FIRST = 0


FIRST_PAGE = _FirstPage.FIRST
"""``Store.sessions``'s ``after`` default: the first page of the catalogue."""

PageCursor = str | _FirstPage
"""What ``Store.sessions`` takes as ``after``: a page's ``next_cursor``, or ``FIRST_PAGE``."""


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of ``Store.sessions``: the sessions, and the cursor of the next page.

    Iterate it like a list; pass ``next_cursor`` as ``after=`` for the next page. On the last
    page ``next_cursor`` is None and ``after=None`` is refused, so a loop that
    keeps passing it on cannot start over at the first page::

        page = await store.sessions()
        while True:
            ...  # use page
            if page.next_cursor is None:
                break
            page = await store.sessions(after=page.next_cursor)

    ``Store.iter_sessions`` is that loop.
    """

    sessions: list[SessionInfo]
    next_cursor: str | None

    def __iter__(self) -> Iterator[SessionInfo]:
        return iter(self.sessions)

    def __len__(self) -> int:
        return len(self.sessions)

    def __getitem__(self, index: int) -> SessionInfo:
        return self.sessions[index]


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One model call of a run, as recorded by ``session.hooks``.

    A time or latency is None when unknown: not recorded, or stored as a value that is no time
    or number (by SQL by hand, or a record stored unchecked before issue 26).
    """

    id: int
    session_id: str
    run_id: int
    agent_name: str | None
    model: str | None
    response_id: str | None
    request_id: str | None
    usage: Usage
    started_at: datetime | None
    completed_at: datetime | None
    latency_ms: float | None


@dataclass(frozen=True, slots=True)
class TraceSpan:
    """One span of the Agents SDK's trace of a run, as ``turnstore.tracing`` stored it.

    ``kind`` is the SDK's span type (``agent``, ``task``, ``turn``, ``generation``,
    ``response``, ``function``, ``handoff``, ``guardrail``, ``mcp_tools``, ``custom``, …);
    ``name`` what it is about (the agent, the tool, the model, ``from -> to`` for a handoff,
    the guardrail); ``error`` the error's text (the exception's message where the SDK gives
    it); ``data`` the span's own fields (see docs/debugging.md). Times are UTC.
    """

    id: int
    session_id: str
    run_id: int
    trace_id: str
    span_id: str
    parent_span_id: str | None
    kind: str
    name: str | None
    started_at: datetime | None
    ended_at: datetime | None
    duration_ms: float | None
    error: str | None
    data: dict[str, Any]

    @property
    def failed(self) -> bool:
        """The span ended with an error."""
        return self.error is not None


@dataclass(frozen=True, slots=True)
class ToolStats:
    """Per-tool statistics. ``failed`` counts the calls that failed (``ToolCall.failed``: the
    one word turnstore uses for them). Durations (ms, see ``turnstore.domain.units``) only count
    calls whose duration is known."""

    tool_name: str | None
    calls: int
    failed: int
    timed_calls: int
    mean_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    max_ms: float | None

    @property
    def failure_rate(self) -> float:
        """``failed / calls``."""
        return self.failed / self.calls if self.calls else 0.0

    @property
    def errors(self) -> int:
        """``failed``, by the name it had before turnstore called failed calls one thing."""
        return self.failed

    @property
    def error_rate(self) -> float:
        """``failure_rate``, by the name it had before."""
        return self.failure_rate


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Token usage summed over one group (a session, user, model, agent, UTC day or run: its
    id as text), and what it cost in USD.

    ``cost`` is None when unknown: some of the group's tokens are of a model the price table
    does not price on their day (``unpriced`` names those models; None: runs with no model
    recorded), or the usage was read without prices. See ``turnstore.domain.prices``.
    ``annotation``: with ``Store.usage(annotation=NAME)``, the annotations NAME of the
    group's runs (a count of 0 where there are none); else None.
    """

    key: str | None
    runs: int
    usage: Usage
    cost: float | None = None
    unpriced: tuple[str | None, ...] = ()
    annotation: AnnotationStats | None = None


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One item that matches a search.

    ``rank`` is the relevance (higher is better; its scale depends on the backend; 0 when
    searching with ``order="recent"``) and
    ``exact`` says the item holds the query's words as one exact phrase: exact matches come
    first. ``snippet`` is a short excerpt of the item's text, as stored; ``matches`` are the
    ``(start, end)`` offsets of the matched words in it (``snippet[start:end]``), in order.
    ``pieces()`` cuts the snippet at them for display. ``tool_error``: the match is in the
    error of the item's tool call (the item is its output, or its call where it has none),
    and the snippet is of that error.
    """

    session_id: str
    run_id: int
    item_id: int
    type: str
    role: str | None
    snippet: str
    rank: float
    exact: bool
    created_at: datetime
    matches: tuple[tuple[int, int], ...] = ()
    tool_error: bool = False

    def pieces(self) -> list[tuple[str, bool]]:
        """The snippet as consecutive ``(text, is_match)`` pieces, empty ones left out."""
        pieces: list[tuple[str, bool]] = []
        position = 0
        for start, end in self.matches:
            if start > position:
                pieces.append((self.snippet[position:start], False))
            if end > start:
                pieces.append((self.snippet[start:end], True))
            position = max(position, end)
        if position < len(self.snippet):
            pieces.append((self.snippet[position:], False))
        return pieces


@dataclass(frozen=True, slots=True)
class SearchCount:
    """How many items match a search: ``matches`` when ``exact``, else more than that (a
    count stops at a bound, so that it costs what a page of results does). ``str()`` says
    it: ``"1,234"`` or ``"more than 1,000"``."""

    matches: int
    exact: bool

    def __str__(self) -> str:
        return f"{self.matches:,}" if self.exact else f"more than {self.matches:,}"


@dataclass(frozen=True, slots=True)
class Annotation:
    """A judgement of a run (or of one tool call of it): feedback, a score, a label, a note.

    ``name`` says what is judged (``"thumbs"``, ``"correctness"``, …); ``value`` is a finite
    number (thumbs: 1 up, 0 down), ``label`` a short text (``"hallucinated"``), ``comment``
    free text; any of them may be None. ``updated_at`` is set by ``Store.update_annotation``.
    """

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
    created_at: datetime
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AnnotationStats:
    """The annotations of one name in one group (an agent, model, tool, UTC day, branch,
    session or user; in a ``UsageRow``, the row's group): how many, how many runs they judge,
    and their values' mean, minimum and maximum (None: no annotation of the group has a
    value)."""

    key: str | None
    name: str
    count: int
    scored: int
    runs: int
    mean: float | None
    minimum: float | None
    maximum: float | None


@dataclass(frozen=True, slots=True)
class DatasetRecord:
    """One run as a dataset holds it (``Store.dataset``): ``input``, the items the model had
    (the model's view up to and including the run's user message, exactly as stored),
    ``output``, the items it gave (the rest of the run), with the run, its session's user, its
    tool calls and its annotations."""

    run: Run
    user_id: str | None
    input: list[Any]
    output: list[Any]
    tool_calls: list[ToolCall]
    annotations: list[Annotation]

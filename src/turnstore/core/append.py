"""Writing: appends and grafts, with telemetry, the search backlog and catalogue fields.

An append is planned first (``_plan``, pure: the tree, pairing and usage rules), then written
(``apply_append``); ``history`` writes through the same path when it pops or forks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidOperationError
from ..items import ItemInfo
from ..model import (
    COMPLETED,
    FAILED,
    FAILED_STATUSES,
    IN_PROGRESS,
    INTERRUPTED,
    RunStatus,
    SessionInfo,
    Usage,
)
from ..validate import MAX_INT, MAX_REQUESTS
from . import statements as S
from .codec import PreparedItem
from .lock import Head, lock_session, set_head
from .ops import Capability, Op, supports
from .reads import find_run, session_info
from .rows import usage_params

__all__ = [
    "INDEX_BATCH",
    "GraftRun",
    "ResponseRecord",
    "SessionPatch",
    "Telemetry",
    "ToolTiming",
    "append",
    "apply_append",
    "copy_backlog",
    "graft",
    "index_backlog",
    "insert_item",
    "parent_head",
    "reports_error",
    "update_session",
]


# ---------------------------------------------------------------------------------------------
# Planning an append: pure, so that both backends share the rules.


@dataclass(slots=True, eq=False)
class _PlanRun:
    """A run an append touches: the existing head, or one it creates."""

    id: int | None
    parent: _PlanRun | None
    parent_id: int | None
    depth: int
    item_count: int
    user_message: str | None = None
    assistant_message: str | None = None
    assistant_changed: bool = False
    newest_item_id: int | None = None  # the id of the last item this append wrote to it
    status: RunStatus | None = None  # None: the append leaves it as it is

    @property
    def resolved_parent_id(self) -> int | None:
        return self.parent.id if self.parent is not None else self.parent_id


@dataclass(slots=True, eq=False)
class _PlanItem:
    run: _PlanRun
    position: int
    prepared: PreparedItem
    id: int | None = None


@dataclass(slots=True, eq=False)
class _PlanCall:
    run: _PlanRun
    call_item: _PlanItem | None
    info: ItemInfo
    output_item: _PlanItem | None = None
    output: str | None = None
    status: str | None = None
    error: str | None = None
    completed: bool = False


def _answers(info: ItemInfo) -> bool:
    """The item is the model's answer: an assistant message (a run that ends with one is
    ``completed``; see ``model.RunStatus``)."""
    return info.kind == "message" and info.role == "assistant"


def _call_status(info: ItemInfo) -> str:
    # A call item's own status says the model finished writing it, not that the tool ran.
    return info.status if info.status in FAILED_STATUSES else "pending"


def _pairing_key(info: ItemInfo) -> str:
    # Server-run tool searches carry no call_id: the SDK pairs the output with the call just
    # before it of the same tool, so within a batch that is what they pair with here.
    return info.call_id if info.call_id is not None else f"\0{info.tool_kind}"


# Outputs that report a failure in words rather than a status: what openai-agents writes when
# a function tool raises (``default_tool_error_function``) or times out
# (``default_tool_timeout_error_message``). Releases before 0.23 add the exception's text
# (" Error: ...") and word bad JSON arguments apart. A custom ``failure_error_function`` is
# not recognised; its calls count as completed.
_ERROR_OUTPUT = re.compile(
    r"An error occurred while running the tool\. Please try again\.(?: Error: .*)?"
    r"|An error occurred while parsing tool arguments\. Please try again with valid JSON\."
    r" Error: .*"
    r"|Tool '.*' timed out after [0-9.e+-]+ seconds\.",
    re.DOTALL,
)


def reports_error(output: str | None) -> bool:
    """The tool output is one of the SDK's error messages (see ``_ERROR_OUTPUT``)."""
    return output is not None and _ERROR_OUTPUT.fullmatch(output) is not None


def _output_error(info: ItemInfo) -> str | None:
    if info.error is not None:
        return info.error
    return info.output if reports_error(info.output) else None


def _output_status(info: ItemInfo) -> str:
    if info.status is not None and info.status not in ("in_progress", "searching"):
        return "failed" if info.status == "completed" and _output_error(info) else info.status
    return "failed" if _output_error(info) else "completed"


def _hosted_status(info: ItemInfo) -> str:
    # An MCP call that reports an error failed, whatever status the item carries.
    if info.error is not None and info.status not in FAILED_STATUSES:
        return "failed"
    return info.status or "completed"


@dataclass(slots=True, eq=False)
class _Plan:
    runs: list[_PlanRun]
    items: list[_PlanItem]
    calls: list[_PlanCall]
    updates: list[tuple[int, _PlanCall]]
    last: _PlanRun  # the run the batch ends in
    owner: _PlanRun | None  # the writer's own run, when it is not the head (see ``append``)
    credited: _PlanRun  # the run the batch's usage counts for
    below_head: bool  # the batch starts with a user message: a new run below the head


def _plan(
    head: Head,
    batch: Sequence[PreparedItem],
    open_calls: Mapping[str, int],
    owner_id: int | None = None,
) -> _Plan:
    runs: list[_PlanRun] = []
    items: list[_PlanItem] = []
    calls: list[_PlanCall] = []
    updates: list[tuple[int, _PlanCall]] = []
    pending: dict[str, _PlanCall] = {}
    current: _PlanRun | None = None
    anchor: _PlanRun | None = None  # the run new runs hang below when there is no current
    # Items before the batch's first user message continue the writer's own run: their answer
    # and tool calls count for it, wherever the items themselves land.
    owner = _PlanRun(owner_id, None, None, 0, 0) if owner_id not in (None, head.id) else None
    credited: _PlanRun | None = owner
    if head.id is not None:
        anchor = _PlanRun(head.id, None, head.parent_id, head.depth, head.item_count)
        # A run that other branches share is never changed: what would join it starts a new
        # run below it instead (a sibling of its children, with no user message).
        if not head.has_children:
            current = anchor
            runs.append(current)
    for prepared in batch:
        info = prepared.info
        if current is None or info.starts_run:
            if info.starts_run and credited is not None and credited.status == IN_PROGRESS:
                credited.status = FAILED  # a new question before its answer
            parent = current if current is not None else anchor
            current = _PlanRun(
                None,
                parent,
                None,
                parent.depth + 1 if parent is not None else 0,
                0,
                user_message=info.text if info.starts_run else None,
            )
            runs.append(current)
        if info.starts_run or credited is None:
            credited = current
        # Where this item leaves the run (model.RunStatus); calls left unanswered: below.
        credited.status = COMPLETED if _answers(info) else IN_PROGRESS
        item = _PlanItem(current, current.item_count, prepared)
        current.item_count += 1
        items.append(item)
        kind = info.kind
        if kind == "message":
            if info.role == "assistant" and info.text is not None:
                credited.assistant_message = info.text
                credited.assistant_changed = True
        elif kind == "tool_call":
            call = _PlanCall(credited, item, info, status=_call_status(info))
            calls.append(call)
            pending[_pairing_key(info)] = call
        elif kind == "hosted_tool":
            calls.append(
                _PlanCall(
                    credited,
                    item,
                    info,
                    output_item=item,
                    output=info.output,
                    status=_hosted_status(info),
                    error=info.error,
                    completed=info.status not in ("in_progress", "searching", "generating"),
                )
            )
        elif kind == "tool_output":
            paired = pending.pop(_pairing_key(info), None)
            if paired is not None:
                call = paired
            else:
                existing = open_calls.get(info.call_id) if info.call_id is not None else None
                # An output whose call is unknown still gets a row, so that it can be queried.
                call = _PlanCall(credited, None, info)
                if existing is not None:
                    updates.append((existing, call))
                else:
                    calls.append(call)
            call.output_item = item
            call.output = info.output
            call.status = _output_status(info)
            call.error = _output_error(info)
            call.completed = True
    assert current is not None
    assert credited is not None
    for call in pending.values():  # a call the batch leaves unanswered: awaiting approval
        call.run.status = INTERRUPTED
    below_head = bool(batch) and batch[0].info.starts_run
    return _Plan(runs, items, calls, updates, current, owner, credited, below_head)


def apply_append(
    session_id: str,
    head: Head,
    batch: Sequence[PreparedItem],
    open_calls: Mapping[str, int],
    now: Any,
    usage: Usage | None,
) -> Op[int]:
    """Write ``batch`` after ``head``; return the id of the run it ends in."""
    plan = yield from _apply_append_run(session_id, head, batch, open_calls, now, usage)
    assert plan.last.id is not None
    return plan.last.id


def _apply_append_run(
    session_id: str,
    head: Head,
    batch: Sequence[PreparedItem],
    open_calls: Mapping[str, int],
    now: Any,
    usage: Usage | None,
    *,
    owner_id: int | None = None,
    add_usage: bool = False,
) -> Op[_Plan]:
    """``apply_append``, returning the plan with its run ids filled in.

    ``usage`` replaces the tokens of the run the batch ends in, or with ``add_usage`` is
    added to those of the run it counts for (``_Plan.credited``).
    """
    plan = _plan(head, batch, open_calls, owner_id)
    runs, items, calls, updates, last = plan.runs, plan.items, plan.calls, plan.updates, plan.last
    sid = session_id
    for run in runs:
        if run.id is None:
            run.id = yield from S.INSERT_RUN(
                {
                    "sid": sid,
                    "parent_id": run.resolved_parent_id,
                    "depth": run.depth,
                    "user_message": run.user_message,
                    "assistant_message": run.assistant_message,
                    "item_count": run.item_count,
                    "status": run.status,
                    "now": now,
                }
            )
        elif run.item_count != head.item_count:
            # Only the head run can exist already; one that gains nothing (a new run starts
            # below it: a fork) is left untouched, since other branches share it.
            yield from S.UPDATE_RUN_APPEND(
                {
                    "sid": sid,
                    "id": run.id,
                    "item_count": run.item_count,
                    "assistant_message": run.assistant_message,
                    "assistant_changed": run.assistant_changed,
                    "status": run.status,
                    "now": now,
                }
            )
    for item in items:
        assert item.run.id is not None
        item.id = item.run.newest_item_id = yield from insert_item(
            sid, item.run.id, item.position, item.prepared, now
        )
    for call in calls:
        info = call.info
        yield from S.INSERT_TOOL_CALL(
            {
                "sid": sid,
                "run_id": call.run.id,
                "call_id": info.call_id,
                "tool_name": info.name,
                "kind": info.tool_kind,
                "arguments": info.arguments,
                "output": call.output,
                "status": call.status,
                "error": call.error,
                "call_item_id": call.call_item.id if call.call_item else None,
                "output_item_id": call.output_item.id if call.output_item else None,
                "now": now,
                "completed_at": now if call.completed else None,
            }
        )
    for call_row_id, call in updates:
        yield from S.COMPLETE_TOOL_CALL(
            {
                "sid": sid,
                "id": call_row_id,
                "output": call.output,
                "status": call.status,
                "error": call.error,
                "output_item_id": call.output_item.id if call.output_item else None,
                "now": now,
            }
        )
    owner = plan.owner
    if owner is not None and (owner.assistant_changed or owner.status is not None):
        yield from S.SET_RUN_ANSWER(
            {
                "sid": sid,
                "id": owner.id,
                "assistant_message": owner.assistant_message,
                "assistant_changed": owner.assistant_changed,
                "status": owner.status,
                "now": now,
            }
        )
    if usage is not None:
        target = plan.credited.id if add_usage else last.id
        yield from _record_usage(sid, target, usage, now, add=add_usage)
    return plan


def _record_usage(sid: str, run_id: Any, usage: Usage, now: Any, *, add: bool) -> Op[None]:
    params = {"sid": sid, "id": run_id, "now": now, **usage_params(usage)}
    if add:
        yield from S.ADD_RUN_USAGE({**params, "max": MAX_INT, "max_requests": MAX_REQUESTS})
    else:
        yield from S.SET_RUN_USAGE(params)


def insert_item(
    session_id: str, run_id: int, position: int, prepared: PreparedItem, now: Any
) -> Op[int]:
    """Store one item at ``position`` of a run; return its id."""
    info = prepared.info
    return (
        yield from S.INSERT_ITEM(
            {
                "sid": session_id,
                "run_id": run_id,
                "position": position,
                "type": info.type,
                "role": info.role,
                "call_id": info.call_id,
                "name": info.name,
                "text": info.text,
                "data": prepared.data,
                "now": now,
            }
        )
    )


def _title(batch: Sequence[PreparedItem]) -> str | None:
    for prepared in batch:
        if prepared.info.starts_run and prepared.info.text:
            return " ".join(prepared.info.text.split())[:100]
    return None


# ---------------------------------------------------------------------------------------------
# Writing: appends and grafts, with what rides on them (telemetry, the search backlog, the
# session's catalogue fields)


def parent_head(session_id: str, parent_id: int | None) -> Op[Head]:
    """The head that an append below ``parent_id`` (None: a root) starts from."""
    if parent_id is None:
        return Head(None)
    parent = yield from find_run(session_id, parent_id)
    child = yield from S.FIRST_CHILD({"sid": session_id, "id": parent.id})
    return Head(parent.id, parent.depth, parent.item_count, parent.parent_id, child is not None)


def append(
    session_id: str,
    batch: Sequence[PreparedItem],
    now: Any,
    usage: Usage | None = None,
    *,
    info: SessionPatch | None = None,
    telemetry: Telemetry | None = None,
    owner: int | None = None,
) -> Op[int | None]:
    """Add a batch: user messages start runs (children of the head), the rest join the head.

    ``usage`` is added to the tokens of the run the batch counts for: the run its first user
    message starts, else ``owner`` (the run of the Runner call writing it, when that run is
    still in the session), else the head. The items before the first user message count for
    that run too (its answer and tool calls), even when another writer has moved the head
    since: the items themselves join the head, in the order they were written. Returns the
    id of the run the batch counted for (None: nothing was written).

    ``info`` sets the session's catalogue fields in the same transaction; ``telemetry`` (what
    ``session.hooks`` saw since the last write) lands on the run that was the head before the
    batch: the model's output joins that run, and a new user message follows its run.
    """
    head = yield from lock_session(
        session_id, now, _title(batch), create=bool(batch) or info is not None
    )
    if info is not None:
        yield from _patch_session(session_id, info, now)
    if owner is not None and owner != head.id:
        row = yield from S.SESSION_RUN({"sid": session_id, "id": owner})
        owner = owner if row is not None else None  # deleted since: the head stands in
    if not batch:  # usage or telemetry alone
        if head.id is None:
            return None  # no run for them to land on
        target = owner if owner is not None else head.id
        if usage is not None:
            yield from _record_usage(session_id, target, usage, now, add=True)
        if telemetry:
            yield from _record_telemetry(session_id, head.id, telemetry)
        return target
    open_calls = yield from _open_calls(session_id, batch)
    plan = yield from _apply_append_run(
        session_id, head, batch, open_calls, now, usage, owner_id=owner, add_usage=True
    )
    if plan.below_head and head.id is not None:
        # A new question below a run still under way: its Runner call ended without an answer.
        yield from S.FAIL_RUN({"sid": session_id, "id": head.id, "now": now})
    last = plan.last
    assert last.id is not None
    if last.id != head.id:  # ensure_session already stamped updated_at
        yield from set_head(session_id, last.id, now)
    if telemetry:
        target = head.id if head.id is not None else last.id
        yield from _record_telemetry(session_id, target, telemetry)
    newest = last.newest_item_id
    if (
        head.indexed_through is not None
        and newest is not None
        and newest - head.indexed_through >= INDEX_BATCH
    ):
        yield from _feed_index()  # the lock's watermark already says items wait
    return plan.credited.id


# How many new items wait before a backend that indexes for search in batches (SQLite's FTS5:
# each writing transaction costs it as much as the rest of an SDK turn) feeds them in.
INDEX_BATCH = 64


def index_backlog() -> Op[None]:
    """Feed the search index every item it lacks.

    Searches call it first, so they see every committed item; appends call it once
    ``INDEX_BATCH`` items wait. A backend whose index keeps up on its own has no statements
    for it.
    """
    if not (yield from supports(Capability.SEARCH_BACKLOG)):
        return
    # A search runs in a read transaction: only a backlog makes it write.
    if (yield from S.INDEX_PENDING()):
        yield from _feed_index()


def copy_backlog() -> Op[bool]:
    """For a store that must not write: copy the items the search index lacks into a private
    index of the connection's own; True when there are any (search them too).

    Ranks in that small index are only comparable to the main index's roughly, and the copy
    is remade for each search, which costs as much as feeding the index would.
    """
    if not (yield from supports(Capability.SEARCH_BACKLOG)):
        return False
    if not (yield from S.INDEX_PENDING()):
        return False
    yield from S.CREATE_BACKLOG_COPY()
    yield from S.CLEAR_BACKLOG_COPY()
    yield from S.COPY_BACKLOG()
    return True


def _feed_index() -> Op[None]:
    yield from S.INDEX_BACKLOG()
    yield from S.MARK_INDEXED()


@dataclass(frozen=True, slots=True)
class SessionPatch:
    """Catalogue fields to set on a session; None leaves a field as it is.

    ``metadata`` is JSON text (a JSON object), stored as given.
    """

    user_id: str | None = None
    title: str | None = None
    metadata: str | None = None


def _patch_session(session_id: str, patch: SessionPatch, now: Any) -> Op[None]:
    yield from S.UPDATE_SESSION_INFO(
        {
            "sid": session_id,
            "user_id": patch.user_id,
            "title": patch.title,
            "metadata": patch.metadata,
            "now": now,
        }
    )


def update_session(session_id: str, patch: SessionPatch, now: Any) -> Op[SessionInfo]:
    """Set catalogue fields of a session, creating it (with no runs) if it is new."""
    yield from S.ENSURE_SESSION({"sid": session_id, "now": now, "title": None})
    yield from _patch_session(session_id, patch, now)
    info = yield from session_info(session_id)
    assert info is not None
    return info


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    """One model call seen by ``session.hooks``; times are backend timestamps."""

    agent_name: str | None
    model: str | None
    response_id: str | None
    request_id: str | None
    usage: Usage
    started_at: Any
    completed_at: Any
    latency_ms: float | None


@dataclass(frozen=True, slots=True)
class ToolTiming:
    """When one tool call (by the model's ``call_id``) ran, as seen by ``session.hooks``."""

    call_id: str
    started_at: Any
    completed_at: Any
    duration_ms: float


@dataclass(slots=True)
class Telemetry:
    """What ``session.hooks`` recorded since the session last wrote."""

    responses: list[ResponseRecord] = field(default_factory=list)
    tools: list[ToolTiming] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.responses or self.tools)


def _record_telemetry(session_id: str, run_id: int, telemetry: Telemetry) -> Op[None]:
    for record in telemetry.responses:
        yield from S.INSERT_MODEL_RESPONSE(
            {
                "sid": session_id,
                "run_id": run_id,
                "agent_name": record.agent_name,
                "model": record.model,
                "response_id": record.response_id,
                "request_id": record.request_id,
                "started_at": record.started_at,
                "completed_at": record.completed_at,
                "latency_ms": record.latency_ms,
                **usage_params(record.usage),
            }
        )
    if telemetry.responses:
        last = telemetry.responses[-1]
        # The run is attributed to the agent (and model) that answered last.
        yield from S.SET_RUN_AGENT(
            {
                "sid": session_id,
                "id": run_id,
                "agent_name": last.agent_name,
                "model": last.model,
            }
        )
    for timing in telemetry.tools:
        # The newest call with that call_id in the session: call ids repeat across runs with
        # some providers, and the one that just ran is the newest.
        yield from S.SET_TOOL_TIMING(
            {
                "sid": session_id,
                "call_id": timing.call_id,
                "started_at": timing.started_at,
                "completed_at": timing.completed_at,
                "duration_ms": timing.duration_ms,
            }
        )


def _open_calls(session_id: str, batch: Sequence[PreparedItem]) -> Op[dict[str, int]]:
    """The unanswered stored calls that outputs in ``batch`` answer: call_id -> row id."""
    # Outputs whose call is in an earlier batch (an interrupted run resumed) pair with it.
    calls_here = {p.info.call_id for p in batch if p.info.kind == "tool_call"}
    call_ids = sorted(
        {
            p.info.call_id
            for p in batch
            if p.info.kind == "tool_output" and p.info.call_id and p.info.call_id not in calls_here
        }
    )
    if not call_ids:
        return {}
    rows = yield from S.OPEN_TOOL_CALLS({"sid": session_id, "call_ids": json.dumps(call_ids)})
    return {row.call_id: row.id for row in rows}


@dataclass(frozen=True, slots=True)
class GraftRun:
    """One run to add by ``graft``: its items, where it hangs, its usage and time.

    ``parent`` (the index of an earlier ``GraftRun`` of the same call) wins over
    ``parent_id`` (a stored run); neither means a root. A leading user message starts a child
    of the parent; other items join the parent run itself (they extend it).
    """

    batch: Sequence[PreparedItem]
    parent_id: int | None = None
    parent: int | None = None
    usage: Usage | None = None
    now: Any = None


def graft(session_id: str, runs: Sequence[GraftRun], head: int | None, now: Any) -> Op[list[int]]:
    """Add many runs anywhere in the tree in one transaction; return each one's run id.

    The bulk path of imports: one lock and one head update for the whole call instead of one
    per batch. The head ends at ``runs[head]``, or stays where it was when ``head`` is None.
    """
    title = next((t for t in (_title(run.batch) for run in runs) if t is not None), None)
    original = yield from lock_session(session_id, now, title)
    ids: list[int] = []
    # The runs this call wrote, as they stand now: a child needs no query for its parent.
    written: dict[int, Head] = {}
    for index, run in enumerate(runs):
        if run.parent is not None and not 0 <= run.parent < index:
            raise InvalidOperationError(f"run {index} names a parent that does not precede it")
        parent_id = ids[run.parent] if run.parent is not None else run.parent_id
        parent = written.get(parent_id) if parent_id is not None else Head(None)
        if parent is None:
            parent = yield from parent_head(session_id, parent_id)
        open_calls = yield from _open_calls(session_id, run.batch)
        plan = yield from _apply_append_run(
            session_id,
            parent,
            run.batch,
            open_calls,
            now if run.now is None else run.now,
            run.usage,
        )
        last = plan.last
        assert last.id is not None
        written[last.id] = Head(last.id, last.depth, last.item_count, last.resolved_parent_id)
        ids.append(last.id)
    yield from index_backlog()
    # apply_append never moves the head: only this does, once.
    yield from set_head(session_id, ids[head] if head is not None else original.id, now)
    return ids

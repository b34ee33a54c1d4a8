"""Planning an append: which runs a batch starts or joins, how its calls pair with their
outputs, which run its usage counts for and what status each run ends with.

Pure (no statements), so that both backends share the rules and the tests can reach them
without a database; ``append`` writes what ``plan`` decides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..items import ItemInfo
from ..model import (
    COMPLETED,
    FAILED,
    FAILED_STATUSES,
    IN_PROGRESS,
    INTERRUPTED,
    REJECTED,
    TIMED_OUT,
    RunStatus,
)
from .codec import PreparedItem
from .lock import Head

__all__ = ["Plan", "output_status", "plan_append", "reports_error"]


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
    # The id of the last item this append wrote to it, where ids are read back (append.py).
    newest_item_id: int | None = None
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
_TIMEOUT_OUTPUT = r"Tool '.*' timed out after [0-9.e+-]+ seconds\."
_ERROR_OUTPUT = re.compile(
    r"An error occurred while running the tool\. Please try again\.(?: Error: .*)?"
    r"|An error occurred while parsing tool arguments\. Please try again with valid JSON\."
    r" Error: .*"
    r"|" + _TIMEOUT_OUTPUT,
    re.DOTALL,
)


def reports_error(output: str | None) -> bool:
    """The tool output is one of the SDK's error messages (see ``_ERROR_OUTPUT``)."""
    return output is not None and _ERROR_OUTPUT.fullmatch(output) is not None


# What openai-agents writes as the output of a call a human rejected (its default
# ``DEFAULT_APPROVAL_REJECTION_MESSAGE``; a custom message is known from the trace span).
_REJECTION = "Tool execution was not approved."
_TIMEOUT = re.compile(_TIMEOUT_OUTPUT, re.DOTALL)


def output_status(output: str | None) -> str | None:
    """The status a tool's output alone says (``model``'s tool call statuses): ``timed_out``,
    ``failed`` (an error message), ``rejected``; None when it says nothing."""
    if output is None:
        return None
    if _TIMEOUT.fullmatch(output):
        return TIMED_OUT
    if reports_error(output):
        return FAILED
    return REJECTED if output == _REJECTION else None


def _output_error(info: ItemInfo) -> str | None:
    if info.error is not None:
        return info.error
    return info.output if reports_error(info.output) else None


def _output_status(info: ItemInfo) -> str:
    if info.status is not None and info.status not in ("in_progress", "searching", "completed"):
        return info.status
    if info.error is not None:
        return FAILED
    return output_status(info.output) or COMPLETED


def _hosted_status(info: ItemInfo) -> str:
    # An MCP call that reports an error failed, whatever status the item carries.
    if info.error is not None and info.status not in FAILED_STATUSES:
        return "failed"
    return info.status or "completed"


@dataclass(slots=True, eq=False)
class Plan:
    runs: list[_PlanRun]
    items: list[_PlanItem]
    calls: list[_PlanCall]
    updates: list[tuple[int, _PlanCall]]
    last: _PlanRun  # the run the batch ends in
    owner: _PlanRun | None  # the writer's own run, when it is not the head (see ``append``)
    credited: _PlanRun  # the run the batch's usage counts for
    below_head: bool  # the batch starts with a user message: a new run below the head


def plan_append(
    head: Head,
    batch: Sequence[PreparedItem],
    open_calls: Mapping[str, int],
    owner_id: int | None = None,
) -> Plan:
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
                # Several user messages in one input (one Runner call): the model answers
                # them together, in the last one's run; the earlier ones need no answer of
                # their own. (A question in a later write below a run still in progress is
                # another matter: ``append`` marks that run failed.)
                credited.status = COMPLETED
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
        if call.status == "pending":  # not one the model left failed or incomplete
            call.run.status = INTERRUPTED
    below_head = bool(batch) and batch[0].info.starts_run
    return Plan(runs, items, calls, updates, current, owner, credited, below_head)

"""Planning an append: which runs a batch starts or joins, how its calls pair with their
outputs, which run its usage counts for and what status each run ends with.

Pure (no statements), so that both backends share the rules and the tests can reach them
without a database; ``append`` writes what ``plan`` decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..domain.items import ItemInfo
from ..domain.model import COMPLETED, IN_PROGRESS, INTERRUPTED, RunStatus
from ..domain.toolcalls import (
    HOSTED_UNDER_WAY,
    PENDING,
    call_item_status,
    hosted_status,
    output_call_status,
    output_error,
)
from ..errors import InvalidOperationError, StorageError
from .codec import PreparedItem
from .lock import Head

__all__ = ["Plan", "PlanItem", "plan_append"]


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

    @property
    def written_id(self) -> int:
        """The run's id, once ``append`` has written it (before any of its items)."""
        if self.id is None:
            raise StorageError("a run of the append was not written before its id was needed")
        return self.id


@dataclass(slots=True, eq=False)
class PlanItem:
    """An item of the batch, where the append puts it: ``position`` in ``run``."""

    run: _PlanRun
    position: int
    prepared: PreparedItem


@dataclass(slots=True, eq=False)
class _PlanCall:
    run: _PlanRun
    call_item: PlanItem | None
    info: ItemInfo
    output_item: PlanItem | None = None
    output: str | None = None
    status: str | None = None
    error: str | None = None
    completed: bool = False


def _answers(info: ItemInfo) -> bool:
    """The item is the model's answer: an assistant message (a run that ends with one is
    ``completed``; see ``model.RunStatus``)."""
    return info.kind == "message" and info.role == "assistant"


def _pairing_key(info: ItemInfo) -> str:
    # Server-run tool searches carry no call_id: the SDK pairs the output with the call just
    # before it of the same tool, so within a batch that is what they pair with here.
    return info.call_id if info.call_id is not None else f"\0{info.tool_kind}"


@dataclass(slots=True, eq=False)
class Plan:
    runs: list[_PlanRun]
    items: list[PlanItem]
    calls: list[_PlanCall]
    updates: list[tuple[int, _PlanCall]]
    last: _PlanRun  # the run the batch ends in
    owner: _PlanRun | None  # the writer's own run, when it is not the head (see ``append``)
    credited: _PlanRun  # the run the batch's usage counts for
    below_head: bool  # the batch starts with a user message: a new run below the head
    started: _PlanRun | None  # the first run the batch starts (a child of the head), if any


def plan_append(
    head: Head,
    batch: Sequence[PreparedItem],
    open_calls: Mapping[str, int],
    owner_id: int | None = None,
) -> Plan:
    runs: list[_PlanRun] = []
    items: list[PlanItem] = []
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
        starts_run = info.starts_run  # a property: asked once
        if current is None or starts_run:
            if starts_run and credited is not None and credited.status == IN_PROGRESS:
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
                user_message=info.text if starts_run else None,
            )
            runs.append(current)
        if starts_run or credited is None:
            credited = current
        # Where this item leaves the run (model.RunStatus); calls left unanswered: below.
        credited.status = COMPLETED if _answers(info) else IN_PROGRESS
        item = PlanItem(current, current.item_count, prepared)
        current.item_count += 1
        items.append(item)
        kind = info.kind
        if kind == "message":
            if info.role == "assistant" and info.text is not None:
                credited.assistant_message = info.text
                credited.assistant_changed = True
        elif kind == "tool_call":
            call = _PlanCall(credited, item, info, status=call_item_status(info.status))
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
                    status=hosted_status(info.status, info.error),
                    error=info.error,
                    completed=info.status not in HOSTED_UNDER_WAY,
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
            call.status = output_call_status(info.status, info.error, info.output)
            call.error = output_error(info.error, info.output)
            call.completed = True
    if current is None or credited is None:
        raise InvalidOperationError("an append needs at least one item")
    for call in pending.values():  # a call the batch leaves unanswered: awaiting approval
        if call.status == PENDING:  # not one the model left failed or incomplete
            call.run.status = INTERRUPTED
    below_head = bool(batch) and batch[0].info.starts_run
    started = next((run for run in runs if run.id is None), None)
    return Plan(runs, items, calls, updates, current, owner, credited, below_head, started)

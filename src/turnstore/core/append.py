"""Writing: appends and grafts, with what rides on them (telemetry, the search backlog, the
session's catalogue fields).

An append is planned first (``plan.plan_append``, pure: the tree, pairing and usage rules),
then written (``apply_append``); ``history`` writes through the same path when it pops or
forks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..domain.model import FAILED, IN_PROGRESS, SessionPatch, Telemetry, Usage
from ..domain.toolcalls import call_failed
from ..domain.turns import BranchRef
from ..domain.validate import MAX_INT, MAX_REQUESTS
from ..errors import InvalidOperationError
from . import append_sql as A
from . import results as R
from . import statements as S
from .branches import name_new_branch, name_run_branch
from .catalogue import patch_session
from .codec import PreparedItem
from .lock import ANY_HEAD, ExpectedHead, Head, Tally, count_rows, lock_session, set_head
from .ops import Op
from .plan import Plan, PlanItem, plan_append
from .reads import find_run
from .search_index import INDEX_BATCH, feed_index, index_backlog
from .tables import TOOL_CALL_FROM_ITEM, RunRow, tool_call_item_values, usage_params
from .telemetry import record_telemetry
from .turns import branch_end

__all__ = ["GraftRun", "append", "apply_append", "graft", "insert_item", "parent_head"]


def apply_append(
    session_id: str,
    head: Head,
    batch: Sequence[PreparedItem],
    open_calls: Mapping[str, int],
    now: Any,
    usage: Usage | None,
    tally: Tally,
) -> Op[int]:
    """Write ``batch`` after ``head``; return the id of the run it ends in (what it changed
    of the session's totals is added to ``tally``)."""
    plan = yield from _apply_append_run(session_id, head, batch, open_calls, now, usage, tally)
    return plan.last.written_id


def _apply_append_run(
    session_id: str,
    head: Head,
    batch: Sequence[PreparedItem],
    open_calls: Mapping[str, int],
    now: Any,
    usage: Usage | None,
    tally: Tally,
    *,
    owner_id: int | None = None,
    add_usage: bool = False,
) -> Op[Plan]:
    """``apply_append``, returning the plan with its run ids filled in.

    ``usage`` replaces the tokens of the run the batch ends in, or with ``add_usage`` is
    added to those of the run it counts for (``Plan.credited``).
    """
    plan = plan_append(head, batch, open_calls, owner_id)
    runs, items, calls, updates, last = plan.runs, plan.items, plan.calls, plan.updates, plan.last
    sid = session_id
    last_is_new = last.id is None
    tally.tool_calls += len(calls)
    # Failures recounted: a status written over the head's failed one, over the owner's (its
    # stored status is unknown here), an open call completed (what it was is unknown here);
    # below, a run's written failed over its stored one. New rows written failed are counted.
    tally.failures |= (
        bool(updates)
        or (plan.owner is not None and plan.owner.status is not None)
        or (head.status == FAILED and bool(runs) and runs[0].id is not None
            and runs[0].status is not None)
    )  # fmt: skip
    next_run_id = head.next_run_id  # had with the lock: its insert need not wait
    for run in runs:
        if run.id is None:
            tally.runs += 1
            tally.failed_runs += run.status == FAILED
            params = {
                "sid": sid,
                "parent_id": run.resolved_parent_id,
                "depth": run.depth,
                "user_message": run.user_message,
                "assistant_message": run.assistant_message,
                "item_count": run.item_count,
                "status": run.status,
                "now": now,
            }
            if next_run_id is None:
                run.id = yield A.INSERT_RUN(params)
            else:
                run.id, next_run_id = next_run_id, None
                yield A.STORE_RUN({**params, "id": run.id})
        elif run.item_count != head.item_count:
            tally.failures |= run.status == FAILED
            # Only the head run can exist already; one that gains nothing (a new run starts
            # below it: a fork) is left untouched, since other branches share it. Its status
            # (read with the lock) is assigned only when the append changes it.
            keeps_status = run.status is None or run.status == head.status
            yield (S.UPDATE_RUN_ITEMS if keeps_status else S.UPDATE_RUN_APPEND)(
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
    # A tool-call row finds its items by place (``core.append_sql``), so ids are read back
    # only where the search index is fed in batches (``append``'s newest id says when:
    # SQLite, whose ids cost nothing); PostgreSQL queues the inserts instead of a round trip
    # each.
    want_id = head.indexed_through is not None
    for item in items:
        item.run.newest_item_id = yield from insert_item(
            sid, item.run.written_id, item.position, item.prepared, now, want_id=want_id
        )
    for call in calls:
        info = call.info
        tally.failed_calls += call_failed(call.status, call.error)
        yield A.INSERT_TOOL_CALL(
            {
                **dict(zip(TOOL_CALL_FROM_ITEM, tool_call_item_values(info), strict=True)),
                "sid": sid,
                "run_id": call.run.id,
                "output": call.output,
                "status": call.status,
                "error": call.error,
                **_place("call_item", call.call_item),
                **_place("output_item", call.output_item),
                "now": now,
                "completed_at": now if call.completed else None,
            }
        )
    for call_row_id, call in updates:
        yield A.COMPLETE_TOOL_CALL(
            {
                "sid": sid,
                "id": call_row_id,
                "output": call.output,
                "status": call.status,
                "error": call.error,
                **_place("output_item", call.output_item),
                "now": now,
            }
        )
    owner = plan.owner
    if owner is not None and (owner.assistant_changed or owner.status is not None):
        yield S.SET_RUN_ANSWER(
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
        if add_usage or last_is_new:
            tally.tokens += usage.total_tokens
        else:  # a stored run's tokens replaced: what they were is not known here
            tally.recount = True
    return plan


def _record_usage(sid: str, run_id: Any, usage: Usage, now: Any, *, add: bool) -> Op[None]:
    params = {"sid": sid, "id": run_id, "now": now, **usage_params(usage)}
    if add:
        yield S.ADD_RUN_USAGE({**params, "max": MAX_INT, "max_requests": MAX_REQUESTS})
    else:
        yield S.SET_RUN_USAGE(params)


def _place(name: str, item: PlanItem | None) -> dict[str, Any]:
    """The parameters that find ``item`` by place (``append_sql.item_at(name)``)."""
    if item is None:
        return {f"{name}_run": None, f"{name}_position": None}
    return {f"{name}_run": item.run.id, f"{name}_position": item.position}


def insert_item(
    session_id: str,
    run_id: int,
    position: int,
    prepared: PreparedItem,
    now: Any,
    *,
    want_id: bool = True,
) -> Op[int | None]:
    """Store one item at ``position`` of a run; return its id (None unless ``want_id``: the
    insert then costs PostgreSQL no round trip of its own)."""
    info = prepared.info
    item_id: int | None = yield (S.INSERT_ITEM if want_id else S.STORE_ITEM)(
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
    return item_id


# The items that are a tool-call row each (an output pairs with a call, in the batch or open).
_CALL_ROWS = ("tool_call", "hosted_tool")


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
    child: int | None = yield S.FIRST_CHILD({"sid": session_id, "id": parent.id})
    return Head(
        parent.id,
        parent.depth,
        parent.item_count,
        parent.parent_id,
        child is not None,
        status=parent.status,
    )


def append(
    session_id: str,
    batch: Sequence[PreparedItem],
    now: Any,
    usage: Usage | None = None,
    *,
    info: SessionPatch | None = None,
    telemetry: Telemetry | None = None,
    owner: int | None = None,
    at: BranchRef | None = None,
    name: str | None = None,
    take: bool = False,
    name_below: ExpectedHead = ANY_HEAD,
) -> Op[int | None]:
    """Add a batch: user messages start runs (children of the head), the rest join the head.

    ``at`` (a branch name, or a run id) writes at that branch's end (that run) instead of
    the head, which moves only when it was there: a pinned writer's own course. A name in a
    session without runs names the branch the batch starts (a pinned writer's first write).

    ``name`` names the branch the batch is written on (``take``: taken from the branch that
    holds it), when it is written at ``name_below`` (ANY_HEAD: wherever it is): the branch
    its first new run starts, or continues; a name refused writes nothing.

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
    # What the batch says it adds before the head is read (its calls, its usage) is counted by
    # the statement that locks the session; the rest (runs, an output of a call not in the
    # batch, failures) by the one that moves the head, when there is any.
    known = Tally(tokens=usage.total_tokens if usage is not None and batch else 0)
    for prepared in batch:
        if prepared.info.kind in _CALL_ROWS:
            known.tool_calls += 1
    head = yield from lock_session(
        session_id,
        now,
        _title(batch),
        create=bool(batch) or info is not None,
        new_run=any(prepared.info.starts_run for prepared in batch),
        counted=known if batch else None,
    )
    move = True
    starts: str | None = None  # the name of the branch the session's first run starts
    if at is not None:
        # A pinned writer's branch (StructuredSession(branch=)): its end stands in for the
        # head, which moves only when it was there.
        end = yield from branch_end(session_id, at)
        if end is None and isinstance(at, str):
            starts = at
            if name is not None:
                raise InvalidOperationError(
                    f"session {session_id!r} has no runs yet: this batch starts branch {at!r}, "
                    f"named so, and cannot name it {name!r} too; nothing was written"
                )
        elif end != head.id:
            indexed = head.indexed_through
            head = yield from parent_head(session_id, end)
            head.indexed_through = indexed
            move = False
    if info is not None:
        yield from patch_session(session_id, info, now)
    if owner is not None and owner != head.id:
        row: RunRow | None = yield S.SESSION_RUN({"sid": session_id, "id": owner})
        owner = owner if row is not None else None  # deleted since: the head stands in
    if not batch:  # usage or telemetry alone
        if head.id is None:
            return None  # no run for them to land on
        target = owner if owner is not None else head.id
        if usage is not None:
            yield from _record_usage(session_id, target, usage, now, add=True)
            yield from count_rows(session_id, Tally(tokens=usage.total_tokens))
        if telemetry:
            yield from record_telemetry(session_id, head.id, telemetry)
        return target
    open_calls = yield from _open_calls(session_id, batch)
    tally = Tally(tool_calls=-known.tool_calls, tokens=-known.tokens)  # counted already
    plan = yield from _apply_append_run(
        session_id, head, batch, open_calls, now, usage, tally, owner_id=owner, add_usage=True
    )
    if plan.below_head and head.status == IN_PROGRESS:
        # A new question below a run still under way: its Runner call ended without an answer.
        yield S.FAIL_RUN({"sid": session_id, "id": head.id, "now": now})
        tally.failed_runs += 1  # in_progress, read with the lock
    last = plan.last
    last_id = last.written_id
    # ensure_session already stamped updated_at: the head moves only to a new run (which
    # changed the totals), and a batch that changed neither needs no statement more.
    if not move:
        yield from count_rows(session_id, tally)
    elif tally.changed:
        yield from set_head(session_id, last_id, now, tally)
    if starts is not None:  # the session's first run, a root: the batch's first run
        yield from name_new_branch(session_id, plan.runs[0].written_id, starts)
    elif name is not None and name_below in (ANY_HEAD, head.id):
        yield from _name_started(session_id, head, plan, name, take)
    if telemetry:
        target = head.id if head.id is not None else last_id
        yield from record_telemetry(session_id, target, telemetry)
    newest = last.newest_item_id
    if (
        head.indexed_through is not None
        and newest is not None
        and newest - head.indexed_through >= INDEX_BATCH
    ):
        yield from feed_index()  # the lock's watermark already says items wait
    return plan.credited.id


def _name_started(session_id: str, head: Head, plan: Plan, name: str, take: bool) -> Op[None]:
    """Name ``name`` the branch the batch is written on at ``head``."""
    if plan.started is not None and (head.id is None or head.has_children):
        # A root or a younger child: the fork run of a branch of its own.
        yield from name_new_branch(session_id, plan.started.written_id, name, take=take)
    else:
        # The head's first child continues the head's branch, which takes the name; so do
        # items that join the head, a leaf (its children gone since the name was chosen: a
        # write refused there would lose a Runner call's output), as its first child would.
        yield from name_run_branch(session_id, plan.last.written_id, name, take=take)


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
    rows: list[R.OpenCallRow] = yield S.OPEN_TOOL_CALLS(
        {"sid": session_id, "call_ids": json.dumps(call_ids)}
    )
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
    tally = Tally()
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
            tally,
        )
        if plan.below_head and parent.status == IN_PROGRESS:
            # As ``append`` does for a question written below a run still under way.
            yield S.FAIL_RUN({"sid": session_id, "id": parent.id, "now": now})
            tally.failed_runs += 1  # in_progress, as written (or read) in this transaction
        last = plan.last
        last_id = last.written_id
        written[last_id] = Head(
            last_id,
            last.depth,
            last.item_count,
            last.resolved_parent_id,
            # The plan's status, or the stored one it leaves as it is (the parent's, then).
            status=last.status if last.status is not None else parent.status,
        )
        ids.append(last_id)
    yield from index_backlog()
    # apply_append never moves the head: only this does, once, counting what the runs added.
    yield from set_head(session_id, ids[head] if head is not None else original.id, now, tally)
    return ids

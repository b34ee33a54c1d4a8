"""The conversation: what ``StructuredSession`` does through the store (the SDK protocol)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core import append, compaction, history, reads, turns
from ..core.codec import PreparedItem, prepare_items
from ..core.lock import ANY_HEAD, ExpectedHead
from ..core.once import HEAD, NEW_RUN
from ..core.telemetry import bind_times
from ..domain import validate
from ..domain.model import HistoryTail, SessionPatch, Telemetry, Usage
from ..domain.turns import BranchRef, branch_ref
from ..errors import InvalidOperationError
from .base import NO_LIMIT, StoreBase, expected_head_arg, limit_arg

__all__ = ["ConversationMixin"]


class ConversationMixin(StoreBase):
    """Append, read, pop and clear a session's active path; compact what the model sees."""

    async def add_items(
        self,
        session_id: str,
        items: Sequence[Any],
        usage: Usage | None = None,
        *,
        info: SessionPatch | None = None,
        telemetry: Telemetry | None = None,
        owner: int | None = None,
        operation_id: str | None = None,
        branch: str | int | None = None,
        name: str | None = None,
        take: bool = False,
        name_below: ExpectedHead = ANY_HEAD,
    ) -> int | None:
        """Append a batch to ``session_id``'s active path in one transaction.

        ``branch`` (a branch name, or a run id) appends at the end of that branch (after that
        run) instead of the head, and the head moves only when it was there: the write of a
        session pinned to its own branch (``StructuredSession(branch=)``). In a session
        without runs a name names the branch the batch starts.

        ``name`` names the branch the batch is written on (its first new run: a root, or a
        younger child of a run that has children, starts a branch of its own; a first child,
        or items that join a leaf, continue that run's branch, which takes the name) in the
        batch's own transaction, as ``name_branch`` would name it: a name another branch holds
        is refused, or with ``take`` moves to this one. ``name_below`` (a run id, or None: an
        empty path) names it only when the batch is written below that run: where the head
        (or ``branch``'s end) was when the name was chosen
        (``StructuredSession.create_branch_from_turn``), so that a batch another writer's move
        sent elsewhere is stored unnamed. A batch of no items has no branch to name and is
        refused with a name, and a refused name writes nothing: the batch and its name are
        stored together or not at all. ``take`` and ``name_below`` need ``name``.

        ``usage`` is added to the tokens of the run the batch counts for, and that run's id is
        returned (None when nothing was written): the run the batch's first user message
        starts, else ``owner`` (the run of the writer's earlier batches, e.g. one Runner call:
        see ``append.append``), else the head. ``info`` (catalogue fields) and ``telemetry``
        (what ``session.hooks`` recorded) are written in the same transaction;
        ``StructuredSession`` passes them.

        Every write method takes ``operation_id``, the write's key (made afresh when None):
        a write is applied at most once per key, and a repeat returns the first one's result.
        Pass the key of an ``OutcomeUnknownError`` to retry its write safely.
        """
        sid = validate.key(session_id, "session_id")
        usage = validate.optional_usage(usage)
        owner = validate.filter_id(owner, "owner")
        at = None if branch is None else branch_ref(branch)
        name, take = validate.new_branch_name(name, take)
        name_below = expected_head_arg(name_below, "name_below")
        if name is None and name_below is not ANY_HEAD:
            raise InvalidOperationError("name_below says when name= names the branch: pass name=")
        if info is not None:
            info = validate.patch_record(info, "info")
        if telemetry is not None:
            telemetry = bind_times(validate.telemetry_record(telemetry), self.backend.bind_time)
        batch = prepare_items(items)
        if name is not None and not batch:
            raise InvalidOperationError(
                f"a batch of no items starts no run, so no branch for name={name!r} to name"
            )
        if not batch and usage is None and info is None and not telemetry:
            return None
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: append.append(
                sid,
                batch,
                now,
                usage,
                info=info,
                telemetry=telemetry,
                owner=owner,
                at=at,
                name=name,
                take=take,
                name_below=name_below,
            ),
            operation_id,
            # A Runner call's later batches count for its run (the owner), a batch that
            # starts a run for it, one that starts none for the head: the write key's claim
            # stores that result at once, and nothing after the write needs to.
            likely=owner
            if owner is not None
            else NEW_RUN
            if _starts_run(batch)
            else None
            if at is not None
            else HEAD,
        )

    async def get_items(
        self, session_id: str, limit: int | None = None, *, branch: BranchRef | None = None
    ) -> list[Any]:
        """The newest ``limit`` items the model sees (all when None), oldest first.

        That is the active path's items, except that a compaction run's items stand in for the
        runs it replaced. ``branch`` (a branch name, or a run id: the path from the root to
        it) reads that branch instead, the head left where it is; an unknown name raises
        ``NotFoundError`` (in a session without runs it is the empty path: a pinned branch
        before its first write), an unknown run ``RunNotFoundError``.
        """
        sid = validate.key(session_id, "session_id")
        where = None if branch is None else branch_ref(branch)
        if limit is not None:
            if validate.count(limit, "limit") == 0:
                return []
            limit = min(limit, NO_LIMIT)
        if where is not None:
            return await self.backend.run(
                lambda: turns.branch_items(sid, where, limit), write=False
            )
        return await self.backend.run(lambda: reads.get_items(sid, limit), write=False)

    async def pop_item(
        self, session_id: str, *, branch: str | None = None, operation_id: str | None = None
    ) -> Any:
        """Remove and return the newest item of the active path, or None.

        ``branch`` (a branch name) pops that branch's newest item instead; the head moves only
        if it was on a run the pop removes. Refused (``InvalidOperationError``, nothing
        changed) when that would remove the run that holds the name (``delete_branch`` does),
        or a run whose younger sibling would then continue the branch."""
        sid = validate.key(session_id, "session_id")
        name = None if branch is None else validate.branch_name(branch)
        now = self.backend.now()
        return await self._write(sid, lambda: history.pop_item(sid, now, name), operation_id)

    async def clear_session(self, session_id: str, *, operation_id: str | None = None) -> None:
        """Delete the session with every branch and derived row."""
        sid = validate.key(session_id, "session_id")
        now = self.backend.now()
        await self._write(
            sid, lambda: history.clear_session(sid, now), operation_id, ends_session=True
        )

    async def history_tail(self, session_id: str, limit: int) -> HistoryTail | None:
        """The newest ``limit`` items the model sees, for ``compact``; None if one is corrupt."""
        sid = validate.key(session_id, "session_id")
        size = limit_arg(limit)
        return await self.backend.run(lambda: compaction.history_tail(sid, size), write=False)

    async def compact(
        self,
        session_id: str,
        items: Sequence[Any],
        *,
        tail: HistoryTail | None = None,
        start: int = 0,
        operation_id: str | None = None,
    ) -> bool:
        """Replace what the model sees from ``tail.items[start]`` on by ``items``: a compaction.

        Without ``tail`` the whole history the model sees is replaced. One transaction, and
        nothing is deleted: the compacted items become a compaction run below the head, the
        replaced runs stay in the transcript marked ``compacted`` (see README, "Compaction").
        Returns False, changing nothing, when the newest items are no longer ``tail``'s or
        ``start`` leaves none of them to replace (as the SDK's ``SQLiteSession`` does).
        """
        sid = validate.key(session_id, "session_id")
        batch = prepare_items(items)
        replaced = None
        if tail is not None:
            tail = validate.instance(tail, "tail", HistoryTail)
            replaced = tail.rows[validate.count(start, "start") :]
        elif start != 0:
            raise InvalidOperationError("start needs a tail")
        now = self.backend.now()
        return await self._write(
            sid, lambda: compaction.compact(sid, batch, now, replaced), operation_id
        )


def _starts_run(batch: Sequence[PreparedItem]) -> bool:
    """Whether ``batch`` holds an item that starts a run (its result is then that run)."""
    return any(prepared.info.starts_run for prepared in batch)

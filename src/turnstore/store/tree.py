"""The conversation tree: forks, the head, branches, bulk runs, and viewing a branch."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..core import append, branches, history, reads, turns
from ..core.codec import prepare_items
from ..core.history import ANY_HEAD, ExpectedHead
from ..core.ops import Op
from ..domain import validate
from ..domain.model import Branch, NewRun, PathView, Run, ToolCall
from ..domain.turns import BranchRef, RunRef, branch_ref, run_ref
from ..errors import InvalidOperationError
from .base import StoreBase, expected_head_arg, limit_arg, run_id_arg

__all__ = ["TreeMixin", "graft"]


class TreeMixin(StoreBase):
    """Fork (edit, regenerate), move the head, list, name and switch branches, list siblings,
    add runs in bulk, delete a branch; read the tree, a window of a branch, a run or a tool
    call by id."""

    async def runs(self, session_id: str, *, branch: BranchRef | None = None) -> list[Run]:
        """The active path's runs, root first: its transcript, compacted runs included.

        ``branch`` (a name, or a run id: the path from the root to it) reads that branch's.
        A run's turn number (``Turn``) is its ``depth + 1``.
        """
        sid = validate.key(session_id, "session_id")
        if branch is not None:
            where = branch_ref(branch)
            return await self.backend.run(lambda: turns.branch_runs(sid, where), write=False)
        return await self.backend.run(lambda: reads.path_runs(sid), write=False)

    async def fork(
        self,
        session_id: str,
        run_id: RunRef,
        new_input: str | Mapping[str, Any] | None,
        *,
        expected_head: ExpectedHead = ANY_HEAD,
        branch: BranchRef | None = None,
        name: str | None = None,
        take: bool = False,
        operation_id: str | None = None,
    ) -> Run:
        """A new sibling of ``run_id`` with its user message (a regenerate) or ``new_input`` (an
        edit); it is the head. It holds no answer: the next Runner call on the session
        answers it. ``run_id`` may be a ``Turn`` (as wherever a run of a session is taken).

        ``branch`` (a name, or a run id: the path to it) forks on that branch's course, as a
        ``StructuredSession(branch=)`` does: ``run_id`` must lie on it (else
        ``InvalidOperationError``), ``expected_head`` is checked against the branch's end, and
        the head stays where it is. The new run starts a branch of its own: unnamed, or
        called ``name``, named in the fork's own transaction as ``name_branch`` would name it
        (a name another branch holds is refused, or with ``take`` moves to the new branch,
        that one left unnamed; ``take`` needs ``name``). A refused name writes nothing: the
        fork and its name are stored together or not at all, as a pinned session's
        ``edit`` needs (its branch's name goes with the edit)."""
        sid = validate.key(session_id, "session_id")
        ref = run_ref(run_id)
        at = None if branch is None else branch_ref(branch)
        name, take = validate.new_branch_name(name, take)
        expected_head = expected_head_arg(expected_head)
        if isinstance(new_input, str):
            validate.text(new_input, "new input")
        elif new_input is not None and not isinstance(new_input, Mapping):
            raise InvalidOperationError(
                f"new input must be a str or a user message item, got {type(new_input).__name__}"
            )
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: turns.at(
                sid,
                ref,
                lambda rid: history.fork(
                    sid, rid, new_input, now, expected_head, at, name, take=take
                ),
            ),
            operation_id,
            lambda run: run.id,  # a repeat returns the run as it is then
            lambda kept: reads.find_run(sid, kept),
        )

    async def move_head(
        self,
        session_id: str,
        run_id: RunRef,
        *,
        to_parent: bool,
        expected_head: ExpectedHead = ANY_HEAD,
        operation_id: str | None = None,
    ) -> int | None:
        """Point the head at ``run_id`` (``to_parent``: at its parent); returns the new head."""
        sid = validate.key(session_id, "session_id")
        ref = run_ref(run_id)
        to_parent = validate.flag(to_parent, "to_parent")
        expected_head = expected_head_arg(expected_head)
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: turns.at(
                sid,
                ref,
                lambda rid: history.move_head(
                    sid, rid, to_parent=to_parent, now=now, expected_head=expected_head
                ),
            ),
            operation_id,
        )

    async def branches(self, session_id: str) -> list[Branch]:
        """Every branch (a leaf of the session's tree), oldest first: where each forks, how it
        was made, its stable handle (``fork_run_id``) and its name."""
        sid = validate.key(session_id, "session_id")
        return await self.backend.run(lambda: branches.branches(sid), write=False)

    async def name_branch(
        self,
        session_id: str,
        run_id: RunRef,
        name: str | None,
        *,
        take: bool = False,
        operation_id: str | None = None,
    ) -> Branch:
        """Name the branch ``run_id`` is on (its leaf, its fork run or a run between them).

        A name is unique in its session: another branch's name is refused, or with ``take``
        moves to this branch (that one is left unnamed). Naming a named branch renames it,
        ``None`` unnames it. The name stays with the branch as it grows and goes when
        ``delete_branch`` removes it. Returns the branch. See ``validate.branch_name`` for
        what a name may hold.
        """
        sid = validate.key(session_id, "session_id")
        ref = run_ref(run_id)
        if name is not None:
            name = validate.branch_name(name)
        take = validate.flag(take, "take")
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: turns.at(
                sid, ref, lambda rid: branches.name_branch(sid, rid, name, now, take=take)
            ),
            operation_id,
            lambda named: named.fork_run_id,  # a repeat returns the branch as it is then
            lambda fork: branches.branch(sid, fork),
        )

    async def switch_to_branch(
        self,
        session_id: str,
        name: str,
        *,
        expected_head: ExpectedHead = ANY_HEAD,
        operation_id: str | None = None,
    ) -> int:
        """Move the head to the newest run of the branch called ``name``; returns that run.

        Raises ``NotFoundError`` when the session has no branch of that name.
        """
        sid = validate.key(session_id, "session_id")
        name = validate.branch_name(name)
        expected_head = expected_head_arg(expected_head)
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: history.switch_to_branch(sid, name, now, expected_head),
            operation_id,
        )

    async def siblings(self, session_id: str, run_id: RunRef) -> list[Run]:
        """``run_id`` and its alternatives (same parent), in creation order."""
        sid = validate.key(session_id, "session_id")
        ref = run_ref(run_id)
        return await self.backend.run(
            lambda: turns.at(sid, ref, lambda rid: reads.siblings(sid, rid)), write=False
        )

    async def tree(self, session_id: str) -> list[tuple[Run, list[Any]]]:
        """Every run of the session, on every branch, in creation order, with its items."""
        sid = validate.key(session_id, "session_id")
        return await self.backend.run(lambda: reads.session_tree(sid), write=False)

    async def add_runs(
        self,
        session_id: str,
        runs: Sequence[NewRun],
        *,
        head: int | None = None,
        operation_id: str | None = None,
    ) -> list[int]:
        """Add many runs anywhere in the session's tree in one transaction (the bulk path).

        Returns the id of each run in order (for an extension, the run it extended). The head
        moves to ``runs[head]``; with ``head=None`` it stays where it was.
        """
        if not isinstance(runs, (list, tuple)):
            raise InvalidOperationError(f"runs must be a list of NewRun, got {type(runs).__name__}")
        grafts = []
        for index, run in enumerate(runs):
            run = validate.instance(run, f"run {index}", NewRun)
            grafts.append(
                append.GraftRun(
                    prepare_items(run.items),
                    None if run.parent_id is None else run_id_arg(run.parent_id),
                    run.parent,
                    validate.optional_usage(run.usage, f"run {index}'s usage"),
                    validate.optional_time(run.created_at, f"run {index}'s created_at"),
                )
            )
        return await graft(self, session_id, grafts, head, operation_id)

    async def delete_branch(
        self,
        session_id: str,
        run_id: RunRef | str,
        *,
        force: bool = False,
        expected_head: ExpectedHead = ANY_HEAD,
        operation_id: str | None = None,
    ) -> int | None:
        """Remove ``run_id``'s subtree and the ancestors only it reaches; returns the head.

        ``run_id`` may be a ``Turn``, or a branch's name (its leaf: the runs only that branch
        reaches go). Removing the runs the head is on (the active branch) needs
        ``force=True``, as AdvancedSQLiteSession's ``delete_branch`` does; the head then
        moves to the nearest surviving run above them. Without it ``InvalidOperationError``.
        """
        sid = validate.key(session_id, "session_id")
        target: RunRef | str = (
            validate.branch_name(run_id) if isinstance(run_id, str) else run_ref(run_id)
        )
        force = validate.flag(force, "force")
        expected_head = expected_head_arg(expected_head)
        now = self.backend.now()

        def delete() -> Op[int | None]:
            if isinstance(target, str):
                run = yield from turns.branch_leaf(sid, target)
            else:
                run = yield from turns.resolve(sid, target)
            return (yield from history.delete_branch(sid, run, now, expected_head, force=force))

        return await self._write(sid, delete, operation_id)

    # -- viewing: a branch a window at a time, runs and tool calls by id ----------------------

    async def path_view(
        self,
        session_id: str,
        *,
        through: RunRef | None = None,
        start: int | None = None,
        stop: int | None = None,
        limit: int = 50,
    ) -> PathView:
        """At most ``limit`` consecutive runs of a branch, with their tool calls and forks.

        The branch is the active path, or the one through the run ``through`` (down to the
        head if the head lies below it, else to its newest run). The window holds the runs at
        depth ``start`` and after, or at depth ``stop`` and before, or else the branch's last
        runs (with ``through``: the runs from just above it). Raises ``SessionNotFoundError``
        or ``RunNotFoundError``.
        """
        sid = validate.key(session_id, "session_id")
        ref = None if through is None else run_ref(through)
        for name, value in (("start", start), ("stop", stop)):
            if value is not None:
                validate.count(value, name)
        limit = limit_arg(limit)

        def view() -> Op[PathView]:
            anchor = None if ref is None else (yield from turns.resolve(sid, ref))
            return (yield from reads.path_view(sid, anchor, start, stop, limit))

        return await self.backend.run(view, write=False)

    async def run(self, run_id: int) -> Run:
        """The run ``run_id``, in whichever session it is. Raises ``RunNotFoundError``."""
        run_id = run_id_arg(run_id)
        return await self.backend.run(lambda: reads.get_run(run_id), write=False)

    async def run_items(self, run_id: int) -> list[Any]:
        """The items of the run ``run_id``, verbatim and in order."""
        run_id = run_id_arg(run_id)
        return await self.backend.run(lambda: reads.run_items(run_id), write=False)

    async def tool_call(self, call_id: int) -> ToolCall:
        """The tool call whose row id is ``call_id``. Raises ``NotFoundError``."""
        call_id = validate.lookup_id(call_id, "tool call")
        return await self.backend.run(lambda: reads.get_tool_call(call_id), write=False)


async def graft(
    store: StoreBase,
    session_id: str,
    runs: Sequence[append.GraftRun],
    head: int | None = None,
    operation_id: str | None = None,
) -> list[int]:
    """``Store.add_runs`` of items already prepared: the importers' internal way in.

    The importers (``turnstore.importers``) prepare items while reading a source; this writes
    them as ``add_runs`` does, with the same checks, as one exactly-once write. A
    ``GraftRun.now`` that is a ``datetime`` is converted to the backend's timestamps.
    """
    sid = validate.key(session_id, "session_id")
    if head is not None and not (validate.count(head, "head") < len(runs)):
        raise InvalidOperationError(f"head must index one of the {len(runs)} runs")
    grafts = []
    for index, run in enumerate(runs):
        if not run.batch:
            raise InvalidOperationError(f"run {index} has no items")
        if run.parent is not None and not (
            validate.count(run.parent, f"run {index}'s parent") < index
        ):
            raise InvalidOperationError(f"run {index}'s parent must be an earlier run")
        if isinstance(run.now, datetime):
            run = dataclasses.replace(run, now=store.backend.bind_time(run.now))
        grafts.append(run)
    now = store.backend.now()
    return await store._write(sid, lambda: append.graft(sid, grafts, head, now), operation_id)

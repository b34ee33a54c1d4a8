"""A ``StructuredSession`` pinned to a branch (``branch=``): where it reads and writes, and
its tree operations, which move its branch, not the session's head (docs/design.md, "The
pinned view")."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from ..core.history import ANY_HEAD, ExpectedHead
from ..core.ops import finish_write
from ..domain.model import Run
from ..domain.turns import BranchRef, RunRef, Turn
from ..errors import ConflictError, InvalidOperationError, RunNotFoundError
from ..store import Store
from .branching import BranchingMixin, PendingBranch

__all__ = ["PinningMixin"]


class PinningMixin(BranchingMixin):
    """The pin of a ``StructuredSession``: its branch, its course, and the tree operations on it."""

    @property
    def branch(self) -> str | None:
        """The branch this object is pinned to (``branch=``), or None: it follows the head."""
        return self._branch

    def _pinned_end(self) -> BranchRef | None:
        """Where this object reads and writes: its pending branch's parent run
        (``create_branch_from_turn``), its pinned branch, or None (the head). A session
        without runs lacks the pinned branch yet: its first write makes it, in the write's
        transaction (``Store.add_items(branch=)``)."""
        if self._branch is None:
            return None
        pending = self._pending_branch
        return self._branch if pending is None else pending.parent_id

    def _moved_pin(self, pinned: str, parent_id: int) -> PendingBranch:
        """The pending branch that takes this object's course below ``parent_id``: its name
        (the pending one's, else ``pinned``, taken from the runs it names now)."""
        pending = self._pending_branch
        if pending is not None:
            return PendingBranch(pending.name, parent_id, pending.take)
        return PendingBranch(pinned, parent_id, take=True)

    @asynccontextmanager
    async def _at_end(self, store: Store, at_end: bool = True) -> AsyncIterator[None]:
        """Around a call at ``_pinned_end()`` (``at_end``; False: one given its own place,
        whose errors pass through): when it finds no run there because another writer deleted
        the run this object's branch was moved back to, a ``RunNotFoundError`` that says so,
        and the move is dropped (the object is on its branch as it is now), rather than "no
        run N" at every call until ``switch_to_branch``."""
        moved = self._pending_branch
        try:
            yield
        except RunNotFoundError as error:
            if (
                not at_end
                or self._branch is None
                or moved is None
                or moved.parent_id is None
                or self._pending_branch is not moved
            ):
                raise
            try:
                exists = await _exists(store, moved.parent_id)
            except asyncio.CancelledError:
                # The call has failed: its error, not the cancellation, which from a write
                # says that it is stored (docs/reliability.md, "Cancellation"). The move
                # stays, checked again by the next call.
                raise error from None
            if exists:
                raise
            self._pending_branch = None
            raise RunNotFoundError(
                f"run {moved.parent_id} of session {self.session_id!r}, below which this "
                f"object's next write was to continue branch {moved.name!r} (rewind, checkout "
                "or create_branch_from_turn), was deleted by another writer: nothing was done, "
                f"and that move is dropped; this object is on branch {self._branch!r} as it "
                "is now (switch_to_branch moves it to another)"
            ) from None

    def _along(self, run_id: RunRef, end: BranchRef) -> RunRef:
        """``run_id``, a ``Turn`` without a branch counted along this object's course."""
        if isinstance(run_id, Turn) and run_id.branch is None:
            return Turn(run_id.number, end)
        return run_id

    async def _pinned_course(self, store: Store, expected_head: ExpectedHead) -> list[Run]:
        """A pinned object's course (the runs of its path, root first), its end checked
        against ``expected_head`` as the head is on an object without ``branch=``."""
        end = self._pinned_end()
        async with self._at_end(store):
            course = [] if end is None else await store.runs(self.session_id, branch=end)
        found = course[-1].id if course else None
        if expected_head is not ANY_HEAD and found != expected_head:
            raise ConflictError(
                f"the end of branch {self._branch!r} of this object is run {found}, not run "
                f"{expected_head}: another writer moved it first; nothing was changed"
            )
        return course

    async def _pinned_fork(
        self,
        store: Store,
        pinned: str,
        run_id: RunRef,
        new_input: str | Mapping[str, Any] | None,
        expected_head: ExpectedHead,
    ) -> Run:
        """``edit`` or ``regenerate`` on a pinned object: a sibling on its course, which takes
        its branch's name (or its pending branch's) in the fork's own transaction; the head
        stays."""
        end = self._pinned_end()
        if end is None:
            raise RunNotFoundError(f"branch {pinned!r} has no runs yet")
        pending = self._pending_branch
        name, take = (pinned, True) if pending is None else (pending.name, pending.take)
        async with self._at_end(store):
            run = await store.fork(
                self.session_id,
                self._along(run_id, end),
                new_input,
                expected_head=expected_head,
                branch=end,
                name=name,
                take=take,
            )
        self._branch, self._pending_branch = name, None  # it follows the branch it made
        return run

    async def _move_pin(
        self, pinned: str, run_id: RunRef, expected_head: ExpectedHead, *, to_parent: bool
    ) -> None:
        """``rewind`` or ``checkout`` on a pinned object: its course ends at ``run_id`` (or its
        parent) once its next write starts a run there; nothing is written now."""
        store = await self._ready()
        course = await self._pinned_course(store, expected_head)
        if not course:
            raise RunNotFoundError(f"branch {pinned!r} has no runs yet")
        ref = self._along(run_id, course[-1].id)
        if isinstance(ref, Turn):
            path = (
                course
                if ref.branch == course[-1].id
                else await store.runs(self.session_id, branch=ref.branch)
            )
            if len(path) < ref.number:
                raise RunNotFoundError(f"session {self.session_id!r} has no {ref}")
            ref = path[ref.number - 1].id
        place = next((i for i, run in enumerate(course) if run.id == ref), None)
        if place is None:
            await store.run(ref)  # RunNotFoundError when there is no such run
            raise InvalidOperationError(
                f"run {ref} is not on branch {pinned!r}, this object's course: nothing "
                "was changed (switch_to_branch moves the object to another named branch)"
            )
        target = place - 1 if to_parent else place
        if target < 0:
            raise InvalidOperationError(
                f"run {ref} is turn 1: an object pinned to a branch has no run above it to "
                "write below (an object without branch= can rewind to an empty path)"
            )
        if target < len(course) - 1:
            self._pending_branch = self._moved_pin(pinned, course[target].id)

    async def _fork(
        self,
        run_id: RunRef,
        new_input: str | Mapping[str, Any] | None,
        expected_head: ExpectedHead,
    ) -> Run:
        """``edit`` or ``regenerate``: on the head, or on a pinned object's branch."""
        store = await self._ready()
        if self._branch is None:
            return await store.fork(self.session_id, run_id, new_input, expected_head=expected_head)
        # A cancellation that arrives during the fork (stored once it comes out: finish_write)
        # is held until this object follows the branch the fork named.
        return await finish_write(
            self._pinned_fork(store, self._branch, run_id, new_input, expected_head)
        )

    def _uncompacted(self) -> None:
        if self._branch is not None:
            raise InvalidOperationError(
                "compaction replaces the items of the session's head path: not on an object "
                f"pinned to branch {self._branch!r}; nothing was changed (compact through an "
                f"object without branch= after its switch_to_branch({self._branch!r}))"
            )

    async def _pinned_run(self, store: Store) -> int | None:
        """The run at a pinned object's end (None: the head's, or no run yet)."""
        end = self._pinned_end()
        if isinstance(end, str):
            course = await store.runs(self.session_id, branch=end)
            return course[-1].id if course else None
        return end


async def _exists(store: Store, run_id: int) -> bool:
    try:
        await store.run(run_id)
    except RunNotFoundError:
        return False
    return True

"""``AdvancedSQLiteSession``'s branch and analytics methods on ``StructuredSession``.

Each takes ``branch=`` (a branch name, or a run id: the path from the root to it; None: the
active path) where AdvancedSQLiteSession takes ``branch_id=``, and returns what it returns
(README, "Coming from AdvancedSQLiteSession", says where they differ). Turn numbers are
``Turn`` numbers: a run's ``depth + 1`` (``turnstore.domain.turns``).
"""

from __future__ import annotations

import asyncio
import re
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.lock import ANY_HEAD
from ..core.ops import finish_write
from ..domain import validate
from ..domain.model import Branch, Run, ToolCall
from ..domain.turns import BranchRef, Turn, branch_ref, turn_number
from ..errors import InvalidOperationError, NotFoundError, RunNotFoundError
from ..store import Store
from ..store.base import NO_LIMIT

if TYPE_CHECKING:
    from ..core.history import ExpectedHead

__all__ = ["BranchingMixin", "PendingBranch"]

# The length of get_conversation_turns' "content" preview, as AdvancedSQLiteSession's.
_PREVIEW = 100


@dataclass(frozen=True, slots=True)
class PendingBranch:
    """A branch ``create_branch_from_turn`` made, or a pinned object's branch moved back by
    ``rewind`` or ``checkout``: named by this object's next write of items at ``parent_id``
    (the tree has no run to hold the name before), which starts a run below it, or joins it
    once another writer removed its children. ``take``: the name is the one the branch holds
    now, which the new run takes from it."""

    name: str
    parent_id: int | None
    take: bool = False


@dataclass(frozen=True, slots=True)
class _BranchView:
    runs: list[Run]  # its whole path, root first
    calls: dict[int, list[ToolCall]]
    fork_depth: int  # its own runs (on no older branch) are those at this depth and below


def _preview(content: str | None, limit: int | None) -> str:
    text = content or ""
    return text[:limit] + "..." if limit is not None and len(text) > limit else text


def _turn(run: Run) -> dict[str, Any]:
    return {
        "turn": turn_number(run.depth),
        "content": _preview(run.user_message, _PREVIEW),
        "full_content": run.user_message,
        "timestamp": run.created_at,
        "can_branch": True,
    }


def _nested(details: dict[str, int]) -> dict[str, Any] | None:
    """Token details in the SDK's shape: dotted names (``Usage``) as nested objects."""
    if not details:
        return None
    nested: dict[str, Any] = {}
    for name, count in details.items():
        *path, last = name.split(".")
        place = nested
        for key in path:
            place = place.setdefault(key, {})
        place[last] = count
    return nested


def _usage(run: Run) -> dict[str, Any]:
    return {
        "requests": run.usage.requests,
        "input_tokens": run.usage.input_tokens,
        "output_tokens": run.usage.output_tokens,
        "total_tokens": run.usage.total_tokens,
        # As the SDK reported them (AdvancedSQLiteSession's turn_usage holds them as JSON too)
        "input_tokens_details": _nested(run.usage.input_tokens_details),
        "output_tokens_details": _nested(run.usage.output_tokens_details),
    }


class BranchingMixin:
    """Read and branch by branch name and turn number; usage, tools and turns per branch."""

    session_id: str
    _pending_branch: PendingBranch | None = None
    _branch: str | None = None

    if TYPE_CHECKING:

        async def _ready(self) -> Store: ...

        async def _pinned_course(self, store: Store, expected_head: ExpectedHead) -> list[Run]: ...

        def _pinned_end(self) -> BranchRef | None: ...

        def _at_end(
            self, store: Store, at_end: bool = True
        ) -> AbstractAsyncContextManager[None]: ...

    async def list_branches(self) -> list[Branch]:
        """Every branch, oldest first, each with ``message_count`` and ``user_turns`` (as
        AdvancedSQLiteSession's ``list_branches``; ``active`` is its ``is_current``)."""
        store = await self._ready()
        return await store.branches(self.session_id)

    async def create_branch_from_turn(self, turn: int, branch_name: str | None = None) -> str:
        """Start a branch before turn ``turn`` of the active path (a pinned object's course:
        its branch, or where its rewind left it), so that it can be asked again: the head
        moves to the turn above it, and this object's next write (the new question) starts
        the branch, named ``branch_name`` (default
        ``branch_from_turn_N_<time>``) in that write's own transaction. Returns the name. As
        AdvancedSQLiteSession's, the name must not be another branch's
        (``InvalidOperationError``: here, or from that write, which then writes nothing, if
        another writer takes the name meanwhile); an unknown turn raises ``RunNotFoundError``.
        Until that write the branch has no run, so ``list_branches`` does not show it yet.
        """
        validate.count(turn, "turn", minimum=1)
        store = await self._ready()
        taken = {found.name for found in await store.branches(self.session_id)}
        if branch_name is None:
            base = branch_name = f"branch_from_turn_{turn}_{int(time.time())}"
            suffix = 1
            while branch_name in taken:
                suffix += 1
                branch_name = f"{base}_{suffix}"
        branch_name = validate.branch_name(branch_name)
        if branch_name in taken:
            raise InvalidOperationError(
                f"session {self.session_id!r} already has a branch named {branch_name!r}"
            )
        if self._branch is None:
            # The head it moved to, read in the move's transaction (another writer may move it
            # next); a cancellation during the move, raised once it is stored (finish_write),
            # still leaves the name waiting for the next write (the move is not asked again).
            move = asyncio.ensure_future(
                store.move_head(self.session_id, Turn(turn), to_parent=True)
            )
            try:
                head = await finish_write(move)
            except asyncio.CancelledError:
                if not move.cancelled() and move.exception() is None:
                    self._pending_branch = PendingBranch(branch_name, move.result())
                raise
        else:  # a pinned object: its next write goes below that turn, the head stays
            if turn == 1:
                raise InvalidOperationError(
                    "an object pinned to a branch branches from turn 2 on (turn 1 has no run "
                    "above it to write below)"
                )
            # Its course as it reads it: moved back by a rewind (its pending branch), if so.
            runs = await self._pinned_course(store, ANY_HEAD)
            if len(runs) < turn:
                raise RunNotFoundError(
                    f"this object's course on branch {self._branch!r} has no turn {turn}"
                )
            head = runs[turn - 2].id
        self._pending_branch = PendingBranch(branch_name, head)
        return branch_name

    async def create_branch_from_content(
        self, search_term: str, branch_name: str | None = None
    ) -> str:
        """``create_branch_from_turn`` of the first turn whose user message holds
        ``search_term`` (``find_turns_by_content``); ``NotFoundError`` if none does."""
        found = await self.find_turns_by_content(search_term)
        if not found:
            raise NotFoundError(f"no user turn holds {search_term!r}")
        return await self.create_branch_from_turn(found[0]["turn"], branch_name)

    def _started(self, pending: PendingBranch | None) -> None:
        """After a write of items that carried ``pending``'s name (``Store.add_items(name=,
        name_below=)``, which named the branch it was written on at ``pending.parent_id``):
        the branch is pending no more, and a pinned object, whose write went there, follows
        it."""
        if pending is None or self._pending_branch is not pending:
            return
        self._pending_branch = None
        if self._branch is not None:
            self._branch = pending.name

    # -- analytics per branch ------------------------------------------------------------------

    async def _branch_view(self, branch: BranchRef | None) -> _BranchView:
        store = await self._ready()
        # None: the course get_items reads (a pinned object's, moved back by a rewind or
        # create_branch_from_turn, as AdvancedSQLiteSession's is the branch it made).
        where = self._pinned_end() if branch is None else branch_ref(branch)
        every = await store.branches(self.session_id)
        through: int | None = None
        if isinstance(where, str):
            named = [found for found in every if found.name == where]
            if not named:
                raise NotFoundError(f"session {self.session_id!r} has no branch named {where!r}")
            through = named[0].leaf_run_id
        elif where is not None:
            through = where
        async with self._at_end(store, branch is None):
            view = await store.path_view(self.session_id, through=through, start=0, limit=NO_LIMIT)
        runs = view.runs
        if isinstance(where, int):  # the path to that run, not below it
            depth = next(run.depth for run in runs if run.id == where)
            runs = [run for run in runs if run.depth <= depth]
        forks = {found.fork_run_id for found in every}
        fork_depth = max((run.depth for run in runs if run.id in forks), default=0)
        return _BranchView(runs, view.tool_calls, fork_depth)

    async def get_conversation_turns(self, branch: BranchRef | None = None) -> list[dict[str, Any]]:
        """The user turns of a branch's path: ``turn``, ``content`` (its first 100
        characters), ``full_content``, ``timestamp``, ``can_branch``."""
        view = await self._branch_view(branch)
        return [_turn(run) for run in view.runs if run.user_message is not None]

    async def find_turns_by_content(
        self, search_term: str, branch: BranchRef | None = None
    ) -> list[dict[str, Any]]:
        """``get_conversation_turns`` whose user message holds ``search_term`` (ignoring ASCII
        case, as AdvancedSQLiteSession's LIKE does), ``content`` uncut as there."""
        term = validate.text(search_term, "search_term")
        pattern = re.compile(re.escape(term), re.IGNORECASE | re.ASCII)
        turns = await self.get_conversation_turns(branch)
        return [
            {**found, "content": found["full_content"]}
            for found in turns
            if pattern.search(found["full_content"])
        ]

    async def get_session_usage(self, branch: BranchRef | None = None) -> dict[str, int] | None:
        """Requests and tokens summed, with ``total_turns`` (the runs counted): of every
        branch, or (``branch``) of that branch's own runs (those on no older branch: a
        branch's shared beginning counts once, for the branch it belongs to). None when no
        run has usage."""
        if branch is None:
            store = await self._ready()
            runs = [run for run, _ in await store.tree(self.session_id)]
        else:
            view = await self._branch_view(branch)
            runs = [run for run in view.runs if run.depth >= view.fork_depth]
        used = [run for run in runs if run.usage.requests or run.usage.total_tokens]
        if not used:
            return None
        return {
            "requests": sum(run.usage.requests for run in used),
            "input_tokens": sum(run.usage.input_tokens for run in used),
            "output_tokens": sum(run.usage.output_tokens for run in used),
            "total_tokens": sum(run.usage.total_tokens for run in used),
            "total_turns": len(used),
        }

    async def get_turn_usage(
        self, user_turn_number: int | None = None, branch: BranchRef | None = None
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """The usage of turn ``user_turn_number`` of a branch ({} when it has none), or of
        each of the branch's own runs that has usage (with its ``user_turn_number``)."""
        view = await self._branch_view(branch)
        if user_turn_number is not None:
            depth = validate.count(user_turn_number, "user_turn_number", minimum=1) - 1
            run = next((run for run in view.runs if run.depth == depth), None)
            return {} if run is None else _usage(run)
        return [
            {"user_turn_number": turn_number(run.depth), **_usage(run)}
            for run in view.runs
            if run.depth >= view.fork_depth and (run.usage.requests or run.usage.total_tokens)
        ]

    async def get_tool_usage(self, branch: BranchRef | None = None) -> list[tuple[str, int, int]]:
        """(tool name, calls, turn number) of a branch's path, by turn: a hosted tool without a
        name counts under its kind (``web_search_call``, …)."""
        view = await self._branch_view(branch)
        result: list[tuple[str, int, int]] = []
        for run in view.runs:
            counts: dict[str, int] = {}
            for call in view.calls.get(run.id, []):
                name = call.tool_name or call.kind or "unknown"
                counts[name] = counts.get(name, 0) + 1
            turn = turn_number(run.depth)
            result.extend((name, count, turn) for name, count in sorted(counts.items()))
        return result

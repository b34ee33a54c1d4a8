"""Two courses of a conversation compared (``Store.diff``): each read as a branch window, then
compared by ``domain.diff``."""

from __future__ import annotations

from ..domain import validate
from ..domain.diff import BranchDiff, compare
from ..domain.model import PathView, Run, ToolCall
from ..errors import InvalidOperationError, NotFoundError, SessionNotFoundError
from .base import NO_LIMIT, run_id_arg
from .catalogue import CatalogueMixin
from .tree import TreeMixin

__all__ = ["DiffMixin", "Side"]

Side = int | str | None
"""One course of a diff: a run id (the path from the root to it), a branch name or None (the
active path) of the session given, or without one a session id (its active path)."""


class DiffMixin(TreeMixin, CatalogueMixin):
    """Compare two courses: edits and regenerations against the branch they left."""

    async def diff(
        self, a: int | str | None, b: int | str | None, *, session_id: str | None = None
    ) -> BranchDiff:
        """Compare two courses: their common runs, the fork point, then the runs after it
        aligned one by one, with what differs in the user message, the answer, the tool calls
        (name, arguments, output, status, duration) and the tokens.

        With ``session_id``, ``a`` and ``b`` are each a run id of that session (the path from
        the root to it), a branch name (``Store.name_branch``) or None (the active path).
        Without, each is a run id or a session id (its active path); two sessions are
        matched run by run by what their runs say. Raises ``SessionNotFoundError``,
        ``RunNotFoundError`` or ``NotFoundError`` (no branch of that name).
        """
        sid = None if session_id is None else validate.key(session_id, "session_id")
        first, second = await self._course(a, sid), await self._course(b, sid)
        calls: dict[int, list[ToolCall]] = {**first[1], **second[1]}
        same_session = (
            bool(first[0])
            and bool(second[0])
            and (first[0][0].session_id == second[0][0].session_id)
        )
        return compare(first[0], second[0], calls, by_id=same_session)

    async def _course(
        self, side: Side, sid: str | None
    ) -> tuple[list[Run], dict[int, list[ToolCall]]]:
        """The runs (root first) and tool calls of one side of a diff."""
        if isinstance(side, bool) or not isinstance(side, int | str | None):
            raise InvalidOperationError(
                f"a side of a diff is a run id, a branch name or a session id, got "
                f"{validate.shown(side)}"
            )
        if side is None and sid is None:
            raise InvalidOperationError("a side of None (the active path) needs session_id")
        if isinstance(side, int):
            run = await self.run(run_id_arg(side))
            if sid is not None and run.session_id != sid:
                raise NotFoundError(f"run {side} belongs to another session, not {sid!r}")
            view = await self._whole(run.session_id, run.id)
            return [r for r in view.runs if r.depth <= run.depth], view.tool_calls
        if sid is None:
            session = validate.key(side, "session_id")
            if await self.session(session) is None:
                raise SessionNotFoundError(f"no session {session!r}")
            view = await self._whole(session, None)
            return view.runs, view.tool_calls
        if await self.session(sid) is None:
            raise SessionNotFoundError(f"no session {sid!r}")
        through = None
        if side is not None:
            name = validate.branch_name(side)
            named = [b for b in await self.branches(sid) if b.name == name]
            if not named:
                raise NotFoundError(f"session {sid!r} has no branch named {name!r}")
            through = named[0].leaf_run_id
        view = await self._whole(sid, through)
        return view.runs, view.tool_calls

    async def _whole(self, sid: str, through: int | None) -> PathView:
        """A whole branch, root first (the active path, or the one through ``through``)."""
        return await self.path_view(sid, through=through, start=0, limit=NO_LIMIT)

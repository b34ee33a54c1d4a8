"""The session catalogue: list sessions, read and change a session's entry, delete one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..core import queries, reads
from ..core.annotation_checks import annotation_value
from ..core.catalogue import update_session
from ..core.ops import Op
from ..core.queries import SessionOrder
from ..domain import validate
from ..domain.model import (
    FIRST_PAGE,
    RUN_STATUSES,
    PageCursor,
    RunStatus,
    SessionInfo,
    SessionPage,
    SessionPatch,
    SessionSummary,
)
from ..errors import InvalidOperationError, SessionNotFoundError
from .base import StoreBase, limit_arg

__all__ = ["MAX_SUMMARIES", "CatalogueMixin", "session_patch"]

MAX_SUMMARIES = 1000
"""The most sessions ``Store.session_summaries`` reads at once: the largest page."""


def _session_entry(session_id: str) -> Op[SessionInfo]:
    info = yield from reads.session_info(session_id)
    if info is None:
        raise SessionNotFoundError(f"session {session_id!r} was deleted since")
    return info


def session_patch(*, user_id: Any = None, title: Any = None, metadata: Any = None) -> SessionPatch:
    """Check catalogue fields and make the ``SessionPatch`` that writes them."""
    return SessionPatch(
        user_id=validate.optional_key(user_id, "user_id"),
        title=validate.optional_text(title, "title"),
        metadata=None if metadata is None else validate.metadata(metadata),
    )


class CatalogueMixin(StoreBase):
    """One page of the catalogue at a time; a session's user, title and metadata."""

    async def session(self, session_id: str) -> SessionInfo | None:
        """The session's catalogue entry, or None if it has never been written."""
        sid = validate.key(session_id, "session_id")
        return await self.backend.run(lambda: reads.session_info(sid), write=False)

    async def sessions(
        self,
        *,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        title: str | None = None,
        agent_name: str | None = None,
        model: str | None = None,
        run_status: RunStatus | None = None,
        failed_tool_calls: bool = False,
        annotation: str | None = None,
        annotation_min: float | None = None,
        annotation_max: float | None = None,
        order_by: SessionOrder = "created_at",
        limit: int = 50,
        after: PageCursor = FIRST_PAGE,
    ) -> SessionPage:
        """One page of the session catalogue, newest first.

        Filters (each left out keeps any session): ``metadata`` keeps sessions whose metadata
        holds every given key with an equal (scalar) value; times are exclusive bounds (naive
        datetimes are UTC); ``title`` a part of the title, in any case (ASCII letters only on
        SQLite); ``agent_name``, ``model`` and ``run_status`` sessions with a run (on any
        branch) answered by that agent or model, or in that status; ``failed_tool_calls``
        sessions with a tool call that failed (``ToolCall.failed``); ``annotation``,
        ``annotation_min`` and ``annotation_max`` sessions with a run annotated with that name
        and a value in that range (inclusive): ``annotation="thumbs", annotation_max=0`` the
        sessions with any thumbs-down. ``count_sessions`` counts what they keep.

        ``order_by``: ``"created_at"`` (the default) or ``"updated_at"``, newest first; or a
        number the session's runs (on every branch) or tool calls add up to, largest first:
        ``"runs"``, ``"tokens"``, ``"tool_calls"``, ``"failures"`` (failed runs and tool
        calls, as ``SessionSummary`` counts them); ties newest session id first.

        Pass the page's ``next_cursor`` as ``after`` for the next page: keyset pagination,
        so a page by a time costs what the first does (a page by a number adds up the
        filtered sessions' rows, whichever page it is). The last page's ``next_cursor`` is
        None, and ``after=None`` is refused: a loop that passes it on ends with an error, never
        by starting over (see ``SessionPage``; ``iter_sessions`` walks every page).
        ``"created_at"`` lists each session once even while sessions are written; by
        ``"updated_at"`` or a number, a session written between two pages moves (it is not
        repeated, and it may be missed).
        """
        order_by = validate.choice(order_by, "order_by", queries.ORDERS)
        if after is None:
            raise InvalidOperationError(
                "after=None names no page: the last page's next_cursor is None, so stop there; "
                "leave after out for the first page"
            )
        cursor = None if after is FIRST_PAGE else validate.text(after, "after")
        size = limit_arg(limit)
        where = self._session_filter(
            user_id=user_id,
            metadata=metadata,
            created_after=created_after,
            created_before=created_before,
            updated_after=updated_after,
            updated_before=updated_before,
            title=title,
            agent_name=agent_name,
            model=model,
            run_status=run_status,
            failed_tool_calls=failed_tool_calls,
            annotation=annotation,
            annotation_min=annotation_min,
            annotation_max=annotation_max,
        )
        return await self.backend.run(
            lambda: queries.list_sessions(where, order_by=order_by, limit=size, after=cursor),
            write=False,
        )

    async def count_sessions(self, **filters: Any) -> int:
        """How many sessions ``filters`` (the filters of ``sessions``: ``user_id``,
        ``metadata``, ``title``, ``model``, …) keep: the catalogue's total, or a filtered
        listing's."""
        where = self._session_filter(**filters)
        return await self.backend.run(lambda: queries.count_sessions(where), write=False)

    def _session_filter(
        self,
        *,
        user_id: Any = None,
        metadata: Any = None,
        created_after: Any = None,
        created_before: Any = None,
        updated_after: Any = None,
        updated_before: Any = None,
        title: Any = None,
        agent_name: Any = None,
        model: Any = None,
        run_status: Any = None,
        failed_tool_calls: Any = False,
        annotation: Any = None,
        annotation_min: Any = None,
        annotation_max: Any = None,
    ) -> queries.SessionFilter:
        """The filters of ``sessions``, checked, with their times bound."""
        times = {
            name: self._bind_time(validate.optional_time(value, name))
            for name, value in (
                ("created_after", created_after),
                ("created_before", created_before),
                ("updated_after", updated_after),
                ("updated_before", updated_before),
            )
        }
        return queries.SessionFilter(
            user_id=validate.optional_text(user_id, "user_id"),
            metadata=validate.metadata_filter(metadata),
            title=validate.optional_text(title, "title"),
            agent_name=validate.optional_text(agent_name, "agent_name"),
            model=validate.optional_text(model, "model"),
            run_status=None
            if run_status is None
            else validate.choice(run_status, "run_status", RUN_STATUSES),
            failed_tool_calls=validate.flag(failed_tool_calls, "failed_tool_calls"),
            annotated=(annotation, annotation_min, annotation_max) != (None, None, None),
            annotation=validate.optional_text(annotation, "annotation"),
            annotation_min=annotation_value(annotation_min, "annotation_min"),
            annotation_max=annotation_value(annotation_max, "annotation_max"),
            **times,
        )

    async def session_summaries(self, session_ids: Sequence[str]) -> dict[str, SessionSummary]:
        """What each session holds (runs, branches, tokens, failures), by id: one query for
        a page of the catalogue (at most ``MAX_SUMMARIES`` ids), in the order given."""
        if not isinstance(session_ids, (list, tuple)):
            raise InvalidOperationError(
                f"session_ids must be a list of str, got {type(session_ids).__name__}"
            )
        if len(session_ids) > MAX_SUMMARIES:
            raise InvalidOperationError(
                f"at most {MAX_SUMMARIES} sessions at a time (a page), got {len(session_ids)}"
            )
        sids = [validate.key(sid, "each session_id") for sid in session_ids]
        if not sids:
            return {}
        return await self.backend.run(lambda: queries.session_summaries(sids), write=False)

    async def iter_sessions(
        self, *, page_size: int = 500, **filters: Any
    ) -> AsyncIterator[SessionInfo]:
        """Every session that ``filters`` (the keyword arguments of ``sessions`` but
        ``limit`` and ``after``) keep, newest first: ``sessions`` page after page, ending with
        the last one (``async for info in store.iter_sessions(user_id="alice"): ...``)."""
        if {"limit", "after"} & filters.keys():
            raise InvalidOperationError("iter_sessions pages by itself: pass page_size instead")
        after: PageCursor = FIRST_PAGE
        while True:
            page = await self.sessions(limit=page_size, after=after, **filters)
            for info in page:
                yield info
            if page.next_cursor is None:
                return
            after = page.next_cursor

    async def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        operation_id: str | None = None,
    ) -> SessionInfo:
        """Set the session's user, title or metadata (None leaves a field unchanged).

        ``metadata`` replaces the stored metadata (a JSON-serialisable mapping). A session
        that does not exist yet is created, with no runs. Returns the updated entry.
        """
        patch = session_patch(user_id=user_id, title=title, metadata=metadata)
        return await self.patch_session(session_id, patch, operation_id=operation_id)

    async def patch_session(
        self, session_id: str, patch: SessionPatch, *, operation_id: str | None = None
    ) -> SessionInfo:
        """Like ``update_session``, with the fields in a ``SessionPatch`` (checked alike:
        ``validate.patch_record``)."""
        sid = validate.key(session_id, "session_id")
        patch = validate.patch_record(patch)
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: update_session(sid, patch, now),
            operation_id,
            lambda info: True,  # a repeat returns the entry as it is then
            lambda kept: _session_entry(sid),
        )

    async def delete_session(
        self,
        session_id: str,
        *,
        updated_before: datetime | None = None,
        operation_id: str | None = None,
    ) -> None:
        """Delete the session with every run, item, tool call and index entry.

        Unlike ``clear_session`` (the SDK's, which ignores unknown sessions) this raises
        ``SessionNotFoundError`` when there is no such session. With ``updated_before``
        (retention: the cutoff ``sessions(updated_before=...)`` listed it by), the session is
        deleted only if its last write is older, checked in the delete itself: one written
        since raises ``ConflictError`` and is kept whole. A naive datetime is UTC.
        """
        sid = validate.key(session_id, "session_id")
        before = self._bind_time(validate.optional_time(updated_before, "updated_before"))
        now = self.backend.now()
        await self._write(
            sid, lambda: queries.delete_session(sid, now, before), operation_id, ends_session=True
        )

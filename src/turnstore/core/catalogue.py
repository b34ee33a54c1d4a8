"""A session's catalogue fields (user, title, metadata): set with a write or on their own."""

from __future__ import annotations

from typing import Any

from ..domain.model import SessionInfo, SessionPatch
from ..errors import ConflictError
from . import statements as S
from .ops import Op
from .reads import session_info

__all__ = ["patch_session", "update_session"]


def patch_session(session_id: str, patch: SessionPatch, now: Any) -> Op[None]:
    yield S.UPDATE_SESSION_INFO(
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
    yield S.ENSURE_SESSION({"sid": session_id, "now": now, "title": None})
    yield from patch_session(session_id, patch, now)
    info = yield from session_info(session_id)
    if info is None:  # the row this transaction locked: never, unless changed by hand
        raise ConflictError(f"session {session_id!r} was deleted while it was updated")
    return info

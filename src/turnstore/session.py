"""``StructuredSession``: the Agents SDK ``Session`` protocol on a turnstore ``Store``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .model import Branch, Run, Usage
from .store import Store

if TYPE_CHECKING:
    from agents.memory.session_settings import SessionSettings

__all__ = ["StructuredSession", "usage_of"]


def usage_of(wrapper: Any) -> Usage | None:
    """The cumulative run usage the SDK carries on its ``RunContextWrapper``, if any."""
    usage = getattr(wrapper, "usage", None)
    if usage is None:
        return None
    input_details = getattr(usage, "input_tokens_details", None)
    output_details = getattr(usage, "output_tokens_details", None)
    return Usage(
        requests=int(getattr(usage, "requests", 0) or 0),
        input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
        total_tokens=int(getattr(usage, "total_tokens", 0) or 0),
        cached_tokens=int(getattr(input_details, "cached_tokens", 0) or 0),
        reasoning_tokens=int(getattr(output_details, "reasoning_tokens", 0) or 0),
    )


def _settings_limit(settings: Any) -> int | None:
    if settings is None:
        return None
    if isinstance(settings, Mapping):
        return settings.get("limit")
    return getattr(settings, "limit", None)


def _coerce_settings(settings: Any) -> Any:
    """The SDK's own ``SessionSettings`` when the SDK is installed (it validates dicts)."""
    try:
        from agents.memory.session_settings import SessionSettings, coerce_session_settings
    except ImportError:
        return settings
    return SessionSettings() if settings is None else coerce_session_settings(settings)


class StructuredSession:
    """A drop-in for the SDK's ``SQLiteSession`` that stores conversations as a tree of runs.

    ``StructuredSession("user_123", "conversations.db")`` (or ``":memory:"``, the default, or a
    ``postgresql://`` URL, or an open ``Store`` to share). Pass it to ``Runner.run(...,
    session=...)``. Besides the SDK protocol it offers the conversation tree: ``runs``,
    ``edit``, ``regenerate``, ``rewind``, ``checkout``, ``branches``, ``siblings``,
    ``delete_branch``.
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        db: str | os.PathLike[str] | Store = ":memory:",
        *,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        """Open ``db`` (a path, URL or shared ``Store``) for the conversation ``session_id``."""
        self.session_settings = _coerce_settings(session_settings)
        if isinstance(db, Store):
            self.store, self._owns_store = db, False
        else:
            self.store, self._owns_store = Store.open(db), True
        self.session_id = session_id
        # Checked through the store so that a bad id fails here, not at the first write.
        from .store import _check_session_id

        _check_session_id(session_id)

    # -- the SDK Session protocol ------------------------------------------------------------

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Any]:
        """The newest ``limit`` items of the active path, oldest first.

        ``limit=None`` falls back to ``session_settings.limit``, and then to everything.
        """
        if limit is None:
            limit = _settings_limit(self.session_settings)
        return await self.store.get_items(self.session_id, limit)

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        """Append ``items`` in one transaction; a user message starts a new run.

        With the SDK's ``wrapper`` its cumulative usage becomes the run's token columns.
        """
        await self.store.add_items(self.session_id, items, usage_of(wrapper))

    async def pop_item(self, *, wrapper: Any = None) -> Any:
        """Remove and return the newest item of the active path, or None."""
        return await self.store.pop_item(self.session_id)

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Delete this conversation: every branch, run, item and tool call."""
        await self.store.clear_session(self.session_id)

    # -- the conversation tree ---------------------------------------------------------------

    async def runs(self) -> list[Run]:
        """The runs of the active path, oldest first."""
        return await self.store.runs(self.session_id)

    async def edit(self, run_id: int, new_input: str | Mapping[str, Any]) -> Run:
        """Start a sibling of ``run_id`` whose user message is ``new_input``; it becomes the head.

        A str replaces the message's content and keeps its role, type and other keys. Continue
        with ``Runner.run(agent, [], session=session)``.
        """
        return await self.store.fork(self.session_id, run_id, new_input)

    async def regenerate(self, run_id: int) -> Run:
        """Start a sibling of ``run_id`` with the same user message; it becomes the head."""
        return await self.store.fork(self.session_id, run_id, None)

    async def rewind(self, run_id: int) -> None:
        """Move the head to ``run_id``'s parent: the next user message starts a sibling."""
        await self.store.move_head(self.session_id, run_id, to_parent=True)

    async def checkout(self, run_id: int) -> None:
        """Move the head to ``run_id`` (any run, on any branch)."""
        await self.store.move_head(self.session_id, run_id, to_parent=False)

    async def branches(self) -> list[Branch]:
        """Every leaf of the tree, with its last user message; ``active`` if the head is on it."""
        return await self.store.branches(self.session_id)

    async def siblings(self, run_id: int) -> list[Run]:
        """``run_id`` and its alternatives, in creation order."""
        return await self.store.siblings(self.session_id, run_id)

    async def delete_branch(self, run_id: int) -> None:
        """Remove ``run_id``, its descendants and the ancestors no other branch reaches."""
        await self.store.delete_branch(self.session_id, run_id)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store this session opened (a shared ``Store`` stays open)."""
        if self._owns_store:
            self.store.close()

    async def aclose(self) -> None:
        """Like ``close``, without blocking the event loop."""
        if self._owns_store:
            await self.store.aclose()

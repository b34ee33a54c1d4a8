"""Chat Completions messages in and out of a session (``formats.chat`` does the converting)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from ..domain import validate
from ..errors import InvalidOperationError
from ..formats.chat import completion_usage, items_to_messages, messages_to_items
from .conversation import ConversationMixin

__all__ = ["ChatMixin", "MessageFormat"]

MessageFormat = Literal["chat"]
"""The message formats ``add_messages`` and ``get_messages`` speak: Chat Completions'."""


def _check_format(value: Any) -> None:
    if value != "chat":
        raise InvalidOperationError(f"format must be 'chat' (Chat Completions), got {value!r:.40}")


class ChatMixin(ConversationMixin):
    """A session written and read as a Chat Completions ``messages`` list."""

    async def add_messages(
        self,
        session_id: str,
        messages: Iterable[Any],
        *,
        format: MessageFormat = "chat",
        usage: Any = None,
        operation_id: str | None = None,
    ) -> int | None:
        """Append ``messages`` (Chat Completions messages: dicts with a ``role``) to the
        session's active path, as the items they are (``formats.chat``), in one transaction.

        ``usage`` is the API response's ``usage`` (its object or dict, or a turnstore
        ``Usage``), added to the run the messages count for, whose id is returned (as
        ``add_items`` does). What ``get_messages`` reads back is the list written.
        """
        _check_format(format)
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
            raise InvalidOperationError(
                "messages must be a list of Chat Completions messages, "
                f"got {type(messages).__name__}"
            )
        items = messages_to_items(messages)
        return await self.add_items(
            session_id, items, completion_usage(usage), operation_id=operation_id
        )

    async def get_messages(
        self, session_id: str, limit: int | None = None, *, format: MessageFormat = "chat"
    ) -> list[dict[str, Any]]:
        """The active path as Chat Completions messages, the newest ``limit`` (all when None),
        oldest first. Items no chat message holds (reasoning, hosted tools) are left out."""
        _check_format(format)
        if limit is not None and validate.count(limit, "limit") == 0:
            return []
        messages = items_to_messages(await self.get_items(session_id))
        return messages if limit is None else messages[-limit:]

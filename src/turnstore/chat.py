"""``ChatSession``: turnstore for an application that keeps a Chat Completions ``messages``
list, without the Agents SDK."""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any

from .domain import validate
from .store import Store

__all__ = ["ChatSession"]


class ChatSession:
    """One conversation kept as Chat Completions messages in a turnstore database.

    ``ChatSession("chat-1", store)`` over an open ``Store``, or ``ChatSession.open("chat-1",
    "chats.db")`` with a store of its own (closed with the session)::

        messages = await chat.get_messages()
        messages.append({"role": "user", "content": question})
        reply = await client.chat.completions.create(model=..., messages=messages)
        await chat.add_messages([messages[-1], reply.choices[0].message.to_dict()],
                                usage=reply.usage)

    Its runs, tool calls and tokens land in the same tables, columns and queries as the
    Agents SDK's; ``get_messages`` returns exactly the messages added.
    """

    def __init__(self, session_id: str, store: Store, *, owns_store: bool = False) -> None:
        self.session_id = validate.key(session_id, "session_id")
        self.store = store
        self._owns_store = owns_store

    @classmethod
    def open(cls, session_id: str, target: str = ":memory:", **options: Any) -> ChatSession:
        """A session on a store of its own, opened from ``target`` as ``Store.open`` does."""
        return cls(session_id, Store.open(target, **options), owns_store=True)

    async def add_messages(self, messages: Iterable[Any], *, usage: Any = None) -> int | None:
        """Append ``messages``; ``usage`` is the API response's (see ``Store.add_messages``)."""
        return await self.store.add_messages(self.session_id, messages, usage=usage)

    async def get_messages(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The conversation's messages (the newest ``limit``), oldest first."""
        return await self.store.get_messages(self.session_id, limit)

    async def clear(self) -> None:
        """Start the conversation afresh (the old messages stay in the tree, as a clear does)."""
        await self.store.clear_session(self.session_id)

    async def aclose(self) -> None:
        """Close the store if the session opened it."""
        if self._owns_store:
            await self.store.aclose()

    async def __aenter__(self) -> ChatSession:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

"""``Store``: the async facade over one database, shared by sessions and queries."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from .backends import base
from .backends.base import Backend
from .errors import ConfigurationError, InvalidOperationError
from .model import Branch, Run, SessionInfo, Usage

__all__ = ["Store"]


def _open_backend(target: str | os.PathLike[str], options: Mapping[str, Any]) -> Backend:
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise ConfigurationError(
            f"a database is a path, ':memory:' or a URL, not {type(target).__name__}"
        )
    scheme = urlsplit(target).scheme.lower() if "://" in target else ""
    if scheme in ("postgresql", "postgres"):
        try:
            from .backends.postgres import PostgresBackend
        except ImportError as exc:
            raise ConfigurationError(
                "PostgreSQL needs the postgres extra: pip install 'turnstore[postgres]'"
            ) from exc
        return PostgresBackend(target, **options)
    from .backends.sqlite import SQLiteBackend

    if scheme == "sqlite":
        # sqlite:///relative.db, sqlite:////absolute.db, sqlite:// (memory)
        path = target[len("sqlite://") :]
        path = path[1:] if path.startswith("/") else path
        return SQLiteBackend(path or ":memory:", **options)
    if scheme:
        raise ConfigurationError(
            f"unknown database URL scheme {scheme!r} in {target!r}: "
            "use a file path, ':memory:', sqlite:///path or postgresql://…"
        )
    if not target:
        raise ConfigurationError("the database path is empty")
    return SQLiteBackend(target, **options)


def _check_session_id(session_id: Any) -> str:
    if not isinstance(session_id, str):
        raise ConfigurationError(f"session_id must be a str, got {type(session_id).__name__}")
    return session_id


class Store:
    """One database of conversations: open it once, share it between sessions and queries.

    ``Store.open(":memory:")``, ``Store.open("conversations.db")`` or
    ``Store.open("postgresql://host/db")``. Close it with ``close()`` / ``aclose()`` or use it
    as a (async) context manager.
    """

    def __init__(self, backend: Backend) -> None:
        """Wrap an open backend; most callers want ``Store.open``."""
        self.backend = backend

    @classmethod
    def open(cls, target: str | os.PathLike[str] = ":memory:", **options: Any) -> Store:
        """Open (creating or upgrading its schema) the database named by a path or URL.

        Keyword options go to the backend (SQLite: ``busy_timeout``, ``durable``).
        """
        return cls(_open_backend(target, options))

    # -- per-session operations (StructuredSession is a thin layer over these) ---------------

    async def add_items(
        self, session_id: str, items: Sequence[Any], usage: Usage | None = None
    ) -> None:
        """Append a batch to ``session_id``'s active path in one transaction."""
        sid = _check_session_id(session_id)
        batch = base.prepare_items(items)
        if not batch and usage is None:
            return
        now = self.backend.now()
        await self.backend.run(lambda: base.append(sid, batch, now, usage), write=True)

    async def get_items(self, session_id: str, limit: int | None = None) -> list[Any]:
        """The newest ``limit`` items of the active path (all when None), oldest first."""
        sid = _check_session_id(session_id)
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise InvalidOperationError(f"limit must be None or an int >= 0, got {limit!r}")
            if limit == 0:
                return []
        return await self.backend.run(lambda: base.get_items(sid, limit), write=False)

    async def pop_item(self, session_id: str) -> Any:
        """Remove and return the newest item of the active path, or None."""
        sid = _check_session_id(session_id)
        now = self.backend.now()
        return await self.backend.run(lambda: base.pop_item(sid, now), write=True)

    async def clear_session(self, session_id: str) -> None:
        """Delete the session with every branch and derived row."""
        sid = _check_session_id(session_id)
        await self.backend.run(lambda: base.clear_session(sid), write=True)

    async def session(self, session_id: str) -> SessionInfo | None:
        """The session's catalogue entry, or None if it has never been written."""
        sid = _check_session_id(session_id)
        return await self.backend.run(lambda: base.session_info(sid), write=False)

    async def runs(self, session_id: str) -> list[Run]:
        """The active path's runs, root first."""
        sid = _check_session_id(session_id)
        return await self.backend.run(lambda: base.path_runs(sid), write=False)

    async def fork(
        self, session_id: str, run_id: int, new_input: str | Mapping[str, Any] | None
    ) -> Run:
        """A new sibling of ``run_id`` with its user message (or ``new_input``); it is the head."""
        sid = _check_session_id(session_id)
        if new_input is not None and not isinstance(new_input, (str, Mapping)):
            raise InvalidOperationError(
                f"new input must be a str or a user message item, got {type(new_input).__name__}"
            )
        now = self.backend.now()
        return await self.backend.run(lambda: base.fork(sid, run_id, new_input, now), write=True)

    async def move_head(self, session_id: str, run_id: int, *, to_parent: bool) -> int | None:
        """Point the head at ``run_id`` (``to_parent``: at its parent); returns the new head."""
        sid = _check_session_id(session_id)
        now = self.backend.now()
        return await self.backend.run(
            lambda: base.move_head(sid, run_id, to_parent=to_parent, now=now), write=True
        )

    async def branches(self, session_id: str) -> list[Branch]:
        """Every leaf of the session's tree, oldest first."""
        sid = _check_session_id(session_id)
        return await self.backend.run(lambda: base.branches(sid), write=False)

    async def siblings(self, session_id: str, run_id: int) -> list[Run]:
        """``run_id`` and its alternatives (same parent), in creation order."""
        sid = _check_session_id(session_id)
        return await self.backend.run(lambda: base.siblings(sid, run_id), write=False)

    async def delete_branch(self, session_id: str, run_id: int) -> int | None:
        """Remove ``run_id``'s subtree and the ancestors only it reaches; returns the head."""
        sid = _check_session_id(session_id)
        now = self.backend.now()
        return await self.backend.run(lambda: base.delete_branch(sid, run_id, now), write=True)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database. Idempotent."""
        self.backend.close()

    async def aclose(self) -> None:
        """Close the database without blocking the event loop."""
        await self.backend.aclose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

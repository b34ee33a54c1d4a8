"""The seam between the domain core and the backends: queries, operations, the protocol.

Each operation (append items, pop, edit, …) is written once, as a generator that yields
``Query`` requests and receives their results: the logic never touches a driver. A backend
supplies the SQL for each statement and a driver that runs one operation inside one
transaction: synchronously on SQLite's worker thread, asynchronously on PostgreSQL. So the
tree, pairing and usage rules cannot drift apart between backends, and an operation can be
retried whole after a transient failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Protocol, TypeVar

__all__ = ["Backend", "Fetch", "Op", "Query", "finish_write", "utc"]

T = TypeVar("T")


class Fetch(Enum):
    """What a query's caller wants back."""

    NONE = 0  # nothing (DDL, UPDATE, DELETE)
    ONE = 1  # the first row, or None
    ALL = 2  # every row
    ID = 3  # the id of the row an INSERT made (its SQL returns it where the driver cannot)


@dataclass(frozen=True, slots=True)
class Query:
    """One statement: a name in the backend's SQL table (or raw DDL) and its parameters."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    fetch: Fetch = Fetch.NONE
    raw: bool = False  # ``name`` is the SQL itself (migrations)


Op = Generator[Query, Any, T]
"""An operation: yields queries, receives their results, returns its value."""


class Backend(Protocol):
    """A storage engine: runs operations, each in one transaction.

    Besides running operations it answers what callers need to know of it, so that none
    guesses from its class or its values: its SQL ``dialect``, a ``label`` to show, whether it
    is ``read_only`` or ``closed``, its schema versions, and how it binds a time.
    """

    @property
    def dialect(self) -> str:
        """The SQL the database speaks: ``"sqlite"`` or ``"postgresql"``."""
        ...

    @property
    def label(self) -> str:
        """What names the database to a person, never with a password: SQLite's path as
        opened (``:memory:`` included), ``PostgreSQL at user@host:port/dbname``."""
        ...

    read_only: bool
    """Opened read-only: ``run(..., write=True)`` raises ``ReadOnlyError``."""

    found_version: int | None
    """The schema version the database had when opened (None: it held no turnstore schema)."""

    @property
    def schema_version(self) -> int:
        """The schema version this backend's migrations lead to: every database it opens is
        at that version once open (an older one is migrated, or refused read-only or with
        ``migrate=False``; a newer one is refused)."""
        ...

    @property
    def closed(self) -> bool:
        """Whether ``close`` (or ``aclose``) has run."""
        ...

    async def run(self, op: Callable[[], Op[T]], *, write: bool) -> T:
        """Run the operation ``op()`` in one transaction and return its value.

        ``op`` is a factory so that a backend may retry a transient failure from scratch.
        """
        ...

    def now(self) -> Any:
        """The current time, as this backend binds timestamps."""
        ...

    def bind_time(self, when: datetime) -> Any:
        """``when`` as this backend binds timestamps (as ``now`` returns them); a naive
        datetime is UTC."""
        ...

    def close(self) -> None:
        """Release connections and threads. Idempotent."""
        ...

    async def aclose(self) -> None:
        """Like ``close``, awaitable."""
        ...


def utc(when: datetime) -> datetime:
    """``when`` in UTC, a naive datetime read as UTC (as SQLite's timestamps are): what each
    backend's ``bind_time`` starts from."""
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


async def finish_write(write: Awaitable[T]) -> T:
    """Await ``write`` to its end, even when the caller is cancelled meanwhile.

    Every backend's ``run(..., write=True)`` goes through here. A cancellation (a task's
    ``cancel()``, a ``wait_for`` timeout) that arrives while a write runs or waits for a lock
    is held back until the write has committed (it then propagates, so a ``CancelledError``
    from a write means the write is stored) or failed (its error propagates instead): a write
    that has started is never dropped nor left running behind the caller's back.
    """
    task = asyncio.ensure_future(write)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError as exc:
            if task.done():  # the write itself was cancelled (its loop is shutting down)
                raise
            cancelled = exc
    if cancelled is not None:
        raise cancelled
    return result

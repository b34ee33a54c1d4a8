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
from enum import Enum
from typing import Any, Protocol, TypeVar

__all__ = ["Backend", "Fetch", "Op", "Query", "finish_write"]

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
    """A storage engine: runs operations, each in one transaction."""

    read_only: bool
    """Opened read-only: ``run(..., write=True)`` raises ``ReadOnlyError``."""

    found_version: int | None
    """The schema version the database had when opened (None: it held no turnstore schema)."""

    async def run(self, op: Callable[[], Op[T]], *, write: bool) -> T:
        """Run the operation ``op()`` in one transaction and return its value.

        ``op`` is a factory so that a backend may retry a transient failure from scratch.
        """
        ...

    def now(self) -> Any:
        """The current time, as this backend binds timestamps."""
        ...

    def close(self) -> None:
        """Release connections and threads. Idempotent."""
        ...

    async def aclose(self) -> None:
        """Like ``close``, awaitable."""
        ...


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

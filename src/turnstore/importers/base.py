"""What every source reads into: a session as a tree of ``SourceRun``, cut at user messages
as the store cuts runs; ``Source``, the interface of each kind of source.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from ..core.codec import loads_item
from ..domain import validate
from ..domain.items import classify
from ..domain.model import Usage
from ..errors import InvalidOperationError
from ..formats.rows import ExactSession

__all__ = [
    "ReadSource",
    "Source",
    "SourceRow",
    "SourceRun",
    "SourceSession",
    "TreeBuilder",
    "as_datetime",
    "decode_item",
    "linear_session",
    "runs_of",
]


@dataclass(eq=False)
class SourceRun:
    """One run read from a source: a user message (except at a root) and what followed it."""

    items: list[dict[str, Any]]
    key: Hashable = None  # the run's identity in its source, to merge branches that share it
    usage: Usage | None = None
    created_at: datetime | None = None
    children: list[SourceRun] = field(default_factory=list)
    # The name of the source's branch this run starts (its first run on no older branch).
    branch_name: str | None = None


@dataclass(eq=False)
class SourceSession:
    """One conversation read from a source, as a tree of runs."""

    session_id: str
    roots: list[SourceRun] = field(default_factory=list)
    head: SourceRun | None = None
    skipped: int = 0  # source rows that cannot be imported (corrupt JSON or usage, not objects)
    # Catalogue fields (user_id, title, metadata) the source holds: turnstore's JSON exports.
    catalogue: dict[str, Any] | None = None
    # Every row of the session as turnstore's exports carry them (version 2): what a store
    # that lacks the session is given exactly, with the copy's writer.
    exact: ExactSession | None = None

    def walk(self) -> Iterator[tuple[SourceRun, SourceRun | None]]:
        """Every run with its parent, parents first and siblings in order (no recursion)."""
        stack: list[tuple[SourceRun, SourceRun | None]] = [(r, None) for r in reversed(self.roots)]
        while stack:
            run, parent = stack.pop()
            yield run, parent
            stack.extend((child, run) for child in reversed(run.children))


class TreeBuilder:
    """Builds a ``SourceSession`` from root-to-leaf paths, merging runs with equal keys."""

    def __init__(self, session: SourceSession) -> None:
        self.session = session
        self._index: dict[tuple[int, Hashable], SourceRun] = {}

    def add_path(self, runs: Iterable[SourceRun], name: str | None = None) -> SourceRun | None:
        """Add a path of runs (root first); return its leaf as stored in the tree. ``name``
        (the source's name of the branch) goes to the path's first run new to the tree: a
        path with none of its own is a branch turnstore has no handle for, and its name goes."""
        parent: SourceRun | None = None
        for run in runs:
            slot = (id(parent), run.key)
            existing = self._index.get(slot)
            if existing is None:
                (parent.children if parent is not None else self.session.roots).append(run)
                self._index[slot] = existing = run
                run.branch_name, name = name, None
            elif existing.usage is None:
                existing.usage = run.usage
            parent = existing
        return parent


# ---------------------------------------------------------------------------------------------
# Sources


class Source(ABC):
    """A place conversations are read from, one session at a time."""

    kind: str
    location: str
    skipped: int = 0  # rows of no readable session (a session id that is not text, …)

    @abstractmethod
    async def session_ids(self) -> list[str]:
        """The ids of the sessions the source holds, oldest first."""

    @abstractmethod
    async def total_items(self) -> int:
        """About how many items the source holds (for progress)."""

    @abstractmethod
    async def load(self, session_id: str) -> SourceSession:
        """Read one session."""

    async def aclose(self) -> None:  # noqa: B027 - most sources have nothing to release
        """Release the source."""


class ReadSource(Source):
    """A source read whole when it is opened (a file): its sessions held, in the file's
    order, with how many items they hold."""

    def __init__(self) -> None:
        self._sessions: dict[str, SourceSession] = {}
        self._total = 0

    async def session_ids(self) -> list[str]:
        """Sessions in the order the file holds them."""
        return list(self._sessions)

    async def total_items(self) -> int:
        """Items read."""
        return self._total

    async def load(self, session_id: str) -> SourceSession:
        """One session, already read."""
        return self._sessions[session_id]


def decode_item(data: Any) -> dict[str, Any] | None:
    """A stored item; None for corrupt JSON (the SDK skips it too), text that is not UTF-8, or
    JSON that is no object."""
    try:
        if isinstance(data, bytes):
            data = data.decode("utf-8", "surrogatepass")
        item = loads_item(data)
    except (TypeError, ValueError, RecursionError):
        return None
    return item if type(item) is dict else None


def as_datetime(value: Any) -> datetime | None:
    """A source's time, or None where it holds none the database can store (not ISO 8601,
    or not movable to UTC, as 0001-01-01T00:00+14:00 is not)."""
    if not isinstance(value, (str, datetime)):
        return None
    try:
        if isinstance(value, str):
            return validate.iso_time(value, "a time")
        return validate.optional_time(value, "a time")
    except InvalidOperationError:
        return None


class SourceRow(NamedTuple):
    """One stored item of a source, as its reader reads it."""

    key: Any  # the source's key of the item (its row id)
    data: Any  # the stored JSON
    created_at: Any  # the source's time, checked by ``as_datetime``


def runs_of(rows: Iterable[SourceRow], session: SourceSession) -> list[tuple[SourceRun, list[Any]]]:
    """Split one branch's rows into runs at user messages; returns (run, keys of its items)."""
    keys: list[Any] = []
    times: list[Any] = []
    items: list[dict[str, Any]] = []
    for row in rows:
        item = decode_item(row.data)
        if item is None:
            session.skipped += 1
            continue
        keys.append(row.key)
        times.append(row.created_at)
        items.append(item)
    return _split(items, keys, times)


def _starts_run(item: dict[str, Any]) -> bool:
    # The store's rule (``classify``), asked only of items that can be user messages: it is
    # most of the cost of reading, and is paid once more while writing.
    return item.get("role") == "user" and classify(item).starts_run


def _split(
    items: Sequence[dict[str, Any]], keys: Sequence[Any], times: Sequence[Any]
) -> list[tuple[SourceRun, list[Any]]]:
    """Cut a path of items into runs where the store would: at each user message."""
    runs: list[tuple[SourceRun, list[Any]]] = []
    for item, key, created_at in zip(items, keys, times, strict=True):
        if not runs or _starts_run(item):
            runs.append((SourceRun([], created_at=as_datetime(created_at)), []))
        runs[-1][0].items.append(item)
        runs[-1][1].append(key)
    for run, run_keys in runs:
        run.key = tuple(run_keys)
    return runs


def linear_session(session_id: str, rows: Iterable[SourceRow]) -> SourceSession:
    session = SourceSession(session_id)
    builder = TreeBuilder(session)
    session.head = builder.add_path(run for run, _ in runs_of(rows, session))
    return session

"""The seam between the domain core and the backends: queries, operations, the protocol.

Each operation (append items, pop, edit, …) is written once, as a generator that yields
``Query`` requests and receives their results: the logic never touches a driver. A query
names a ``Statement`` (declared once, as a symbol, in ``core.statements``: its fetch kind and
the named row type it returns); a backend supplies each statement's SQL in its dialect and a
driver that runs one operation inside one transaction: synchronously on SQLite's worker
thread, asynchronously on PostgreSQL. So the tree, pairing and usage rules cannot drift apart
between backends, and an operation can be retried whole after a transient failure.

An operation reads rows by name (``row.depth``), never by position: the driver builds each
row as the statement's row type, after checking once that the columns the database returns
are the ones the row type declares, so a column added or moved fails loudly. What a backend
lacks is a ``Capability`` it does not have; an operation asks with ``supports``, which
the driver answers before it starts.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum, Flag, auto
from functools import partial
from typing import Any, Generic, Literal, Protocol, TypeVar, overload

from ..errors import ClosedError

__all__ = [
    "DRIVING",
    "All",
    "Backend",
    "Capability",
    "Execute",
    "Fetch",
    "Group",
    "Insert",
    "One",
    "Op",
    "Query",
    "Statement",
    "Unchanged",
    "Value",
    "Values",
    "finish_write",
    "forked_away",
    "last",
    "noting_stored",
    "step",
    "stored_cancellation",
    "supports",
    "utc",
]

T = TypeVar("T")
R = TypeVar("R")

_NO_PARAMS: Mapping[str, Any] = {}


class Fetch(Enum):
    """What a query's caller gets back."""

    NONE = 0  # nothing (DDL, UPDATE, DELETE)
    ONE = 1  # the first row, or None
    ALL = 2  # every row
    ID = 3  # the id of the row an INSERT made (its SQL returns it where the driver cannot)
    VALUE = 4  # the first row's only column, or None when there is no row
    VALUES = 5  # every row's only column
    # Raw SQL only: (column names, every row) of one statement, which may not be more than one
    # (``turnstore query``: a second statement could end the read-only transaction).
    TABLE = 7
    GROUP = 8  # a Group: each of its queries' results, in order


class Capability(Flag):
    """What some backends can do and others cannot; a statement may need one.

    An operation asks with ``supports`` before it runs a statement that needs one: a
    backend's dialect provides every statement but those of capabilities it lacks.
    """

    NONE = 0
    UPSERT_HEAD = auto()
    """Create a session and read its locked head in one statement (SQLite: BEGIN IMMEDIATE
    already holds the write lock; PostgreSQL locks first and reads after)."""
    SEARCH_BACKLOG = auto()
    """The search index is fed in batches, so it may lack the newest items (SQLite's FTS5);
    a read-only store searches a private copy of that backlog."""
    SDK_ADOPTION = auto()
    """The database may hold the SDK's own session tables, to adopt (SQLite files)."""
    IDS_AHEAD = auto()
    """A row's id can be had before its insert (PostgreSQL's sequences), in the same round
    trip as the session's lock: the insert then need not wait for its ``RETURNING``."""
    SEARCH_PROBE = auto()
    """The search index cannot give a word's newest matches first (PostgreSQL's GIN): a
    search reads the newest items first, and what they hold chooses how it reads below them:
    backwards, or through the index."""
    STATISTICS = auto()
    """The planner estimates from statistics that a bulk load leaves stale until they are
    taken again (PostgreSQL's ANALYZE; ``core.transfer.refresh_statistics``). SQLite has
    none unless a user runs ANALYZE, and its plans of a session's runs hold however stale
    they are: it counts an equality on more of an index's columns as more selective, so the
    (session_id, parent_id) index beats runs_session_totals, and a run by id is its rowid."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Statement:
    """One SQL statement, declared once (``core.statements``): its name, what it returns,
    and its SQL where every dialect runs the same text (``:name`` placeholders, rendered per
    dialect), else None (each dialect writes its own).

    Calling it with its parameters makes the ``Query`` an operation yields:
    ``row: HeadRow | None = yield LOCK_HEAD({"sid": sid})``. The statement's class says what
    the query returns (``Execute``: None, ``Insert``: the new id, ``One``, ``All``, ``Value``,
    ``Values``: rows of the row type the statement names, or their one column).
    """

    name: str
    sql: str | None = None
    needs: Capability = Capability.NONE
    """The capability a backend needs to run it (NONE: every backend runs it)."""
    replan: bool = False
    """Planned with its parameters' values at every call, never by a cached generic plan
    (PostgreSQL's prepared statements): for a statement whose best plan depends on them."""

    fetch = Fetch.NONE
    columns: tuple[str, ...] = ()
    """The columns it returns, by name, in the order the row type declares them."""
    make: Callable[[Any], Any] | None = field(default=None, init=False)
    """Builds a row of its row type from the driver's row (a sequence in ``columns`` order)."""

    def __call__(self, params: Mapping[str, Any] = _NO_PARAMS) -> Query:
        # The hot path of every operation (a write turn runs twenty statements): one Python
        # call, the query's slots filled here rather than by a second call to its __init__.
        query = _new_query(Query)
        query.statement = self
        query.params = params
        query.fetch = self.fetch
        query.raw = False
        query.last = False
        return query

    def __repr__(self) -> str:
        return f"<statement {self.name}>"


class Execute(Statement):
    """A statement that returns nothing (DDL, UPDATE, DELETE, INSERT)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Insert(Statement):
    """An INSERT of one row; the query returns the new row's ``id``."""

    fetch = Fetch.ID
    columns: tuple[str, ...] = ("id",)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _Rows(Statement, Generic[R]):
    """Rows of ``row``, a NamedTuple whose fields name the columns, in order."""

    row: type[R] | None = None

    def __post_init__(self) -> None:
        if self.row is None:
            raise TypeError(f"statement {self.name} names no row type")
        object.__setattr__(self, "columns", tuple(self.row._fields))  # type: ignore[attr-defined]
        # The row type's _make without its Python frame and length check (the driver checks
        # the columns once per statement): one C call per row read.
        object.__setattr__(self, "make", partial(tuple.__new__, self.row))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class One(_Rows[R]):
    """A statement whose query returns its first row (a ``row``, a NamedTuple), or None."""

    fetch = Fetch.ONE


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class All(_Rows[R]):
    """A statement whose query returns every row, each a ``row`` (a NamedTuple)."""

    fetch = Fetch.ALL


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _Column(Statement, Generic[R]):
    """One column, by name."""

    column: str = ""
    holds: type[R] | None = None  # what the column holds (for the reader's type checker)

    def __post_init__(self) -> None:
        if not self.column:
            raise TypeError(f"statement {self.name} names no column")
        object.__setattr__(self, "columns", (self.column,))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Value(_Column[R]):
    """A statement of one column, whose query returns the first row's value, or None when
    there is no row (or the value is NULL)."""

    fetch = Fetch.VALUE


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Values(_Column[R]):
    """A statement of one column, whose query returns every row's value."""

    fetch = Fetch.VALUES


class Query:
    """One request of an operation: a statement and its parameters, or raw SQL (migrations,
    tests)."""

    __slots__ = ("fetch", "last", "params", "raw", "statement")

    statement: Statement | str
    params: Mapping[str, Any]
    fetch: Fetch
    raw: bool  # ``statement`` is the SQL itself
    last: bool  # the operation's last query (``last``)

    @overload
    def __init__(self, statement: Statement, params: Mapping[str, Any] = ...) -> None: ...
    @overload
    def __init__(
        self,
        statement: str,
        params: Mapping[str, Any] = ...,
        fetch: Fetch = ...,
        *,
        raw: Literal[True],
    ) -> None: ...
    def __init__(
        self,
        statement: Statement | str,
        params: Mapping[str, Any] = _NO_PARAMS,
        fetch: Fetch | None = None,
        *,
        raw: bool = False,
    ) -> None:
        self.statement = statement
        self.params = params
        self.raw = raw
        self.last = False
        self.fetch = (fetch or Fetch.NONE) if raw else statement.fetch  # type: ignore[union-attr]

    def __repr__(self) -> str:
        return f"Query({self.statement!r}, {dict(self.params)!r})"


_new_query = object.__new__


class Group(Query):
    """Queries an operation needs answered together, yielded as one: it receives a tuple of
    their results, in order. PostgreSQL's driver sends them all before it waits for the
    first answer (one round trip); SQLite's runs them in a row."""

    __slots__ = ("queries",)

    def __init__(self, queries: Sequence[Query]) -> None:
        self.queries = tuple(queries)
        self.statement = "group"
        self.params = _NO_PARAMS
        self.fetch = Fetch.GROUP
        self.raw = False
        self.last = False

    def __repr__(self) -> str:
        return f"Group({list(self.queries)!r})"


def last(query: Query) -> Query:
    """``query`` marked as its operation's last: the operation returns what it makes of the
    result and yields nothing after it. A driver may end a read's transaction along with it
    (PostgreSQL sends the ROLLBACK with the query: one round trip, not two); a query yielded
    after it is an error."""
    query.last = True
    return query


class Unchanged(Exception):
    """Raised by an operation to end with ``value`` and none of its writes: the driver rolls
    the transaction back and returns ``value`` (``core.once``: a write found applied already,
    after its first statements ran beside the check)."""

    def __init__(self, value: Any) -> None:
        super().__init__("the operation ends without its writes")
        self.value = value


Op = Generator[Query, Any, T]
"""An operation: yields queries, receives their results, returns its value."""

DRIVING: ContextVar[Capability] = ContextVar("turnstore_driving")
"""The capabilities of the backend whose driver is running an operation in this context:
each driver sets it around the operations it drives (``supports`` reads it)."""


def step(op: Op[T], result: Any, capabilities: Capability) -> Query:
    """``op``'s next query, sent ``result``, with ``DRIVING`` set to ``capabilities`` for that
    step only: a driver that awaits between steps must not hold the variable's token across
    the await, since a cancelled task's coroutine may be closed in another context, where the
    token cannot be reset."""
    token = DRIVING.set(capabilities)
    try:
        return op.send(result)
    finally:
        DRIVING.reset(token)


def supports(capability: Capability) -> bool:
    """Whether the backend running the operation has ``capability``.

    Answered from ``DRIVING`` rather than asked of the driver with a query: an operation is
    only ever run by one driver, which knows its backend's capabilities before it starts.
    """
    try:
        return capability in DRIVING.get()
    except LookupError:
        raise RuntimeError("supports() asked outside a backend's driver") from None


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

    capabilities: Capability
    """What this backend can do that others may not (``supports`` asks from an operation)."""

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


# The mark finish_write sets on the cancellation it held until its write was stored.
_STORED = "_turnstore_stored"


def stored_cancellation(error: BaseException) -> bool:
    """Whether ``error`` is the cancellation ``finish_write`` held until its write was
    stored, raised then.

    A plain ``CancelledError`` out of a task that runs a write may be the write's own (a loop
    shutting down cancels every task, the write's too, which then stores nothing): this one
    says the write is stored. It reaches code awaiting the write in the same task (and the
    first awaiter of a task that ended with it: Python hands that awaiter the task's own);
    a task's other awaiters, and a shield's, get a new ``CancelledError`` (``noting_stored``
    tells them apart). A mark on the ``CancelledError`` itself, not a subclass: Python
    3.11's ``asyncio.timeout`` and ``TaskGroup`` recognise their cancellation by its type
    (``is CancelledError``), and a subclass came out of them as a cancellation instead of
    ``TimeoutError`` or nothing.
    """
    return getattr(error, _STORED, False) is True


async def finish_write(write: Awaitable[T]) -> T:
    """Await ``write`` to its end, even when the caller is cancelled meanwhile.

    Every backend's ``run(..., write=True)`` goes through here. A cancellation (a task's
    ``cancel()``, a ``wait_for`` timeout) that arrives while a write runs or waits for a lock
    is held back until the write has committed (it then propagates, marked so that
    ``stored_cancellation`` says so: a ``CancelledError`` from a write means the write is
    stored) or failed (its error propagates instead): a write that has started is never
    dropped nor left running behind the caller's back.
    """
    task = asyncio.ensure_future(write)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError as exc:
            if task.cancelled():  # the write itself was cancelled (its loop is shutting down)
                raise
            cancelled = exc  # a write that ended meanwhile: its outcome, at the next await
    if cancelled is not None:
        setattr(cancelled, _STORED, True)
        raise cancelled
    return result


async def noting_stored(write: Callable[[], Awaitable[T]], stored: Callable[[], None]) -> T:
    """``write()``, a write awaited in this task (for a write run as a task of its own, whose
    ``CancelledError`` does not say whether it was stored), calling ``stored()`` once it is
    stored: when it returns, or raises a ``stored_cancellation``. A task cancelled before it
    started never calls ``write``, so nothing is stored and ``stored`` is not called."""
    try:
        result = await write()
    except asyncio.CancelledError as cancelled:
        if stored_cancellation(cancelled):
            stored()
        raise
    stored()
    return result


def forked_away(pid: int) -> ClosedError:
    """What a store opened in process ``pid`` raises in a forked child of it, where the
    thread that serves it (SQLite's worker, PostgreSQL's event loop) does not exist: waiting
    for that thread would wait forever."""
    return ClosedError(
        f"this store was opened in process {pid}, and this process ({os.getpid()}) is a fork "
        "of it: the store's worker is not here, so it cannot be used in this process; open "
        "a store here, after the fork (StructuredSession does so by itself)"
    )

"""The PostgreSQL backend, on psycopg 3 (async) and a ``psycopg_pool`` connection pool.

Threads and loops: by default the backend owns its pool, and runs it on an event loop in a
thread of its own (loop.py); ``run`` hands each operation to that loop and awaits the result.
So a store opens and closes synchronously (``StructuredSession``'s constructor and ``close``
are sync, as in the SDK) and one store serves any thread and any event loop. A pool the caller
passes (``pool=``) belongs to the caller's loop: operations then run on the caller's loop, and
the pool is never closed by turnstore.

Each operation runs in one transaction, re-run whole after a transient failure
(transaction.py). A write, once started, finishes before a cancellation reaches the caller
(ops.finish_write).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from ..core.ops import Capability, Fetch, Op, Query, finish_write, forked_away, utc
from ..core.schema import migrate_step, stored_version
from ..domain.targets import DEFAULT_SCHEMA, check_schema, split_schema
from ..domain.validate import option_text
from ..errors import (
    ClosedError,
    ConfigurationError,
    ConnectionFailedError,
    ReadOnlyError,
    SchemaError,
)
from . import migrations  # MIGRATIONS read at each open: a test may shorten the history there
from .errors import connect_error, driver_error
from .loop import LoopThread, stop_loop
from .sql import DIALECT
from .transaction import Retry, Transactions, configure
from .url import describe, parse_url

__all__ = ["PostgresBackend", "now"]

# A server that vanishes without a word (its host down, a network partition) leaves a query
# waiting for an answer, and a write's cancellation waits for its write (see finish_write).
# libpq probes a silent connection, but with the kernel's timings only after two hours; these
# find a dead peer in about a minute and fail the wait as a lost connection. A live server's
# kernel answers the probes however long its query runs. The URL and connect_kwargs win.
KEEPALIVES = {"keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}


T = TypeVar("T")


def now() -> datetime:
    """The current time as this backend binds it: an aware UTC datetime (TIMESTAMPTZ)."""
    return datetime.now(timezone.utc)


def _identifier(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


class PostgresBackend:
    """A PostgreSQL database, reached through a psycopg connection pool.

    ``PostgresBackend("postgresql://user@host/db", schema="public", min_size=1, max_size=10)``
    opens its own pool (closed by ``close``). ``PostgresBackend(pool=pool, schema=...)`` uses
    an open ``psycopg_pool.AsyncConnectionPool`` the caller owns: operations then run on the
    caller's event loop and the pool is never closed here; the schema is checked (and created
    or upgraded) at the first operation.
    """

    capabilities: Capability = DIALECT.capabilities

    def __init__(
        self,
        url: str | None = None,
        *,
        schema: str | None = None,
        pool: AsyncConnectionPool[Any] | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
        pool_timeout: float = 30.0,
        retries: int = 5,
        migrate: bool = True,
        read_only: bool = False,
        connect_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """Open the database at ``url`` (or use ``pool``) and create or upgrade its schema.

        ``schema`` is the PostgreSQL schema that holds turnstore's tables (created if
        missing): this, else the one the URL names (``?schema=NAME``, or libpq's
        ``?options=-csearch_path%3DNAME``; see targets.py), else ``public``.
        ``min_size``/``max_size`` size the pool; ``connect_timeout`` bounds each connection
        attempt, ``pool_timeout`` the wait for a free connection. ``retries`` is how
        many times a transiently failed operation is re-run. ``migrate=False`` never changes
        the schema and refuses a database that is not at this turnstore's version (for read
        replicas, or when migrations are a deployment step). ``read_only=True`` also never
        creates a schema, runs every operation in a READ ONLY transaction and refuses writes
        with ``ReadOnlyError``. ``connect_kwargs`` go to
        ``psycopg.AsyncConnection.connect`` (e.g. ``sslmode``, ``prepare_threshold``).
        """
        if isinstance(url, str):
            url, schema = split_schema(url, schema)
        else:
            schema = check_schema(DEFAULT_SCHEMA if schema is None else schema)
        if retries < 0 or min_size < 0 or max_size < max(min_size, 1):
            raise ConfigurationError(
                "need retries >= 0 and 0 <= min_size <= max_size with max_size >= 1"
            )
        if not (connect_timeout > 0 and pool_timeout > 0):
            # With no time to connect, the open would fail after creating the schema.
            raise ConfigurationError("connect_timeout and pool_timeout must be > 0 seconds")
        self.schema = schema
        self.found_version: int | None = None
        """The schema version found at opening (None: no turnstore schema); with a caller's
        pool, known after the first operation."""
        self.read_only = bool(read_only)
        self._migrate = migrate and not self.read_only
        self._connect_timeout = max(2, round(connect_timeout))  # libpq's minimum is 2 s
        self._closed = False
        self._pid = os.getpid()  # a forked child has not our loop thread: see run and close
        self._state = threading.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()  # operations on our loop (its thread only)
        self._lock_sql = f"SELECT pg_advisory_xact_lock({_lock_key(schema)})"
        # Set in every transaction (queued with BEGIN: no round trip), never per connection,
        # so that a caller's connections keep their settings and a transaction-pooling proxy
        # (PgBouncer) cannot hand us a connection with another search_path.
        self._transactions = Transactions(_identifier(schema), retries, self._connect_timeout)
        self._thread: LoopThread | None = None
        if pool is not None:
            if not isinstance(pool, AsyncConnectionPool):
                raise ConfigurationError(
                    f"pool must be a psycopg_pool.AsyncConnectionPool, got {type(pool).__name__}"
                )
            self._pool: AsyncConnectionPool[Any] = pool
            pool_url = pool.conninfo if isinstance(pool.conninfo, str) else ""
            self._where = describe(parse_url(pool_url)) if pool_url else "PostgreSQL"
            self._ready = False
            self._ready_lock: asyncio.Lock | None = None
            return
        if url is None:
            raise ConfigurationError("PostgresBackend needs a postgresql:// URL or a pool")
        if connect_kwargs is not None and not isinstance(connect_kwargs, Mapping):
            raise ConfigurationError(
                f"connect_kwargs must be a mapping, got {type(connect_kwargs).__name__}"
            )
        for key, value in (connect_kwargs or {}).items():
            # libpq takes its parameters as UTF-8 text without NUL: say so here, by name,
            # rather than let the encoder fail inside psycopg.
            option_text(key, "a connect_kwargs key")
            if isinstance(value, str):
                option_text(value, f"connect_kwargs[{key!r}]")
        conninfo = parse_url(url)
        self._where = describe(conninfo)
        self._ready = True
        self._ready_lock = None
        kwargs: dict[str, Any] = {
            "autocommit": True,  # transactions are begun and ended explicitly
            "connect_timeout": self._connect_timeout,
            **{key: value for key, value in KEEPALIVES.items() if key not in conninfo},
            **(connect_kwargs or {}),
        }
        self._thread = thread = LoopThread()
        weakref.finalize(self, stop_loop, thread)
        try:
            self._pool = thread.submit(
                self._open_pool(url, kwargs, min_size, max_size, connect_timeout, pool_timeout)
            ).result()
        except BaseException:
            self._closed = True
            thread.stop()
            raise

    # -- opening -------------------------------------------------------------------------------

    async def _open_pool(
        self,
        url: str,
        kwargs: dict[str, Any],
        min_size: int,
        max_size: int,
        connect_timeout: float,
        pool_timeout: float,
    ) -> AsyncConnectionPool[Any]:
        # One plain connection first: a failure then says why (the pool would only time out),
        # and it prepares the schema before any pooled connection exists.
        try:
            conn = await psycopg.AsyncConnection.connect(url, **kwargs)
        except psycopg.Error as exc:
            raise connect_error(exc, self._where) from None
        try:
            await configure(conn)
            await self._prepare_schema(conn)
        except Retry as retry:
            raise driver_error(retry.cause, self._where) from None
        except psycopg.Error as exc:
            raise driver_error(exc, self._where) from None
        finally:
            await conn.close()
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs=kwargs,
            configure=configure,
            timeout=pool_timeout,
            open=False,
            name=f"turnstore-{self.schema}",
        )
        try:
            await pool.open(wait=min_size > 0, timeout=connect_timeout)
        except PoolTimeout as exc:
            await pool.close()
            raise ConnectionFailedError(
                f"cannot connect to {self._where}: the pool opened no connection in "
                f"{connect_timeout:g} s"
            ) from exc
        return pool

    async def _prepare_schema(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Create the schema if missing and bring it to the newest version (or check it)."""
        self.found_version = await self._transactions.transaction(
            conn, lambda: stored_version(migrations.MIGRATIONS), False
        )
        pending = len(migrations.MIGRATIONS) - (self.found_version or 0)
        if pending == 0:
            return
        if self.read_only:
            raise SchemaError(
                f"{self._where} (schema {self.schema!r}) holds no turnstore schema"
                if pending == len(migrations.MIGRATIONS)
                else f"{self._where} (schema {self.schema!r}) is {pending} migration(s) older "
                "than this turnstore: too old to read without migrating, which a read-only "
                "open never does; run `turnstore migrate` with write access first"
            )
        if not self._migrate:
            raise SchemaError(
                f"{self._where} (schema {self.schema!r}) is {pending} migration(s) behind this "
                "turnstore; run turnstore.migrate(url) or open it with migrate=True"
            )
        await self._transactions.transaction(conn, self._create_schema, True)
        while await self._transactions.transaction(conn, self._migrate_step, True):
            pass

    def _migrate_step(self) -> Op[bool]:
        # On Citus, a step that updates every shard and then replaces a view (9: statuses)
        # must reach each worker over one connection, or Citus refuses the view command; on
        # plain PostgreSQL the setting is an unused placeholder.
        yield _raw("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        return (yield from migrate_step(migrations.MIGRATIONS, self._lock_sql))

    def _create_schema(self) -> Op[None]:
        # Under the migration lock, because concurrent CREATE SCHEMA IF NOT EXISTS can fail.
        yield _raw(self._lock_sql)
        row = yield Query(
            "SELECT 1 FROM pg_namespace WHERE nspname = %(schema)s",
            {"schema": self.schema},
            Fetch.ONE,
            raw=True,
        )
        if row is None:
            yield _raw(f"CREATE SCHEMA {_identifier(self.schema)}")

    async def _ensure_ready(self) -> None:
        """For a caller's pool: prepare the schema once, at the first operation."""
        if self._ready_lock is None:
            self._ready_lock = asyncio.Lock()
        async with self._ready_lock:
            if not self._ready:
                async with self._pool.connection() as conn:
                    await self._prepare_schema(conn)
                self._ready = True

    # -- running operations --------------------------------------------------------------------

    @staticmethod
    def now() -> datetime:
        """The current time, as this backend binds it."""
        return now()

    @staticmethod
    def bind_time(when: datetime) -> datetime:
        """``when`` as this backend binds times: an aware UTC datetime (TIMESTAMPTZ)."""
        return utc(when)

    dialect = "postgresql"

    @property
    def label(self) -> str:
        """``PostgreSQL at user@host:port/dbname``: never the password."""
        return self._where

    @property
    def schema_version(self) -> int:
        """The version this turnstore's migrations lead to, which an open database is at."""
        return len(migrations.MIGRATIONS)

    @property
    def closed(self) -> bool:
        """Whether ``close`` (or ``aclose``) has run."""
        return self._closed

    async def run(self, op: Callable[[], Op[T]], *, write: bool) -> T:
        """Run ``op()`` in one transaction, re-running it whole after a transient failure."""
        if write and self.read_only:
            raise ReadOnlyError(f"{self._where} is open read-only: nothing was written")
        if self._thread is None:
            if self._closed:
                raise ClosedError("the store is closed")
            return await (
                finish_write(self._execute(op, write)) if write else self._execute(op, write)
            )
        if self._pid != os.getpid():  # before the lock, which a parent's thread may have held
            raise forked_away(self._pid)
        with self._state:
            if self._closed:
                raise ClosedError("the store is closed")
            future = self._thread.submit(self._tracked(op, write))
        wrapped = asyncio.wrap_future(future)
        return await (finish_write(wrapped) if write else wrapped)

    async def _tracked(self, op: Callable[[], Op[T]], write: bool) -> T:
        """``_execute`` on our loop, noted until it ends: a read its caller gave up on is
        cancelled here, and still runs on a while (psycopg cancels its statement on the
        server, the transaction is rolled back), which ``close`` waits for."""
        task = cast("asyncio.Task[Any]", asyncio.current_task())  # submitted: run as a task
        self._tasks.add(task)
        try:
            return await self._execute(op, write)
        finally:
            self._tasks.discard(task)

    async def _execute(self, op: Callable[[], Op[T]], write: bool) -> T:
        try:
            if not self._ready:
                await self._ensure_ready()
            return await self._transactions.retrying(self._pool, op, write, self._where)
        except Retry as retry:  # from preparing the schema of a caller's pool
            raise driver_error(retry.cause, self._where) from retry.cause
        except (PoolClosed, PoolTimeout, psycopg.Error) as exc:
            raise driver_error(exc, self._where, write=write) from exc

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Finish the operations in flight, close the pool (if ours) and stop the thread.

        In a forked child with our own pool only this copy is marked closed: the loop thread
        is the parent's, and so are the pool's connections (closing them here would end the
        parent's sessions on the server).
        """
        if self._thread is not None and self._pid != os.getpid():
            self._closed = True
            return
        with self._state:
            if self._closed:
                return
            self._closed = True
        thread = self._thread
        if thread is None:
            return  # the caller's pool stays open
        try:
            thread.submit(self._shut()).result()
        finally:
            thread.stop()

    async def _shut(self) -> None:
        # Every operation submitted before close is a task by now (the loop takes submissions
        # in order): each ends before the pool closes, and none is left pending on a stopped
        # loop, to be closed by the garbage collector with its statement still running.
        if self._tasks:
            await asyncio.wait(set(self._tasks))
        await self._pool.close()

    async def aclose(self) -> None:
        """Like ``close``, without blocking the event loop."""
        await asyncio.to_thread(self.close)


def _raw(statement: str) -> Query:
    return Query(statement, raw=True)


def _lock_key(schema: str) -> int:
    """A stable 64-bit advisory-lock key for migrations of ``schema``."""
    digest = hashlib.sha256(f"turnstore migrate {schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)

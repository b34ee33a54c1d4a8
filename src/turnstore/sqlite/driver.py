"""The SQLite backend: the embedded default, on the standard library's ``sqlite3``.

One long-lived connection per store, used only by one worker thread: every operation is
handed to that thread, so the event loop never blocks and a store (and the sessions on it)
can be used from any thread or event loop. Writes take SQLite's write lock at BEGIN
(``BEGIN IMMEDIATE``) so that reading the head and writing after it is atomic across
processes too.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from ..core.dialect import result_row, result_rows
from ..core.ops import (
    DRIVING,
    Capability,
    Fetch,
    Group,
    Op,
    Query,
    Unchanged,
    finish_write,
    forked_away,
    utc,
)
from ..core.schema import migrate_step, stored_version
from ..domain import validate
from ..errors import (
    ClosedError,
    ConfigurationError,
    ConnectionFailedError,
    ReadOnlyError,
    SchemaError,
    StorageError,
)
from . import migrations  # MIGRATIONS read at each open: a test may shorten the history there
from .checkpoint import Checkpointer
from .errors import driver_error
from .files import connect_read_only, connect_uri, file_kind, foreign_message, set_caches, set_wal
from .forkgate import gated
from .sql import DIALECT
from .worker import Worker

__all__ = ["SQLiteBackend", "now"]

T = TypeVar("T")


def now() -> str:
    """The current time as SQLite stores it: ISO 8601 UTC text, which sorts by time."""
    return datetime.now(timezone.utc).isoformat(sep=" ", timespec="microseconds")


class SQLiteBackend:
    """A SQLite database file (or ``:memory:``), served by one worker thread."""

    capabilities: Capability = DIALECT.capabilities

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        busy_timeout: float = 30.0,
        durable: bool = False,
        read_only: bool = False,
    ) -> None:
        """Open (and create or upgrade) the database at ``path``, as ``targets.sqlite_path``
        gives it (a leading ``~`` already expanded).

        ``busy_timeout`` is how long a writer waits for another process's write lock.
        ``durable=True`` makes every commit wait for the disk (``synchronous=FULL``); the default
        (``NORMAL`` under WAL) can lose the last commits on power loss but never corrupts the
        database, and is several times faster per write. ``read_only=True`` opens an existing
        turnstore database without ever writing to it (see ``_open_read_only``).
        """
        self.path = validate.sqlite_file_path(str(path))
        self.read_only = bool(read_only)
        self.found_version: int | None = None
        """The schema version found at opening (None: no turnstore schema)."""
        self._lock = threading.Lock()
        self._closed = False
        self._reading: asyncio.Future[Any] | None = None  # the read the worker runs, if any
        self._reading_lock = threading.Lock()
        self._pid = os.getpid()  # a forked child has no worker thread: see run and close
        self._conn: sqlite3.Connection | None = None
        self._checkpointer: Checkpointer | None = None
        self._executor = Worker("turnstore-sqlite")
        try:
            opener = self._open_read_only if self.read_only else self._open
            self._executor.submit(gated, opener, busy_timeout, durable).result()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def now() -> str:
        """The current time, as this backend binds it."""
        return now()

    @staticmethod
    def bind_time(when: datetime) -> str:
        """``when`` as SQLite stores times: ISO 8601 UTC text, which sorts by time."""
        return utc(when).isoformat(sep=" ", timespec="microseconds")

    dialect = "sqlite"

    @property
    def label(self) -> str:
        """The file's path as opened (``:memory:`` for a database in memory)."""
        return self.path

    @property
    def schema_version(self) -> int:
        """The version this turnstore's migrations lead to, which an open database is at."""
        return len(migrations.MIGRATIONS)

    @property
    def closed(self) -> bool:
        """Whether ``close`` has run."""
        return self._closed

    def _open(self, busy_timeout: float, durable: bool) -> None:
        if self.path != ":memory:":
            try:
                parent = Path(self.path).resolve().parent
            except (OSError, RuntimeError) as exc:  # a link loop (RuntimeError before 3.13)
                raise ConnectionFailedError(f"cannot open {self.path}: {exc}") from None
            if not parent.is_dir():
                raise ConnectionFailedError(f"cannot open {self.path}: {parent} is not a directory")
        try:
            # isolation_level=None: transactions are begun and ended explicitly below.
            conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise ConnectionFailedError(f"cannot open {self.path}: {exc}") from exc
        self._conn = conn
        # Before anything writes (the WAL switch included): another application's file is
        # refused as it was found.
        if file_kind(conn, self.path) == "foreign":
            raise SchemaError(foreign_message(conn, self.path))
        try:
            if self.path != ":memory:":
                set_wal(conn, busy_timeout)
                conn.execute(f"PRAGMA wal_autocheckpoint = {Checkpointer.FALLBACK_PAGES}")
            conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
            set_caches(conn)
        except sqlite3.Error as exc:
            raise driver_error(exc, self.path) from exc
        # Foreign keys are off while migrating, as SQLite's table rebuilds require (dropping
        # the old table must not cascade), and on for everything after.
        self.found_version = self._transaction(
            lambda: stored_version(migrations.MIGRATIONS), write=False
        )
        while self._transaction(lambda: migrate_step(migrations.MIGRATIONS, None), write=True):
            pass
        try:
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise driver_error(exc, self.path) from exc
        if self.path != ":memory:":
            self._checkpointer = Checkpointer(self.path)

    def _open_read_only(self, busy_timeout: float, durable: bool) -> None:
        """Open an existing turnstore database with SQLite's ``mode=ro``: nothing is migrated,
        the journal mode is left as it is, and no statement can write to the file.

        A WAL database needs its ``-shm`` index, which a read-only connection creates when
        the directory is writable. Where it cannot (a read-only directory or mount, no
        ``-shm`` yet) and no write-ahead log holds data, the file is opened ``immutable``:
        SQLite then takes no locks and assumes nobody changes the file, so a read may see a
        torn state if someone does. A non-empty ``-wal`` that cannot be read is refused, since
        ``immutable`` would silently ignore the commits it holds.
        """
        if self.path == ":memory:":
            raise ConfigurationError("a read-only store needs a database file, not :memory:")
        path = Path(self.path)
        if not path.is_file():
            raise ConnectionFailedError(
                f"cannot open {self.path} read-only: "
                + ("it is not a file" if path.exists() else "no such file")
            )
        # A first look at the database file alone (immutable: no -shm, no locks), so that
        # another application's file is refused before SQLite creates anything beside it.
        peek = connect_uri(path, "immutable=1", busy_timeout)
        try:
            if file_kind(peek, self.path) == "foreign":
                raise SchemaError(foreign_message(peek, self.path))
        except StorageError:
            pass  # e.g. a page torn by a writer's checkpoint: the real open below decides
        finally:
            peek.close()
        self._conn = conn = connect_read_only(path, busy_timeout)
        kind = file_kind(conn, self.path)
        if kind == "foreign":
            raise SchemaError(foreign_message(conn, self.path))
        if kind != "turnstore":
            what = "empty" if kind == "empty" else "an Agents SDK session database"
            raise SchemaError(
                f"{self.path} is {what}, not a turnstore database: there is nothing to read"
            )
        self.found_version = self._transaction(
            lambda: stored_version(migrations.MIGRATIONS), write=False
        )
        behind = len(migrations.MIGRATIONS) - (self.found_version or 0)
        if behind:
            raise SchemaError(
                f"{self.path}'s schema is {behind} migration(s) older than this turnstore: too "
                f"old to read without migrating, which a read-only open never does; run "
                f"`turnstore migrate --db {self.path}` with write access first"
            )
        try:
            set_caches(conn)
        except sqlite3.Error as exc:
            raise driver_error(exc, self.path) from exc

    def _drive(self, conn: sqlite3.Connection, op: Op[T]) -> T:
        cursor = conn.cursor()  # one for the whole operation: a statement is ~10 us
        execute = cursor.execute
        sql, checked = DIALECT.sql, DIALECT.checked
        result: Any = None
        driving = DRIVING.set(self.capabilities)
        try:
            while True:
                sent = op.send(result)
                # A group's queries run in a row (no round trips to save here); a lone query
                # is a group of one, without a call of its own.
                group = sent.queries if isinstance(sent, Group) else None
                results = []
                for query in (sent,) if group is None else group:
                    statement: Any = query.statement
                    fetch = query.fetch
                    if query.raw:  # the SQL itself (Query's signature says so)
                        result = self._raw(cursor, statement, query)
                    else:
                        try:
                            text = sql[statement]
                        except KeyError:
                            text = DIALECT[statement]  # raises, naming what is lacking
                        execute(text, query.params)
                        if fetch is Fetch.NONE:
                            result = None
                        elif fetch is Fetch.ID:  # ~5 us less per insert than RETURNING
                            result = cursor.lastrowid
                        else:
                            if statement not in checked:
                                DIALECT.check(statement, cursor.description)
                            if fetch is Fetch.ALL or fetch is Fetch.VALUES:
                                # Rows straight from the cursor: no list of tuples between.
                                result = result_rows(statement, cursor)
                            else:
                                result = result_row(statement, cursor.fetchone())
                    results.append(result)
                result = result if group is None else tuple(results)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            DRIVING.reset(driving)

    def _raw(self, cursor: sqlite3.Cursor, text: str, query: Query) -> Any:
        """Run ``text``, the raw SQL of ``query`` (migrations, tests, a user's query:
        ``Fetch.TABLE``)."""
        if query.fetch is Fetch.TABLE:
            return _table(cursor, text)
        cursor.execute(text, query.params)
        if query.fetch is Fetch.ONE:
            return cursor.fetchone()
        if query.fetch is Fetch.ALL:
            return cursor.fetchall()
        return cursor.lastrowid if query.fetch is Fetch.ID else None

    def _transaction(self, op: Callable[[], Op[T]], write: bool) -> T:
        conn = self._conn
        if conn is None:
            raise ClosedError("the store is closed")
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = self._drive(conn, op())
            except Unchanged as unchanged:
                conn.execute("ROLLBACK")
                return unchanged.value  # type: ignore[no-any-return]
            conn.execute("COMMIT")
            if write and self._checkpointer is not None:
                self._checkpointer.poke()
            return result
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if write or self.read_only or "database is locked" not in str(exc):
                raise driver_error(exc, self.path) from exc
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        # A read that writes (a search feeding the index backlog; never on a read-only store)
        # met another connection's write: a read transaction cannot wait for the write lock,
        # so it runs again as a write, which waits for the lock as writes do.
        return self._transaction(op, write=True)

    async def run(self, op: Callable[[], Op[T]], *, write: bool) -> T:
        """Run ``op()`` in one transaction on the worker thread.

        A write, once handed to the thread, finishes before a cancellation reaches the caller.
        """
        if write and self.read_only:
            raise ReadOnlyError(f"{self.path} is open read-only: nothing was written")
        if self._pid != os.getpid():  # before the lock, which a parent's thread may have held
            raise forked_away(self._pid)
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._closed:
                raise ClosedError("the store is closed")
            self._executor.post(gated, self._serve, future, op, write)
        if write:
            return await finish_write(future)
        future.add_done_callback(self._interrupt)
        return await future

    def _interrupt(self, future: asyncio.Future[Any]) -> None:
        """A read given up (a cancelled caller, Ctrl-C): if the worker runs it, interrupt its
        statement, which may otherwise run on for minutes, and ``close`` wait for it."""
        if not future.cancelled():
            return
        with self._reading_lock:  # held: the worker cannot move on to another operation
            if self._reading is future and self._conn is not None:
                self._conn.interrupt()

    def _serve(self, future: asyncio.Future[T], op: Callable[[], Op[T]], write: bool) -> None:
        """Run ``op()`` for ``future`` (the caller's, on its loop) and settle it there: one
        call into the loop, where wrapping the executor's own future (``wrap_future``) took
        two and a copy of its state, ~20 us of CPU per call."""
        with self._reading_lock:  # what _interrupt sees: this read, from here to its end
            if future.cancelled():
                return  # a read given up before it started (a write's future is shielded)
            if not write:
                self._reading = future
        try:
            result = self._transaction(op, write)
        except BaseException as exc:  # handed to the caller, as the executor's future would
            _settle(future, future.set_exception, exc)
        else:
            _settle(future, future.set_result, result)
        finally:
            if not write:
                with self._reading_lock:
                    self._reading = None

    def _close_connection(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Close the connection and stop the worker thread. Idempotent.

        In a forked child only this copy is marked closed: the worker (and the connection it
        serves) belong to the parent.
        """
        if self._pid != os.getpid():
            self._closed = True
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # Queued behind any operation already submitted, so those finish first.
        self._executor.submit(gated, self._close_connection)
        self._executor.shutdown(wait=True)

    async def aclose(self) -> None:
        """Like ``close``, without blocking the event loop."""
        await asyncio.to_thread(self.close)


def _settle(future: asyncio.Future[Any], outcome: Callable[[Any], None], value: Any) -> None:
    """From the worker: ``outcome(value)`` on ``future``'s loop, unless the future was given
    up meanwhile (a cancelled read) or its loop is gone (nobody waits any more)."""

    def settle() -> None:
        if not future.done():
            outcome(value)

    try:  # not contextlib.suppress: three Python calls more on every operation
        future.get_loop().call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed
        return


def _no_attach(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else 0


def _table(cursor: sqlite3.Cursor, statement: str) -> tuple[list[str], list[Any]]:
    """A user's statement (``Fetch.TABLE``): sqlite3 runs one per ``execute``. ATTACH is
    refused, since it would open (and create) another file for writing."""
    cursor.connection.set_authorizer(_no_attach)
    try:
        cursor.execute(statement)
        return [d[0] for d in cursor.description or ()], cursor.fetchall()
    finally:
        cursor.connection.set_authorizer(None)

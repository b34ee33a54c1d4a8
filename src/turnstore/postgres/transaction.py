"""How an operation runs on PostgreSQL: one transaction per attempt, pipelined, retried.

Transactions: one per operation. A write first upserts the session row, which locks it
(``INSERT … ON CONFLICT DO UPDATE`` locks the conflicting row even when its ``WHERE`` is
false), so writes to one session serialise while writes to different sessions never wait for
each other; everything after the lock reads the latest committed state (READ COMMITTED takes
a snapshot per statement). Reads run in one REPEATABLE READ, READ ONLY snapshot. Each
transaction runs in pipeline mode (statements whose results are not needed travel with the
next one) and sets ``search_path`` for itself only, so connections carry no turnstore state.

Retries: a serialisation failure, a deadlock or a dropped connection re-runs the whole
operation from a fresh generator, a bounded number of times. A connection lost while COMMIT
was in flight is the one ambiguous case: the write is run again, with its key (core/once.py),
on a connection of its own rather than one from the pool (which may have no other to give):
if the first commit happened, the key is found and the re-run only returns its result. When
no connection can be made, ``OutcomeUnknownError`` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.string import ByteaBinaryLoader
from psycopg_pool import AsyncConnectionPool

from ..core.dialect import result_row, result_rows
from ..core.ops import Fetch, Group, Op, Query, Unchanged, step
from ..errors import OutcomeUnknownError
from .errors import TRANSIENT, driver_error, lost_connection
from .sql import BYTES, DIALECT

__all__ = ["Retry", "Transactions", "configure"]

log = logging.getLogger("turnstore")

T = TypeVar("T")


class Retry(Exception):
    """Internal: the attempt failed in a way that re-running the operation may fix.

    ``unsettled``: the connection was lost with a write's COMMIT in flight, so the write may
    have committed; only a re-run with its key (on a connection of its own) can tell.
    """

    def __init__(self, cause: BaseException, *, unsettled: bool = False) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.unsettled = unsettled


async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
    # Once per new connection of our own pool: timestamps come back in UTC, as SQLite's.
    await conn.execute("SET TIME ZONE 'UTC'")


# What a transaction sets for itself, by whether it writes. A read also runs without JIT
# compilation: reads are index-driven and short, but PostgreSQL compiles any plan whose
# estimated cost passes jit_above_cost, and a search's statement is estimated as if each of its
# gated reads ran (past a few million items: tens of milliseconds compiling, every search, for
# a few of work). Writes plan nothing that large.
_SETTINGS = {
    True: "SELECT set_config('search_path', %s, true)",
    False: "SELECT set_config('search_path', %s, true), set_config('jit', 'off', true)",
}


class Transactions:
    """Runs operations on one schema (``search_path``, a quoted identifier)."""

    def __init__(self, search_path: str, retries: int, connect_timeout: int) -> None:
        self._search_path = search_path
        self._retries = retries
        self._connect_timeout = connect_timeout

    async def retrying(
        self, pool: AsyncConnectionPool[Any], op: Callable[[], Op[T]], write: bool, where: str
    ) -> T:
        """Run ``op()`` on a connection of ``pool``, re-running it whole after a transient
        failure (``where`` names the server in errors)."""
        attempt = 0
        unsettled = False  # a commit was cut off and no attempt since has had an answer
        while True:
            try:
                if unsettled:
                    return await self.settle(pool, op)
                async with pool.connection() as conn:
                    return await self.transaction(conn, op, write)
            except Retry as retry:
                unsettled = unsettled or retry.unsettled
                attempt += 1
                if attempt > self._retries:
                    if unsettled:
                        raise OutcomeUnknownError(
                            f"lost the connection to {where} while a write committed, "
                            f"and cannot reach it to learn whether it did ({retry.cause}); "
                            "it may or may not be stored"
                        ) from retry.cause
                    raise driver_error(retry.cause, where) from retry.cause
                log.info("retrying a transaction on %s: %s", where, retry.cause)
                if isinstance(retry.cause, psycopg.OperationalError) and not unsettled:
                    await pool.check()  # drop the other dead connections too
                # Exponential backoff with jitter, so that colliding writers spread out.
                await asyncio.sleep(random.uniform(0, 0.01 * 2 ** min(attempt, 6)))

    async def transaction(
        self, conn: psycopg.AsyncConnection[Any], op: Callable[[], Op[T]], write: bool
    ) -> T:
        """Run ``op()`` on ``conn`` between BEGIN and COMMIT; raise Retry when that may help.

        In pipeline mode: a statement whose result the operation does not need (BEGIN, an
        UPDATE, COMMIT) is queued and travels with the next one that is awaited, which saves
        about a third of the round trips of a write. A read's last query (``ops.last``) is
        sent with the ROLLBACK, and its answer read once the pipeline is synced: one round
        trip for a read of one statement.
        """
        restore_autocommit = not conn.autocommit
        if restore_autocommit:  # a caller's connection: we issue BEGIN/COMMIT ourselves
            await conn.set_autocommit(True)
        committing = False
        try:
            async with conn.pipeline():
                await conn.execute(
                    "BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
                )
                await conn.execute(_SETTINGS[write], [self._search_path])
                try:
                    result = await self.drive(conn, op(), write)
                    committing = write
                except Unchanged as unchanged:
                    result = unchanged.value
                # A read is rolled back: what a READ ONLY transaction still lets a statement
                # do (a user's query creating a large object, a NOTIFY) is never kept.
                if not isinstance(result, _Last):  # else rolled back with its last query
                    await conn.execute("COMMIT" if committing else "ROLLBACK")
            return await result.finish() if isinstance(result, _Last) else result
        except psycopg.Error as exc:
            if isinstance(exc, TRANSIENT):
                raise Retry(exc) from exc
            if conn.broken or lost_connection(exc):
                # Before COMMIT was sent nothing can have been stored: simply run it again.
                raise Retry(exc, unsettled=committing) from exc
            raise
        finally:
            if not conn.broken and conn.info.transaction_status in (
                TransactionStatus.INTRANS,
                TransactionStatus.INERROR,
            ):
                with contextlib.suppress(psycopg.Error):
                    await conn.execute("ROLLBACK")
            if restore_autocommit and not conn.broken:
                with contextlib.suppress(psycopg.Error):
                    await conn.set_autocommit(False)

    async def settle(self, pool: AsyncConnectionPool[Any], op: Callable[[], Op[T]]) -> T:
        """Run a write whose commit was cut off again, on a new connection outside the pool.

        The write's key makes the re-run return the first run's result if that committed, and
        apply it if not. The pool is not asked: it may be waiting to replace the connection
        just lost (with ``max_size=1``, for ``pool_timeout``).
        """
        kwargs = dict(pool.kwargs) if isinstance(pool.kwargs, Mapping) else {}
        kwargs.setdefault("connect_timeout", self._connect_timeout)
        conninfo = pool.conninfo if isinstance(pool.conninfo, str) else ""
        try:
            conn = await pool.connection_class.connect(conninfo, **kwargs)
        except psycopg.Error as exc:
            raise Retry(exc, unsettled=True) from exc
        try:
            try:
                await configure(conn)
            except psycopg.Error as exc:
                raise Retry(exc, unsettled=True) from exc
            return await self.transaction(conn, op, True)
        finally:
            await conn.close()

    @staticmethod
    async def drive(conn: psycopg.AsyncConnection[Any], op: Op[T], write: bool) -> T | _Last[T]:
        """``op`` run to its end; or, at a read's last query, sent with the ROLLBACK and left
        for ``_Last.finish`` once the pipeline has synced."""
        capabilities = DIALECT.capabilities
        result: Any = None
        try:
            while True:
                query = step(op, result, capabilities)
                if isinstance(query, Group):
                    # Every query sent before the first answer is awaited: one round trip.
                    sent = [await _send(conn, member) for member in query.queries]
                    result = tuple([await _receive(member, cursor) for member, cursor in sent])
                elif query.last and not write:
                    _, cursor = await _send(conn, query)
                    await conn.execute("ROLLBACK")
                    return _Last(op, query, cursor)
                else:
                    result = await _receive(*(await _send(conn, query)))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


class _Last(Generic[T]):
    """A read whose last query went with its ROLLBACK: its answer, once the pipeline has
    synced, is what the operation returns from."""

    def __init__(self, op: Op[T], query: Query, cursor: Any) -> None:
        self.op, self.query, self.cursor = op, query, cursor

    async def finish(self) -> T:
        """The operation's value, from its last query's answer."""
        result = await _receive(self.query, self.cursor)
        try:
            extra = step(self.op, result, DIALECT.capabilities)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        self.op.close()
        raise AssertionError(f"an operation yielded {extra!r} after its last query")


async def _send(conn: psycopg.AsyncConnection[Any], query: Query) -> tuple[Query, Any]:
    """Send ``query`` (in pipeline mode: without waiting); return it with its cursor, or with
    its result where it is raw SQL (run to its end: ``_raw``)."""
    statement: Any = query.statement
    if query.raw:  # the SQL itself (Query's signature says so)
        return query, await _raw(conn, statement, query)
    try:
        text = DIALECT.sql[statement]
    except KeyError:
        text = DIALECT[statement]  # raises, naming what is lacking
    prepare = False if statement.replan else None
    if statement in BYTES and conn.info.encoding == "utf-8":
        # In binary format a text column comes as the server sends it, in the client's
        # encoding: as bytes where that is UTF-8 (any other is read as text, decoded).
        cursor = conn.cursor(binary=True)
        cursor.adapters.register_loader("text", ByteaBinaryLoader)
        return query, await cursor.execute(text, query.params, prepare=prepare)
    # Always with parameters: a rendered statement writes a literal % as %%.
    return query, await conn.execute(text, query.params, prepare=prepare)


async def _receive(query: Query, cursor: Any) -> Any:
    """What ``query`` returns, from the ``cursor`` it was sent on (waiting for it, unless its
    answer came with an earlier one's)."""
    fetch = query.fetch
    if fetch is Fetch.NONE:
        return None
    if query.raw:
        return cursor  # its result already
    statement: Any = query.statement
    if fetch is Fetch.ALL or fetch is Fetch.VALUES:
        rows = await cursor.fetchall()
        DIALECT.check(statement, cursor.description)
        return result_rows(statement, rows)
    # ONE, VALUE, or ID (the statement's RETURNING id)
    row = await cursor.fetchone()
    DIALECT.check(statement, cursor.description)
    return result_row(statement, row)


async def _raw(conn: psycopg.AsyncConnection[Any], text: str, query: Query) -> Any:
    """Run ``text``, the raw SQL of ``query`` (migrations, tests, a user's query:
    ``Fetch.TABLE``)."""
    if query.fetch is Fetch.TABLE:
        # Parameters (none) send it by the extended protocol, which takes one statement only;
        # a % is then a placeholder's sign, hence doubled.
        cursor = await conn.execute(text.replace("%", "%%"), {})
        rows = await cursor.fetchall()  # first: in a pipeline, the description comes with them
        return [column.name for column in cursor.description or ()], rows
    # No parameters: the text is sent as is (a raw % needs no escaping).
    cursor = await conn.execute(text, query.params or None)
    if query.fetch is Fetch.ONE:
        return await cursor.fetchone()
    if query.fetch is Fetch.ALL:
        return await cursor.fetchall()
    if query.fetch is Fetch.ID:  # the statement's RETURNING id
        row = await cursor.fetchone()
        return None if row is None else row[0]
    return None

"""What only the PostgreSQL backend does: opening errors, schemas, pools, locks and retries.

Everything both backends share is in the conformance suite (the ``store`` fixture runs it on
Postgres too); these tests cover the server-specific behaviour around it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from builders import assistant, call, output, user
from citus import CITUS_URL
from support import POSTGRES_URL, require_module, require_postgres, session_target, sql
from turnstore import (
    ClosedError,
    ConfigurationError,
    ConflictError,
    ConnectionFailedError,
    SchemaError,
    StorageError,
    Store,
    StructuredSession,
    new_operation_id,
)
from turnstore.core import append
from turnstore.core.codec import prepare_items
from turnstore.core.once import once
from turnstore.core.ops import Op, Query, last

require_module("psycopg")
import psycopg  # noqa: E402
from psycopg_pool import AsyncConnectionPool  # noqa: E402

from turnstore.postgres import PostgresBackend  # noqa: E402
from turnstore.postgres.errors import connect_error  # noqa: E402

pytestmark = pytest.mark.postgres


def _free_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _url(**parts: str) -> str:
    """POSTGRES_URL with some of its parts replaced (user, host, port, dbname)."""
    params = psycopg.conninfo.conninfo_to_dict(POSTGRES_URL)
    params.update(parts)
    user_part = params.get("user", "postgres")
    if "password" in params:
        user_part += f":{params['password']}"
    host = params.get("host", "127.0.0.1")
    port = params.get("port", "5432")
    return f"postgresql://{user_part}@{host}:{port}/{params.get('dbname', 'test')}"


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema name on the test server, dropped afterwards."""
    require_postgres()
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    _drop(name)


def _drop(schema: str) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema.replace(chr(34), chr(34) * 2)}" CASCADE')


def _admin() -> psycopg.Connection[Any]:
    return psycopg.connect(POSTGRES_URL, autocommit=True)


# ---------------------------------------------------------------------------------------------
# Opening: clear errors, raised by Store.open, naming the problem


@pytest.mark.parametrize(
    ("url", "mentions"),
    [
        ("postgresql://[::1/test", "malformed"),
        ("postgresql://postgres@127.0.0.1:notaport/test", "port"),
        ("postgresql://%zz@127.0.0.1/test", "malformed"),
        ("postgresql://127.0.0.1/test?no_such_option=1", "no_such_option"),
    ],
)
def test_malformed_url_is_a_configuration_error(url: str, mentions: str) -> None:
    with pytest.raises(ConfigurationError, match=mentions) as caught:
        Store.open(url)
    assert caught.value.__cause__ is None  # no driver traceback chained on


def test_refused_port_names_the_server() -> None:
    port = _free_port()
    with pytest.raises(ConnectionFailedError, match="refused") as caught:
        Store.open(f"postgresql://postgres:s3cret@127.0.0.1:{port}/test", connect_timeout=2)
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message
    assert "s3cret" not in message  # never the password
    assert caught.value.__cause__ is None


def test_unknown_user_is_named() -> None:
    require_postgres()
    with pytest.raises(ConnectionFailedError, match="no_such_user_ts") as caught:
        Store.open(_url(user="no_such_user_ts"), connect_timeout=2)
    assert "user name and password" in str(caught.value)


def test_missing_database_is_named() -> None:
    require_postgres()
    with pytest.raises(ConnectionFailedError, match='database "no_such_db_ts" does not exist'):
        Store.open(_url(dbname="no_such_db_ts"), connect_timeout=2)


def test_wrong_password_message_is_clear() -> None:
    # The test server trusts every local connection, so no password can be wrong there; this
    # checks the mapping of libpq's message for it instead.
    error = connect_error(
        psycopg.OperationalError(
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: FATAL:  '
            'password authentication failed for user "app"'
        ),
        "PostgreSQL at app@10.0.0.5:5432/prod",
    )
    assert isinstance(error, ConnectionFailedError)
    assert 'password authentication failed for user "app"' in str(error)
    assert "app@10.0.0.5:5432/prod" in str(error)


def test_structured_session_opens_a_url(tmp_path: Path) -> None:
    # A database of its own: the URL names no schema, and the shared "public" may hold
    # another turnstore version's tables.
    with session_target("postgres", tmp_path) as target:
        session = StructuredSession(f"ts-url-{uuid.uuid4().hex}", target)
        try:
            assert isinstance(session.store.backend, PostgresBackend)
        finally:
            session.close()


def test_postgres_scheme_alias(schema: str) -> None:
    with Store.open(POSTGRES_URL.replace("postgresql://", "postgres://"), schema=schema) as store:
        assert isinstance(store.backend, PostgresBackend)


@pytest.mark.parametrize("bad", ["", "x" * 64])
def test_bad_schema_name_is_refused(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="schema"):
        PostgresBackend(POSTGRES_URL, schema=bad)


# ---------------------------------------------------------------------------------------------
# Schemas


async def test_tables_live_in_the_named_schema_created_if_missing() -> None:
    require_postgres()
    odd = f'T {uuid.uuid4().hex[:8]} "quoted"'  # needs quoting everywhere
    try:
        store = Store.open(POSTGRES_URL, schema=odd)
        try:
            await store.add_items("s", [user("hi")])
            assert await store.get_items("s") == [user("hi")]
        finally:
            await store.aclose()
        with _admin() as conn:
            tables = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                [odd],
            ).fetchall()
            assert {"sessions", "runs", "items", "tool_calls", "turnstore_schema"} <= {
                row[0] for row in tables
            }
            count = conn.execute(
                f'SELECT count(*) FROM "{odd.replace(chr(34), chr(34) * 2)}".items'
            ).fetchone()
            assert count == (1,)
    finally:
        _drop(odd)


async def test_schemas_are_separate_stores(schema: str) -> None:
    other = f"{schema}_b"
    try:
        with (
            Store.open(POSTGRES_URL, schema=schema) as one,
            Store.open(POSTGRES_URL, schema=other) as two,
        ):
            await one.add_items("s", [user("in one")])
            assert await two.get_items("s") == []
    finally:
        _drop(other)


def _schema_exists(name: str) -> bool:
    with _admin() as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [name]).fetchone()
    return found is not None


@pytest.mark.parametrize(
    "query",
    ["?schema={}", "?options=-csearch_path%3D{}", "?sslmode=disable&options=-c%20search_path%3D{}"],
)
async def test_a_url_names_the_schema(schema: str, query: str) -> None:
    async with Store.open(POSTGRES_URL + query.format(schema)) as store:
        await store.add_items("s", [user("in the URL's schema")])
    with _admin() as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}".items').fetchone() == (1,)
    async with Store.open(POSTGRES_URL, schema=schema) as same:  # the keyword names it too
        assert await same.get_items("s") == [user("in the URL's schema")]
    async with Store.open(POSTGRES_URL + query.format(schema), schema=schema) as both:
        assert await both.get_items("s") == [user("in the URL's schema")]


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("%22{}+b%22", "{}+b"),  # + is a plus sign to libpq, not a space
        ("{}_%C3%9CBER", "{}_Über"),  # the server folds ASCII letters only
    ],
)
async def test_a_url_names_the_schema_psql_reads_in_it(
    schema: str, spelling: str, name: str
) -> None:
    url = f"{POSTGRES_URL}?options=-csearch_path%3D{spelling.format(schema)}"
    try:
        async with Store.open(url) as store:
            await store.add_items("s", [user("hi")])
        assert _schema_exists(name.format(schema))
        with psycopg.connect(url) as conn:  # as psql connects with the same URL
            assert conn.execute("SELECT count(*) FROM items").fetchone() == (1,)
    finally:
        _drop(name.format(schema))


def test_a_url_and_a_keyword_that_disagree_are_refused_untouched(schema: str) -> None:
    with pytest.raises(ConfigurationError, match="but schema="):
        Store.open(f"{POSTGRES_URL}?schema={schema}", schema=f"{schema}_b")
    with pytest.raises(ConfigurationError, match="several schemas"):
        Store.open(f"{POSTGRES_URL}?options=-csearch_path%3D{schema}%2Cpublic")
    assert not _schema_exists(schema)
    assert not _schema_exists(f"{schema}_b")


def test_migrate_false_refuses_an_unmigrated_schema(schema: str) -> None:
    with pytest.raises(SchemaError, match="behind"):
        Store.open(POSTGRES_URL, schema=schema, migrate=False)
    Store.open(POSTGRES_URL, schema=schema).close()
    Store.open(POSTGRES_URL, schema=schema, migrate=False).close()  # current: fine


def test_timestamps_are_aware_utc(schema: str) -> None:
    async def main() -> None:
        with Store.open(POSTGRES_URL, schema=schema) as store:
            await store.add_items("s", [user("hi")])
            (run,) = await store.runs("s")
            assert run.created_at.utcoffset() is not None
            assert run.created_at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]

    asyncio.run(main())


def test_item_json_is_kept_verbatim(schema: str) -> None:
    # jsonb would sort these keys and drop the duplicate-looking ordering: the text column
    # keeps the bytes the SDK wrote.
    item = {"role": "user", "content": "x", "zeta": 1, "alpha": {"b": 2, "a": [1, "\u0000"]}}

    async def main() -> None:
        with Store.open(POSTGRES_URL, schema=schema) as store:
            await store.add_items("s", [item])
            (got,) = await store.get_items("s")
            assert list(got) == list(item)
            assert list(got["alpha"]) == ["b", "a"]
            assert got == item

    asyncio.run(main())


def _keepalive_timings(store: Store) -> tuple[int, int, int, int]:
    """SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT of a connection of ``store``'s
    pool, read from its socket."""

    async def read() -> tuple[int, int, int, int]:
        async with store.backend._pool.connection() as conn:  # type: ignore[attr-defined]
            sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
            with sock:
                return (
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                )

    return store.backend._thread.submit(read()).result()  # type: ignore[attr-defined]


@pytest.mark.skipif(not hasattr(socket, "TCP_KEEPIDLE"), reason="Linux's TCP options")
@pytest.mark.parametrize(
    ("query", "kwargs", "expected"),
    [
        ("", {}, (1, 30, 10, 3)),  # a silent server is found dead in about a minute
        ("?keepalives_idle=7", {}, (1, 7, 10, 3)),  # the URL's own setting wins
        ("", {"keepalives_count": 5}, (1, 30, 10, 5)),  # and connect_kwargs'
    ],
)
def test_connections_probe_a_silent_server(
    schema: str, query: str, kwargs: dict[str, Any], expected: tuple[int, ...]
) -> None:
    # A host that vanished leaves a query waiting; libpq's probes with the kernel's timings
    # would find it after two hours, and a write's cancellation waits for its write.
    with Store.open(_url() + query, schema=schema, connect_kwargs=kwargs) as store:
        assert _keepalive_timings(store) == expected


# ---------------------------------------------------------------------------------------------
# A pool the caller owns


@pytest.fixture
async def callers_pool() -> AsyncIterator[AsyncConnectionPool[Any]]:
    require_postgres()
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        POSTGRES_URL, min_size=1, max_size=3, open=False
    )
    await pool.open()
    yield pool
    await pool.close()


async def test_callers_pool_is_used_and_never_closed(
    callers_pool: AsyncConnectionPool[Any], schema: str
) -> None:
    store = Store(PostgresBackend(pool=callers_pool, schema=schema))
    await store.add_items("s", [user("hi"), assistant("hello")])
    assert await store.get_items("s") == [user("hi"), assistant("hello")]
    await store.aclose()
    with pytest.raises(ClosedError):
        await store.get_items("s")
    assert not callers_pool.closed
    # The caller's connections come back as they were lent: not autocommit, their own path.
    async with callers_pool.connection() as conn:
        assert conn.autocommit is False
        row = await (await conn.execute("SHOW search_path")).fetchone()
        assert row is not None
        assert schema not in row[0]
    # Through Store.open too, where the URL is only a label.
    with Store.open(POSTGRES_URL, pool=callers_pool, schema=schema) as again:
        assert await again.get_items("s") == [user("hi"), assistant("hello")]
    assert not callers_pool.closed


async def test_items_read_back_through_a_connection_not_speaking_utf8(schema: str) -> None:
    # A path read takes the item JSON as bytes where the connection's encoding is UTF-8; in
    # any other, the server sends text in that encoding, which only a str decodes rightly.
    require_postgres()
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        POSTGRES_URL, kwargs={"options": "-c client_encoding=LATIN1"}, min_size=1, open=False
    )
    await pool.open()
    try:
        async with pool.connection() as conn:
            assert conn.info.encoding == "iso8859-1"
        store = Store(PostgresBackend(pool=pool, schema=schema))
        items = [user("café ½"), assistant("naïve ©"), user("ÿ"), assistant("done")]
        await store.add_items("s", items)
        assert await store.get_items("s") == items
        assert await store.get_items("s", 2) == items[2:]
        await store.aclose()
    finally:
        await pool.close()


async def test_a_read_ends_at_its_last_query(schema: str) -> None:
    # A read's last query travels with its ROLLBACK: a query yielded after it would run
    # outside the transaction, so the driver refuses it.
    def past_the_end() -> Op[object]:
        yield last(Query("SELECT 1", raw=True))
        yield Query("SELECT 2", raw=True)

    with Store.open(POSTGRES_URL, schema=schema, max_size=1) as store:
        await store.add_items("s", [user("hi")])
        with pytest.raises(AssertionError, match="after its last query"):
            await store.backend.run(past_the_end, write=False)
        assert await store.get_items("s") == [user("hi")]  # its one connection is sound


async def test_callers_pool_bad_object_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="AsyncConnectionPool"):
        PostgresBackend(pool=object())  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Locks: one session's writers serialise, other sessions' do not wait


def _labelled_store(schema: str) -> Store:
    """A store whose connections carry the schema's name, to find them in pg_stat_activity."""
    return Store.open(POSTGRES_URL, schema=schema, connect_kwargs={"application_name": schema})


# A writer of the store (its connections carry the schema's name) waiting for a lock. On Citus
# (tests/citus.py) the wait happens on the worker that holds the session's shard, in a backend
# of the writer's distributed transaction: its global pid is the writer's.
_WAITING = {
    False: """SELECT count(*) FROM pg_stat_activity
        WHERE application_name = %(name)s AND wait_event_type = 'Lock'""",
    True: """SELECT count(*) FROM citus_stat_activity
        WHERE wait_event_type = 'Lock' AND global_pid IN (
            SELECT global_pid FROM citus_stat_activity WHERE application_name = %(name)s)""",
}


async def _waiting_on_a_lock(schema: str) -> bool:
    with _admin() as conn:
        citus = conn.execute("SELECT to_regclass('citus_stat_activity') IS NOT NULL").fetchone()
        row = conn.execute(_WAITING[bool(citus and citus[0])], {"name": schema}).fetchone()
    return row is not None and row[0] > 0


async def _hold_session_lock(schema: str, session_id: str) -> psycopg.AsyncConnection[Any]:
    """A connection holding the row lock of ``session_id``, as a writer mid-batch would."""
    holder = await psycopg.AsyncConnection.connect(POSTGRES_URL)
    await holder.execute(f'SET search_path TO "{schema}"')
    await holder.execute("SELECT 1 FROM sessions WHERE session_id = %s FOR UPDATE", [session_id])
    return holder


async def _until_a_writer_waits(schema: str) -> None:
    for _ in range(600):  # until the server reports a writer waiting for the lock
        if await _waiting_on_a_lock(schema):
            return
        await asyncio.sleep(0.05)
    pytest.fail("no writer ever waited for the session lock")


async def test_writers_of_one_session_serialise_and_others_do_not_wait(schema: str) -> None:
    store = _labelled_store(schema)
    try:
        await store.add_items("busy", [user("first")])
        await store.add_items("free", [user("first")])
        holder = await _hold_session_lock(schema, "busy")

        # Another session is written at once (bounded wait: a hang fails, it is not timed).
        await asyncio.wait_for(store.add_items("free", [user("second")]), 30)

        blocked = asyncio.ensure_future(store.add_items("busy", [user("second")]))
        await _until_a_writer_waits(schema)
        assert not blocked.done()
        await holder.rollback()
        await holder.close()
        await asyncio.wait_for(blocked, 30)
        assert await store.get_items("busy") == [user("first"), user("second")]
    finally:
        await store.aclose()


# ---------------------------------------------------------------------------------------------
# Retries: the whole operation again, nothing written twice


def _append(store: Store, session_id: str, items: list[Any]) -> Op[None]:
    return append.append(session_id, prepare_items(items), store.backend.now())


async def test_dropped_connection_is_retried_without_duplicates(schema: str) -> None:
    store = Store.open(POSTGRES_URL, schema=schema)
    attempts: list[int] = []

    def op() -> Op[None]:
        attempts.append(1)
        yield from _append(store, "s", [user("q"), call("c1", "tool"), output("c1", "out")])
        if len(attempts) == 1:  # the server drops us after the writes, before COMMIT
            yield Query("SELECT pg_terminate_backend(pg_backend_pid())", raw=True)

    try:
        await store.backend.run(op, write=True)
        assert len(attempts) == 2
        assert await store.get_items("s") == [user("q"), call("c1", "tool"), output("c1", "out")]
        assert await sql(store, "SELECT count(*) FROM tool_calls") == [(1,)]
    finally:
        await store.aclose()


@pytest.mark.skipif(
    bool(CITUS_URL),
    reason="on Citus the trigger would fire on a worker; test_exactly_once cuts the reply to "
    "COMMIT there instead (tests/faultproxy.py)",
)
async def test_connection_lost_during_commit_is_settled_by_the_write_key(schema: str) -> None:
    store = Store.open(POSTGRES_URL, schema=schema)
    # A deferred trigger fires inside COMMIT and kills the server process once: the client
    # loses its connection with COMMIT in flight, the one case where the outcome is unknown.
    with _admin() as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("CREATE SEQUENCE kills")
        conn.execute(
            """CREATE FUNCTION kill_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF nextval('kills') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid());
                END IF;
                RETURN NULL;
            END $$"""
        )
        conn.execute(
            "CREATE CONSTRAINT TRIGGER kill AFTER INSERT ON items"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION kill_at_commit()"
        )
    attempts: list[int] = []
    key = new_operation_id()

    def op() -> Op[None]:
        attempts.append(1)
        yield from once(
            "s", key, append.append("s", prepare_items([user("once")]), store.backend.now())
        )

    try:
        await store.backend.run(op, write=True)
        assert await store.get_items("s") == [user("once")]  # exactly once
        with _admin() as conn:
            (fired,) = conn.execute(f'SELECT last_value FROM "{schema}".kills').fetchone() or (0,)
        assert fired >= 1
        assert len(attempts) == 2  # the commit really was cut off, and settled by a re-run
    finally:
        await store.aclose()


@pytest.mark.parametrize("sqlstate", ["serialization_failure", "deadlock_detected"])
async def test_transient_errors_rerun_the_operation(schema: str, sqlstate: str) -> None:
    store = Store.open(POSTGRES_URL, schema=schema)
    attempts: list[int] = []

    def op() -> Op[None]:
        attempts.append(1)
        yield from _append(store, "s", [user(f"try {len(attempts)}")])
        if len(attempts) < 3:
            yield Query(
                f"DO $$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = '{sqlstate}'; END $$",
                raw=True,
            )

    try:
        await store.backend.run(op, write=True)
        assert len(attempts) == 3
        assert await store.get_items("s") == [user("try 3")]
    finally:
        await store.aclose()


async def test_retries_are_bounded_and_end_in_a_turnstore_error(schema: str) -> None:
    store = Store.open(POSTGRES_URL, schema=schema, retries=2)
    attempts: list[int] = []

    def op() -> Op[None]:
        attempts.append(1)
        yield Query(
            "DO $$ BEGIN RAISE EXCEPTION 'always' USING ERRCODE = 'serialization_failure'; END $$",
            raw=True,
        )

    try:
        with pytest.raises(ConflictError, match="always"):
            await store.backend.run(op, write=True)
        assert len(attempts) == 3
    finally:
        await store.aclose()


async def test_other_errors_are_not_retried(schema: str) -> None:
    store = Store.open(POSTGRES_URL, schema=schema)
    attempts: list[int] = []

    def op() -> Op[None]:
        attempts.append(1)
        yield from _append(store, "s", [user("lost")])
        yield Query("SELECT 1 / 0", raw=True)

    try:
        with pytest.raises(StorageError, match="division by zero"):
            await store.backend.run(op, write=True)
        assert len(attempts) == 1
        assert await store.get_items("s") == []  # rolled back whole
    finally:
        await store.aclose()


async def test_a_dropped_schema_is_a_schema_error(schema: str) -> None:
    store = Store.open(POSTGRES_URL, schema=schema)
    try:
        _drop(schema)
        with pytest.raises(SchemaError, match="migrate"):
            await store.get_items("s")
    finally:
        await store.aclose()

"""Fixtures shared by the suite: every conformance test runs on every backend.

``store`` (and ``open_store``) are parametrised over a SQLite file, SQLite ``:memory:`` and
PostgreSQL; ``cli_target`` and ``new_target`` give the CLI's and the viewer's tests a database
as one string (a SQLite file, or a Postgres URL naming a schema of its own), over the module's
``target_backend``. Postgres is reached through ``TURNSTORE_TEST_POSTGRES_URL`` (default: the
project's local server), or ``TURNSTORE_TEST_CITUS_URL`` for the opt-in Citus run
(tests/citus.py); each test gets a schema of its own (an emptied one where it can:
tests/schemapool.py), dropped afterwards. Without a
server the Postgres cases skip locally; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

from schemapool import SchemaPool, fingerprint
from sqlscope import uncolocated
from turnstore import Store

# The opt-in Citus run (tests/citus.py): the PostgreSQL tests on a coordinator.
pytest_plugins = ["citus"]
POSTGRES_URL = os.environ.get("TURNSTORE_TEST_CITUS_URL") or os.environ.get(
    "TURNSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Emptied schemas for the conformance tests (not on Citus: tests/citus.py distributes each
# schema as it is created, and checks each statement's plan there).
SCHEMAS = None if os.environ.get("TURNSTORE_TEST_CITUS_URL") else SchemaPool(POSTGRES_URL)

BACKENDS = [
    pytest.param("sqlite-file", id="sqlite-file"),
    pytest.param("sqlite-memory", id="sqlite-memory"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]

# The backends a target string (the CLI's --db, the viewer's database) can name.
TARGET_BACKENDS = [
    pytest.param("sqlite-file", id="sqlite-file"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]

_postgres_checked: list[str | None] = []


def _postgres_unavailable() -> str | None:
    """Why Postgres cannot be used here, or None. Checked once per test run."""
    if not _postgres_checked:
        reason: str | None = None
        try:
            import psycopg

            with psycopg.connect(POSTGRES_URL, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:
            reason = f"PostgreSQL at {POSTGRES_URL} is unavailable: {exc}"
        _postgres_checked.append(reason)
    return _postgres_checked[0]


def unavailable(reason: str) -> NoReturn:
    """Skip a test (or a whole module) that lacks what it needs; under ``CI=true`` fail it,
    because CI installs every extra and runs every test."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: every test must run)")
    pytest.skip(reason, allow_module_level=True)


def require_module(name: str) -> ModuleType:
    """``pytest.importorskip`` that fails under ``CI=true``: ``name`` of an installed extra."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        install = "pip install -e '.[agents,postgres,cli,web]' --group dev"
        unavailable(f"cannot import {name} ({install}): {exc}")


def require_postgres() -> None:
    """Skip (or, in CI, fail) a test that needs the Postgres server."""
    reason = _postgres_unavailable()
    if reason is not None:
        unavailable(reason)


def _drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    """The backend a conformance test runs on."""
    name: str = request.param
    if name == "postgres":
        require_postgres()
    return name


@pytest.fixture
def db_target(
    backend_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(target, options) that open one fresh database of the test's backend.

    Every store opened with them sees the same database, except ``:memory:``, which is one
    database per store. A PostgreSQL schema is an emptied one (tests/schemapool.py) unless the
    test names this fixture itself: such a test sees how the database is made, so it gets a
    schema that does not exist yet.
    """
    if backend_name == "sqlite-file":
        yield str(tmp_path / "turnstore.db"), {}
    elif backend_name == "sqlite-memory":
        yield ":memory:", {}
    elif SCHEMAS is None or "db_target" in inspect.signature(request.function).parameters:
        schema = f"t_{uuid.uuid4().hex[:12]}"
        yield POSTGRES_URL, {"schema": schema}
        _drop_schema(schema)
    else:
        schema = SCHEMAS.take()
        yield POSTGRES_URL, {"schema": schema}
        SCHEMAS.give_back(schema)


@pytest.fixture(autouse=True, scope="session")
def _drain_schemas() -> Iterator[None]:
    """Drop the schemas kept for reuse when the run ends."""
    yield
    if SCHEMAS is not None:
        SCHEMAS.drain()


@pytest.fixture
def open_store(db_target: tuple[str, dict[str, Any]]) -> Iterator[Callable[[], Store]]:
    """A factory of stores on the test's database; all are closed after the test."""
    target, options = db_target
    opened: list[Store] = []

    def factory() -> Store:
        store = Store.open(target, **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
async def store(open_store: Callable[[], Store]) -> Store:
    """One open store on a fresh database of the test's backend."""
    return open_store()


@pytest.fixture
def shared_loop_store(
    open_store: Callable[[], Store],
) -> Iterator[tuple[asyncio.AbstractEventLoop, Store]]:
    """One event loop and one store for every example of a (Hypothesis) test."""
    loop = asyncio.new_event_loop()
    try:
        yield loop, open_store()
    finally:
        loop.close()


def rendered(store: Store, statement: str, params: Iterable[str]) -> str:
    """``statement`` with its ``{name}`` parameters in ``store``'s placeholder style; on
    PostgreSQL checked for a join that Citus refuses (``sql``'s rule)."""
    placeholder = ":{}" if store.backend.dialect == "sqlite" else "%({})s"
    text = statement.format(**{name: placeholder.format(name) for name in params})
    if store.backend.dialect != "sqlite":  # what Citus runs too (tests/citus.py)
        assert uncolocated(text) == [], f"a join Citus refuses: {text}"
    return text


async def sql(
    store: Store, statement: str, *, write: bool = False, **params: Any
) -> list[tuple[Any, ...]]:
    """Run a SQL statement on ``store``'s database, as a user would by hand (read-only unless
    ``write``); the rows it returns (none for a write).

    Parameters are written ``{name}`` and bound in the backend's own placeholder style.
    """
    from turnstore.core.ops import Fetch, Query

    text = rendered(store, statement, params)

    def op() -> Any:
        rows = yield Query(text, params, Fetch.NONE if write else Fetch.ALL, raw=True)
        return [] if write else [tuple(row) for row in rows]

    result: list[tuple[Any, ...]] = await store.backend.run(op, write=write)
    return result


def target_sql(target: str, statement: str, *, write: bool = False, **params: Any) -> Any:
    """``sql`` on the database ``target`` names, from synchronous code."""

    async def go() -> Any:
        async with Store.open(target) as store:
            return await sql(store, statement, write=write, **params)

    return asyncio.run(go())


def postgres_target(schema: str) -> str:
    """The test server's URL naming ``schema`` (turnstore's ``?schema=`` parameter)."""
    return f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema={schema}"


@contextmanager
def database_target(backend: str, directory: Path) -> Iterator[str]:
    """A fresh database of ``backend`` as the one string the CLI and the viewer take: a new
    SQLite file in ``directory``, or a Postgres URL naming a schema of its own, dropped
    afterwards."""
    if backend == "sqlite-file":
        yield str(directory / f"t_{uuid.uuid4().hex[:8]}.db")
        return
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield postgres_target(schema)
    finally:
        _drop_schema(schema)


def target_exists(target: str) -> bool:
    """Whether anything was created at ``target``: the SQLite file, or the Postgres schema."""
    if "://" not in target:
        return Path(target).exists()
    import psycopg

    schema = target.rsplit("schema=", 1)[1]
    with psycopg.connect(POSTGRES_URL) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone()
    return row is not None


def target_state(target: str) -> object:
    """What a read must leave as it found it: the SQLite file's bytes, or the PostgreSQL
    schema's catalogue (its version included) and every row of every table. Read without
    turnstore, which could migrate an old schema."""
    if "://" not in target:
        return hashlib.sha256(Path(target).read_bytes()).hexdigest()
    import psycopg

    schema = target.rsplit("schema=", 1)[1]
    with psycopg.connect(POSTGRES_URL) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        listing = "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename"
        tables = [name for (name,) in conn.execute(listing, [schema]).fetchall()]
        rows = {
            t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"').fetchall())) for t in tables
        }
        return fingerprint(conn, schema), rows


@contextmanager
def reader_target(target: str) -> Iterator[str]:
    """The PostgreSQL ``target`` reached as a role of its own that may read its schema and do
    nothing else: what the user ``nobody`` is to a read-only SQLite file, so that whatever
    works through it is shown to write nothing. The role is dropped afterwards."""
    import psycopg

    role = f"t_reader_{uuid.uuid4().hex[:12]}"
    schema = target.rsplit("schema=", 1)[1]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD 'reader'")
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
    try:
        parts = urlsplit(target)
        server = parts.netloc.rsplit("@", 1)[-1]
        yield urlunsplit(parts._replace(netloc=f"{role}:reader@{server}"))
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP OWNED BY "{role}"')  # its grants
            admin.execute(f'DROP ROLE "{role}"')


# What a command says of a target where no database is: no file, or a schema without tables.
MISSING_DATABASE = {"sqlite-file": "no database at", "postgres": "holds no turnstore schema"}


@pytest.fixture(scope="module", params=TARGET_BACKENDS)
def target_backend(request: pytest.FixtureRequest) -> str:
    """The backend of a module's CLI and viewer tests. Module-scoped, so that the database a
    module writes once and the fresh ones its tests make are of one backend."""
    name: str = request.param
    if name == "postgres":
        require_postgres()
    return name


@pytest.fixture
def new_target(target_backend: str, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """A factory of fresh databases (``database_target``) of the module's backend."""
    with ExitStack() as stack:
        yield lambda: stack.enter_context(database_target(target_backend, tmp_path))


@pytest.fixture
def cli_target(new_target: Callable[[], str]) -> str:
    """A fresh database of the module's backend, as the CLI's --db takes it."""
    return new_target()


@pytest.fixture(autouse=True, scope="session")
def _no_trace_export() -> None:
    """No test sends traces anywhere (and none warns that it cannot)."""
    try:
        from agents import set_tracing_disabled
    except ImportError:
        return
    set_tracing_disabled(True)


@contextmanager
def session_target(backend: str, tmp_path: Path) -> Iterator[str]:
    """A fresh database of ``backend`` as the target a session is opened from; for Postgres a
    database of its own, for a URL that names no schema (so it uses "public")."""
    if backend == "sqlite-file":
        yield str(tmp_path / "app.db")
        return
    require_postgres()
    import psycopg

    name = f"t_shared_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")

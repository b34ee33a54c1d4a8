"""Fixtures shared by the suite: every conformance test runs on every backend.

``store`` (and ``open_store``) are parametrised over a SQLite file, SQLite ``:memory:`` and
PostgreSQL; ``cli_target`` and ``new_target`` give the CLI's and the viewer's tests a database
as one string (a SQLite file, or a Postgres URL naming a schema of its own), over the module's
``target_backend``. Postgres is reached through ``TURNSTORE_TEST_POSTGRES_URL`` (default: the
project's local server), or ``TURNSTORE_TEST_CITUS_URL`` for the opt-in Citus run
(tests/citus.py); each test gets a schema of its own (an emptied one where it can:
tests/schemapool.py), dropped afterwards. Without a
server the Postgres cases skip locally; under ``CI=true`` they fail instead.

Also the fixtures several modules use: ``shared_dir`` (a directory an unprivileged user
reaches), ``proxy`` (a fault-injecting proxy to PostgreSQL), ``browser`` and ``page``
(headless Chromium). What the tests share that is not a fixture is in support.py and
builders.py; no test module imports this one.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import pwd
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

# The helper modules' asserts report their values as a test's own do (rewritten on import).
pytest.register_assert_rewrite(
    "browsing", "builders", "chains", "querydata", "richdb", "scripted", "support", "webdata"
)

from faultproxy import FaultProxy  # noqa: E402
from schemapool import tidy_catalogue  # noqa: E402
from support import (  # noqa: E402
    BACKENDS,
    POSTGRES_URL,
    SCHEMAS,
    TARGET_BACKENDS,
    database_target,
    drop_schema,
    emptied_schema,
    require_postgres,
)
from turnstore import Store  # noqa: E402

# The opt-in Citus run (tests/citus.py): the PostgreSQL tests on a coordinator.
pytest_plugins = ["citus"]


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
        drop_schema(schema)
    else:
        with emptied_schema() as schema:
            yield POSTGRES_URL, {"schema": schema}


def pytest_configure(config: pytest.Config) -> None:
    """Once per run, before any test (in pytest-xdist's controller, not in its workers)."""
    if SCHEMAS is not None and not hasattr(config, "workerinput"):
        tidy_catalogue(POSTGRES_URL)


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


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI prints as into a pipe (no width known) unless a test sets ``COLUMNS``: pytest-xdist
    gives its workers the terminal's ``COLUMNS``, which would wrap their tables at 80."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(autouse=True, scope="session")
def _no_trace_export() -> None:
    """No test sends traces anywhere (and none warns that it cannot)."""
    try:
        from agents import set_tracing_disabled
    except ImportError:
        return
    set_tracing_disabled(True)


@pytest.fixture(autouse=True, scope="session")
def _cli_built_once() -> Iterator[None]:
    """typer's ``CliRunner.invoke`` builds the click command from the app at every call (~0.1 s
    of reading every command's signature, which a user's process pays once): built once per
    app here, a third of the CLI tests' CPU. A typer whose testing module no longer has the
    name fails here, loudly."""
    try:
        import typer.main
        import typer.testing
    except ImportError:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typer.testing, "_get_command", functools.cache(typer.main.get_command))
        yield


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory under /tmp that an unprivileged user can reach (pytest's is root-only)."""
    if os.getuid() == 0:
        try:
            pwd.getpwnam("nobody")
        except KeyError:
            pytest.skip("no user 'nobody' to drop privileges to")
    path = Path(tempfile.mkdtemp(prefix="turnstore-ro-"))
    path.chmod(0o755)
    yield path
    path.chmod(0o755)
    shutil.rmtree(path)


@pytest.fixture
def proxy() -> Iterator[Any]:
    """A fault-injecting proxy in front of the test PostgreSQL server (tests/faultproxy.py)."""
    require_postgres()
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(POSTGRES_URL)
    with FaultProxy(str(params.get("host", "127.0.0.1")), int(params.get("port", 5432))) as p:
        p.database = str(params.get("dbname", "test"))
        p.user = str(params.get("user", "postgres"))
        yield p


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium, launched once for the module (tests/browsing.py)."""
    from browsing import chromium

    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (a context of its own) in the module's browser."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(10_000)
    yield tab
    context.close()

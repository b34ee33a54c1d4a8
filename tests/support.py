"""What the tests share besides fixtures: the PostgreSQL server and the targets made on it,
what a test needs (``require_*``: skipped locally, failed under ``CI=true``), SQL by hand on
a store's database, and the CLI.

The fixtures built on these are in conftest.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import os
import pwd
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

from schemapool import SchemaPool, fingerprint
from sqlscope import uncolocated
from turnstore import Store

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


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


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
        drop_schema(schema)


@contextmanager
def emptied_schema() -> Iterator[str]:
    """A PostgreSQL schema holding turnstore's tables and no rows (tests/schemapool.py), given
    back for reuse afterwards; a new one, dropped afterwards, where no pool is kept (Citus)."""
    if SCHEMAS is None:
        schema = f"t_{uuid.uuid4().hex[:12]}"
        try:
            yield schema
        finally:
            drop_schema(schema)
        return
    schema = SCHEMAS.take()
    try:
        yield schema
    finally:
        SCHEMAS.give_back(schema)


def target_exists(target: str) -> bool:
    """Whether anything was created at ``target``: the SQLite file, or the Postgres schema."""
    if "://" not in target:
        return Path(target).exists()
    import psycopg

    schema = target.rsplit("schema=", 1)[1]
    with psycopg.connect(POSTGRES_URL) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone()
    return row is not None


# What a command says of a target where no database is: no file, or a schema without tables.
MISSING_DATABASE = {"sqlite-file": "no database at", "postgres": "holds no turnstore schema"}


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


# ---------------------------------------------------------------------------------------------
# The CLI, and faults a test injects


def cli(*args: str, code: int = 0) -> Any:
    """Run ``turnstore ARGS`` in this process; check its exit status and that it shows no
    traceback; return the result."""
    from typer.testing import CliRunner

    from turnstore.cli import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.output
    return result


class Interrupted(Exception):
    """The fault a test injects into a copy."""


def failing_after(store: Store, writes: int) -> Store:
    """``store``, whose backend fails every transaction that writes after the first ``writes``."""
    run = store.backend.run
    seen = [0]

    async def failing(op: Any, *, write: bool) -> Any:
        if write:
            seen[0] += 1
            if seen[0] > writes:
                raise Interrupted(f"write {seen[0]}")
        return await run(op, write=write)

    store.backend.run = failing  # type: ignore[method-assign]
    return store


# ---------------------------------------------------------------------------------------------
# Databases only read: as an unprivileged user (SQLite), as a role that may only read
# (PostgreSQL), and what the read must leave as it found


def file_hashes(path: Path) -> dict[str, str]:
    """The SHA-256 of the database file and of its -wal and -shm, where present."""
    return {
        name.name: hashlib.sha256(name.read_bytes()).hexdigest()
        for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
        if name.exists()
    }


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


def reader_ids(target: str | Path) -> list[str]:
    """The uid and gid a child process reading ``target`` drops to: ``nobody``'s for a file
    when this process is root (whom file permissions do not stop); none for a PostgreSQL URL,
    where the role it names is what may only read (``reader_target``)."""
    nobody = pwd.getpwnam("nobody") if os.getuid() == 0 and "://" not in str(target) else None
    return [str(nobody.pw_uid), str(nobody.pw_gid)] if nobody else ["0", "0"]


def run_as_reader(target: str | Path, script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` on ``target`` in a child process, as ``nobody`` for a file when this one
    is root (see ``reader_ids``)."""
    src = str(Path(__file__).resolve().parents[1] / "src")
    return subprocess.run(
        [sys.executable, "-c", script, str(target), *reader_ids(target)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": src},
        check=False,
    )


@contextmanager
def unwritable(
    backend: str, fill: Callable[[str], None], request: pytest.FixtureRequest
) -> Iterator[str]:
    """A database ``fill`` wrote that nothing reading it can write, as the target to read it
    by: a read-only file in a read-only directory, to be read as ``nobody`` (SQLite), or the
    schema as a role that may only read it (PostgreSQL). On leaving, the database (and the
    directory) must be as they were."""
    if backend == "sqlite-file":
        directory: Path = request.getfixturevalue("shared_dir")
        path = directory / "c.db"
        fill(str(path))
        path.chmod(0o444)
        directory.chmod(0o555)
        before: object = sorted(os.listdir(directory)), file_hashes(path)
        yield str(path)
        assert (sorted(os.listdir(directory)), file_hashes(path)) == before
        return
    target: str = request.getfixturevalue("cli_target")
    fill(target)
    with reader_target(target) as reader:
        before = target_state(target)  # its grants included
        yield reader
        assert target_state(target) == before


def old_database(
    monkeypatch: pytest.MonkeyPatch, backend_name: str, target: str, options: dict[str, Any]
) -> None:
    """Create the database at the schema version before the newest."""
    if backend_name == "postgres":
        from turnstore.postgres import migrations as module
    else:
        from turnstore.sqlite import migrations as module
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", module.MIGRATIONS[:-1])
        Store.open(target, **options).close()


@contextmanager
def writes_before_totals(dialect: str) -> Iterator[None]:
    """Today's writes on a database from before the sessions' totals (SQLite's step 18,
    PostgreSQL's 17; core/lock.py): the head moves as it did then, nothing is counted; and on
    PostgreSQL, before its step 18, a run's rows go by its foreign keys' cascade. For tests
    that write data at an older schema version, then upgrade it."""
    from turnstore.core import catalogue_sql as C
    from turnstore.core import statements as S

    if dialect == "sqlite":
        from turnstore.sqlite.sql import DIALECT
    else:
        from turnstore.postgres.sql import DIALECT
    uncounted = DIALECT.render("UPDATE sessions SET title = title WHERE session_id = :sid")
    plain = {
        **dict.fromkeys(C.SET_HEAD_COUNTED.values(), S.SET_HEAD),
        **dict.fromkeys(C.ENSURE_SESSION_COUNTED.values(), S.ENSURE_SESSION),
        **dict.fromkeys(C.UPSERT_HEAD_COUNTED.values(), S.UPSERT_HEAD),
    }
    with pytest.MonkeyPatch.context() as patch:
        for counted, statement in plain.items():
            if counted in DIALECT.sql:
                patch.setitem(DIALECT.sql, counted, DIALECT.sql[statement])
        for counting in (*C.COUNT_ROWS.values(), C.RECOUNT_ROWS):
            patch.setitem(DIALECT.sql, counting, uncounted)
        if dialect != "sqlite":
            patch.setitem(
                DIALECT.sql,
                S.DELETE_RUN,
                DIALECT.render("DELETE FROM runs WHERE session_id = :sid AND id = :id"),
            )
        yield

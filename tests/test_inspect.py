"""``Store.inspect``: what a target holds, found without creating or changing anything.

On a SQLite file and a PostgreSQL schema of its own (conftest's ``target_backend``): a missing
database, an empty one, turnstore's (current and older), the Agents SDK's session tables
(SQLiteSession's, AdvancedSQLiteSession's) and another application's. What only a file can be
(a directory, a file that is not a database, ``:memory:``) on SQLite alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from support import POSTGRES_URL, target_exists
from turnstore import (
    ConfigurationError,
    ConnectionFailedError,
    DatabaseInfo,
    Store,
    migrate,
    postgres,
    sqlite,
)
from turnstore.core.statements import CREATE_VERSION_TABLE

SDK_TABLES = (
    "CREATE TABLE agent_sessions (session_id TEXT PRIMARY KEY)",
    "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, message_data TEXT)",
)
ADVANCED_TABLES = (
    *SDK_TABLES,
    "CREATE TABLE message_structure (id INTEGER PRIMARY KEY, message_id INTEGER)",
    "CREATE TABLE turn_usage (id INTEGER PRIMARY KEY)",
)


def make(target: str, statements: Sequence[str]) -> None:
    """Create the database ``target`` names (a file, a schema) holding what ``statements``
    create, written by hand as another application would."""
    if "://" not in target:
        with sqlite3.connect(target) as conn:
            for statement in statements:
                conn.execute(statement)
        conn.close()
        return
    import psycopg
    from psycopg import sql

    schema = target.rsplit("schema=", 1)[1]
    with psycopg.connect(POSTGRES_URL) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        for statement in statements:
            conn.execute(statement.replace("INTEGER PRIMARY KEY", "SERIAL PRIMARY KEY"))  # type: ignore[call-overload]


def latest(target: str) -> int:
    return len((postgres if "://" in target else sqlite).MIGRATIONS)


def test_a_missing_database_is_not_created(cli_target: str, target_backend: str) -> None:
    info = Store.inspect(cli_target)
    assert info == DatabaseInfo(
        target=cli_target,
        backend="postgresql" if target_backend == "postgres" else "sqlite",
        kind="missing",
        schema_version=None,
        latest_version=latest(cli_target),
        tables=(),
        path=None if target_backend == "postgres" else cli_target,
    )
    assert not info.exists
    assert not info.up_to_date
    assert not target_exists(cli_target)


def test_an_empty_database(cli_target: str) -> None:
    make(cli_target, [])
    info = Store.inspect(cli_target)
    assert (info.kind, info.tables, info.schema_version) == ("empty", (), None)
    assert info.exists


def test_a_turnstore_database(cli_target: str) -> None:
    migrate(cli_target)
    info = Store.inspect(cli_target)
    assert info.kind == "turnstore"
    assert info.schema_version == info.latest_version == latest(cli_target)
    assert info.up_to_date
    assert {"sessions", "runs", "items", "turnstore_schema"} <= set(info.tables)
    assert list(info.tables) == sorted(info.tables)


def test_an_older_turnstore_database_is_not_migrated(cli_target: str) -> None:
    schema = (postgres if "://" in cli_target else sqlite).MIGRATIONS[0]
    version_table = (postgres if "://" in cli_target else sqlite).SQL[CREATE_VERSION_TABLE]
    make(
        cli_target,
        [*schema, version_table, "INSERT INTO turnstore_schema (version) VALUES (1)"],
    )
    for _ in range(2):  # and inspecting left it at version 1
        info = Store.inspect(cli_target)
        assert (info.kind, info.schema_version, info.up_to_date) == ("turnstore", 1, False)


@pytest.mark.parametrize(
    ("statements", "kind"),
    [
        (SDK_TABLES, "sdk-sessions"),
        (ADVANCED_TABLES, "sdk-advanced"),
        (("CREATE TABLE invoices (id INTEGER PRIMARY KEY)",), "foreign"),
        # The SDK's tables beside others (custom-named ones, say) are still the SDK's.
        ((*SDK_TABLES, "CREATE TABLE msgs (id INTEGER PRIMARY KEY)"), "sdk-sessions"),
        ((*ADVANCED_TABLES, "CREATE TABLE msgs (id INTEGER PRIMARY KEY)"), "sdk-advanced"),
        (("CREATE VIEW answer AS SELECT 42 AS n",), "foreign"),
    ],
)
def test_databases_of_other_kinds(cli_target: str, statements: Sequence[str], kind: str) -> None:
    make(cli_target, statements)
    before = Path(cli_target).read_bytes() if "://" not in cli_target else None
    info = Store.inspect(cli_target)
    assert info.kind == kind
    assert info.schema_version is None
    assert info.tables == tuple(sorted(s.split()[2] for s in statements))
    if before is not None:
        assert Path(cli_target).read_bytes() == before


# SQLite only: what only a file can be.


def test_sqlite_targets(tmp_path: Path) -> None:
    memory = Store.inspect(":memory:")
    assert (memory.kind, memory.path, memory.backend) == ("empty", None, "sqlite")
    db = tmp_path / "app.db"
    migrate(db)
    for target in (db, str(db), f"sqlite:///{db}"):
        info = Store.inspect(target)
        assert (info.kind, info.path, info.target) == ("turnstore", str(db), str(target))
    assert Store.inspect("sqlite://").kind == "empty"


def test_what_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(ConnectionFailedError, match="is a directory, not a database"):
        Store.inspect(tmp_path)
    junk = tmp_path / "junk.db"
    junk.write_text("hello, I am text\n" * 100)
    with pytest.raises(ConnectionFailedError, match="not a SQLite database"):
        Store.inspect(junk)
    assert junk.read_text() == "hello, I am text\n" * 100


def test_bad_targets_are_configuration_errors(tmp_path: Path) -> None:
    for target in ("", "mysql://host/db", 42):
        with pytest.raises(ConfigurationError):
            Store.inspect(target)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="schema= is for PostgreSQL"):
        Store.inspect(tmp_path / "app.db", schema="agents")


def test_a_home_relative_path_is_the_file_open_would_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    migrate("~/home.db")
    assert (tmp_path / "home.db").is_file()
    info = Store.inspect("~/home.db")
    assert info.kind == "turnstore"

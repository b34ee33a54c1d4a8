"""Looking at a database without opening it as a store: ``Store.inspect(target)``.

``Store.open`` creates what is missing (a SQLite file, a PostgreSQL schema, turnstore's tables)
and ``Store.open(..., read_only=True)`` refuses what it cannot read. Before either, a tool may
want to know what a target holds, to say so or to choose: the command line refuses a missing
file on a read command, names ``turnstore import`` for an SDK session file and ``turnstore
adopt`` for a ``SQLiteSession`` one. ``inspect`` answers with a ``DatabaseInfo`` and never
creates or changes anything: a SQLite file is read through a read-only connection (``mode=ro``,
or ``immutable`` in a directory it cannot write), a missing one is not created; a PostgreSQL
schema is read in a read-only session, a missing one is not created.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from . import validate
from .errors import ConfigurationError, ConnectionFailedError
from .extras import missing_extra

__all__ = ["DatabaseInfo", "DatabaseKind", "inspect_database", "sqlite_file"]

DatabaseKind = Literal["missing", "empty", "turnstore", "sdk-sessions", "sdk-advanced", "foreign"]
"""What a target holds:

- ``missing``: no SQLite file there, or no such PostgreSQL schema;
- ``empty``: a database (or schema) without tables: a 0-byte file, ``:memory:``;
- ``turnstore``: turnstore's tables (``DatabaseInfo.schema_version`` says at which version);
- ``sdk-sessions``: the Agents SDK's ``SQLiteSession`` tables (``agent_sessions``,
  ``agent_messages``), which ``Store.open`` adopts in place (``turnstore adopt``) when they are
  all the file holds (beside tables of other names ``Store.open`` refuses it untouched);
- ``sdk-advanced``: an ``AdvancedSQLiteSession``'s (the same and ``message_structure``,
  ``turn_usage``), whose branches only an import (``turnstore import``) keeps;
- ``foreign``: tables of another application, which ``Store.open`` refuses untouched.
"""


@dataclass(frozen=True, slots=True)
class DatabaseInfo:
    """What ``Store.inspect`` found at a target."""

    target: str
    """The target as given (a path or URL; a URL may hold a password: do not print it)."""
    backend: Literal["sqlite", "postgresql"]
    kind: DatabaseKind
    schema_version: int | None
    """The version of turnstore's schema stored there (None unless ``kind`` is turnstore)."""
    latest_version: int
    """The version this turnstore's backend migrates to (``schema_version`` below it: the
    database needs ``turnstore migrate`` before a read-only open can read it)."""
    tables: tuple[str, ...]
    """The names of the tables and views found, sorted (SQLite's own left out)."""
    path: str | None
    """The SQLite file the target names (None for ``:memory:`` and PostgreSQL)."""

    @property
    def exists(self) -> bool:
        """Something is there: a file (or ``:memory:``), or a PostgreSQL schema."""
        return self.kind != "missing"

    @property
    def up_to_date(self) -> bool:
        """A turnstore database at this turnstore's schema version."""
        return self.kind == "turnstore" and self.schema_version == self.latest_version


def inspect_database(target: str | os.PathLike[str], *, schema: str | None = None) -> DatabaseInfo:
    """What ``target`` (a path, ``sqlite://`` or ``postgresql://`` URL, as ``Store.open``
    takes it) holds, found without creating or changing anything. ``schema`` is the PostgreSQL
    schema, as ``Store.open``'s ``schema=``.

    ``ConnectionFailedError`` when a SQLite target is a directory or a file that is not a
    database, or the PostgreSQL server cannot be reached; ``ConfigurationError`` for a target
    ``Store.open`` would refuse as such.
    """
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise ConfigurationError(
            f"a database is a path, ':memory:' or a URL, not {type(target).__name__}"
        )
    validate.open_target(target)
    scheme = target.split("://", 1)[0].lower() if "://" in target else ""
    if scheme in ("postgresql", "postgres"):
        return _inspect_postgres(target, schema)
    if schema is not None:
        raise ConfigurationError("schema= is for PostgreSQL; a SQLite database has none")
    if scheme not in ("", "sqlite"):
        raise ConfigurationError(
            f"unknown database URL scheme {scheme!r} in {target!r}: "
            "use a file path, ':memory:', sqlite:///path or postgresql://…"
        )
    if not target:
        raise ConfigurationError("the database path is empty")
    return _inspect_sqlite(target)


def sqlite_file(target: str) -> str | None:
    """The file behind a SQLite target (a path or ``sqlite://`` URL); None for ``:memory:``
    and for server URLs. Nothing is looked at."""
    from .store import sqlite_path

    if "://" in target and not target.lower().startswith("sqlite://"):
        return None
    path = sqlite_path(target)
    return None if path == ":memory:" else path


def _kind(tables: list[str]) -> DatabaseKind:
    from .sqlite import sqlite_file_kind

    kind = sqlite_file_kind(tables)
    if kind not in ("sdk-sessions", "foreign"):
        return kind
    # The SDK's tables beside others of the application (an SDK session with custom table
    # names, say) are still the SDK's: a tool names import or adopt for them.
    names = {name.lower() for name in tables}
    if "message_structure" in names:
        return "sdk-advanced"
    return "sdk-sessions" if "agent_messages" in names else "foreign"


def _inspect_sqlite(target: str) -> DatabaseInfo:
    from .sqlite import MIGRATIONS, connect_read_only

    path = sqlite_file(target)
    found: list[str] = []
    version: int | None = None
    kind: DatabaseKind = "empty"
    if path is not None:
        file = Path(path)
        if not file.exists():
            kind = "missing"
        elif file.is_dir():
            raise ConnectionFailedError(f"{target} is a directory, not a database")
        elif not file.is_file():  # a FIFO (whose reading would wait for a writer), a device
            raise ConnectionFailedError(f"{target} is not a regular file, not a database")
        else:
            found, version = _read_sqlite(connect_read_only(file), file)
            kind = _kind(found)
    return DatabaseInfo(
        target=target,
        backend="sqlite",
        kind=kind,
        schema_version=version if kind == "turnstore" else None,
        latest_version=len(MIGRATIONS),
        tables=tuple(sorted(found)),
        path=path,
    )


def _read_sqlite(conn: sqlite3.Connection, file: Path) -> tuple[list[str], int | None]:
    """The tables and views of the SQLite file ``file`` and, when it has turnstore's version
    table, the version stored in it; read through ``conn``, which cannot write (and is closed)."""
    conn.text_factory = lambda value: value.decode("utf-8", "replace")  # names are shown only
    try:
        try:
            rows = conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise ConnectionFailedError(f"{file} is not a SQLite database ({exc})") from exc
        tables = [name for (name,) in rows if not name.lower().startswith("sqlite_")]
        if "turnstore_schema" not in {name.lower() for name in tables}:
            return tables, None
        try:
            (version,) = conn.execute("SELECT max(version) FROM turnstore_schema").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ConnectionFailedError(f"cannot read {file}: {exc}") from exc
        return tables, (None if version is None else int(version))
    finally:
        conn.close()


def _inspect_postgres(target: str, schema: str | None) -> DatabaseInfo:
    try:
        import psycopg
        from psycopg import sql

        from .postgres.errors import connect_error, driver_error
        from .postgres.migrations import MIGRATIONS
        from .postgres.url import describe, parse_url, split_schema
    except ImportError as exc:
        raise missing_extra("postgres", "PostgreSQL", exc.name) from exc
    url, schema = split_schema(target, schema)
    where = describe(parse_url(url))
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise connect_error(exc, where) from None
    try:
        conn.read_only = True
        namespace = conn.execute(
            "SELECT oid FROM pg_namespace WHERE nspname = %s", [schema]
        ).fetchone()
        tables: list[str] = []
        version: int | None = None
        if namespace is not None:
            (namespace_oid,) = namespace
            tables = [
                name
                for (name,) in conn.execute(
                    "SELECT relname FROM pg_class WHERE relnamespace = %s "
                    "AND relkind IN ('r', 'p', 'v', 'm', 'f')",
                    [namespace_oid],
                ).fetchall()
            ]
            if "turnstore_schema" in tables:
                statement = sql.SQL("SELECT max(version) FROM {}.turnstore_schema")
                row = conn.execute(statement.format(sql.Identifier(schema))).fetchone()
                (stored,) = row if row is not None else (None,)
                version = None if stored is None else int(stored)
    except psycopg.Error as exc:
        raise driver_error(exc, where) from None
    finally:
        conn.close()
    kind: DatabaseKind = "missing" if namespace is None else _kind(tables)
    return DatabaseInfo(
        target=target,
        backend="postgresql",
        kind=kind,
        schema_version=version if kind == "turnstore" else None,
        latest_version=len(MIGRATIONS),
        tables=tuple(sorted(tables)),
        path=None,
    )

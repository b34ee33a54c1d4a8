"""``Store.inspect`` of a SQLite target: its tables and schema version, nothing changed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..domain.targets import DatabaseInfo, DatabaseKind, database_kind, sqlite_file
from ..errors import ConnectionFailedError
from .files import connect_read_only
from .migrations import MIGRATIONS

__all__ = ["inspect"]


def inspect(target: str) -> DatabaseInfo:
    """What the SQLite target holds (``Store.inspect``), read through a connection that
    cannot write; a missing file is not created."""
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
            kind = database_kind(found)
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

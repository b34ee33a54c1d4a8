"""The database file rather than the driver: what kind of file it is, read-only connections,
and the settings a file is opened with (WAL, caches).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from ..errors import ConnectionFailedError, SchemaError
from .errors import driver_error

__all__ = [
    "SDK_ADVANCED_TABLES",
    "SDK_SESSION_TABLES",
    "FileKind",
    "connect_read_only",
    "connect_uri",
    "file_kind",
    "foreign_message",
    "set_caches",
    "set_wal",
    "sqlite_file_kind",
]

log = logging.getLogger("turnstore")


def set_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch to WAL (a no-op when the file already is: the mode is stored in it).

    The switch needs an exclusive lock, and SQLite reports "database is locked" at once rather
    than wait for it: processes opening a new file together retry until ``busy_timeout``.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


FileKind = Literal["empty", "turnstore", "sdk-sessions", "foreign"]

# The Agents SDK's SQLiteSession tables, and AdvancedSQLiteSession's extra ones.
SDK_SESSION_TABLES = frozenset({"agent_sessions", "agent_messages"})
SDK_ADVANCED_TABLES = frozenset(
    {"message_structure", "turn_usage", "branch_reservations", "session_clear_generations"}
)


def sqlite_file_kind(tables: Iterable[str]) -> FileKind:
    """What a SQLite database is, by the names of its tables.

    ``empty`` (no tables: a new file, or a 0-byte one), ``turnstore`` (it has turnstore's
    version table), ``sdk-sessions`` (only the Agents SDK's session tables: opening adds
    turnstore's tables beside them, on purpose) or ``foreign`` (another application's, which
    ``Store.open`` refuses untouched).
    """
    names = {name.lower() for name in tables if not name.lower().startswith("sqlite_")}
    if "turnstore_schema" in names:
        return "turnstore"
    if not names:
        return "empty"
    if "agent_messages" in names and names <= SDK_SESSION_TABLES | SDK_ADVANCED_TABLES:
        return "sdk-sessions"
    return "foreign"


def _tables(conn: sqlite3.Connection, path: str) -> list[str]:
    # Views too: a file of views alone is another application's schema, not an empty file.
    try:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc):
            raise SchemaError(f"{path} is not a SQLite database") from exc
        raise driver_error(exc, path) from exc
    return [name for (name,) in rows]


def file_kind(conn: sqlite3.Connection, path: str) -> FileKind:
    return sqlite_file_kind(_tables(conn, path))


def foreign_message(conn: sqlite3.Connection, path: str) -> str:
    tables = sorted(name for name in _tables(conn, path) if not name.startswith("sqlite_"))
    listed = ", ".join(tables[:6]) + (", …" if len(tables) > 6 else "")
    return (
        f"{path} is a database of another application (tables {listed}), not a turnstore "
        "database; it was left untouched: use another file"
    )


def connect_uri(path: Path, flags: str, busy_timeout: float) -> sqlite3.Connection:
    try:
        return sqlite3.connect(
            f"{path.resolve().as_uri()}?{flags}",
            uri=True,
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error as exc:
        raise ConnectionFailedError(f"cannot open {path}: {exc}") from exc


def connect_read_only(path: Path, busy_timeout: float = 5.0) -> sqlite3.Connection:
    """A connection that can only read the existing SQLite file ``path``: ``mode=ro``, or
    ``immutable`` where a WAL database's ``-shm`` cannot be made (see
    ``SQLiteBackend._open_read_only``). ``ConnectionFailedError`` when neither can read it.
    """
    conn = connect_uri(path, "mode=ro", busy_timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        conn.close()
        real = path.resolve()  # SQLite keeps the -wal beside the file a symlink names
        wal = Path(f"{real}-wal")
        if os.access(real.parent, os.W_OK) or (wal.exists() and wal.stat().st_size):
            raise ConnectionFailedError(f"cannot open {path} read-only: {exc}") from exc
        log.info("%s: read-only directory, opening the database immutable", path)
        conn = connect_uri(path, "immutable=1", busy_timeout)
    except sqlite3.DatabaseError:
        pass  # not a database: the caller's first query says so
    return conn


def set_caches(conn: sqlite3.Connection) -> None:
    # Sorts (tail reads, the viewer's windows, analytics) stay in memory: spilling them to
    # temporary files made reads ~10% slower (bench/).
    conn.execute("PRAGMA temp_store = MEMORY")
    # A 32 MiB page cache (the default is 2 MiB) keeps the index pages that every write and
    # path read touches in the process, not behind a system call.
    conn.execute("PRAGMA cache_size = -32768")

"""The SQLite backend (the embedded default, on the standard library's ``sqlite3``)."""

from .driver import (
    MIGRATIONS,
    SQL,
    FileKind,
    SQLiteBackend,
    connect_read_only,
    now,
    sqlite_file_kind,
)

__all__ = [
    "MIGRATIONS",
    "SQL",
    "FileKind",
    "SQLiteBackend",
    "connect_read_only",
    "now",
    "sqlite_file_kind",
]

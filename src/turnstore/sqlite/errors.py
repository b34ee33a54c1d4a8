"""SQLite's errors become turnstore's here: ``sqlite3.Error`` -> ``TurnstoreError``."""

from __future__ import annotations

import sqlite3

from ..errors import (
    ConnectionFailedError,
    ReadOnlyError,
    SchemaError,
    StorageError,
    TurnstoreError,
)

__all__ = ["driver_error"]


def driver_error(exc: sqlite3.Error, path: str) -> TurnstoreError:
    message = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and "already exists" in message:
        return SchemaError(
            f"{path} already holds a table that turnstore did not create ({message}); "
            "use another database file"
        )
    if isinstance(exc, sqlite3.DatabaseError) and "not a database" in message:
        return ConnectionFailedError(f"{path} is not a SQLite database")
    if isinstance(exc, sqlite3.OperationalError) and "readonly database" in message:
        # SQLITE_READONLY: opened read-only (``turnstore query``), or a file, directory or
        # mount the process may not write.
        return ReadOnlyError(f"{path} cannot be written here ({message}): nothing was written")
    if isinstance(exc, sqlite3.OperationalError) and "unable to open database file" in message:
        # SQLITE_CANTOPEN once the file is open: the -wal or -shm beside it (a read-only
        # mount refuses them even to root).
        return ConnectionFailedError(
            f"cannot open {path} ({message}): is it on a read-only mount, or in a directory "
            "this process may not write? Store.open(..., read_only=True) and the commands "
            "that only read can still read it"
        )
    return StorageError(f"SQLite error on {path}: {message}")

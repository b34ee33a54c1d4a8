"""SQLite's errors become turnstore's here: ``sqlite3.Error`` -> ``TurnstoreError``."""

from __future__ import annotations

import sqlite3

from ..errors import ConnectionFailedError, SchemaError, StorageError, TurnstoreError

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
    return StorageError(f"SQLite error on {path}: {message}")

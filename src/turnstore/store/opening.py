"""Opening a database: the backend a path or URL names, with its options checked; or
inspecting what it holds without opening it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..core.ops import Backend
from ..domain import validate
from ..domain.extras import missing_extra
from ..domain.targets import DatabaseInfo, backend_of, sqlite_path
from ..errors import ConfigurationError

__all__ = ["inspect_target", "open_backend"]


def open_backend(target: str | os.PathLike[str], options: Mapping[str, Any]) -> Backend:
    """The backend ``target`` names, opened with ``options`` (checked against its own)."""
    backend, target = backend_of(target)
    # Each backend's package is imported when a target names it: its driver is an extra.
    if backend == "postgresql":
        try:
            from ..postgres import PostgresBackend
        except ImportError as exc:
            raise missing_extra("postgres", "PostgreSQL", exc.name) from exc
        validate.open_options(PostgresBackend, "PostgreSQL", options)
        return PostgresBackend(target, **options)
    from ..sqlite import SQLiteBackend

    validate.open_options(SQLiteBackend, "SQLite", options)
    return SQLiteBackend(sqlite_path(target), **options)


def inspect_target(target: str | os.PathLike[str], schema: str | None) -> DatabaseInfo:
    """What ``target`` holds, found by its backend's ``inspect`` without creating or changing
    anything (``Store.inspect``)."""
    backend, target = backend_of(target)
    if backend == "postgresql":
        try:
            from ..postgres.inspect import inspect as inspect_postgres
        except ImportError as exc:
            raise missing_extra("postgres", "PostgreSQL", exc.name) from exc
        return inspect_postgres(target, schema)
    if schema is not None:
        raise ConfigurationError("schema= is for PostgreSQL; a SQLite database has none")
    from ..sqlite.inspect import inspect as inspect_sqlite

    return inspect_sqlite(target)

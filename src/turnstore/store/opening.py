"""Opening a database: the backend a path or URL names, with its options checked."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .. import validate
from ..core.ops import Backend
from ..errors import ConfigurationError
from ..extras import missing_extra

__all__ = ["open_backend", "sqlite_path"]


def sqlite_path(target: str) -> str:
    """The SQLite path a target names: ``sqlite:///relative.db``, ``sqlite:////absolute.db``,
    ``sqlite://`` (``:memory:``), or a plain path; a leading ``~`` is the user's home, for
    every use of the path alike (open, read-only open, inspect). A SQLite URI (``file:…``)
    is refused (``validate.sqlite_file_path``)."""
    path = target
    if target.lower().startswith("sqlite://"):
        path = target[len("sqlite://") :]
        path = (path[1:] if path.startswith("/") else path) or ":memory:"
    return path if path == ":memory:" else validate.sqlite_file_path(os.path.expanduser(path))


def open_backend(target: str | os.PathLike[str], options: Mapping[str, Any]) -> Backend:
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise ConfigurationError(
            f"a database is a path, ':memory:' or a URL, not {type(target).__name__}"
        )
    validate.open_target(target)
    # Not urlsplit: it raises ValueError on some malformed URLs, which the backend reports.
    scheme = target.split("://", 1)[0].lower() if "://" in target else ""
    if scheme in ("postgresql", "postgres"):
        try:
            from ..postgres import PostgresBackend
        except ImportError as exc:
            raise missing_extra("postgres", "PostgreSQL", exc.name) from exc
        validate.open_options(PostgresBackend, "PostgreSQL", options)
        return PostgresBackend(target, **options)
    from ..sqlite import SQLiteBackend

    validate.open_options(SQLiteBackend, "SQLite", options)
    if scheme == "sqlite":
        return SQLiteBackend(sqlite_path(target), **options)
    if scheme:
        raise ConfigurationError(
            f"unknown database URL scheme {scheme!r} in {target!r}: "
            "use a file path, ':memory:', sqlite:///path or postgresql://…"
        )
    if not target:
        raise ConfigurationError("the database path is empty")
    return SQLiteBackend(sqlite_path(target), **options)

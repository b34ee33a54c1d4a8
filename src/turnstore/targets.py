"""What a database target names, parsed once, and what ``Store.inspect`` finds there.

A target is a path, ``:memory:``, a ``sqlite://`` URL or a ``postgresql://`` URL (``SCHEMES``:
the one table of URL schemes). ``Store.open`` and ``Store.inspect`` both read it here, and each
backend package inspects its own kind (``sqlite/inspect.py``, ``postgres/inspect.py``).

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
from dataclasses import dataclass
from typing import Literal

from . import validate
from .errors import ConfigurationError

__all__ = [
    "SCHEMES",
    "BackendName",
    "DatabaseInfo",
    "DatabaseKind",
    "backend_of",
    "database_kind",
    "sqlite_file",
    "sqlite_path",
]

BackendName = Literal["sqlite", "postgresql"]

# A URL's scheme → the backend it names (a target without one is a SQLite path).
SCHEMES: dict[str, BackendName] = {
    "": "sqlite",
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
}

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


def backend_of(target: str | os.PathLike[str]) -> tuple[BackendName, str]:
    """(the backend a target names, the target as a string); ``ConfigurationError`` for what
    names none: not a path or string, an unknown URL scheme, an empty path."""
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise ConfigurationError(
            f"a database is a path, ':memory:' or a URL, not {type(target).__name__}"
        )
    validate.open_target(target)
    # Not urlsplit: it raises ValueError on some malformed URLs, which the backend reports.
    scheme = target.split("://", 1)[0].lower() if "://" in target else ""
    backend = SCHEMES.get(scheme)
    if backend is None:
        raise ConfigurationError(
            f"unknown database URL scheme {scheme!r} in {target!r}: "
            "use a file path, ':memory:', sqlite:///path or postgresql://…"
        )
    if not target:
        raise ConfigurationError("the database path is empty")
    return backend, target


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


def sqlite_file(target: str) -> str | None:
    """The file behind a SQLite target (a path or ``sqlite://`` URL); None for ``:memory:``
    and for server URLs. Nothing is looked at."""
    if "://" in target and not target.lower().startswith("sqlite://"):
        return None
    path = sqlite_path(target)
    return None if path == ":memory:" else path


def database_kind(tables: list[str]) -> DatabaseKind:
    """What a database holds, by the names of its tables and views (a SQLite file's or a
    PostgreSQL schema's). The SDK's tables beside others of the application (an SDK session
    with custom table names, say) are still the SDK's: a tool names import or adopt for them."""
    names = {name.lower() for name in tables if not name.lower().startswith("sqlite_")}
    if "turnstore_schema" in names:
        return "turnstore"
    if not names:
        return "empty"
    if "message_structure" in names:
        return "sdk-advanced"
    return "sdk-sessions" if "agent_messages" in names else "foreign"

"""What a database target names, parsed once, and what ``Store.inspect`` finds there.

A target is a path, ``:memory:``, a ``sqlite://`` URL or a ``postgresql://`` URL (``SCHEMES``:
the one table of URL schemes). ``Store.open`` and ``Store.inspect`` both read it here, and each
backend package inspects its own kind (``sqlite/inspect.py``, ``postgres/inspect.py``).

The PostgreSQL schema a URL names (``split_schema``) is read here too, for the backend and for
the command line's ``--schema`` alike. Two spellings are read from the URL's query:

- ``?schema=NAME``: turnstore's own parameter, taken verbatim (as ``schema=`` is) and removed
  before the URL reaches libpq, which does not know it;
- ``?options=-csearch_path%3DNAME``: libpq's, which ``psql`` and psycopg honour too, so the same
  URL shows the same tables there. ``NAME`` follows PostgreSQL's rules: ASCII letters folded
  to lower case unless double-quoted. It must name one schema: turnstore keeps its tables in one.

Both are decoded as libpq decodes a URL's query: ``%XX`` only (``+`` is a plus sign, not a space),
so that turnstore and ``psql`` read one URL the same way. No schema in the URL and none given:
``public``.

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
from urllib.parse import unquote

from ..errors import ConfigurationError, InvalidOperationError
from . import validate

__all__ = [
    "DEFAULT_SCHEMA",
    "SCHEMES",
    "BackendName",
    "DatabaseInfo",
    "DatabaseKind",
    "backend_of",
    "check_schema",
    "database_kind",
    "split_schema",
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

DEFAULT_SCHEMA = "public"

# The white space of libpq and the server (C isspace): other characters are part of a name.
_SPACES = " \t\n\v\f\r"


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


def check_schema(schema: object) -> str:
    """``schema`` if PostgreSQL can name a schema so (1 to 63 bytes of UTF-8, no NUL) and it is
    not one of the server's own, else a ConfigurationError."""
    try:
        name = validate.text(schema, "schema")
    except InvalidOperationError:  # not a str, a NUL, a lone surrogate (UTF-8 has none)
        name = ""
    if not 0 < len(name.encode()) <= 63:
        raise ConfigurationError(
            f"schema must be a PostgreSQL identifier of 1 to 63 bytes, got {schema!r}"
        )
    # The server's own schemas: a superuser may create tables in information_schema, which a
    # typo should not do (pg_* names the server refuses itself, less clearly).
    if name == "information_schema" or name.startswith("pg_"):
        raise ConfigurationError(f"schema {name!r} is PostgreSQL's own: name a schema of yours")
    return name


def split_schema(url: str, schema: str | None) -> tuple[str, str]:
    """(the URL for libpq, the schema): the ``schema`` given, else the URL's, else ``public``.

    A ConfigurationError when the URL names a schema twice or several at once, or one that
    ``schema`` contradicts, or when the name is not a valid schema name.
    """
    base, sep, query = url.partition("?")
    kept: list[str] = []
    named: list[str] = []
    for pair in query.split("&") if sep else []:
        key, _, value = pair.partition("=")
        decoded = unquote(key)
        if decoded == "schema":
            named.append(_decoded(value, "schema"))
            continue
        if decoded == "options":
            found = _options_schema(_decoded(value, "options"))
            if found is not None:
                named.append(found)
        kept.append(pair)
    if len(set(named)) > 1:
        raise ConfigurationError(
            f"the PostgreSQL URL names schemas {' and '.join(map(repr, named))}: name one"
        )
    from_url = named[0] if named else None
    if schema is not None and from_url is not None and schema != from_url:
        raise ConfigurationError(
            f"the PostgreSQL URL names schema {from_url!r} but schema={schema!r} was given: "
            "name it once, or the same in both"
        )
    if schema is None:
        schema = DEFAULT_SCHEMA if from_url is None else from_url
    chosen = check_schema(schema)
    return base + ("?" + "&".join(kept) if kept else ""), chosen


def _decoded(value: str, name: str) -> str:
    """A URL query's ``value`` decoded (``%XX``), refused when its bytes are not UTF-8 (which
    ``unquote`` would turn into U+FFFD: another name than the one written)."""
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        raise ConfigurationError(
            f"the PostgreSQL URL's {name} {value!r} is not UTF-8 once decoded"
        ) from None


def _options_schema(options: str) -> str | None:
    """The schema a libpq ``options`` value sets with ``-c search_path=…``, or None."""
    words = _words(options)
    value: str | None = None
    for index, word in enumerate(words):
        if word == "-c":
            setting = words[index + 1] if index + 1 < len(words) else ""
        elif word.startswith(("-c", "--")):
            setting = word[2:]
        else:
            continue
        name, sep, text = setting.partition("=")
        if sep and name.strip().lower().replace("-", "_") == "search_path":
            value = text  # the last setting wins, as in the server
    return None if value is None else _one_schema(value)


def _words(options: str) -> list[str]:
    """``options`` split as libpq splits it: at unescaped whitespace, ``\\`` escaping."""
    words: list[str] = []
    word: list[str] = []
    escaped = False
    for char in options:
        if escaped:
            word.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in _SPACES:
            if word:
                words.append("".join(word))
            word = []
        else:
            word.append(char)
    if word:
        words.append("".join(word))
    return words


def _one_schema(search_path: str) -> str:
    """The one schema ``search_path`` names, read as the server reads it: an unquoted name
    folds its ASCII letters to lower case; a quoted one is taken as it is, ``""`` a quote."""
    entries: list[str] = []
    entry: list[str] = []
    quoted = False
    for char in search_path:
        if char == '"':
            quoted = not quoted  # a doubled quote inside quotes toggles twice: kept below
        if char == "," and not quoted:
            entries.append("".join(entry))
            entry = []
        else:
            entry.append(char)
    entries.append("".join(entry))
    if len(entries) != 1:
        raise ConfigurationError(
            f"the PostgreSQL URL's search_path {search_path!r} names several schemas; "
            "turnstore keeps its tables in one: name it alone (or with ?schema=NAME)"
        )
    name = entries[0].strip(_SPACES)
    quoted = len(name) >= 2 and name[0] == name[-1] == '"'
    inner = name[1:-1] if quoted else name
    if quoted:
        valid = '"' not in inner.replace('""', "")
    else:
        valid = '"' not in name and not any(char in _SPACES for char in name)
    if not valid:
        raise ConfigurationError(
            f"the PostgreSQL URL's search_path {search_path!r} is not a schema name PostgreSQL "
            'reads: quote the whole name ("My Schema", with "" for a quote) or none of it'
        )
    if quoted:
        return inner.replace('""', '"')
    return "".join(char.lower() if "A" <= char <= "Z" else char for char in name)

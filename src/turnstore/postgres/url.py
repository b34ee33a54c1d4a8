"""Which PostgreSQL schema a ``postgresql://`` URL names, so that one string can say it.

Two spellings are read from the URL's query:

- ``?schema=NAME``: turnstore's own parameter, taken verbatim (as ``schema=`` is) and removed
  before the URL reaches libpq, which does not know it;
- ``?options=-csearch_path%3DNAME``: libpq's, which ``psql`` and psycopg honour too, so the same
  URL shows the same tables there. ``NAME`` follows PostgreSQL's rules: ASCII letters folded
  to lower case unless double-quoted. It must name one schema: turnstore keeps its tables in one.

Both are decoded as libpq decodes a URL's query: ``%XX`` only (``+`` is a plus sign, not a space),
so that turnstore and ``psql`` read one URL the same way.

No schema in the URL and none given: ``public``.

``parse_url`` reads a URL's connection parameters (with psycopg, imported only then) and
``describe`` names the server they reach in messages, never with the password.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from .. import validate
from ..errors import ConfigurationError, InvalidOperationError

__all__ = ["DEFAULT_SCHEMA", "check_schema", "describe", "parse_url", "split_schema"]

DEFAULT_SCHEMA = "public"

# The white space of libpq and the server (C isspace): other characters are part of a name.
_SPACES = " \t\n\v\f\r"


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


def describe(conninfo: Mapping[str, Any]) -> str:
    """user@host:port/dbname for messages; never the password."""
    user = conninfo.get("user")
    host = conninfo.get("host") or conninfo.get("hostaddr") or "the default socket"
    port = conninfo.get("port")
    dbname = conninfo.get("dbname")
    where = f"{user}@{host}" if user else str(host)
    if port:
        where += f":{port}"
    return f"PostgreSQL at {where}/{dbname}" if dbname else f"PostgreSQL at {where}"


def parse_url(url: str) -> dict[str, Any]:
    """The URL's connection parameters, or a ConfigurationError naming what is wrong."""
    if not isinstance(url, str):
        raise ConfigurationError(f"a PostgreSQL URL is a str, not {type(url).__name__}")
    # Imported here: the rest of this module needs no psycopg (the postgres extra).
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        reason = str(exc).strip().replace(url, "<url>")
        raise ConfigurationError(f"malformed PostgreSQL URL: {reason}") from None
    port = str(params.get("port") or "")
    if port and not all(part.strip().isdigit() for part in port.split(",")):
        raise ConfigurationError(f"malformed PostgreSQL URL: the port {port!r} is not a number")
    return params

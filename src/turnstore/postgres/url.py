"""How a ``postgresql://`` URL reaches its server: ``parse_url`` reads its connection parameters
(with psycopg, imported only then) and ``describe`` names the server they reach in messages,
never with the password. Which schema the URL names is ``targets.split_schema``'s: the
command line reads it too, without the postgres extra.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigurationError

__all__ = ["describe", "parse_url"]


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

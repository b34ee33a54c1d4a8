"""``Store.inspect`` of a PostgreSQL target: its schema's tables and version, nothing changed."""

from __future__ import annotations

import psycopg
from psycopg import sql

from ..domain.targets import DatabaseInfo, DatabaseKind, database_kind, split_schema
from .errors import connect_error, driver_error
from .migrations import MIGRATIONS
from .url import describe, parse_url

__all__ = ["inspect"]


def inspect(target: str, schema: str | None) -> DatabaseInfo:
    """What the PostgreSQL target's schema holds (``Store.inspect``), read in a read-only
    session; a missing schema is not created."""
    url, schema = split_schema(target, schema)
    where = describe(parse_url(url))
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise connect_error(exc, where) from None
    try:
        conn.read_only = True
        namespace = conn.execute(
            "SELECT oid FROM pg_namespace WHERE nspname = %s", [schema]
        ).fetchone()
        tables: list[str] = []
        version: int | None = None
        if namespace is not None:
            (namespace_oid,) = namespace
            tables = [
                name
                for (name,) in conn.execute(
                    "SELECT relname FROM pg_class WHERE relnamespace = %s "
                    "AND relkind IN ('r', 'p', 'v', 'm', 'f')",
                    [namespace_oid],
                ).fetchall()
            ]
            if "turnstore_schema" in tables:
                statement = sql.SQL("SELECT max(version) FROM {}.turnstore_schema")
                row = conn.execute(statement.format(sql.Identifier(schema))).fetchone()
                (stored,) = row if row is not None else (None,)
                version = None if stored is None else int(stored)
    except psycopg.Error as exc:
        raise driver_error(exc, where) from None
    finally:
        conn.close()
    kind: DatabaseKind = "missing" if namespace is None else database_kind(tables)
    return DatabaseInfo(
        target=target,
        backend="postgresql",
        kind=kind,
        schema_version=version if kind == "turnstore" else None,
        latest_version=len(MIGRATIONS),
        tables=tuple(sorted(tables)),
        path=None,
    )

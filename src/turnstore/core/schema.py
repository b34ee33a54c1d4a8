"""Migrations: apply a backend's schema history one step at a time, or read its version."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SchemaError
from .ops import Fetch, Op, Query

__all__ = [
    "migrate_step",
    "stored_version",
]


def migrate_step(migrations: Sequence[Sequence[str]], lock: str | None) -> Op[bool]:
    """Apply the next pending migration with its version row; False when none is pending.

    The driver runs each step in its own transaction, so a step and its version row land
    together or not at all; ``lock`` (Postgres: an advisory lock) serialises migrators.
    """
    if lock is not None:
        yield Query(lock, raw=True)
    yield Query("create_version_table")
    version = yield from _schema_version(migrations)
    if version == len(migrations):
        return False
    for statement in migrations[version]:
        yield Query(statement, raw=True)
    yield Query("record_version", {"version": version + 1})
    return True


def _schema_version(migrations: Sequence[Sequence[str]]) -> Op[int]:
    """The database's schema version (the version table must exist); refuses a newer one."""
    row = yield Query("schema_version", fetch=Fetch.ONE)
    version: int = row[0] if row is not None and row[0] is not None else 0
    if version > len(migrations):
        raise SchemaError(
            f"the database's schema is at version {version}, newer than this turnstore "
            f"knows ({len(migrations)}): upgrade turnstore"
        )
    return version


def stored_version(migrations: Sequence[Sequence[str]]) -> Op[int | None]:
    """The database's schema version, read without writing anything; None when it holds no
    turnstore schema (no version table, or no version in it). Refuses a schema newer than
    ``migrations``.

    Lets a backend skip the migration lock when the schema is current, and open a read-only
    replica.
    """
    row = yield Query("version_table_exists", fetch=Fetch.ONE)
    if row is None or not row[0]:
        return None
    return (yield from _schema_version(migrations)) or None

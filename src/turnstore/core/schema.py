"""Migrations: apply a backend's schema history one step at a time, or read its version."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SchemaError
from . import statements as S
from .ops import Op, Query

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
    yield S.CREATE_VERSION_TABLE()
    version = yield from _schema_version(migrations)
    if version == len(migrations):
        return False
    for statement in migrations[version]:
        yield Query(statement, raw=True)
    yield S.RECORD_VERSION({"version": version + 1})
    return True


def _schema_version(migrations: Sequence[Sequence[str]]) -> Op[int]:
    """The database's schema version (the version table must exist); refuses a newer one."""
    version = (yield S.SCHEMA_VERSION()) or 0
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
    if not (yield S.VERSION_TABLE_EXISTS()):
        return None
    return (yield from _schema_version(migrations)) or None

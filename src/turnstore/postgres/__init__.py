"""The PostgreSQL backend, on psycopg 3 and ``psycopg_pool`` (the ``postgres`` extra).

The driver, and psycopg with it, is imported at the first use of a name below, so that the
modules that need no psycopg (``url``) import without the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .driver import MIGRATIONS, SQL, PostgresBackend, now

__all__ = ["MIGRATIONS", "SQL", "PostgresBackend", "now"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import driver

        return getattr(driver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The PostgreSQL backend, on psycopg 3 (async) and ``psycopg_pool`` (the ``postgres`` extra).

One module per concern:

- ``driver``: ``PostgresBackend``: opening (the pool, the schema), handing operations to the
  loop, closing;
- ``transaction``: how an operation runs: one pipelined transaction per attempt, retried
  after a transient failure, a cut-off commit settled by the write's key;
- ``loop``: the event-loop thread that serves a backend's own pool;
- ``migrations``: the schema history (``MIGRATIONS``, the DDL of every version);
- ``sql``: its text of the statements that ``core.statements`` declares (``DIALECT``,
  ``SQL``: every statement it runs, rendered, by statement symbol);
- ``errors``: psycopg's exceptions mapped to turnstore's, and which are worth a re-run;
- ``url``: what a ``postgresql://`` URL names (its schema, its server), for messages too.

Scale-out: every table carries ``session_id``, every key starts with it, foreign keys include
it, and every statement filters by it, so the tables can be distributed by ``session_id``
(Citus) with each session's rows on one node. See docs/scaling.md.

The driver, and psycopg with it, is imported at the first use of its names below, so that
the modules that need no psycopg (``url``, ``migrations``, ``sql``) import without the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .migrations import MIGRATIONS
from .sql import SQL

if TYPE_CHECKING:
    from .driver import PostgresBackend, now

__all__ = ["MIGRATIONS", "SQL", "PostgresBackend", "now"]


def __getattr__(name: str) -> Any:
    if name in ("PostgresBackend", "now"):
        from . import driver

        return getattr(driver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

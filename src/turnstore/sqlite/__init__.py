"""The SQLite backend: the embedded default, on the standard library's ``sqlite3``.

One module per concern:

- ``driver``: ``SQLiteBackend``, which runs core/'s operations on one connection served by a
  worker thread, one transaction each;
- ``migrations``: the schema history (``MIGRATIONS``, the DDL of every version);
- ``sql``: its text of the statements that ``core.statements`` declares (``DIALECT``,
  ``SQL``: every statement it runs, rendered, by statement symbol);
- ``errors``: ``sqlite3`` errors mapped to turnstore's;
- ``files``: the database file itself: its kind (turnstore, the SDK's, another
  application's), read-only connections, WAL and cache settings;
- ``checkpoint``: WAL checkpoints on a thread of their own;
- ``forkgate``: keeps ``fork()`` out of SQLite calls in flight.
"""

from .driver import SQLiteBackend, now
from .files import FileKind, connect_read_only, sqlite_file_kind
from .migrations import MIGRATIONS
from .sql import SQL

__all__ = [
    "MIGRATIONS",
    "SQL",
    "FileKind",
    "SQLiteBackend",
    "connect_read_only",
    "now",
    "sqlite_file_kind",
]

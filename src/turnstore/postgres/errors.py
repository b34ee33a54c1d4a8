"""psycopg's exceptions become turnstore's here, and nowhere else.

``connect_error`` for a failed connection attempt, ``driver_error`` for a failure during an
operation; ``TRANSIENT`` and ``lost_connection`` say which failures are worth a re-run
(transaction.py).
"""

from __future__ import annotations

import psycopg
import psycopg.errors
from psycopg_pool import PoolClosed, PoolTimeout

from ..errors import (
    ClosedError,
    ConflictError,
    ConnectionFailedError,
    InvalidOperationError,
    ReadOnlyError,
    SchemaError,
    StorageError,
    TurnstoreError,
)

__all__ = ["TRANSIENT", "connect_error", "driver_error", "lost_connection"]

# Worth re-running the whole operation: the server rolled the transaction back.
TRANSIENT = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)


def connect_error(exc: psycopg.Error, where: str) -> TurnstoreError:
    """A clear error for a failed connection attempt, naming the problem."""
    message = str(exc).strip()
    detail = message.rsplit("FATAL:", 1)[-1].strip() if "FATAL:" in message else message
    lowered = message.lower()
    if "does not exist" in lowered and "database" in lowered:
        return ConnectionFailedError(f"cannot connect to {where}: {detail}")
    if "password authentication failed" in lowered or (
        "role" in lowered and "does not exist" in lowered
    ):
        return ConnectionFailedError(
            f"cannot connect to {where}: {detail} (check the user name and password)"
        )
    if "connection refused" in lowered:
        return ConnectionFailedError(
            f"cannot connect to {where}: connection refused (is the server running and "
            "accepting TCP/IP connections on that host and port?)"
        )
    if "timeout expired" in lowered:
        return ConnectionFailedError(f"cannot connect to {where}: timed out")
    if "resolve host" in lowered or "could not translate host name" in lowered:
        return ConnectionFailedError(f"cannot connect to {where}: unknown host ({detail})")
    first_line = detail.splitlines()[0] if detail else type(exc).__name__
    return ConnectionFailedError(f"cannot connect to {where}: {first_line}")


def driver_error(exc: BaseException, where: str, *, write: bool = True) -> TurnstoreError:
    """The turnstore error for a psycopg (or pool) failure during an operation (``write``:
    one run in a read-write transaction)."""
    if isinstance(exc, PoolClosed):
        return ClosedError("the store is closed")
    if isinstance(exc, PoolTimeout):
        return ConnectionFailedError(f"no connection to {where} became available: {exc}")
    message = str(exc).strip()
    if isinstance(exc, psycopg.DataError) and "NUL" in message:
        return InvalidOperationError(
            f"{message}: PostgreSQL cannot store the NUL character (in a session id?)"
        )
    if isinstance(exc, (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn)):
        return SchemaError(
            f"{where} lacks part of turnstore's schema ({message}); was it dropped? "
            "Open the store again (or run turnstore.migrate) to recreate it"
        )
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return StorageError(f"permission denied on {where}: {message}")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        if not write:  # our own READ ONLY transaction refused it (a user's query)
            return ReadOnlyError(
                f"{where} is open read-only here and refused a statement that writes "
                f"({message}): nothing was written"
            )
        return StorageError(f"{where} is read-only (a replica?): {message}")
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(exc, TRANSIENT):
        return ConflictError(
            f"gave up after repeated conflicts with other writers on {where}: {message}"
        )
    if lost_connection(exc):
        return ConnectionFailedError(f"lost the connection to {where}: {message}")
    code = f" [{sqlstate}]" if sqlstate else ""
    return StorageError(f"PostgreSQL error on {where}{code}: {message}")


def lost_connection(exc: BaseException) -> bool:
    # No SQLSTATE: the client lost the socket (or could not leave pipeline mode on it: "cannot
    # exit pipeline mode while busy"); 08: connection exception; 57P: server shutdown.
    sqlstate = getattr(exc, "sqlstate", None)
    return isinstance(exc, psycopg.OperationalError) and (
        sqlstate is None or sqlstate.startswith("08") or sqlstate.startswith("57P")
    )

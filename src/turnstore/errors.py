"""The exceptions turnstore raises.

Every error is a ``TurnstoreError``; driver errors are mapped to these at each backend's edge,
so callers never need to import ``sqlite3`` or ``psycopg`` to catch them::

    TurnstoreError
    ├── ConfigurationError     a database turnstore cannot open as asked: bad path or URL,
    │                          unknown scheme or option, missing optional dependency
    ├── ConnectionFailedError  the database cannot be opened or reached
    │   └── OutcomeUnknownError  a write's commit was cut off and cannot be checked: retry it
    │                            with its ``operation_id``, which applies it at most once
    ├── SchemaError            the database holds a newer or foreign schema
    ├── InvalidItemError       an item that is not a JSON-serialisable mapping, nests deeper
    │                          than 200 or has keys that collide in JSON (also TypeError)
    ├── NotFoundError          unknown session, run or tool call id (also LookupError)
    │   ├── SessionNotFoundError
    │   └── RunNotFoundError
    ├── InvalidOperationError  a wrong argument (type, range, NUL or lone surrogate in text,
    │   │                      metadata nested deeper than 200), or an operation that does not
    │   │                      apply to its run (e.g. edit of a run with no user message)
    │   │                      (also ValueError)
    │   ├── ArgumentTypeError  an argument of the wrong type: a float limit, a session id
    │   │                      that is no str, unknown session_settings keys (also TypeError,
    │   │                      what Python and the Agents SDK's SQLiteSession raise)
    │   └── ReadOnlyError      a write to a store opened with read_only=True
    ├── ConflictError          another writer changed the session first
    ├── ClosedError            the store or session was closed
    └── StorageError           any other database failure

Which error a bad argument raises follows one rule, declared in
``turnstore.domain.validate``: options of an open are ``ConfigurationError``, items
``InvalidItemError``, an id that names nothing (an int out of the 64-bit range included)
``NotFoundError``, any other wrong argument ``InvalidOperationError``. A refused call changes
nothing.
"""

from __future__ import annotations

__all__ = [
    "ArgumentTypeError",
    "ClosedError",
    "ConfigurationError",
    "ConflictError",
    "ConnectionFailedError",
    "InvalidItemError",
    "InvalidOperationError",
    "NotFoundError",
    "OutcomeUnknownError",
    "ReadOnlyError",
    "RunNotFoundError",
    "SchemaError",
    "SessionNotFoundError",
    "StorageError",
    "TurnstoreError",
]


class TurnstoreError(Exception):
    """Base class of every error turnstore raises."""


class ConfigurationError(TurnstoreError):
    """The store was configured wrongly: a malformed URL, an unknown scheme, a missing extra."""


class ConnectionFailedError(TurnstoreError):
    """The database could not be opened or reached."""


class OutcomeUnknownError(ConnectionFailedError):
    """The connection was lost while a write committed, and the database cannot be reached to
    learn whether it did: the write may or may not be stored.

    Calling the same method again with ``operation_id=error.operation_id`` is safe: if the
    first try committed, the retry changes nothing and returns its result; if not, it applies
    the write once. The key is remembered for a day (see docs/reliability.md).
    """

    def __init__(self, message: str, operation_id: str | None = None) -> None:
        super().__init__(message)
        self.operation_id = operation_id


class SchemaError(TurnstoreError):
    """The database's schema is newer than this turnstore, or is not turnstore's."""


class InvalidItemError(TurnstoreError, TypeError):
    """An item is not a mapping or cannot be serialised to JSON; nothing of its batch is written."""


class NotFoundError(TurnstoreError, LookupError):
    """A session or run does not exist."""


class SessionNotFoundError(NotFoundError):
    """The session does not exist in the store."""


class RunNotFoundError(NotFoundError):
    """The run does not exist, or belongs to another session."""


class InvalidOperationError(TurnstoreError, ValueError):
    """The operation does not apply to its target, e.g. editing a run that has no user message."""


class ArgumentTypeError(InvalidOperationError, TypeError):
    """An argument of the wrong type (a float limit, a session id that is not text); a
    ``TypeError`` too, as the SDK's sessions raise, so code written for them catches it."""


class ReadOnlyError(InvalidOperationError):
    """A write was asked of a store opened with ``read_only=True``; nothing was written."""


class ConflictError(TurnstoreError):
    """Another writer changed the session first; the operation changed nothing."""


class ClosedError(TurnstoreError, RuntimeError):
    """The store or session is closed."""


class StorageError(TurnstoreError):
    """The database failed in a way that none of the other errors describes."""

"""``StructuredSession``'s constructor arguments: its own and ``SQLiteSession``'s, checked as
the SDK checks them (a wrong type is a ``TypeError`` there, ``ArgumentTypeError`` here)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..domain import validate
from ..errors import ArgumentTypeError, ConfigurationError, InvalidOperationError
from ..store import Store

__all__ = [
    "MESSAGES_TABLE",
    "SESSIONS_TABLE",
    "coerce_settings",
    "database",
    "register_session_abc",
    "settings_limit",
]

SESSIONS_TABLE = "agent_sessions"
MESSAGES_TABLE = "agent_messages"


def settings_limit(settings: Any) -> int | None:
    """The ``limit`` of ``session_settings`` (a ``SessionSettings`` or a mapping), if any."""
    if settings is None:
        return None
    if isinstance(settings, Mapping):
        return settings.get("limit")
    return getattr(settings, "limit", None)


def coerce_settings(settings: Any) -> Any:
    """The SDK's own ``SessionSettings`` when the SDK is installed (it validates dicts); its
    ``TypeError`` (unknown keys, another type) is ``ArgumentTypeError``, its ``ValueError``
    (pydantic's, for a field of the wrong value) ``InvalidOperationError``."""
    try:
        from agents.memory.session_settings import SessionSettings, coerce_session_settings
    except ImportError:
        return settings
    if settings is None:
        return SessionSettings()
    try:
        return coerce_session_settings(settings)
    except TypeError as exc:
        raise ArgumentTypeError(f"session_settings: {exc}") from None
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise InvalidOperationError(f"session_settings: {exc}") from None


def database(
    db: str | os.PathLike[str] | Store | None,
    db_path: str | os.PathLike[str] | None,
    sessions_table: str | None,
    messages_table: str | None,
) -> str | os.PathLike[str] | Store:
    """The database ``StructuredSession`` opens, from its own and ``SQLiteSession``'s options."""
    for name, value, default in (
        ("sessions_table", sessions_table, SESSIONS_TABLE),
        ("messages_table", messages_table, MESSAGES_TABLE),
    ):
        if value is not None and value != default:
            raise ConfigurationError(
                f"{name}={validate.shown(value)} does not apply to StructuredSession: it keeps "
                "conversations in turnstore's own tables (sessions, runs, items, tool_calls), not "
                f"in one table of messages. It takes over a SQLiteSession file's history from the "
                f"SDK's default table ({default!r}) by itself; to bring in history from "
                "tables with other names, run `turnstore import FILE --messages-table NAME`"
            )
    if db is not None and db_path is not None:
        raise ConfigurationError("give the database once: as db or as db_path, not both")
    chosen = db if db is not None else db_path
    return ":memory:" if chosen is None else chosen


def register_session_abc(cls: type) -> None:
    """Make ``cls`` an SDK ``SessionABC`` for ``isinstance`` (a virtual subclass: turnstore
    imports no SDK at import time). Called once the SDK is loaded anyway."""
    try:
        from agents.memory.session import SessionABC
    except ImportError:
        return
    if not issubclass(cls, SessionABC):
        SessionABC.register(cls)

"""Opening the database a command names, and turning errors into one line.

What a target holds is the library's to say (``Store.inspect``); here it becomes the refusal a
command gives before opening: a read command never creates, migrates or writes anything, and
no command writes into a SQLite file of another kind (but ``adopt``, into an SDK's).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

from .. import Store
from ..domain.targets import sqlite_file
from ..errors import ConnectionFailedError, SchemaError, TurnstoreError
from .options import ENV_DB
from .output import fail

__all__ = ["check_database", "command_errors", "open_store", "run_command"]

T = TypeVar("T")


def check_database(target: str, *, create: bool, sdk: bool = False) -> None:
    """Refuse, before opening, a missing file (unless ``create``), a file that is not a
    database, and a database of another kind (which opening would add tables to), which
    includes a file of the SDK's ``SQLiteSession`` unless the command adopts it (``sdk``).
    A server's database is left to the open to judge."""
    if sqlite_file(target) is None:
        return
    info = Store.inspect(target)
    if info.kind == "turnstore" or (create and info.kind in ("missing", "empty")):
        return
    if info.kind == "missing":
        raise ConnectionFailedError(
            f"no database at {target}: name one with --db or ${ENV_DB}, or create one with "
            "`turnstore demo` or `turnstore import`"
        )
    if info.kind == "empty":
        raise SchemaError(f"{target} is an empty database, not a turnstore database")
    listed = ", ".join(info.tables[:6]) + (", …" if len(info.tables) > 6 else "")
    if info.kind in ("sdk-sessions", "sdk-advanced") and sdk:
        return
    if info.kind == "sdk-advanced":
        raise SchemaError(
            f"{target} is an AdvancedSQLiteSession database (tables {listed}), not a turnstore "
            f"database: adopt its conversations in place with `turnstore adopt --db {target}` "
            f"or copy them into another with `turnstore import {target}`"
        )
    if info.kind == "sdk-sessions":
        raise SchemaError(
            f"{target} is an Agents SDK session database (tables {listed}), not a turnstore "
            f"database: adopt its conversations in place with `turnstore adopt --db {target}` "
            f"or copy them into another with `turnstore import {target}`"
        )
    raise SchemaError(f"{target} is a database of another kind (tables {listed})")


@contextlib.asynccontextmanager
async def open_store(
    target: str, *, write: bool = False, create: bool = False, sdk: bool = False
) -> AsyncIterator[Store]:
    """The store at ``target``, checked first (``check_database``): read-only (never created
    or migrated) unless the command ``write``s; ``create`` lets it start a new database,
    ``sdk`` take over an SDK's ``SQLiteSession`` file."""
    check_database(target, create=create, sdk=sdk)
    store = Store.open(target, read_only=not write)
    try:
        yield store
    finally:
        await store.aclose()


@contextlib.contextmanager
def command_errors() -> Iterator[None]:
    """An error inside becomes one line on stderr and exit status 1 (2: a non-UTF-8
    argument)."""
    try:
        yield
    except TurnstoreError as exc:
        raise fail(str(exc), kind=type(exc).__name__) from None
    except UnicodeEncodeError as exc:  # a non-UTF-8 argument (decoded with surrogates)
        text = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else exc.object
        raise fail(f"{text!r} is not valid UTF-8 text: is an argument not UTF-8?", 2) from None
    except BrokenPipeError:
        raise  # stdout's reader is gone (`| head`): the root command ends quietly
    except OSError as exc:  # e.g. an --output file that cannot be written
        raise fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc)) from None


def run_command(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; an error becomes one line on stderr (``command_errors``)."""
    with command_errors():
        result = asyncio.run(coro)
    return result

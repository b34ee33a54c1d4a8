"""The SQLite backend: the embedded default, on the standard library's ``sqlite3``.

One long-lived connection per store, used only by one worker thread: every operation is
handed to that thread, so the event loop never blocks and a store (and the sessions on it)
can be used from any thread or event loop. Writes take SQLite's write lock at BEGIN
(``BEGIN IMMEDIATE``) so that reading the head and writing after it is atomic across
processes too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from ..errors import (
    ClosedError,
    ConnectionFailedError,
    SchemaError,
    StorageError,
    TurnstoreError,
)
from .base import RUN_COLUMNS, Fetch, Op, migrate_step

__all__ = ["MIGRATIONS", "SQL", "SQLiteBackend", "now"]

T = TypeVar("T")

# The ordered schema history: MIGRATIONS[i] takes a database from version i to i + 1.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            user_id TEXT,
            title TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            head_run_id INTEGER,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
            parent_id INTEGER REFERENCES runs (id) ON DELETE CASCADE,
            depth INTEGER NOT NULL,
            user_message TEXT,
            assistant_message TEXT,
            agent_name TEXT,
            model TEXT,
            status TEXT,
            requests INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            total_tokens INTEGER NOT NULL DEFAULT 0,
            cached_tokens INTEGER NOT NULL DEFAULT 0,
            reasoning_tokens INTEGER NOT NULL DEFAULT 0,
            item_count INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        "CREATE INDEX runs_session_parent ON runs (session_id, parent_id, id)",
        "CREATE INDEX runs_parent ON runs (parent_id)",
        """CREATE TABLE items (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            type TEXT NOT NULL,
            role TEXT,
            call_id TEXT,
            name TEXT,
            text TEXT,
            data TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (run_id, position)
        )""",
        # call_item_id / output_item_id name items rows; no foreign key, because every
        # deleted item would then search tool_calls for them.
        """CREATE TABLE tool_calls (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            call_id TEXT,
            tool_name TEXT,
            kind TEXT,
            arguments TEXT,
            output TEXT,
            status TEXT,
            error TEXT,
            call_item_id INTEGER,
            output_item_id INTEGER,
            created_at TEXT NOT NULL,
            completed_at TEXT,
            duration_ms REAL
        )""",
        "CREATE INDEX tool_calls_run ON tool_calls (run_id)",
        "CREATE INDEX tool_calls_session_call ON tool_calls (session_id, call_id)",
    ],
]

# The active path is walked from the head up through parent_id: each step is one primary-key
# lookup, and a tail read stops as soon as the runs seen hold ``limit`` items, so reading the
# last N items costs O(N) whatever the depth of the tree or the size of the database.
_PATH_UP = """
WITH RECURSIVE path (id, parent_id, depth, seen) AS (
    SELECT r.id, r.parent_id, r.depth, r.item_count
    FROM sessions s JOIN runs r ON r.id = s.head_run_id
    WHERE s.session_id = :sid
    UNION ALL
    SELECT r.id, r.parent_id, r.depth, path.seen + r.item_count
    FROM runs r JOIN path ON r.id = path.parent_id
    {stop}
)"""

SQL: dict[str, str] = {
    "create_version_table": """CREATE TABLE IF NOT EXISTS turnstore_schema (
        version INTEGER PRIMARY KEY,
        applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'))
    )""",
    "schema_version": "SELECT max(version) FROM turnstore_schema",
    "record_version": "INSERT INTO turnstore_schema (version) VALUES (:version)",
    "ensure_session": """
        INSERT INTO sessions (session_id, title, created_at, updated_at)
        VALUES (:sid, :title, :now, :now)
        ON CONFLICT (session_id) DO UPDATE SET title = excluded.title
        WHERE sessions.title IS NULL AND excluded.title IS NOT NULL""",
    "lock_head": """
        SELECT s.head_run_id, r.depth, r.item_count, r.parent_id
        FROM sessions s LEFT JOIN runs r ON r.id = s.head_run_id
        WHERE s.session_id = :sid""",
    "set_head": """
        UPDATE sessions SET head_run_id = :head, updated_at = :now WHERE session_id = :sid""",
    "insert_run": """
        INSERT INTO runs (session_id, parent_id, depth, user_message, assistant_message,
                          item_count, created_at, updated_at)
        VALUES (:sid, :parent_id, :depth, :user_message, :assistant_message, :item_count,
                :now, :now)
        RETURNING id""",
    "update_run_append": """
        UPDATE runs SET item_count = :item_count, updated_at = :now,
            assistant_message = CASE WHEN :assistant_changed THEN :assistant_message
                                     ELSE assistant_message END
        WHERE id = :id""",
    "set_run_usage": """
        UPDATE runs SET requests = :requests, input_tokens = :input_tokens,
            output_tokens = :output_tokens, total_tokens = :total_tokens,
            cached_tokens = :cached_tokens, reasoning_tokens = :reasoning_tokens,
            updated_at = :now
        WHERE id = :id""",
    "insert_item": """
        INSERT INTO items (session_id, run_id, position, type, role, call_id, name, text, data,
                           created_at)
        VALUES (:sid, :run_id, :position, :type, :role, :call_id, :name, :text, :data, :now)
        RETURNING id""",
    "insert_tool_call": """
        INSERT INTO tool_calls (session_id, run_id, call_id, tool_name, kind, arguments, output,
                                status, error, call_item_id, output_item_id, created_at,
                                completed_at)
        VALUES (:sid, :run_id, :call_id, :tool_name, :kind, :arguments, :output, :status,
                :error, :call_item_id, :output_item_id, :now, :completed_at)""",
    "open_tool_calls": """
        SELECT call_id, max(id) FROM tool_calls
        WHERE session_id = :sid AND output_item_id IS NULL
          AND call_id IN (SELECT value FROM json_each(:call_ids))
        GROUP BY call_id""",
    "complete_tool_call": """
        UPDATE tool_calls SET output = :output, status = :status, error = :error,
            output_item_id = :output_item_id, completed_at = :now
        WHERE id = :id""",
    "path_items": _PATH_UP.format(stop="")
    + """
        SELECT i.id, i.data FROM path JOIN items i ON i.run_id = path.id
        ORDER BY path.depth, i.position""",
    "path_items_tail": _PATH_UP.format(stop="WHERE path.seen < :limit")
    + """
        SELECT i.id, i.data FROM path JOIN items i ON i.run_id = path.id
        ORDER BY path.depth DESC, i.position DESC LIMIT :limit""",
    "path_runs": _PATH_UP.format(stop="")
    + f"""
        SELECT {RUN_COLUMNS} FROM runs WHERE id IN (SELECT id FROM path) ORDER BY depth""",
    "run": f"SELECT {RUN_COLUMNS} FROM runs WHERE id = :id",
    "children": f"""
        SELECT {RUN_COLUMNS} FROM runs
        WHERE session_id = :sid AND parent_id IS :parent_id ORDER BY id""",
    "leaves": """
        SELECT r.id, r.depth, r.user_message, r.created_at FROM runs r
        WHERE r.session_id = :sid
          AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = r.id)
        ORDER BY r.id""",
    "head_leaves": """
        WITH RECURSIVE below (id) AS (
            SELECT head_run_id FROM sessions WHERE session_id = :sid
            UNION ALL
            SELECT r.id FROM runs r JOIN below ON r.parent_id = below.id
        )
        SELECT b.id FROM below b
        WHERE NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = b.id)""",
    "session": """
        SELECT session_id, user_id, title, metadata, head_run_id, created_at, updated_at
        FROM sessions WHERE session_id = :sid""",
    "delete_session": "DELETE FROM sessions WHERE session_id = :sid",
    "last_item": """
        SELECT id, position, call_id, data FROM items
        WHERE run_id = :run_id ORDER BY position DESC LIMIT 1""",
    "first_item": "SELECT id, data FROM items WHERE run_id = :run_id AND position = 0",
    "first_child": """
        SELECT id FROM runs WHERE session_id = :sid AND parent_id = :id LIMIT 1""",
    "run_items_before": """
        SELECT id, data FROM items WHERE run_id = :run_id AND position < :position
        ORDER BY position""",
    "drop_call_of_item": """
        DELETE FROM tool_calls
        WHERE session_id = :sid AND call_id = :call_id
          AND (call_item_id = :item OR (call_item_id IS NULL AND output_item_id = :item))""",
    "reopen_call_of_output": """
        UPDATE tool_calls SET output = NULL, output_item_id = NULL, error = NULL,
            status = 'pending', completed_at = NULL, duration_ms = NULL
        WHERE session_id = :sid AND call_id = :call_id AND output_item_id = :item""",
    "delete_item": "DELETE FROM items WHERE id = :id",
    "delete_run": "DELETE FROM runs WHERE id = :id",
    "shrink_run": """
        UPDATE runs SET item_count = :item_count, updated_at = :now,
            assistant_message = (
                SELECT text FROM items
                WHERE run_id = :id AND type = 'message' AND role = 'assistant'
                ORDER BY position DESC LIMIT 1)
        WHERE id = :id""",
    "ancestors_child_counts": """
        WITH RECURSIVE up (id, parent_id, level) AS (
            SELECT p.id, p.parent_id, 1 FROM runs r JOIN runs p ON p.id = r.parent_id
            WHERE r.id = :id
            UNION ALL
            SELECT p.id, p.parent_id, up.level + 1 FROM runs p JOIN up ON p.id = up.parent_id
        )
        SELECT up.id, up.parent_id, (SELECT count(*) FROM runs c WHERE c.parent_id = up.id)
        FROM up ORDER BY up.level""",
    "is_ancestor": _PATH_UP.format(stop="")
    + """
        SELECT 1 FROM path WHERE id = :id""",
}


def now() -> str:
    """The current time as SQLite stores it: ISO 8601 UTC text, which sorts by time."""
    return datetime.now(timezone.utc).isoformat(sep=" ", timespec="microseconds")


def _driver_error(exc: sqlite3.Error, path: str) -> TurnstoreError:
    message = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and "already exists" in message:
        return SchemaError(
            f"{path} already holds a table that turnstore did not create ({message}); "
            "use another database file"
        )
    if isinstance(exc, sqlite3.DatabaseError) and "not a database" in message:
        return ConnectionFailedError(f"{path} is not a SQLite database")
    return StorageError(f"SQLite error on {path}: {message}")


class SQLiteBackend:
    """A SQLite database file (or ``:memory:``), served by one worker thread."""

    def __init__(
        self, path: str | Path = ":memory:", *, busy_timeout: float = 30.0, durable: bool = False
    ) -> None:
        """Open (and create or upgrade) the database at ``path``.

        ``busy_timeout`` is how long a writer waits for another process's write lock.
        ``durable=True`` makes every commit wait for the disk (``synchronous=FULL``); the default
        (``NORMAL`` under WAL) can lose the last commits on power loss but never corrupts the
        database, and is several times faster per write.
        """
        self.path = str(path)
        self._lock = threading.Lock()
        self._closed = False
        self._conn: sqlite3.Connection | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "turnstore-sqlite")
        try:
            self._executor.submit(self._open, busy_timeout, durable).result()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def now() -> str:
        """The current time, as this backend binds it."""
        return now()

    def _open(self, busy_timeout: float, durable: bool) -> None:
        if self.path != ":memory:":
            parent = Path(self.path).expanduser().resolve().parent
            if not parent.is_dir():
                raise ConnectionFailedError(f"cannot open {self.path}: {parent} is not a directory")
        try:
            # isolation_level=None: transactions are begun and ended explicitly below.
            conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise ConnectionFailedError(f"cannot open {self.path}: {exc}") from exc
        self._conn = conn
        try:
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise _driver_error(exc, self.path) from exc
        while self._transaction(lambda: migrate_step(MIGRATIONS, None), write=True):
            pass

    def _drive(self, op: Op[T]) -> T:
        assert self._conn is not None
        execute = self._conn.execute
        result: Any = None
        try:
            while True:
                query = op.send(result)
                cursor = execute(query.name if query.raw else SQL[query.name], query.params)
                if query.fetch is Fetch.ONE:
                    result = cursor.fetchone()
                elif query.fetch is Fetch.ALL:
                    result = cursor.fetchall()
                else:
                    result = None
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def _transaction(self, op: Callable[[], Op[T]], write: bool) -> T:
        conn = self._conn
        if conn is None:
            raise ClosedError("the store is closed")
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            result = self._drive(op())
            conn.execute("COMMIT")
            return result
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise _driver_error(exc, self.path) from exc
            raise

    async def run(self, op: Callable[[], Op[T]], *, write: bool) -> T:
        """Run ``op()`` in one transaction on the worker thread."""
        with self._lock:
            if self._closed:
                raise ClosedError("the store is closed")
            future = self._executor.submit(self._transaction, op, write)
        return await asyncio.wrap_future(future)

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Close the connection and stop the worker thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # Queued behind any operation already submitted, so those finish first.
        self._executor.submit(self._close_connection)
        self._executor.shutdown(wait=True)

    async def aclose(self) -> None:
        """Like ``close``, without blocking the event loop."""
        await asyncio.to_thread(self.close)

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
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..core.ops import Fetch, Op, finish_write
from ..core.queries import ORDERS
from ..core.rows import RUN_COLUMNS, SESSION_COLUMNS, TOOL_CALL_COLUMNS
from ..core.schema import migrate_step, stored_version
from ..errors import (
    ClosedError,
    ConfigurationError,
    ConnectionFailedError,
    ReadOnlyError,
    SchemaError,
    StorageError,
    TurnstoreError,
)
from .forkgate import gated, inside

__all__ = [
    "MIGRATIONS",
    "SQL",
    "FileKind",
    "SQLiteBackend",
    "connect_read_only",
    "now",
    "sqlite_file_kind",
]

T = TypeVar("T")
log = logging.getLogger("turnstore")

# The tables that hand out ids, as migration 1 creates them and migration 6 rebuilds them.
_KEY = "INTEGER PRIMARY KEY"
_RUNS_TABLE = """CREATE TABLE {table} (
            id {key},
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
            updated_at TEXT NOT NULL{more}
        )"""
_RUNS_INDEXES = [
    "CREATE INDEX runs_session_parent ON runs (session_id, parent_id, id)",
    "CREATE INDEX runs_parent ON runs (parent_id)",
]
_ITEMS_TABLE = """CREATE TABLE {table} (
            id {key},
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
        )"""
_TOOL_CALLS_TABLE = """CREATE TABLE {table} (
            id {key},
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
            duration_ms REAL{more}
        )"""
_TOOL_CALLS_INDEXES = [
    "CREATE INDEX tool_calls_run ON tool_calls (run_id)",
    "CREATE INDEX tool_calls_session_call ON tool_calls (session_id, call_id)",
]
_FTS_UPDATE_TRIGGER = """CREATE TRIGGER items_fts_update AFTER UPDATE OF text ON items
        WHEN old.id <= (SELECT indexed_through FROM items_fts_state)
        BEGIN
            INSERT INTO items_fts (items_fts, rowid, text)
            SELECT 'delete', old.id, old.text WHERE old.text IS NOT NULL;
            INSERT INTO items_fts (rowid, text)
            SELECT new.id, new.text WHERE new.text IS NOT NULL;
        END"""


def _rebuild(table: str, create: str, indexes: list[str]) -> list[str]:
    """SQLite's table rebuild: a copy made by ``create`` (ids and all) replaces ``table``."""
    return [
        create,
        f"INSERT INTO {table}_new SELECT * FROM {table}",
        f"DROP TABLE {table}",
        f"ALTER TABLE {table}_new RENAME TO {table}",
        *indexes,
    ]


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
        _RUNS_TABLE.format(table="runs", key=_KEY, more=""),
        *_RUNS_INDEXES,
        _ITEMS_TABLE.format(table="items", key=_KEY),
        # call_item_id / output_item_id name items rows; no foreign key, because every
        # deleted item would then search tool_calls for them.
        _TOOL_CALLS_TABLE.format(table="tool_calls", key=_KEY, more=""),
        *_TOOL_CALLS_INDEXES,
    ],
    # 2: query and analytics. The session catalogue's keyset indexes (the session_id column
    # makes each key unique), tool timing, model responses, full-text search, and the views.
    [
        "CREATE INDEX sessions_created ON sessions (created_at, session_id)",
        "CREATE INDEX sessions_updated ON sessions (updated_at, session_id)",
        "CREATE INDEX sessions_user_created ON sessions (user_id, created_at, session_id)",
        "CREATE INDEX sessions_user_updated ON sessions (user_id, updated_at, session_id)",
        "ALTER TABLE tool_calls ADD COLUMN started_at TEXT",
        "CREATE INDEX tool_calls_tool ON tool_calls (tool_name, id)",
        # Outputs stored before version 2 that report an error (see append.reports_error).
        """UPDATE tool_calls SET status = 'failed', error = output
        WHERE error IS NULL AND status = 'completed'
          AND (output = 'An error occurred while running the tool. Please try again.'
               OR output GLOB 'Tool ''*'' timed out after * seconds.')""",
        """CREATE TABLE model_responses (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            agent_name TEXT,
            model TEXT,
            response_id TEXT,
            request_id TEXT,
            requests INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            total_tokens INTEGER NOT NULL DEFAULT 0,
            cached_tokens INTEGER NOT NULL DEFAULT 0,
            reasoning_tokens INTEGER NOT NULL DEFAULT 0,
            started_at TEXT,
            completed_at TEXT NOT NULL,
            latency_ms REAL
        )""",
        "CREATE INDEX model_responses_run ON model_responses (run_id)",
        "CREATE INDEX model_responses_session ON model_responses (session_id, id)",
        # External content: the index holds only tokens, items.text stays the one copy. The
        # triggers keep it in step in the writing transaction, cascaded deletes included.
        """CREATE VIRTUAL TABLE items_fts USING fts5 (
            text, content = 'items', content_rowid = 'id',
            tokenize = 'porter unicode61 remove_diacritics 2'
        )""",
        """CREATE TRIGGER items_fts_insert AFTER INSERT ON items
        WHEN new.text IS NOT NULL
        BEGIN
            INSERT INTO items_fts (rowid, text) VALUES (new.id, new.text);
        END""",
        """CREATE TRIGGER items_fts_delete AFTER DELETE ON items WHEN old.text IS NOT NULL
        BEGIN
            INSERT INTO items_fts (items_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END""",
        """CREATE TRIGGER items_fts_update AFTER UPDATE OF text ON items
        BEGIN
            INSERT INTO items_fts (items_fts, rowid, text)
            SELECT 'delete', old.id, old.text WHERE old.text IS NOT NULL;
            INSERT INTO items_fts (rowid, text)
            SELECT new.id, new.text WHERE new.text IS NOT NULL;
        END""",
        "INSERT INTO items_fts (items_fts) VALUES ('rebuild')",
        """CREATE VIEW run_overview AS
        SELECT r.session_id, s.user_id, r.id AS run_id, r.parent_id, r.depth,
            r.user_message, r.assistant_message,
            (SELECT group_concat(tool_name, ', ') FROM (
                SELECT t.tool_name FROM tool_calls t WHERE t.run_id = r.id
                GROUP BY t.tool_name ORDER BY min(t.id))) AS tools,
            (SELECT count(*) FROM tool_calls t WHERE t.run_id = r.id) AS tool_calls,
            (SELECT count(*) FROM tool_calls t WHERE t.run_id = r.id
                AND (t.status IN ('failed', 'incomplete') OR t.error IS NOT NULL))
                AS failed_tool_calls,
            r.agent_name, r.model, r.requests, r.input_tokens, r.output_tokens,
            r.total_tokens, r.cached_tokens, r.reasoning_tokens, r.item_count,
            r.id = s.head_run_id AS is_head, r.created_at, r.updated_at
        FROM runs r JOIN sessions s ON s.session_id = r.session_id""",
        """CREATE VIEW tool_call_overview AS
        SELECT t.session_id, s.user_id, t.run_id, t.id AS tool_call_id, t.call_id,
            t.tool_name, t.kind, r.user_message, t.arguments, t.output, t.status, t.error,
            (t.status IN ('failed', 'incomplete') OR t.error IS NOT NULL) AS failed,
            t.duration_ms, t.created_at, t.started_at, t.completed_at
        FROM tool_calls t
        JOIN runs r ON r.id = t.run_id
        JOIN sessions s ON s.session_id = t.session_id""",
    ],
    # 3: the search index is fed in batches. FTS5 costs ~0.1 ms of CPU per writing transaction
    # however few rows it gets, more than the rest of an SDK turn's write; so items are indexed
    # once INDEX_BATCH of them are waiting (one statement for all), and always before a search
    # (append.index_backlog), which therefore sees every committed item. items_fts_state holds
    # the id through which every item is indexed.
    [
        "DROP TRIGGER items_fts_insert",
        "DROP TRIGGER items_fts_delete",
        "DROP TRIGGER items_fts_update",
        """CREATE TABLE items_fts_state (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            indexed_through INTEGER NOT NULL
        )""",
        "INSERT INTO items_fts_state VALUES (1, (SELECT coalesce(max(id), 0) FROM items))",
        """CREATE TRIGGER items_fts_delete AFTER DELETE ON items
        BEGIN
            INSERT INTO items_fts (items_fts, rowid, text)
            SELECT 'delete', old.id, old.text
            WHERE old.text IS NOT NULL
              AND old.id <= (SELECT indexed_through FROM items_fts_state);
            -- SQLite hands the highest freed id out again: it must not count as indexed.
            UPDATE items_fts_state SET indexed_through = (SELECT coalesce(max(id), 0) FROM items)
            WHERE indexed_through > (SELECT coalesce(max(id), 0) FROM items);
        END""",
        _FTS_UPDATE_TRIGGER,
    ],
    # 4: the per-user catalogue indexes leave out sessions without a user, so that a write
    # to such a session (the SDK's default) maintains one index on updated_at, not two.
    [
        "DROP INDEX sessions_user_created",
        """CREATE INDEX sessions_user_created ON sessions (user_id, created_at, session_id)
        WHERE user_id IS NOT NULL""",
        "DROP INDEX sessions_user_updated",
        """CREATE INDEX sessions_user_updated ON sessions (user_id, updated_at, session_id)
        WHERE user_id IS NOT NULL""",
    ],
    # 5: compaction keeps the transcript (core/compaction.py). A compaction run (kind
    # 'compaction') holds what the model sees instead of the runs it replaced, which stay as
    # its ancestors with status 'compacted' and compacted_by naming it; the model's history
    # continues above it at prior_run_id (NULL: nowhere). No foreign keys: prior_run_id names
    # an ancestor (whose deletion removes the compaction run anyway), and compacted_by stays
    # a record of a compaction run that pop_item or delete_branch removed since.
    [
        "ALTER TABLE runs ADD COLUMN kind TEXT",
        "ALTER TABLE runs ADD COLUMN prior_run_id INTEGER",
        "ALTER TABLE runs ADD COLUMN compacted_by INTEGER",
    ],
    # 6: ids are never handed out twice. Without AUTOINCREMENT SQLite gives the highest freed
    # id to the next row: a popped run's id came back as the next run's, so a stale
    # expected_head, a permalink or a delete aimed at the old run hit the new one.
    # AUTOINCREMENT (sqlite_sequence: one small page more per writing transaction, ~10 us;
    # docs/reliability.md) can only be set by CREATE TABLE, so each table is rebuilt with
    # its ids: the driver migrates with foreign keys off (dropping the old runs cascades
    # nowhere) and legacy_alter_table leaves the views, which name the final tables, alone.
    # Indexes and the search triggers are made anew; items_fts follows items by name and id.
    # Ids freed before this step can still come back once. The delete trigger no longer
    # lowers the index watermark: no id at or below it is handed out again.
    [
        "PRAGMA legacy_alter_table = ON",
        *_rebuild(
            "runs",
            _RUNS_TABLE.format(
                table="runs_new",
                key=_KEY + " AUTOINCREMENT",
                more=",\n            kind TEXT,\n            prior_run_id INTEGER,"
                "\n            compacted_by INTEGER",
            ),
            _RUNS_INDEXES,
        ),
        *_rebuild("items", _ITEMS_TABLE.format(table="items_new", key=_KEY + " AUTOINCREMENT"), []),
        """CREATE TRIGGER items_fts_delete AFTER DELETE ON items
        WHEN old.text IS NOT NULL AND old.id <= (SELECT indexed_through FROM items_fts_state)
        BEGIN
            INSERT INTO items_fts (items_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END""",
        _FTS_UPDATE_TRIGGER,
        *_rebuild(
            "tool_calls",
            _TOOL_CALLS_TABLE.format(
                table="tool_calls_new",
                key=_KEY + " AUTOINCREMENT",
                more=",\n            started_at TEXT",
            ),
            _TOOL_CALLS_INDEXES,
        ),
        "CREATE INDEX tool_calls_tool ON tool_calls (tool_name, id)",
        "PRAGMA legacy_alter_table = OFF",
    ],
    # 7: the keys of committed writes (core/once.py), so that a write runs exactly once.
    [
        """CREATE TABLE operations (
            session_id TEXT NOT NULL,
            op_id TEXT NOT NULL,
            result TEXT,
            PRIMARY KEY (session_id, op_id)
        ) WITHOUT ROWID""",
    ],
    # 8: the sessions of the Agents SDK's own tables (agent_messages, in the same file) whose
    # history turnstore has adopted (turnstore/_adopt.py), each marked in the transaction that
    # imported it, so that it is imported once. SQLite only: SQLiteSession writes only there.
    [
        """CREATE TABLE sdk_adopted (
            session_id TEXT PRIMARY KEY,
            adopted_at TEXT NOT NULL
        ) WITHOUT ROWID""",
    ],
]

# The active path is walked from the head up through parent_id: each step is one primary-key
# lookup, and a tail read stops as soon as the runs seen hold ``limit`` items, so reading the
# last N items costs O(N) whatever the depth of the tree or the size of the database.
_PATH_UP = """
WITH RECURSIVE path (id, parent_id, depth, seen) AS (
    SELECT r.id, {up}, r.depth, r.item_count
    FROM sessions s JOIN runs r ON r.id = s.head_run_id
    WHERE s.session_id = :sid
    UNION ALL
    SELECT r.id, {up}, r.depth, path.seen + r.item_count
    FROM runs r JOIN path ON r.id = path.parent_id
    {stop}
)"""
# The step up: the tree's (the transcript: every run that was written), or the model's view,
# where a compaction run continues at prior_run_id above the runs it replaced.
_TREE = "r.parent_id"
_VIEW = "CASE WHEN r.kind IS NULL THEN r.parent_id ELSE r.prior_run_id END"

_ENSURE_SESSION = """
        INSERT INTO sessions (session_id, title, created_at, updated_at)
        VALUES (:sid, :title, :now, :now)
        ON CONFLICT (session_id) DO UPDATE SET updated_at = excluded.updated_at,
            title = coalesce(sessions.title, excluded.title)"""
_INDEXED_THROUGH = "(SELECT indexed_through FROM items_fts_state)"

SQL: dict[str, str | None] = {
    "create_version_table": """CREATE TABLE IF NOT EXISTS turnstore_schema (
        version INTEGER PRIMARY KEY,
        applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'))
    )""",
    "schema_version": "SELECT max(version) FROM turnstore_schema",
    "version_table_exists": """
        SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'turnstore_schema'""",
    "record_version": "INSERT INTO turnstore_schema (version) VALUES (:version)",
    # BEGIN IMMEDIATE already holds the database's write lock: creating the session and
    # reading its head is one statement.
    "upsert_head": f"""
        {_ENSURE_SESSION}
        RETURNING head_run_id,
            (SELECT depth FROM runs WHERE id = head_run_id),
            (SELECT item_count FROM runs WHERE id = head_run_id),
            (SELECT CASE WHEN kind IS NULL THEN parent_id ELSE prior_run_id END
             FROM runs WHERE id = head_run_id),
            EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = head_run_id),
            {_INDEXED_THROUGH}""",
    "ensure_session": _ENSURE_SESSION,
    "lock_head": f"""
        SELECT s.head_run_id, r.depth, r.item_count, {_VIEW},
            EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = r.id), {_INDEXED_THROUGH}
        FROM sessions s LEFT JOIN runs r ON r.id = s.head_run_id
        WHERE s.session_id = :sid""",
    "set_head": """
        UPDATE sessions SET head_run_id = :head, updated_at = :now WHERE session_id = :sid""",
    # Write keys (core/once.py): a claim returns a row only when the key is new.
    "forget_operations": "DELETE FROM operations WHERE session_id = :sid AND op_id < :before",
    "forget_other_operations": "DELETE FROM operations WHERE session_id = :sid AND op_id <> :key",
    "claim_operation": """
        INSERT INTO operations (session_id, op_id) VALUES (:sid, :key)
        ON CONFLICT DO NOTHING RETURNING 1""",
    "operation_result": "SELECT result FROM operations WHERE session_id = :sid AND op_id = :key",
    # Adopting the SDK's SQLiteSession tables in the same file (turnstore/_adopt.py).
    "sdk_messages_table": """
        SELECT 1 FROM sqlite_master WHERE type = 'table' AND lower(name) = 'agent_messages'""",
    "sdk_adopted_ids": "SELECT session_id FROM sdk_adopted",
    # Through the SDK's index on agent_messages (session_id, id) and sdk_adopted's key.
    "sdk_unadopted": """
        SELECT 1 FROM agent_messages WHERE session_id = :sid
        AND NOT EXISTS (SELECT 1 FROM sdk_adopted WHERE session_id = :sid) LIMIT 1""",
    "claim_sdk_adoption": """
        INSERT INTO sdk_adopted (session_id, adopted_at) VALUES (:sid, :now)
        ON CONFLICT DO NOTHING RETURNING 1""",
    "keep_operation_result": """
        UPDATE operations SET result = :result WHERE session_id = :sid AND op_id = :key""",
    "insert_run": """
        INSERT INTO runs (session_id, parent_id, depth, user_message, assistant_message,
                          item_count, created_at, updated_at)
        VALUES (:sid, :parent_id, :depth, :user_message, :assistant_message, :item_count,
                :now, :now)""",
    "update_run_append": """
        UPDATE runs SET item_count = :item_count, updated_at = :now,
            assistant_message = CASE WHEN :assistant_changed THEN :assistant_message
                                     ELSE assistant_message END
        WHERE id = :id""",
    # A Runner call's usage since its last write: each call's tokens add up on its run.
    "add_run_usage": """
        -- A sum stops at its column's largest value: a usage figure never fails a turn.
        UPDATE runs SET
            requests = min(requests, :max_requests - :requests) + :requests,
            input_tokens = min(input_tokens, :max - :input_tokens) + :input_tokens,
            output_tokens = min(output_tokens, :max - :output_tokens) + :output_tokens,
            total_tokens = min(total_tokens, :max - :total_tokens) + :total_tokens,
            cached_tokens = min(cached_tokens, :max - :cached_tokens) + :cached_tokens,
            reasoning_tokens = min(reasoning_tokens, :max - :reasoning_tokens) + :reasoning_tokens,
            updated_at = :now
        WHERE id = :id""",
    "set_run_answer": """
        UPDATE runs SET assistant_message = :assistant_message, updated_at = :now
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
        VALUES (:sid, :run_id, :position, :type, :role, :call_id, :name, :text, :data, :now)""",
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
    # A run's id is larger than its parent's (it is written after it), so a path in run-id
    # order is in depth order: SQLite walks the (run_id, position) index through the path's
    # run ids in order and sorts nothing. Item JSON is read as bytes (CAST), which msgspec
    # decodes without a str in between; the full read leaves the id out (a column less to
    # build for every item).
    "path_items": _PATH_UP.format(up=_VIEW, stop="")
    + """
        SELECT CAST(data AS BLOB) FROM items WHERE run_id IN (SELECT id FROM path)
        ORDER BY run_id, position""",
    "path_items_tail": _PATH_UP.format(up=_VIEW, stop="WHERE path.seen < :limit")
    + """
        SELECT id, CAST(data AS BLOB) FROM items WHERE run_id IN (SELECT id FROM path)
        ORDER BY run_id DESC, position DESC LIMIT :limit""",
    "path_runs": _PATH_UP.format(up=_TREE, stop="")
    + f"""
        SELECT {RUN_COLUMNS} FROM runs WHERE id IN (SELECT id FROM path) ORDER BY depth""",
    "run": f"SELECT {RUN_COLUMNS} FROM runs WHERE id = :id",
    "session_run": f"SELECT {RUN_COLUMNS} FROM runs WHERE id = :id AND session_id = :sid",
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
            status = 'pending', completed_at = NULL, duration_ms = NULL, started_at = NULL
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
    "is_ancestor": _PATH_UP.format(up=_TREE, stop="")
    + """
        SELECT 1 FROM path WHERE id = :id""",
    # Migration 3: feed the search index the items it lacks.
    "index_pending": f"SELECT (SELECT coalesce(max(id), 0) FROM items) > {_INDEXED_THROUGH}",
    "index_backlog": f"""
        INSERT INTO items_fts (rowid, text)
        SELECT id, text FROM items WHERE id > {_INDEXED_THROUGH} AND text IS NOT NULL""",
    "mark_indexed": """
        UPDATE items_fts_state SET indexed_through = (SELECT coalesce(max(id), 0) FROM items)""",
    # A read-only store's searches: the backlog is copied into an index in the connection's
    # own (in-memory) temp database, which even a mode=ro or immutable connection may write.
    "create_backlog_copy": """
        CREATE VIRTUAL TABLE IF NOT EXISTS temp.items_fts_backlog USING fts5 (
            text, tokenize = 'porter unicode61 remove_diacritics 2'
        )""",
    "clear_backlog_copy": "DELETE FROM temp.items_fts_backlog",
    "copy_backlog": f"""
        INSERT INTO temp.items_fts_backlog (rowid, text)
        SELECT id, text FROM items WHERE id > {_INDEXED_THROUGH} AND text IS NOT NULL""",
    "session_runs": f"SELECT {RUN_COLUMNS} FROM runs WHERE session_id = :sid ORDER BY id",
    # Through runs (indexed by session) so that items need no session index of their own.
    "session_items": """
        SELECT i.run_id, i.id, i.data FROM runs r JOIN items i ON i.run_id = r.id
        WHERE r.session_id = :sid ORDER BY r.id, i.position""",
    # The web viewer: the branch below a run (the head's if the head is below it, else the
    # newest run's), a window of a branch with each run's place among its siblings, and
    # the tool calls of a window's runs.
    "descend": """
        WITH RECURSIVE below (id) AS (
            SELECT id FROM runs WHERE id = :id AND session_id = :sid
            UNION ALL
            SELECT r.id FROM runs r JOIN below ON r.parent_id = below.id
            WHERE r.session_id = :sid
        )
        SELECT id, depth FROM runs WHERE id = coalesce(
            (SELECT b.id FROM below b JOIN sessions s ON s.head_run_id = b.id
             WHERE s.session_id = :sid),
            (SELECT max(id) FROM below))""",
    "path_window": """
        WITH RECURSIVE path (id, parent_id, depth) AS (
            SELECT id, parent_id, depth FROM runs WHERE id = :leaf AND session_id = :sid
            UNION ALL
            SELECT r.id, r.parent_id, r.depth FROM runs r JOIN path ON r.id = path.parent_id
            WHERE path.depth > :lo
        )
        SELECT """
    + ", ".join(f"r.{column.strip()}" for column in RUN_COLUMNS.split(","))
    + """,
            (SELECT count(*) FROM runs s
             WHERE s.session_id = :sid AND s.parent_id IS r.parent_id),
            (SELECT count(*) FROM runs s
             WHERE s.session_id = :sid AND s.parent_id IS r.parent_id AND s.id <= r.id),
            (SELECT max(s.id) FROM runs s
             WHERE s.session_id = :sid AND s.parent_id IS r.parent_id AND s.id < r.id),
            (SELECT min(s.id) FROM runs s
             WHERE s.session_id = :sid AND s.parent_id IS r.parent_id AND s.id > r.id)
        FROM path JOIN runs r ON r.id = path.id
        WHERE path.depth BETWEEN :lo AND :hi
        ORDER BY path.depth""",
    # "+session_id": not an index for SQLite's planner, which would otherwise walk every call
    # of the session instead of the window's runs (tool_calls_run).
    "tool_calls_of_runs": f"""
        SELECT {TOOL_CALL_COLUMNS} FROM tool_calls
        WHERE +session_id = :sid AND run_id IN (SELECT value FROM json_each(:run_ids))
        ORDER BY run_id, id""",
    "tool_call": f"SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE id = :id",
    # Compaction (core/compaction.py): where an item is, the compaction run, and the mark
    # on the runs of the model's view from the head up to the first one it replaced.
    "item_place": "SELECT run_id, position FROM items WHERE id = :id AND session_id = :sid",
    "insert_compaction_run": """
        INSERT INTO runs (session_id, parent_id, depth, item_count, kind, prior_run_id,
                          created_at, updated_at)
        VALUES (:sid, :parent_id, :depth, :item_count, 'compaction', :prior_run_id, :now, :now)""",
    "mark_compacted": _PATH_UP.format(up=_VIEW, stop="WHERE r.depth >= :depth")
    + """
        UPDATE runs SET status = 'compacted', compacted_by = :by
        WHERE id IN (SELECT id FROM path)""",
}


# ---------------------------------------------------------------------------------------------
# Query and analytics (core/queries.py and the write side of append.py's hooks telemetry)

_SESSIONS = f"""
    SELECT {SESSION_COLUMNS} FROM sessions
    WHERE {{user}} ({{order}}, session_id)
          < (coalesce(:cursor_time, '~'), coalesce(:cursor_sid, ''))
      AND (:created_after IS NULL OR created_at > :created_after)
      AND (:created_before IS NULL OR created_at < :created_before)
      AND (:updated_after IS NULL OR updated_at > :updated_after)
      AND (:updated_before IS NULL OR updated_at < :updated_before)
      AND (:meta IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:meta) f WHERE NOT EXISTS (
            SELECT 1 FROM json_each(sessions.metadata) m
            WHERE m.key = f.key AND m.atom IS f.atom
              AND (m.type = f.type
                   OR (m.type IN ('integer', 'real') AND f.type IN ('integer', 'real'))))))
    ORDER BY {{order}} DESC, session_id DESC LIMIT :limit"""

_CALL_DRIVERS = {
    "run": "run_id = :run_id",
    "session": "session_id = :sid",
    "tool": "tool_name = :tool_name",
    "all": "1 = 1",
}
_CALL_FILTERS = """
      AND (:sid IS NULL OR session_id = :sid) AND (:run_id IS NULL OR run_id = :run_id)
      AND (:tool_name IS NULL OR tool_name = :tool_name)
      AND (:since IS NULL OR created_at >= :since) AND (:until IS NULL OR created_at < :until)"""
_FAILED = "(status IN ('failed', 'incomplete') OR error IS NOT NULL)"

_USAGE_FILTERS = """
      (:sid IS NULL OR r.session_id = :sid) AND (:user_id IS NULL OR s.user_id = :user_id)
      AND (:since IS NULL OR r.created_at >= :since)
      AND (:until IS NULL OR r.created_at < :until)"""
_TOKENS = "requests, input_tokens, output_tokens, total_tokens, cached_tokens, reasoning_tokens"
_SUMS = ", ".join(f"sum({column})" for column in _TOKENS.split(", "))
_RUN_SUMS = ", ".join(f"sum(r.{column})" for column in _TOKENS.split(", "))
_USAGE_KEYS = {"session": "r.session_id", "user": "s.user_id", "day": "substr(r.created_at, 1, 10)"}
_RESPONSE_KEYS = {"model": "model", "agent": "agent_name"}

QUERY_SQL: dict[str, str | None] = {
    **{
        f"sessions_by_{order}" + ("_user" if user else ""): _SESSIONS.format(
            order=order, user="user_id = :user_id AND" if user else ""
        )
        for order in ORDERS
        for user in (False, True)
    },
    "update_session_info": """
        UPDATE sessions SET user_id = coalesce(:user_id, user_id),
            title = coalesce(:title, title), metadata = coalesce(:metadata, metadata),
            updated_at = :now
        WHERE session_id = :sid""",
    "delete_session_returning": """
        DELETE FROM sessions WHERE session_id = :sid RETURNING session_id""",
    **{
        f"{prefix}tool_calls_by_{driver}": f"""
        SELECT {TOOL_CALL_COLUMNS} FROM tool_calls
        WHERE {condition} {_CALL_FILTERS} {extra}
          AND (:status IS NULL OR status = :status OR (:status = 'failed' AND {_FAILED}))
        ORDER BY {order} LIMIT :limit"""
        for driver, condition in _CALL_DRIVERS.items()
        for prefix, extra, order in (
            ("", "", "id DESC"),
            ("slowest_", "AND duration_ms IS NOT NULL", "duration_ms DESC, id DESC"),
        )
    },
    # Nearest-rank percentiles: the value at rank ceil(p * n / 100) of the sorted durations.
    **{
        f"tool_stats_by_{driver}": f"""
        WITH c AS (
            SELECT tool_name, duration_ms, CASE WHEN {_FAILED} THEN 1 ELSE 0 END AS failed
            FROM tool_calls WHERE {condition} {_CALL_FILTERS}
        ), d AS (
            SELECT tool_name, duration_ms,
                row_number() OVER (PARTITION BY tool_name ORDER BY duration_ms) AS n,
                count(*) OVER (PARTITION BY tool_name) AS total
            FROM c WHERE duration_ms IS NOT NULL
        ), p AS (
            SELECT tool_name,
                max(CASE WHEN n = (50 * total + 99) / 100 THEN duration_ms END) AS p50,
                max(CASE WHEN n = (95 * total + 99) / 100 THEN duration_ms END) AS p95
            FROM d GROUP BY tool_name
        )
        SELECT c.tool_name, count(*), sum(c.failed), count(c.duration_ms), avg(c.duration_ms),
            p.p50, p.p95, max(c.duration_ms)
        FROM c LEFT JOIN p ON p.tool_name IS c.tool_name
        GROUP BY c.tool_name, p.p50, p.p95
        ORDER BY count(*) DESC, c.tool_name"""
        for driver, condition in _CALL_DRIVERS.items()
    },
    "items_of_runs": """
        SELECT run_id, id, data FROM items
        WHERE run_id IN (SELECT value FROM json_each(:run_ids)) ORDER BY run_id, position""",
    "insert_model_response": f"""
        INSERT INTO model_responses (session_id, run_id, agent_name, model, response_id,
            request_id, {_TOKENS}, started_at, completed_at, latency_ms)
        VALUES (:sid, :run_id, :agent_name, :model, :response_id, :request_id, :requests,
            :input_tokens, :output_tokens, :total_tokens, :cached_tokens, :reasoning_tokens,
            :started_at, :completed_at, :latency_ms)""",
    "set_run_agent": "UPDATE runs SET agent_name = :agent_name, model = :model WHERE id = :id",
    "set_tool_timing": """
        UPDATE tool_calls SET started_at = :started_at, completed_at = :completed_at,
            duration_ms = :duration_ms
        WHERE id = (SELECT max(id) FROM tool_calls
                    WHERE session_id = :sid AND call_id = :call_id)""",
    **{
        f"model_responses_by_{driver}": f"""
        SELECT id, session_id, run_id, agent_name, model, response_id, request_id, {_TOKENS},
            started_at, completed_at, latency_ms
        FROM model_responses WHERE {condition} ORDER BY id DESC LIMIT :limit"""
        for driver, condition in (
            ("run", "run_id = :run_id"),
            ("session", "session_id = :sid"),
            ("all", "1 = 1"),
        )
    },
    **{
        f"usage_by_{group}": f"""
        SELECT {key}, count(*), {_RUN_SUMS}
        FROM runs r JOIN sessions s ON s.session_id = r.session_id
        WHERE {_USAGE_FILTERS}
        GROUP BY 1"""
        for group, key in _USAGE_KEYS.items()
    },
    # Model calls where the hooks recorded them; the run's own totals where they did not.
    **{
        f"usage_by_{group}": f"""
        SELECT k, count(DISTINCT run_id), {_SUMS} FROM (
            SELECT m.{column} AS k, m.run_id, {", ".join(f"m.{c}" for c in _TOKENS.split(", "))}
            FROM model_responses m
            JOIN runs r ON r.id = m.run_id JOIN sessions s ON s.session_id = r.session_id
            WHERE {_USAGE_FILTERS}
            UNION ALL
            SELECT r.{column}, r.id, {", ".join(f"r.{c}" for c in _TOKENS.split(", "))}
            FROM runs r JOIN sessions s ON s.session_id = r.session_id
            WHERE {_USAGE_FILTERS}
              AND NOT EXISTS (SELECT 1 FROM model_responses m WHERE m.run_id = r.id)
        ) u
        GROUP BY k"""
        for group, column in _RESPONSE_KEYS.items()
    },
    # rank (bm25) is lower for better matches; the result's rank is its negation. Ordering by
    # the rank column (not bm25()) lets FTS5 sort, and the snippets are then only made for
    # the rows returned.
    # "recent" leaves rank out: bm25 needs every query term's document count, which costs a
    # scan of the term's whole index entry when the term is common.
    # The "_backlog" variants search the private copy of the items the index lacks that a
    # read-only store makes (see copy_backlog).
    **{
        name + suffix: f"""
        SELECT i.id, i.session_id, i.run_id, i.type, i.role, i.created_at,
            snippet({fts}, 0, :open, :close, '…', 16), {rank.format(fts=fts)}
        FROM {fts} JOIN items i ON i.id = {fts}.rowid
        WHERE {fts} MATCH :fts
          AND (:sid IS NULL OR i.session_id = :sid)
          AND (:roles IS NULL OR i.role IN (SELECT value FROM json_each(:roles)))
          AND (:types IS NULL OR i.type IN (SELECT value FROM json_each(:types)))
          AND i.id NOT IN (SELECT value FROM json_each(:exclude))
        ORDER BY {order.format(fts=fts)}
        LIMIT :limit"""
        for suffix, fts in (("", "items_fts"), ("_backlog", "items_fts_backlog"))
        for name, rank, order in (
            ("search", "-{fts}.rank", "{fts}.rank, i.id"),
            ("search_recent", "0.0", "{fts}.rowid DESC"),
        )
    },
}
SQL.update(QUERY_SQL)


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


def _set_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch to WAL (a no-op when the file already is: the mode is stored in it).

    The switch needs an exclusive lock, and SQLite reports "database is locked" at once rather
    than wait for it: processes opening a new file together retry until ``busy_timeout``.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


FileKind = Literal["empty", "turnstore", "sdk-sessions", "foreign"]

# The Agents SDK's SQLiteSession tables, and AdvancedSQLiteSession's extra ones.
SDK_SESSION_TABLES = frozenset({"agent_sessions", "agent_messages"})
SDK_ADVANCED_TABLES = frozenset({"message_structure", "turn_usage"})


def sqlite_file_kind(tables: Iterable[str]) -> FileKind:
    """What a SQLite database is, by the names of its tables.

    ``empty`` (no tables: a new file, or a 0-byte one), ``turnstore`` (it has turnstore's
    version table), ``sdk-sessions`` (only the Agents SDK's session tables: opening adds
    turnstore's tables beside them, on purpose) or ``foreign`` (another application's, which
    ``Store.open`` refuses untouched).
    """
    names = {name.lower() for name in tables if not name.lower().startswith("sqlite_")}
    if "turnstore_schema" in names:
        return "turnstore"
    if not names:
        return "empty"
    if "agent_messages" in names and names <= SDK_SESSION_TABLES | SDK_ADVANCED_TABLES:
        return "sdk-sessions"
    return "foreign"


def _tables(conn: sqlite3.Connection, path: str) -> list[str]:
    # Views too: a file of views alone is another application's schema, not an empty file.
    try:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc):
            raise SchemaError(f"{path} is not a SQLite database") from exc
        raise _driver_error(exc, path) from exc
    return [name for (name,) in rows]


def _file_kind(conn: sqlite3.Connection, path: str) -> FileKind:
    return sqlite_file_kind(_tables(conn, path))


def _foreign_message(conn: sqlite3.Connection, path: str) -> str:
    tables = sorted(name for name in _tables(conn, path) if not name.startswith("sqlite_"))
    listed = ", ".join(tables[:6]) + (", …" if len(tables) > 6 else "")
    return (
        f"{path} is a database of another application (tables {listed}), not a turnstore "
        "database; it was left untouched: use another file"
    )


def _connect_uri(path: Path, flags: str, busy_timeout: float) -> sqlite3.Connection:
    try:
        return sqlite3.connect(
            f"{path.resolve().as_uri()}?{flags}",
            uri=True,
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error as exc:
        raise ConnectionFailedError(f"cannot open {path}: {exc}") from exc


def connect_read_only(path: Path, busy_timeout: float = 5.0) -> sqlite3.Connection:
    """A connection that can only read the existing SQLite file ``path``: ``mode=ro``, or
    ``immutable`` where a WAL database's ``-shm`` cannot be made (see
    ``SQLiteBackend._open_read_only``). ``ConnectionFailedError`` when neither can read it.
    """
    conn = _connect_uri(path, "mode=ro", busy_timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        conn.close()
        real = path.resolve()  # SQLite keeps the -wal beside the file a symlink names
        wal = Path(f"{real}-wal")
        if os.access(real.parent, os.W_OK) or (wal.exists() and wal.stat().st_size):
            raise ConnectionFailedError(f"cannot open {path} read-only: {exc}") from exc
        log.info("%s: read-only directory, opening the database immutable", path)
        conn = _connect_uri(path, "immutable=1", busy_timeout)
    except sqlite3.DatabaseError:
        pass  # not a database: the caller's first query says so
    return conn


def _set_caches(conn: sqlite3.Connection) -> None:
    # Sorts (tail reads, the viewer's windows, analytics) stay in memory: spilling them to
    # temporary files made reads ~10% slower (bench/).
    conn.execute("PRAGMA temp_store = MEMORY")
    # A 32 MiB page cache (the default is 2 MiB) keeps the index pages that every write and
    # path read touches in the process, not behind a system call.
    conn.execute("PRAGMA cache_size = -32768")


class _Checkpointer:
    """Checkpoints a WAL database from a thread and connection of its own.

    SQLite's automatic checkpoint runs inside the commit that crosses its threshold: one append
    in ~30 turns paid for copying ~1,000 pages into the database and an fsync (5-10 ms, and
    ~200 us per turn on average; bench/). Here a commit only pokes this thread, which copies
    them on the other core, at most once per ``INTERVAL`` seconds. A passive checkpoint never
    waits for readers or writers, and the writer's own automatic checkpoint stays on at a
    higher threshold (``FALLBACK_PAGES``) in case this one cannot keep up.
    """

    INTERVAL = 0.05
    FALLBACK_PAGES = 10_000

    def __init__(self, path: str) -> None:
        self._path = path
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="turnstore-checkpoint", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Ask for a checkpoint soon (cheap when one is already asked for)."""
        if not self._wake.is_set():
            self._wake.set()

    def _run(self) -> None:
        conn = gated(sqlite3.connect, self._path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._wake.wait()
                if self._stop.is_set():
                    return
                self._wake.clear()
                try:
                    with inside():
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as exc:  # nothing is lost: the next checkpoint retries
                    log.warning("checkpoint of %s failed: %s", self._path, exc)
                if self._stop.wait(self.INTERVAL):
                    return
        finally:
            gated(conn.close)

    def close(self) -> None:
        """Stop the thread (a checkpoint under way finishes first)."""
        self._stop.set()
        self._wake.set()
        self._thread.join()


class SQLiteBackend:
    """A SQLite database file (or ``:memory:``), served by one worker thread."""

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        busy_timeout: float = 30.0,
        durable: bool = False,
        read_only: bool = False,
    ) -> None:
        """Open (and create or upgrade) the database at ``path``.

        ``busy_timeout`` is how long a writer waits for another process's write lock.
        ``durable=True`` makes every commit wait for the disk (``synchronous=FULL``); the default
        (``NORMAL`` under WAL) can lose the last commits on power loss but never corrupts the
        database, and is several times faster per write. ``read_only=True`` opens an existing
        turnstore database without ever writing to it (see ``_open_read_only``).
        """
        self.path = str(path)
        self.read_only = bool(read_only)
        self.found_version: int | None = None
        """The schema version found at opening (None: no turnstore schema)."""
        self._lock = threading.Lock()
        self._closed = False
        self._conn: sqlite3.Connection | None = None
        self._checkpointer: _Checkpointer | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "turnstore-sqlite")
        try:
            opener = self._open_read_only if self.read_only else self._open
            self._executor.submit(gated, opener, busy_timeout, durable).result()
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
        # Before anything writes (the WAL switch included): another application's file is
        # refused as it was found.
        if _file_kind(conn, self.path) == "foreign":
            raise SchemaError(_foreign_message(conn, self.path))
        try:
            if self.path != ":memory:":
                _set_wal(conn, busy_timeout)
                conn.execute(f"PRAGMA wal_autocheckpoint = {_Checkpointer.FALLBACK_PAGES}")
            conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
            _set_caches(conn)
        except sqlite3.Error as exc:
            raise _driver_error(exc, self.path) from exc
        # Foreign keys are off while migrating, as SQLite's table rebuilds require (dropping
        # the old table must not cascade), and on for everything after.
        self.found_version = self._transaction(lambda: stored_version(MIGRATIONS), write=False)
        while self._transaction(lambda: migrate_step(MIGRATIONS, None), write=True):
            pass
        try:
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise _driver_error(exc, self.path) from exc
        if self.path != ":memory:":
            self._checkpointer = _Checkpointer(self.path)

    def _open_read_only(self, busy_timeout: float, durable: bool) -> None:
        """Open an existing turnstore database with SQLite's ``mode=ro``: nothing is migrated,
        the journal mode is left as it is, and no statement can write to the file.

        A WAL database needs its ``-shm`` index, which a read-only connection creates when
        the directory is writable. Where it cannot (a read-only directory or mount, no
        ``-shm`` yet) and no write-ahead log holds data, the file is opened ``immutable``:
        SQLite then takes no locks and assumes nobody changes the file, so a read may see a
        torn state if someone does. A non-empty ``-wal`` that cannot be read is refused, since
        ``immutable`` would silently ignore the commits it holds.
        """
        if self.path == ":memory:":
            raise ConfigurationError("a read-only store needs a database file, not :memory:")
        path = Path(self.path).expanduser()
        if not path.is_file():
            raise ConnectionFailedError(
                f"cannot open {self.path} read-only: "
                + ("it is not a file" if path.exists() else "no such file")
            )
        # A first look at the database file alone (immutable: no -shm, no locks), so that
        # another application's file is refused before SQLite creates anything beside it.
        peek = _connect_uri(path, "immutable=1", busy_timeout)
        try:
            if _file_kind(peek, self.path) == "foreign":
                raise SchemaError(_foreign_message(peek, self.path))
        except StorageError:
            pass  # e.g. a page torn by a writer's checkpoint: the real open below decides
        finally:
            peek.close()
        self._conn = conn = connect_read_only(path, busy_timeout)
        kind = _file_kind(conn, self.path)
        if kind == "foreign":
            raise SchemaError(_foreign_message(conn, self.path))
        if kind != "turnstore":
            what = "empty" if kind == "empty" else "an Agents SDK session database"
            raise SchemaError(
                f"{self.path} is {what}, not a turnstore database: there is nothing to read"
            )
        self.found_version = self._transaction(lambda: stored_version(MIGRATIONS), write=False)
        behind = len(MIGRATIONS) - (self.found_version or 0)
        if behind:
            raise SchemaError(
                f"{self.path}'s schema is {behind} migration(s) older than this turnstore: too "
                f"old to read without migrating, which a read-only open never does; run "
                f"`turnstore migrate --db {self.path}` with write access first"
            )
        try:
            _set_caches(conn)
        except sqlite3.Error as exc:
            raise _driver_error(exc, self.path) from exc

    def _drive(self, op: Op[T]) -> T:
        assert self._conn is not None
        cursor = self._conn.cursor()  # one for the whole operation: a statement is ~10 us
        execute = cursor.execute
        result: Any = None
        try:
            while True:
                query = op.send(result)
                statement = query.name if query.raw else SQL[query.name]
                if statement is None:  # nothing to do on this backend
                    result = [] if query.fetch is Fetch.ALL else None
                    continue
                execute(statement, query.params)
                if query.fetch is Fetch.ONE:
                    result = cursor.fetchone()
                elif query.fetch is Fetch.ALL:
                    result = cursor.fetchall()
                elif query.fetch is Fetch.ID:  # ~5 us less per insert than RETURNING
                    result = cursor.lastrowid
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
            if write and self._checkpointer is not None:
                self._checkpointer.poke()
            return result
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if write or self.read_only or "database is locked" not in str(exc):
                raise _driver_error(exc, self.path) from exc
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        # A read that writes (a search feeding the index backlog; never on a read-only store)
        # met another connection's write: a read transaction cannot wait for the write lock,
        # so it runs again as a write, which waits for the lock as writes do.
        return self._transaction(op, write=True)

    async def run(self, op: Callable[[], Op[T]], *, write: bool) -> T:
        """Run ``op()`` in one transaction on the worker thread.

        A write, once handed to the thread, finishes before a cancellation reaches the caller.
        """
        if write and self.read_only:
            raise ReadOnlyError(f"{self.path} is open read-only: nothing was written")
        with self._lock:
            if self._closed:
                raise ClosedError("the store is closed")
            future = asyncio.wrap_future(self._executor.submit(gated, self._transaction, op, write))
        return await (finish_write(future) if write else future)

    def _close_connection(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
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
        self._executor.submit(gated, self._close_connection)
        self._executor.shutdown(wait=True)

    async def aclose(self) -> None:
        """Like ``close``, without blocking the event loop."""
        await asyncio.to_thread(self.close)

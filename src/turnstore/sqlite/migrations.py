"""SQLite's schema history: the DDL of every version, in ``MIGRATIONS``.

``MIGRATIONS[i]`` takes a database from version ``i`` to ``i + 1`` (core/schema.py applies
them). Append new steps; never edit a released one.
"""

from __future__ import annotations

from ..core.annotation_sql import RUN_ANNOTATIONS_VIEW

__all__ = ["MIGRATIONS", "TOTALS_BACKFILL"]

# The tables that hand out ids, as migration 1 creates them and migrations 6 and 12 rebuild
# them.
_KEY = "INTEGER PRIMARY KEY"
_CASCADE = " ON DELETE CASCADE"
_RUNS_TABLE = """CREATE TABLE {table} (
            id {key},
            session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
            parent_id INTEGER REFERENCES runs (id){on_parent_delete},
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


# A tool call whose error the search index holds (migration 15): one its output does not say.
_SEARCHED_ERROR = "({row}.error IS NOT NULL AND {row}.error IS NOT {row}.output)"

_SPAN_OVERVIEW = """CREATE VIEW span_overview AS
        SELECT p.session_id, s.user_id, p.run_id, r.user_message, p.id AS span_row_id,
            p.trace_id, p.span_id, p.parent_span_id, p.kind, p.name, p.started_at, p.ended_at,
            p.duration_ms, p.error, p.error IS NOT NULL AS failed, p.data
        FROM spans p
        JOIN runs r ON r.session_id = p.session_id AND r.id = p.run_id
        JOIN sessions s ON s.session_id = p.session_id"""


# The columns migration 5 added to runs, as the rebuilds write them.
_RUNS_V5 = (
    ",\n            kind TEXT,\n            prior_run_id INTEGER,\n            compacted_by INTEGER"
)


def _rebuild(
    table: str, create: str, indexes: list[str], *, keep_counter: bool = False
) -> list[str]:
    """SQLite's table rebuild: a copy made by ``create`` (ids and all) replaces ``table``.

    ``keep_counter``: the copy's AUTOINCREMENT counter starts where the table's stands, so
    that the ids of rows deleted since are not handed out again (the rename carries the
    counter's row over to the final name).
    """
    counter = [
        f"""INSERT INTO sqlite_sequence (name, seq)
        SELECT '{table}_new', seq FROM sqlite_sequence WHERE name = '{table}'"""
    ]
    return [
        create,
        *(counter if keep_counter else []),
        f"INSERT INTO {table}_new SELECT * FROM {table}",
        f"DROP TABLE {table}",
        f"ALTER TABLE {table}_new RENAME TO {table}",
        *indexes,
    ]


# The totals step 18 adds to each session's row (a shipped step: never edited).
_SESSION_TOTALS = (
    "run_count",
    "total_tokens",
    "tool_call_count",
    "failed_run_count",
    "failed_call_count",
    "failure_count",
)

# Step 18's backfill: each session's totals computed from its rows (also what a bulk load
# that writes rows by SQL runs after, as bench/bench_catalogue.py does).
TOTALS_BACKFILL = [
    """UPDATE sessions SET
        run_count = (SELECT count(*) FROM runs r WHERE r.session_id = sessions.session_id),
        total_tokens = (
            SELECT CAST(min(total(r.total_tokens), 9223372036854775807.0) AS INTEGER)
            FROM runs r WHERE r.session_id = sessions.session_id),
        tool_call_count = (
            SELECT count(*) FROM tool_calls t WHERE t.session_id = sessions.session_id),
        failed_call_count = (
            SELECT count(*) FROM tool_calls t
            WHERE t.session_id = sessions.session_id
              AND (status IN ('cancelled', 'failed', 'incomplete', 'timed_out')
                   OR error IS NOT NULL))""",
    """UPDATE sessions SET failed_run_count = (
        SELECT count(*) FROM runs r
        WHERE r.session_id = sessions.session_id AND r.status = 'failed')""",
    "UPDATE sessions SET failure_count = failed_run_count + failed_call_count",
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
        _RUNS_TABLE.format(table="runs", key=_KEY, on_parent_delete=_CASCADE, more=""),
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
        # Outputs stored before version 2 that report an error (see toolcalls.reports_error).
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
    # (search_index.index_backlog), which therefore sees every committed item. items_fts_state holds
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
                on_parent_delete=_CASCADE,
                more=_RUNS_V5,
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
    # history turnstore has adopted (turnstore/importers/adopt.py), each marked in the
    # transaction that imported it, so that it is imported once. SQLite only: SQLiteSession
    # writes only there.
    [
        """CREATE TABLE sdk_adopted (
            session_id TEXT PRIMARY KEY,
            adopted_at TEXT NOT NULL
        ) WITHOUT ROWID""",
    ],
    # 9: runs.status follows each write (model.RunStatus, core/append.py); the runs stored
    # before get theirs from what they hold, as the writes would have left them: a call
    # without its output (interrupted), an assistant message last (completed), a new question
    # below (failed), else in_progress. Compacted and compaction runs keep theirs. One pass
    # over runs, with an index lookup into tool_calls, items and runs for each.
    [
        """UPDATE runs SET status = CASE
            WHEN EXISTS (SELECT 1 FROM tool_calls t
                         WHERE t.run_id = runs.id AND t.status = 'pending') THEN 'interrupted'
            WHEN (SELECT i.type = 'message' AND i.role = 'assistant' FROM items i
                  WHERE i.run_id = runs.id ORDER BY i.position DESC LIMIT 1) THEN 'completed'
            WHEN EXISTS (SELECT 1 FROM runs c
                         WHERE c.parent_id = runs.id AND c.user_message IS NOT NULL)
                THEN 'failed'
            ELSE 'in_progress' END
        WHERE status IS NULL AND kind IS NULL""",
    ],
    # 10: the SDK's trace spans of each run (turnstore.tracing): what happened inside a turn.
    # Written in batches after the turn (a span that names a run no longer stored is
    # dropped); data is the span's JSON as turnstore keeps it (core/spans.py).
    [
        """CREATE TABLE spans (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            trace_id TEXT NOT NULL,
            span_id TEXT NOT NULL,
            parent_span_id TEXT,
            kind TEXT NOT NULL,
            name TEXT,
            started_at TEXT,
            ended_at TEXT,
            duration_ms REAL,
            error TEXT,
            data TEXT NOT NULL
        )""",
        "CREATE INDEX spans_run ON spans (run_id, started_at)",
        "CREATE INDEX spans_session ON spans (session_id, id)",
        "CREATE INDEX spans_kind_duration ON spans (kind, duration_ms)",
        _SPAN_OVERVIEW,
        # Tool call statuses tell timed out, cancelled and rejected calls apart
        # (toolcalls.FAILED_STATUSES); the views count the new failed ones.
        """UPDATE tool_calls SET status = 'timed_out'
        WHERE status = 'failed' AND output GLOB 'Tool ''*'' timed out after * seconds.'""",
        """UPDATE tool_calls SET status = 'rejected'
        WHERE status = 'completed' AND error IS NULL
          AND output = 'Tool execution was not approved.'""",
        "DROP VIEW run_overview",
        "DROP VIEW tool_call_overview",
        """CREATE VIEW run_overview AS
        SELECT r.session_id, s.user_id, r.id AS run_id, r.parent_id, r.depth,
            r.user_message, r.assistant_message,
            (SELECT group_concat(tool_name, ', ') FROM (
                SELECT t.tool_name FROM tool_calls t WHERE t.run_id = r.id
                GROUP BY t.tool_name ORDER BY min(t.id))) AS tools,
            (SELECT count(*) FROM tool_calls t WHERE t.run_id = r.id) AS tool_calls,
            (SELECT count(*) FROM tool_calls t WHERE t.run_id = r.id
                AND (t.status IN ('cancelled', 'failed', 'incomplete', 'timed_out')
                    OR t.error IS NOT NULL))
                AS failed_tool_calls,
            r.agent_name, r.model, r.requests, r.input_tokens, r.output_tokens,
            r.total_tokens, r.cached_tokens, r.reasoning_tokens, r.item_count,
            r.id = s.head_run_id AS is_head, r.created_at, r.updated_at
        FROM runs r JOIN sessions s ON s.session_id = r.session_id""",
        """CREATE VIEW tool_call_overview AS
        SELECT t.session_id, s.user_id, t.run_id, t.id AS tool_call_id, t.call_id,
            t.tool_name, t.kind, r.user_message, t.arguments, t.output, t.status, t.error,
            (t.status IN ('cancelled', 'failed', 'incomplete', 'timed_out')
             OR t.error IS NOT NULL) AS failed,
            t.duration_ms, t.created_at, t.started_at, t.completed_at
        FROM tool_calls t
        JOIN runs r ON r.id = t.run_id
        JOIN sessions s ON s.session_id = t.session_id""",
    ],
    # 11: a branch's name (core/branches.py). A branch is known by its fork run, its first
    # run, which stays as the branch grows; the name is kept beside it and goes with it.
    [
        """CREATE TABLE branch_names (
            run_id INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
            session_id TEXT NOT NULL,
            name TEXT NOT NULL,
            UNIQUE (session_id, name)
        )""",
    ],
    # 12: a conversation of any length can be deleted. runs.parent_id cascaded, so deleting
    # a run deleted its child, which deleted its own, one trigger level per run, and SQLite
    # stops at 1,000 levels: a session of 999 runs could not be cleared, deleted or pruned
    # ("too many levels of trigger recursion"), nor a branch of as many runs deleted. The link
    # stays a foreign key (a run's parent exists) but no longer cascades: a session's runs go
    # with its sessions row, all in one level, and a branch's runs in one statement
    # (core/history.py); a delete that would leave a run without its parent fails whole.
    # SQLite cannot change a constraint in place: runs is rebuilt as in step 6, with foreign
    # keys off, keeping its ids and its AUTOINCREMENT counter.
    [
        "PRAGMA legacy_alter_table = ON",
        *_rebuild(
            "runs",
            _RUNS_TABLE.format(
                table="runs_new",
                key=_KEY + " AUTOINCREMENT",
                on_parent_delete="",
                more=_RUNS_V5,
            ),
            _RUNS_INDEXES,
            keep_counter=True,
        ),
        "PRAGMA legacy_alter_table = OFF",
    ],
    # 13: annotations (core/annotations.py): feedback, scores, labels and notes on a run, or on
    # one tool call of it; many per run. They cascade with their run (a session's go with its
    # runs, a branch's with its runs, in the same one-level delete) and with their tool call
    # (a pop that drops it). Read by run, by session and by name across sessions; the view
    # run_annotations joins each with its run for SQL users (docs/queries.md).
    [
        """CREATE TABLE annotations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            tool_call_id INTEGER REFERENCES tool_calls (id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            value REAL,
            label TEXT,
            comment TEXT,
            source TEXT NOT NULL,
            author TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT
        )""",
        "CREATE INDEX annotations_run ON annotations (run_id, created_at)",
        "CREATE INDEX annotations_session ON annotations (session_id, created_at)",
        "CREATE INDEX annotations_name ON annotations (name, created_at)",
        "CREATE INDEX annotations_tool_call ON annotations (tool_call_id)",
        RUN_ANNOTATIONS_VIEW,
    ],
    # 14: the last row of the SDK's agent_messages each adoption took over, so that what the
    # SDK's own classes write to an adopted session later is taken up (core/adoption.py,
    # take_up). NULL for sessions adopted before: their later SDK rows are not taken up.
    ["ALTER TABLE sdk_adopted ADD COLUMN through_id INTEGER"],
    # 15: tool calls' errors are searchable. The SDK (0.23 on) keeps an exception's text out
    # of the tool's output ("An error occurred while running the tool. Please try again.")
    # and turnstore has it from the trace span (tool_calls.error), and an MCP call's or an
    # image generation's error is a field of its item apart from its text: none of them was in
    # items_fts. They get an index of their own, keyed by tool call id, fed by triggers (few
    # calls have an error: the conditions keep every other write as it was), holding only the
    # errors that are not already the output's text.
    [
        """CREATE VIRTUAL TABLE tool_errors_fts USING fts5 (
            error, tokenize = 'porter unicode61 remove_diacritics 2'
        )""",
        f"""INSERT INTO tool_errors_fts (rowid, error)
        SELECT id, error FROM tool_calls WHERE {_SEARCHED_ERROR.format(row="tool_calls")}""",
        f"""CREATE TRIGGER tool_errors_fts_insert AFTER INSERT ON tool_calls
        WHEN {_SEARCHED_ERROR.format(row="new")}
        BEGIN
            INSERT INTO tool_errors_fts (rowid, error) VALUES (new.id, new.error);
        END""",
        f"""CREATE TRIGGER tool_errors_fts_update AFTER UPDATE OF error, output ON tool_calls
        WHEN {_SEARCHED_ERROR.format(row="old")} OR {_SEARCHED_ERROR.format(row="new")}
        BEGIN
            DELETE FROM tool_errors_fts WHERE rowid = old.id;
            INSERT INTO tool_errors_fts (rowid, error)
            SELECT new.id, new.error WHERE {_SEARCHED_ERROR.format(row="new")};
        END""",
        f"""CREATE TRIGGER tool_errors_fts_delete AFTER DELETE ON tool_calls
        WHEN {_SEARCHED_ERROR.format(row="old")}
        BEGIN
            DELETE FROM tool_errors_fts WHERE rowid = old.id;
        END""",
    ],
    # 16: the sessions list sorted and filtered across the store (queries.list_sessions;
    # as postgres/ step 15). What each session's runs add up to (tokens, failed runs) and hold
    # (agents, models) is read from one covering index, not from the runs' wide rows; its
    # failed tool calls (toolcalls.failed_sql as it reads today) from a partial index.
    [
        """CREATE INDEX runs_session_totals
        ON runs (session_id, total_tokens, status, agent_name, model)""",
        """CREATE INDEX tool_calls_session_failed ON tool_calls (session_id)
        WHERE (status IN ('cancelled', 'failed', 'incomplete', 'timed_out')
               OR error IS NOT NULL)""",
    ],
    # 17: the token details as the SDK reports them (input_tokens_details,
    # output_tokens_details: every field, each summed over a run's requests), per run and per
    # model call, as JSON text (as postgres/ step 16). cached_tokens and reasoning_tokens stay
    # columns of their own (the price table reads them).
    [
        "ALTER TABLE runs ADD COLUMN input_tokens_details TEXT",
        "ALTER TABLE runs ADD COLUMN output_tokens_details TEXT",
        "ALTER TABLE model_responses ADD COLUMN input_tokens_details TEXT",
        "ALTER TABLE model_responses ADD COLUMN output_tokens_details TEXT",
    ],
    # 18: the sessions list sorted by a number over the whole store (issue 29; as postgres/
    # step 17). Each session's totals are columns of its row, kept by the writes in statements
    # they run anyway (core/lock.py, Tally): its runs, tokens (capped at the largest integer,
    # as a run's are) and tool calls, and its failed runs and failed tool calls (failed_sql as
    # it reads today), recounted by the writes through the partial indexes. Each order is
    # an index of the sessions table: a page is an index range.
    [
        *(
            f"ALTER TABLE sessions ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0"
            for column in _SESSION_TOTALS
        ),
        """CREATE INDEX runs_session_failed ON runs (session_id) WHERE status = 'failed'""",
        *TOTALS_BACKFILL,
        "CREATE INDEX sessions_runs ON sessions (run_count, session_id)",
        "CREATE INDEX sessions_tokens ON sessions (total_tokens, session_id)",
        "CREATE INDEX sessions_tool_calls ON sessions (tool_call_count, session_id)",
        """CREATE INDEX sessions_failures
        ON sessions (failure_count, session_id)""",
    ],
]

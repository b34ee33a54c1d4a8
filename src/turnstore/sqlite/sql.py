"""SQLite's statements: the table from statement name to SQL that the driver runs.

The names are the ones the operations of core/ yield (``Query(name, ...)``); a ``None``
statement means that there is nothing to do on this backend.
"""

from __future__ import annotations

from ..core.queries import ORDERS
from ..core.rows import RUN_COLUMNS, SESSION_COLUMNS, TOOL_CALL_COLUMNS
from ..model import failed_sql

__all__ = ["QUERY_SQL", "SQL"]

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
                          item_count, status, created_at, updated_at)
        VALUES (:sid, :parent_id, :depth, :user_message, :assistant_message, :item_count,
                :status, :now, :now)""",
    "update_run_append": """
        UPDATE runs SET item_count = :item_count, updated_at = :now,
            assistant_message = CASE WHEN :assistant_changed THEN :assistant_message
                                     ELSE assistant_message END,
            status = CASE WHEN :status IS NULL OR status = 'compacted' THEN status
                          ELSE :status END
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
    # A run's status (model.RunStatus) follows its writes; a compacted run stays so.
    "set_run_answer": """
        UPDATE runs SET updated_at = :now,
            assistant_message = CASE WHEN :assistant_changed THEN :assistant_message
                                     ELSE assistant_message END,
            status = CASE WHEN :status IS NULL OR status = 'compacted' THEN status
                          ELSE :status END
        WHERE id = :id""",
    "fail_run": """
        UPDATE runs SET status = 'failed', updated_at = :now
        WHERE session_id = :sid AND id = :id AND status = 'in_progress'""",
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
                ORDER BY position DESC LIMIT 1),
            -- As a write would leave it (model.RunStatus); compaction runs have none.
            status = CASE
                WHEN status IS NULL OR status = 'compacted' THEN status
                WHEN EXISTS (SELECT 1 FROM tool_calls
                             WHERE run_id = :id AND status = 'pending') THEN 'interrupted'
                WHEN (SELECT type = 'message' AND role = 'assistant' FROM items
                      WHERE run_id = :id ORDER BY position DESC LIMIT 1) THEN 'completed'
                ELSE 'in_progress' END
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
_FAILED = failed_sql()  # the one rule: model.call_failed

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

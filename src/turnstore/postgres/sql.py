"""PostgreSQL's statements: the table from statement name to SQL that the driver runs.

The names are those of sqlite/sql.py; the operations of core/ yield them (``Query(name, ...)``)
and say what each must return. A ``None`` statement means nothing to do on this backend.
"""

from __future__ import annotations

from ..core.queries import ORDERS, SNIPPET_MARKS
from ..core.rows import RUN_COLUMNS, SESSION_COLUMNS, TOOL_CALL_COLUMNS
from ..model import failed_sql

__all__ = ["QUERY_SQL", "SQL", "TS_CONFIG"]

# The text search configuration of items.search_vector, made by migration 7: searches use it too.
TS_CONFIG = "turnstore_english"

# Lookups by call_id and tool name, through the prefix indexes of migration 5.
_CALL_ID_IS = "left(call_id, 256) = left(%(call_id)s, 256) AND call_id = %(call_id)s"
_TOOL_NAME_IS = "left(tool_name, 256) = left(%(tool_name)s, 256) AND tool_name = %(tool_name)s"

# The active path, walked from the head up through parent_id (see sqlite/sql.py for why): each
# step is one primary-key lookup, and every step names the session so that it stays on the
# session's shard.
#
# Walks and per-run lookups are written as LATERAL subqueries with LIMIT / OFFSET 0, which
# the planner cannot flatten into a join: as plain joins, a planner that thinks a session has
# few rows (fresh statistics, or a generic plan) hashes all of the session's runs or items at
# every step, and a walk of n runs costs O(n^2) instead of n index lookups.
_PATH_UP = """
WITH RECURSIVE path (id, parent_id, depth, seen) AS (
    SELECT r.id, {up}, r.depth, r.item_count
    FROM sessions s JOIN runs r ON r.session_id = s.session_id AND r.id = s.head_run_id
    WHERE s.session_id = %(sid)s
    UNION ALL
    SELECT r.id, r.up, r.depth, path.seen + r.item_count
    FROM path CROSS JOIN LATERAL (
        SELECT id, {up} AS up, depth, item_count FROM runs
        WHERE session_id = %(sid)s AND id = path.parent_id LIMIT 1
    ) r
    {stop}
)"""
# The step up: the tree's, or the model's view (see sqlite/sql.py).
_TREE = "parent_id"
_VIEW = "CASE WHEN kind IS NULL THEN parent_id ELSE prior_run_id END"

# The items of each run of ``path``, through the (session_id, run_id, position) key.
_PATH_ITEMS = """
    FROM path CROSS JOIN LATERAL (
        SELECT id, data, position FROM items
        WHERE session_id = %(sid)s AND run_id = path.id
        ORDER BY position {order} {limit}
    ) i"""

# Query name -> statement, in psycopg's ``%(name)s`` style (a literal % is written %%). The
# names are those of sqlite/sql.py; the operations (append, reads, history, schema, queries) say
# what each must return.
SQL: dict[str, str | None] = {
    "create_version_table": """CREATE TABLE IF NOT EXISTS turnstore_schema (
        version INTEGER PRIMARY KEY,
        applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )""",
    "version_table_exists": "SELECT to_regclass('turnstore_schema') IS NOT NULL",
    "schema_version": "SELECT max(version) FROM turnstore_schema",
    "record_version": "INSERT INTO turnstore_schema (version) VALUES (%(version)s)",
    # ON CONFLICT DO UPDATE locks the session row even when the WHERE is false: this is the
    # lock that serialises writers of one session (lock_head then re-reads under it).
    "ensure_session": """
        INSERT INTO sessions (session_id, title, created_at, updated_at)
        VALUES (%(sid)s, %(title)s, %(now)s, %(now)s)
        ON CONFLICT (session_id) DO UPDATE SET updated_at = excluded.updated_at,
            title = coalesce(sessions.title, excluded.title)""",
    "lock_head": f"""
        SELECT s.head_run_id, r.depth, r.item_count, {_VIEW},
            EXISTS (SELECT 1 FROM runs c
                    WHERE c.session_id = s.session_id AND c.parent_id = r.id)
        FROM sessions s
        LEFT JOIN runs r ON r.session_id = s.session_id AND r.id = s.head_run_id
        WHERE s.session_id = %(sid)s
        FOR UPDATE OF s""",
    # Locked by ensure_session, read by lock_head: see core.lock.lock_session.
    "upsert_head": None,
    # The SDK's SQLiteSession tables are adopted from SQLite files only (turnstore/_adopt.py).
    "sdk_messages_table": None,
    "sdk_adopted_ids": None,
    "sdk_unadopted": None,
    "claim_sdk_adoption": None,
    "set_head": """
        UPDATE sessions SET head_run_id = %(head)s, updated_at = %(now)s
        WHERE session_id = %(sid)s""",
    # Write keys (core/once.py). A claim of a key that a transaction still in flight holds
    # waits for it, then returns a row only if that transaction rolled back.
    "forget_operations": """
        DELETE FROM operations WHERE session_id = %(sid)s AND op_id < %(before)s""",
    "forget_other_operations": """
        DELETE FROM operations WHERE session_id = %(sid)s AND op_id <> %(key)s""",
    "claim_operation": """
        INSERT INTO operations (session_id, op_id) VALUES (%(sid)s, %(key)s)
        ON CONFLICT DO NOTHING RETURNING 1""",
    "operation_result": """
        SELECT result FROM operations WHERE session_id = %(sid)s AND op_id = %(key)s""",
    "keep_operation_result": """
        UPDATE operations SET result = %(result)s WHERE session_id = %(sid)s AND op_id = %(key)s""",
    "insert_run": """
        INSERT INTO runs (session_id, parent_id, depth, user_message, assistant_message,
                          item_count, status, created_at, updated_at)
        VALUES (%(sid)s, %(parent_id)s, %(depth)s, %(user_message)s, %(assistant_message)s,
                %(item_count)s, %(status)s, %(now)s, %(now)s)
        RETURNING id""",
    "update_run_append": """
        UPDATE runs SET item_count = %(item_count)s, updated_at = %(now)s,
            assistant_message = CASE WHEN %(assistant_changed)s THEN %(assistant_message)s
                                     ELSE assistant_message END,
            status = CASE WHEN %(status)s::text IS NULL OR status = 'compacted' THEN status
                          ELSE %(status)s END
        WHERE session_id = %(sid)s AND id = %(id)s""",
    # A Runner call's usage since its last write: each call's tokens add up on its run.
    "add_run_usage": """
        -- A sum stops at its column's largest value: a usage figure never fails a turn.
        UPDATE runs SET
            requests = LEAST(requests, %(max_requests)s - %(requests)s)
                + %(requests)s,
            input_tokens = LEAST(input_tokens, %(max)s - %(input_tokens)s)
                + %(input_tokens)s,
            output_tokens = LEAST(output_tokens, %(max)s - %(output_tokens)s)
                + %(output_tokens)s,
            total_tokens = LEAST(total_tokens, %(max)s - %(total_tokens)s)
                + %(total_tokens)s,
            cached_tokens = LEAST(cached_tokens, %(max)s - %(cached_tokens)s)
                + %(cached_tokens)s,
            reasoning_tokens = LEAST(reasoning_tokens, %(max)s - %(reasoning_tokens)s)
                + %(reasoning_tokens)s,
            updated_at = %(now)s
        WHERE session_id = %(sid)s AND id = %(id)s""",
    # A run's status (model.RunStatus) follows its writes; a compacted run stays so.
    "set_run_answer": """
        UPDATE runs SET updated_at = %(now)s,
            assistant_message = CASE WHEN %(assistant_changed)s THEN %(assistant_message)s
                                     ELSE assistant_message END,
            status = CASE WHEN %(status)s::text IS NULL OR status = 'compacted' THEN status
                          ELSE %(status)s END
        WHERE session_id = %(sid)s AND id = %(id)s""",
    "fail_run": """
        UPDATE runs SET status = 'failed', updated_at = %(now)s
        WHERE session_id = %(sid)s AND id = %(id)s AND status = 'in_progress'""",
    "set_run_usage": """
        UPDATE runs SET requests = %(requests)s, input_tokens = %(input_tokens)s,
            output_tokens = %(output_tokens)s, total_tokens = %(total_tokens)s,
            cached_tokens = %(cached_tokens)s, reasoning_tokens = %(reasoning_tokens)s,
            updated_at = %(now)s
        WHERE session_id = %(sid)s AND id = %(id)s""",
    "insert_item": """
        INSERT INTO items (session_id, run_id, position, type, role, call_id, name, text, data,
                           created_at)
        VALUES (%(sid)s, %(run_id)s, %(position)s, %(type)s, %(role)s, %(call_id)s, %(name)s,
                %(text)s, %(data)s, %(now)s)
        RETURNING id""",
    "insert_tool_call": """
        INSERT INTO tool_calls (session_id, run_id, call_id, tool_name, kind, arguments, output,
                                status, error, call_item_id, output_item_id, created_at,
                                completed_at)
        VALUES (%(sid)s, %(run_id)s, %(call_id)s, %(tool_name)s, %(kind)s, %(arguments)s,
                %(output)s, %(status)s, %(error)s, %(call_item_id)s, %(output_item_id)s,
                %(now)s, %(completed_at)s)""",
    "open_tool_calls": """
        SELECT call_id, max(id) FROM tool_calls
        WHERE session_id = %(sid)s AND output_item_id IS NULL
          AND left(call_id, 256) = ANY (ARRAY(
              SELECT left(c, 256) FROM jsonb_array_elements_text(%(call_ids)s::jsonb) c))
          AND call_id = ANY (ARRAY(SELECT jsonb_array_elements_text(%(call_ids)s::jsonb)))
        GROUP BY call_id""",
    "complete_tool_call": """
        UPDATE tool_calls SET output = %(output)s, status = %(status)s, error = %(error)s,
            output_item_id = %(output_item_id)s, completed_at = %(now)s
        WHERE session_id = %(sid)s AND id = %(id)s""",
    "path_items": _PATH_UP.format(up=_VIEW, stop="")
    + "SELECT i.id, i.data"
    + _PATH_ITEMS.format(order="", limit="OFFSET 0")
    + " ORDER BY path.depth, i.position",
    "path_items_tail": _PATH_UP.format(up=_VIEW, stop="WHERE path.seen < %(limit)s")
    + "SELECT i.id, i.data"
    + _PATH_ITEMS.format(order="DESC", limit="LIMIT %(limit)s")
    + " ORDER BY path.depth DESC, i.position DESC LIMIT %(limit)s",
    "path_runs": _PATH_UP.format(up=_TREE, stop="")
    + f"""
        SELECT r.* FROM path CROSS JOIN LATERAL (
            SELECT {RUN_COLUMNS} FROM runs WHERE session_id = %(sid)s AND id = path.id LIMIT 1
        ) r
        ORDER BY r.depth""",
    "session_run": f"""
        SELECT {RUN_COLUMNS} FROM runs WHERE session_id = %(sid)s AND id = %(id)s""",
    # By id alone, whatever the session (deep links): served by runs_id; on Citus it asks
    # every shard.
    "run": f"SELECT {RUN_COLUMNS} FROM runs WHERE id = %(id)s",
    # Two arms instead of IS NOT DISTINCT FROM, which no index serves.
    "children": f"""
        SELECT {RUN_COLUMNS} FROM runs
        WHERE session_id = %(sid)s AND parent_id = %(parent_id)s
        UNION ALL
        SELECT {RUN_COLUMNS} FROM runs
        WHERE session_id = %(sid)s AND parent_id IS NULL AND %(parent_id)s::bigint IS NULL
        ORDER BY id""",
    "leaves": """
        SELECT r.id, r.depth, r.user_message, r.created_at FROM runs r
        WHERE r.session_id = %(sid)s
          AND NOT EXISTS (SELECT 1 FROM runs c
                          WHERE c.session_id = %(sid)s AND c.parent_id = r.id)
        ORDER BY r.id""",
    "head_leaves": """
        WITH RECURSIVE below (id) AS (
            SELECT head_run_id FROM sessions WHERE session_id = %(sid)s
            UNION ALL
            SELECT r.id FROM below CROSS JOIN LATERAL (
                SELECT id FROM runs WHERE session_id = %(sid)s AND parent_id = below.id OFFSET 0
            ) r
        )
        SELECT b.id FROM below b
        WHERE NOT EXISTS (SELECT 1 FROM runs c
                          WHERE c.session_id = %(sid)s AND c.parent_id = b.id)""",
    "session": """
        SELECT session_id, user_id, title, metadata, head_run_id, created_at, updated_at
        FROM sessions WHERE session_id = %(sid)s""",
    "delete_session": "DELETE FROM sessions WHERE session_id = %(sid)s",
    "last_item": """
        SELECT id, position, call_id, data FROM items
        WHERE session_id = %(sid)s AND run_id = %(run_id)s ORDER BY position DESC LIMIT 1""",
    "first_item": """
        SELECT id, data FROM items
        WHERE session_id = %(sid)s AND run_id = %(run_id)s AND position = 0""",
    "first_child": """
        SELECT id FROM runs WHERE session_id = %(sid)s AND parent_id = %(id)s LIMIT 1""",
    "run_items_before": """
        SELECT id, data FROM items
        WHERE session_id = %(sid)s AND run_id = %(run_id)s AND position < %(position)s
        ORDER BY position""",
    "drop_call_of_item": f"""
        DELETE FROM tool_calls
        WHERE session_id = %(sid)s AND {_CALL_ID_IS}
          AND (call_item_id = %(item)s
               OR (call_item_id IS NULL AND output_item_id = %(item)s))""",
    "reopen_call_of_output": f"""
        UPDATE tool_calls SET output = NULL, output_item_id = NULL, error = NULL,
            status = 'pending', completed_at = NULL, duration_ms = NULL, started_at = NULL
        WHERE session_id = %(sid)s AND {_CALL_ID_IS} AND output_item_id = %(item)s""",
    "delete_item": "DELETE FROM items WHERE session_id = %(sid)s AND id = %(id)s",
    "delete_run": "DELETE FROM runs WHERE session_id = %(sid)s AND id = %(id)s",
    "shrink_run": """
        UPDATE runs SET item_count = %(item_count)s, updated_at = %(now)s,
            assistant_message = (
                SELECT text FROM items
                WHERE session_id = %(sid)s AND run_id = %(id)s
                  AND type = 'message' AND role = 'assistant'
                ORDER BY position DESC LIMIT 1),
            -- As a write would leave it (model.RunStatus); compaction runs have none.
            status = CASE
                WHEN status IS NULL OR status = 'compacted' THEN status
                WHEN EXISTS (SELECT 1 FROM tool_calls
                             WHERE session_id = %(sid)s AND run_id = %(id)s
                               AND status = 'pending') THEN 'interrupted'
                WHEN (SELECT type = 'message' AND role = 'assistant' FROM items
                      WHERE session_id = %(sid)s AND run_id = %(id)s
                      ORDER BY position DESC LIMIT 1) THEN 'completed'
                ELSE 'in_progress' END
        WHERE session_id = %(sid)s AND id = %(id)s""",
    "ancestors_child_counts": """
        WITH RECURSIVE up (id, parent_id, level) AS (
            SELECT p.id, p.parent_id, 1 FROM runs r
            JOIN runs p ON p.session_id = r.session_id AND p.id = r.parent_id
            WHERE r.session_id = %(sid)s AND r.id = %(id)s
            UNION ALL
            SELECT p.id, p.parent_id, up.level + 1 FROM up CROSS JOIN LATERAL (
                SELECT id, parent_id FROM runs
                WHERE session_id = %(sid)s AND id = up.parent_id LIMIT 1
            ) p
        )
        SELECT up.id, up.parent_id,
               (SELECT count(*) FROM runs c WHERE c.session_id = %(sid)s AND c.parent_id = up.id)
        FROM up ORDER BY up.level""",
    "is_ancestor": _PATH_UP.format(up=_TREE, stop="")
    + """
        SELECT 1 FROM path WHERE id = %(id)s""",
    # The search index needs no batching here: search_vector is a generated column, kept by
    # every INSERT, and GIN's pending list already batches its updates.
    "index_pending": None,
    "index_backlog": None,
    "mark_indexed": None,
    "create_backlog_copy": None,
    "clear_backlog_copy": None,
    "copy_backlog": None,
    "search_backlog": None,
    "search_recent_backlog": None,
    "session_runs": f"SELECT {RUN_COLUMNS} FROM runs WHERE session_id = %(sid)s ORDER BY id",
    "session_items": """
        SELECT run_id, id, data FROM items WHERE session_id = %(sid)s
        ORDER BY run_id, position""",
    # The web viewer (see sqlite/sql.py): the branch below a run, a window of a branch with each
    # run's place among its siblings, and the tool calls of a window's runs.
    "descend": """
        WITH RECURSIVE below (id) AS (
            SELECT id FROM runs WHERE session_id = %(sid)s AND id = %(id)s
            UNION ALL
            SELECT r.id FROM below CROSS JOIN LATERAL (
                SELECT id FROM runs WHERE session_id = %(sid)s AND parent_id = below.id OFFSET 0
            ) r
        )
        SELECT id, depth FROM runs WHERE session_id = %(sid)s AND id = coalesce(
            (SELECT b.id FROM below b JOIN sessions s ON s.head_run_id = b.id
             WHERE s.session_id = %(sid)s),
            (SELECT max(id) FROM below))""",
    "path_window": """
        WITH RECURSIVE path (id, parent_id, depth) AS (
            SELECT id, parent_id, depth FROM runs WHERE session_id = %(sid)s AND id = %(leaf)s
            UNION ALL
            SELECT r.id, r.parent_id, r.depth FROM path CROSS JOIN LATERAL (
                SELECT id, parent_id, depth FROM runs
                WHERE session_id = %(sid)s AND id = path.parent_id LIMIT 1
            ) r
            WHERE path.depth > %(lo)s
        )
        SELECT """
    + ", ".join(f"r.{column.strip()}" for column in RUN_COLUMNS.split(","))
    + """, f.count, f.index, f.previous_id, f.next_id
        FROM path JOIN runs r ON r.session_id = %(sid)s AND r.id = path.id
        CROSS JOIN LATERAL (
            SELECT count(*) AS count,
                   count(*) FILTER (WHERE s.id <= r.id) AS index,
                   max(s.id) FILTER (WHERE s.id < r.id) AS previous_id,
                   min(s.id) FILTER (WHERE s.id > r.id) AS next_id
            FROM runs s
            WHERE s.session_id = %(sid)s
              AND (s.parent_id = r.parent_id OR (s.parent_id IS NULL AND r.parent_id IS NULL))
        ) f
        WHERE path.depth BETWEEN %(lo)s AND %(hi)s
        ORDER BY path.depth""",
    "tool_calls_of_runs": f"""
        SELECT {TOOL_CALL_COLUMNS} FROM tool_calls
        WHERE session_id = %(sid)s
          AND run_id IN (SELECT jsonb_array_elements_text(%(run_ids)s::jsonb)::bigint)
        ORDER BY run_id, id""",
    # By id alone (deep links), served by tool_calls_id.
    "tool_call": f"SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE id = %(id)s",
    # Compaction (see sqlite/sql.py).
    "item_place": """
        SELECT run_id, position FROM items WHERE session_id = %(sid)s AND id = %(id)s""",
    "insert_compaction_run": """
        INSERT INTO runs (session_id, parent_id, depth, item_count, kind, prior_run_id,
                          created_at, updated_at)
        VALUES (%(sid)s, %(parent_id)s, %(depth)s, %(item_count)s, 'compaction',
                %(prior_run_id)s, %(now)s, %(now)s)
        RETURNING id""",
    "mark_compacted": _PATH_UP.format(up=_VIEW, stop="WHERE r.depth >= %(depth)s")
    + """
        UPDATE runs SET status = 'compacted', compacted_by = %(by)s
        WHERE session_id = %(sid)s AND id IN (SELECT id FROM path)""",
}


# ---------------------------------------------------------------------------------------------
# Query and analytics (core/queries.py; the names and results of sqlite/sql.py QUERY_SQL). Every
# optional parameter is cast, so that Postgres knows its type when it is NULL.

_SESSIONS = f"""
    SELECT {SESSION_COLUMNS} FROM sessions
    WHERE {{user}} ({{order}}, session_id) < (
        coalesce(%(cursor_time)s::timestamptz, 'infinity'), coalesce(%(cursor_sid)s::text, ''))
      AND (%(created_after)s::timestamptz IS NULL OR created_at > %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR updated_at > %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR updated_at < %(updated_before)s)
      AND (%(meta)s::jsonb IS NULL OR metadata @> %(meta)s::jsonb)
    ORDER BY {{order}} DESC, session_id DESC LIMIT %(limit)s"""

_CALL_DRIVERS = {
    # By run alone: the run's session first (runs_id), so the rest is one session's range.
    "run": """session_id = (SELECT session_id FROM runs WHERE id = %(run_id)s)
        AND run_id = %(run_id)s""",
    "session": "session_id = %(sid)s",
    "tool": _TOOL_NAME_IS,
    "all": "TRUE",
}
_CALL_FILTERS = """
      AND (%(sid)s::text IS NULL OR session_id = %(sid)s)
      AND (%(run_id)s::bigint IS NULL OR run_id = %(run_id)s)
      AND (%(tool_name)s::text IS NULL OR tool_name = %(tool_name)s)
      AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
      AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s)"""
_FAILED = failed_sql()  # the one rule: model.call_failed

_USAGE_FILTERS = """
      (%(sid)s::text IS NULL OR r.session_id = %(sid)s)
      AND (%(user_id)s::text IS NULL OR s.user_id = %(user_id)s)
      AND (%(since)s::timestamptz IS NULL OR r.created_at >= %(since)s)
      AND (%(until)s::timestamptz IS NULL OR r.created_at < %(until)s)"""
_TOKENS = "requests, input_tokens, output_tokens, total_tokens, cached_tokens, reasoning_tokens"
_SUMS = ", ".join(f"sum({column})" for column in _TOKENS.split(", "))
_RUN_SUMS = ", ".join(f"sum(r.{column})" for column in _TOKENS.split(", "))
_USAGE_KEYS = {
    "session": "r.session_id",
    "user": "s.user_id",
    "day": "to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}
_RESPONSE_KEYS = {"model": "model", "agent": "agent_name"}
# ts_headline's options are constants; queries.search turns the marks into offsets.
_HEADLINE = (
    f"StartSel={SNIPPET_MARKS[0]}, StopSel={SNIPPET_MARKS[1]}, MaxWords=24, MinWords=8, "
    "MaxFragments=1"
)

QUERY_SQL: dict[str, str | None] = {
    **{
        f"sessions_by_{order}" + ("_user" if user else ""): _SESSIONS.format(
            order=order, user="user_id = %(user_id)s AND" if user else ""
        )
        for order in ORDERS
        for user in (False, True)
    },
    "update_session_info": """
        UPDATE sessions SET user_id = coalesce(%(user_id)s::text, user_id),
            title = coalesce(%(title)s::text, title),
            metadata = coalesce(%(metadata)s::jsonb, metadata),
            updated_at = %(now)s
        WHERE session_id = %(sid)s""",
    "delete_session_returning": """
        DELETE FROM sessions WHERE session_id = %(sid)s RETURNING session_id""",
    **{
        f"{prefix}tool_calls_by_{driver}": f"""
        SELECT {TOOL_CALL_COLUMNS} FROM tool_calls
        WHERE {condition} {_CALL_FILTERS} {extra}
          AND (%(status)s::text IS NULL OR status = %(status)s
               OR (%(status)s = 'failed' AND {_FAILED}))
        ORDER BY {order} LIMIT %(limit)s"""
        for driver, condition in _CALL_DRIVERS.items()
        for prefix, extra, order in (
            ("", "", "id DESC"),
            ("slowest_", "AND duration_ms IS NOT NULL", "duration_ms DESC, id DESC"),
        )
    },
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
        FROM c LEFT JOIN p ON p.tool_name IS NOT DISTINCT FROM c.tool_name
        GROUP BY c.tool_name, p.p50, p.p95
        ORDER BY count(*) DESC, c.tool_name"""
        for driver, condition in _CALL_DRIVERS.items()
    },
    "items_of_runs": """
        SELECT run_id, id, data FROM items
        WHERE session_id = %(sid)s
          AND run_id IN (SELECT jsonb_array_elements_text(%(run_ids)s::jsonb)::bigint)
        ORDER BY run_id, position""",
    "insert_model_response": f"""
        INSERT INTO model_responses (session_id, run_id, agent_name, model, response_id,
            request_id, {_TOKENS}, started_at, completed_at, latency_ms)
        VALUES (%(sid)s, %(run_id)s, %(agent_name)s, %(model)s, %(response_id)s,
            %(request_id)s, %(requests)s, %(input_tokens)s, %(output_tokens)s,
            %(total_tokens)s, %(cached_tokens)s, %(reasoning_tokens)s, %(started_at)s,
            %(completed_at)s, %(latency_ms)s)""",
    "set_run_agent": """
        UPDATE runs SET agent_name = %(agent_name)s, model = %(model)s
        WHERE session_id = %(sid)s AND id = %(id)s""",
    "set_tool_timing": f"""
        UPDATE tool_calls SET started_at = %(started_at)s, completed_at = %(completed_at)s,
            duration_ms = %(duration_ms)s
        WHERE session_id = %(sid)s AND id = (
            SELECT max(id) FROM tool_calls WHERE session_id = %(sid)s AND {_CALL_ID_IS})""",
    **{
        f"model_responses_by_{driver}": f"""
        SELECT id, session_id, run_id, agent_name, model, response_id, request_id, {_TOKENS},
            started_at, completed_at, latency_ms
        FROM model_responses WHERE {condition} ORDER BY id DESC LIMIT %(limit)s"""
        for driver, condition in (
            ("run", _CALL_DRIVERS["run"]),
            ("session", "session_id = %(sid)s"),
            ("all", "TRUE"),
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
    **{
        f"usage_by_{group}": f"""
        SELECT k, count(DISTINCT run_id), {_SUMS} FROM (
            SELECT m.{column} AS k, m.run_id, {", ".join(f"m.{c}" for c in _TOKENS.split(", "))}
            FROM model_responses m
            JOIN runs r ON r.session_id = m.session_id AND r.id = m.run_id
            JOIN sessions s ON s.session_id = r.session_id
            WHERE {_USAGE_FILTERS}
            UNION ALL
            SELECT r.{column}, r.id, {", ".join(f"r.{c}" for c in _TOKENS.split(", "))}
            FROM runs r JOIN sessions s ON s.session_id = r.session_id
            WHERE {_USAGE_FILTERS}
              AND NOT EXISTS (SELECT 1 FROM model_responses m
                              WHERE m.session_id = r.session_id AND m.run_id = r.id)
        ) u
        GROUP BY k"""
        for group, column in _RESPONSE_KEYS.items()
    },
    # Rank and limit first, then headline only the rows returned (ts_headline re-parses the
    # text). to_tsquery gets the query as rendered by queries.SearchQuery: quoted lexemes
    # only, so user text is never tsquery syntax.
    **{
        name: f"""
        SELECT h.id, h.session_id, h.run_id, h.type, h.role, h.created_at,
            ts_headline('{TS_CONFIG}', left(h.text, 100000), to_tsquery('{TS_CONFIG}', %(tsq)s),
                        '{_HEADLINE}'),
            h.rank
        FROM (
            SELECT i.id, i.session_id, i.run_id, i.type, i.role, i.created_at, i.text,
                {rank} AS rank
            FROM items i, to_tsquery('{TS_CONFIG}', %(tsq)s) q
            WHERE i.search_vector @@ q
              AND (%(sid)s::text IS NULL OR i.session_id = %(sid)s)
              AND (%(roles)s::jsonb IS NULL
                   OR i.role IN (SELECT jsonb_array_elements_text(%(roles)s::jsonb)))
              AND (%(types)s::jsonb IS NULL
                   OR i.type IN (SELECT jsonb_array_elements_text(%(types)s::jsonb)))
              AND i.id NOT IN (SELECT jsonb_array_elements_text(%(exclude)s::jsonb)::bigint)
            ORDER BY {order}
            LIMIT %(limit)s
        ) h
        ORDER BY {order.replace("i.id", "h.id").replace("rank", "h.rank")}"""
        for name, rank, order in (
            ("search", "ts_rank_cd(i.search_vector, q)", "rank DESC, i.id"),
            ("search_recent", "0.0::float8", "i.id DESC"),
        )
    },
}
SQL.update(QUERY_SQL)

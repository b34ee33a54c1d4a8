"""PostgreSQL's SQL: its ``SYNTAX``, and the statements whose text differs in shape.

Written, like every statement, with ``:name`` placeholders; ``DIALECT`` renders them as
psycopg's ``%(name)s`` (a literal % as %%) and joins the shared statements in (those of
``core.statements``, and those of ``core.shared_sql`` rendered with ``SYNTAX``). Every optional
parameter is cast, so that PostgreSQL knows its type when it is NULL.

Scale-out: every statement on a session's rows filters each table it touches by
``session_id`` (``tests/test_sql_scope.py``), so the tables can be distributed by it.
"""

from __future__ import annotations

from ..core import append_sql as A
from ..core import catalogue_sql as C
from ..core import dataset_sql as D
from ..core import search_sql
from ..core import search_sql as Q
from ..core import statements as S
from ..core.catalogue_sql import SESSION_TOTALS
from ..core.dialect import Dialect, pyformat
from ..core.ops import Capability, Statement
from ..core.search import SNIPPET_MARKS
from ..core.sql import claim_operation_sql
from ..core.syntax import Syntax
from ..core.tables import (
    RUN_COLUMNS,
    TOOL_CALL_COLUMNS,
    RunRow,
    columns,
    session_columns,
)
from ..domain.model import FAILED
from .migrations import ERROR_VECTOR, SEARCHED_ERROR

__all__ = ["BYTES", "CAPABILITIES", "DIALECT", "RUN_ROWS", "SQL", "SYNTAX", "TS_CONFIG"]

CAPABILITIES = Capability.IDS_AHEAD | Capability.SEARCH_PROBE | Capability.STATISTICS

# The text search configuration of items.search_vector, made by migration 7: searches use it too.
TS_CONFIG = "turnstore_english"


def _key_is(column: str, param: str) -> str:
    """A lookup by call_id, tool name or span kind, through the prefix indexes of migrations
    5 and 11 (a btree entry holds at most a third of a page)."""
    return f"left({column}, 256) = left(:{param}, 256) AND {column} = :{param}"


# The active path, walked from the head up through parent_id (see sqlite/sql.py for why):
# each step is one primary-key lookup, and every step names the session so that it stays on
# the session's shard.
#
# Walks and per-run lookups are written as LATERAL subqueries with LIMIT / OFFSET 0, which
# the planner cannot flatten into a join: as plain joins, a planner that thinks a session has
# few rows (fresh statistics, or a generic plan) hashes all of the session's runs or items at
# every step, and a walk of n runs costs O(n^2) instead of n index lookups.
_PATH_UP = """
WITH RECURSIVE path (id, parent_id, depth, seen) AS (
    SELECT r.id, {up}, r.depth, r.item_count
    {start}
    UNION ALL
    SELECT r.id, r.up, r.depth, path.seen + r.item_count
    FROM path CROSS JOIN LATERAL (
        SELECT id, {up} AS up, depth, item_count FROM runs
        WHERE session_id = :sid AND id = path.parent_id LIMIT 1
    ) r
    {stop}
)"""
# The step up: the tree's, or the model's view (see sqlite/sql.py).
_TREE = "parent_id"
_VIEW = "CASE WHEN kind IS NULL THEN parent_id ELSE prior_run_id END"

# Where a path starts: at the session's head, or at the run :leaf (a branch read without
# moving the head).
_FROM_HEAD = (
    "FROM sessions s JOIN runs r ON r.session_id = :sid AND r.id = s.head_run_id "
    "WHERE s.session_id = :sid"
)
_FROM_LEAF = "FROM runs r WHERE r.session_id = :sid AND r.id = :leaf"


def _path_up(up: str, stop: str, start: str = _FROM_HEAD) -> str:
    return _PATH_UP.format(up=up, stop=stop, start=start)


# A run and every run below it, through runs_session_parent at each step.
_BELOW = """
WITH RECURSIVE below (id) AS (
    SELECT id FROM runs WHERE session_id = :sid AND id = :id
    UNION ALL
    SELECT r.id FROM below CROSS JOIN LATERAL (
        SELECT id FROM runs WHERE session_id = :sid AND parent_id = below.id OFFSET 0
    ) r
)"""

# The tables that hold a run's rows (each by session_id, run_id). Their foreign keys name the
# session, not the run (migration 18: PostgreSQL checks a key row by row, seven lookups per
# deleted run), so a statement that deletes runs deletes their rows too.
RUN_ROWS = ("items", "tool_calls", "model_responses", "spans", "branch_names", "annotations")


def _delete_runs() -> str:
    """The runs of the CTE ``below (id)`` (of session :sid, each once) deleted with every row
    they hold, in one statement: a set delete per table, each a join to ``below`` (``IN``
    would hash it again to drop duplicates it cannot have). The tail of its ``WITH``."""
    rows = "".join(
        f",\ngone_{table} AS (DELETE FROM {table} USING below "
        f"WHERE {table}.session_id = :sid AND {table}.run_id = below.id)"
        for table in RUN_ROWS
    )
    return (
        f"{rows}\nDELETE FROM runs USING below WHERE runs.session_id = :sid AND runs.id = below.id"
    )


# The run {of} names, with how many children it has.
_RUN_CHILDREN = """
    SELECT a.id, a.parent_id,
        (SELECT count(*) FROM runs c WHERE c.session_id = :sid AND c.parent_id = a.id)
            AS children
    FROM runs a WHERE a.session_id = :sid AND a.id = {of} LIMIT 1"""

# The items of each run of ``path``, through the (session_id, run_id, position) key.
_PATH_ITEMS = """
    FROM path CROSS JOIN LATERAL (
        SELECT id, data, position FROM items
        WHERE session_id = :sid AND run_id = path.id
        ORDER BY position {order} {limit}
    ) i"""

# A whole path read up from the run {leaf} (the head, or :leaf): one statement of two arms.
# Most sessions are unbranched: their path is every run they hold, so its items are the
# session's, read in one scan of the (session_id, run_id, position) key, no walk and no sort
# (bench/README.md: ~3 against ~7-10 ms of the server at 4,000 items). ``line`` says whether
# that holds: the leaf's depth + 1 is the session's run_count (the writes' total: a branch or a
# head rewound above runs makes it more; the runs are read only past this, LATERAL below the
# leaf's row, else ``line`` is empty), and in id order each run's parent is the run before it
# (the first's none), none is a compaction (whose step up is the model's view) and the last
# is the leaf. Then the walk from the leaf meets every run, in id order, whatever order ids
# were given in; a run deleted or written by hand (run_count no longer its runs, a parent
# missing) sends the read to the walk. Items left by a run deleted by hand without them
# (docs/reliability.md) are read on a line once the totals are recounted.
# The check reads the runs newest first and stops at the first that breaks the line: a
# compaction is a child of the head, so a compacted session (the SDK's compaction session
# reads it every turn) agrees with run_count, and a check of all its runs would cost their
# scan (~20 ms at 10,000) for a walk of the few since the compaction (~0.1 ms). Newest first
# it reads no more runs than the walk does, plus one.
# One arm returns rows: the line's scan is limited to NULL (no limit) or 0 (it reads nothing),
# a value the planner cannot see, so it plans for the first rows: the key in its order, never a
# sort of the session's items; the walk is below a one-time filter that starts it only if not.
_LINE = """,
line (fast) AS MATERIALIZED (
    SELECT NOT EXISTS (
        SELECT FROM (SELECT id, parent_id, kind, lead(id) OVER (ORDER BY id DESC) AS below
                     FROM runs WHERE session_id = :sid) r
        WHERE id > h.id OR kind IS NOT NULL OR parent_id IS DISTINCT FROM below
    )
    FROM (SELECT r.id FROM sessions s JOIN runs r ON r.session_id = :sid AND r.id = {leaf}
          WHERE s.session_id = :sid AND s.run_count = r.depth + 1) h
)
SELECT data FROM (
    SELECT data FROM items WHERE session_id = :sid ORDER BY run_id, position
    LIMIT CASE WHEN (SELECT fast FROM line) THEN NULL ELSE 0 END
) line_items
UNION ALL
SELECT data FROM (
    SELECT i.data"""

_WALKED = """
    WHERE (SELECT fast FROM line) IS NOT TRUE
    ORDER BY path.depth, i.position
) path_items"""


def _whole_path(start: str, leaf: str) -> str:
    """A whole path's items, oldest first: a line's read, else the walk up from ``start``."""
    return (
        _path_up(up=_VIEW, stop="", start=start)
        + _LINE.format(leaf=leaf)
        + _PATH_ITEMS.format(order="", limit="OFFSET 0")
        + _WALKED
    )


_OWN: dict[Statement, str] = {
    S.CREATE_VERSION_TABLE: """CREATE TABLE IF NOT EXISTS turnstore_schema (
        version INTEGER PRIMARY KEY,
        applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )""",
    S.VERSION_TABLE_EXISTS: "SELECT to_regclass('turnstore_schema') IS NOT NULL AS present",
    S.DATABASE_IDENTITY: """
        SELECT concat_ws(' ', pg_postmaster_start_time(), d.oid, current_schema()) AS identity
        FROM pg_database d WHERE d.datname = current_database()""",
    # The tables a bulk load writes, analysed as autovacuum would (core.transfer): their
    # statistics when a session was small or absent make the planner walk its runs through
    # runs_session_totals, a scan of the session at every step. Past autovacuum's threshold
    # (50 rows + a tenth of those the statistics counted), or past 10,000 runs whatever the
    # tables held: a session that long is quadratic to walk on a wrong plan, and writing it
    # costs far more than the analysis (a sample of at most 30,000 rows a table).
    S.STATISTICS_BEHIND: """
        SELECT CAST(:runs AS bigint) > LEAST(50 + GREATEST(reltuples, 0) / 10, 10000) AS behind
        FROM pg_class WHERE oid = to_regclass('runs')""",
    S.ANALYZE_TABLES: f"ANALYZE sessions, runs, {', '.join(RUN_ROWS)}",
    # Always "forget": the DELETE is queued and travels with the next statement (no round
    # trip of its own), and a subquery in an INSERT is not one Citus routes: so no guess of
    # the head either (the row lock is taken after the claim, so it could be stale anyway).
    S.CLAIM_OPERATION: claim_operation_sql("true", "CAST(:result AS text)"),
    # The lock that serialises the writers of one session is its row's: ENSURE_SESSION's ON
    # CONFLICT DO UPDATE takes it (even when the WHERE is false), or LOCK_SESSION where the
    # session is not to be created. LOCK_HEAD then reads the head in a statement of its own,
    # whose snapshot is taken once the lock is held (core.lock.lock_session): a statement that
    # waited for the lock would join the session row, re-read, to the head run it read before
    # waiting, which the writer it waited for may have deleted (NULL run columns).
    S.LOCK_SESSION: "SELECT 1 FROM sessions WHERE session_id = :sid FOR UPDATE",
    # Without a table: one statement wherever the session's rows live (Citus' coordinator).
    A.NEXT_RUN_ID: "SELECT nextval(pg_get_serial_sequence('runs', 'id')) AS id",
    S.LOCK_HEAD: f"""
        SELECT s.head_run_id AS id, r.depth, r.item_count, {_VIEW} AS parent_id,
            EXISTS (SELECT 1 FROM runs c
                    WHERE c.session_id = :sid AND c.parent_id = r.id) AS has_children,
            NULL::bigint AS indexed_through, r.status
        FROM sessions s
        LEFT JOIN runs r ON r.session_id = :sid AND r.id = s.head_run_id
        WHERE s.session_id = :sid""",
    S.OPEN_TOOL_CALLS: """
        SELECT call_id, max(id) AS id FROM tool_calls
        WHERE session_id = :sid AND output_item_id IS NULL
          AND left(call_id, 256) = ANY (ARRAY(
              SELECT left(c, 256) FROM jsonb_array_elements_text(:call_ids::jsonb) c))
          AND call_id = ANY (ARRAY(SELECT jsonb_array_elements_text(:call_ids::jsonb)))
        GROUP BY call_id""",
    S.PATH_ITEMS: _whole_path(_FROM_HEAD, "s.head_run_id"),
    S.PATH_ITEMS_TAIL: _path_up(up=_VIEW, stop="WHERE path.seen < :limit")
    + "SELECT i.id, i.data"
    + _PATH_ITEMS.format(order="DESC", limit="LIMIT :limit")
    + " ORDER BY path.depth DESC, i.position DESC LIMIT :limit",
    S.PATH_RUNS: _path_up(up=_TREE, stop="")
    + f"""
        SELECT r.* FROM path CROSS JOIN LATERAL (
            SELECT {RUN_COLUMNS} FROM runs WHERE session_id = :sid AND id = path.id LIMIT 1
        ) r
        ORDER BY r.depth""",
    S.PATH_ITEMS_AT: _whole_path(_FROM_LEAF, ":leaf"),
    S.PATH_ITEMS_TAIL_AT: _path_up(up=_VIEW, stop="WHERE path.seen < :limit", start=_FROM_LEAF)
    + "SELECT i.id, i.data"
    + _PATH_ITEMS.format(order="DESC", limit="LIMIT :limit")
    + " ORDER BY path.depth DESC, i.position DESC LIMIT :limit",
    S.PATH_RUNS_AT: _path_up(up=_TREE, stop="", start=_FROM_LEAF)
    + f"""
        SELECT r.* FROM path CROSS JOIN LATERAL (
            SELECT {RUN_COLUMNS} FROM runs WHERE session_id = :sid AND id = path.id LIMIT 1
        ) r
        ORDER BY r.depth""",
    # Two arms instead of IS NOT DISTINCT FROM, which no index serves.
    S.CHILDREN: f"""
        SELECT {RUN_COLUMNS} FROM runs
        WHERE session_id = :sid AND parent_id = :parent_id
        UNION ALL
        SELECT {RUN_COLUMNS} FROM runs
        WHERE session_id = :sid AND parent_id IS NULL AND :parent_id::bigint IS NULL
        ORDER BY id""",
    S.HEAD_LEAVES: """
        WITH RECURSIVE below (id) AS (
            SELECT head_run_id FROM sessions WHERE session_id = :sid
            UNION ALL
            SELECT r.id FROM below CROSS JOIN LATERAL (
                SELECT id FROM runs WHERE session_id = :sid AND parent_id = below.id OFFSET 0
            ) r
        )
        SELECT b.id FROM below b
        WHERE NOT EXISTS (SELECT 1 FROM runs c
                          WHERE c.session_id = :sid AND c.parent_id = b.id)""",
    # The climb stops past the first ancestor that is a fork or the head (see sqlite/sql.py).
    S.ANCESTORS_CHILD_COUNTS: f"""
        WITH RECURSIVE up (id, parent_id, children, level) AS (
            SELECT p.id, p.parent_id, p.children, 1 FROM runs r
            CROSS JOIN LATERAL ({_RUN_CHILDREN.format(of="r.parent_id")}) p
            WHERE r.session_id = :sid AND r.id = :id
            UNION ALL
            SELECT p.id, p.parent_id, p.children, up.level + 1
            FROM up CROSS JOIN LATERAL ({_RUN_CHILDREN.format(of="up.parent_id")}) p
            WHERE up.children = 1 AND up.id IS DISTINCT FROM :head::bigint
        )
        SELECT id, parent_id, children FROM up ORDER BY level""",
    S.DELETE_SUBTREE: _BELOW + _delete_runs(),
    S.DELETE_RUN: "WITH below (id) AS (SELECT CAST(:id AS bigint))" + _delete_runs(),
    S.IS_ANCESTOR: _path_up(up=_TREE, stop="WHERE r.depth >= :depth")
    + """
        SELECT 1 AS found FROM path WHERE id = :id""",
    # The search index needs no batching here (no SEARCH_BACKLOG): search_vector is a
    # generated column, kept by every INSERT, and GIN's pending list already batches its
    # updates.
    S.SESSION_ITEMS: """
        SELECT run_id, id, data FROM items WHERE session_id = :sid
        ORDER BY run_id, position""",
    # The web viewer (see sqlite/sql.py): the branch below a run, a window of a branch with
    # each run's place among its siblings, and the tool calls of a window's runs.
    S.DESCEND: _BELOW
    + """
        SELECT id, depth FROM runs WHERE session_id = :sid AND id = coalesce(
            (SELECT b.id FROM below b JOIN sessions s ON s.head_run_id = b.id
             WHERE s.session_id = :sid),
            (SELECT max(id) FROM below))""",
    S.PATH_WINDOW: f"""
        WITH RECURSIVE path (id, parent_id, depth) AS (
            SELECT id, parent_id, depth FROM runs WHERE session_id = :sid AND id = :leaf
            UNION ALL
            SELECT r.id, r.parent_id, r.depth FROM path CROSS JOIN LATERAL (
                SELECT id, parent_id, depth FROM runs
                WHERE session_id = :sid AND id = path.parent_id LIMIT 1
            ) r
            WHERE path.depth > :lo
        )
        SELECT {columns(RunRow, "r")},
            f.sibling_count, f.sibling_index, f.previous_id, f.next_id
        FROM path JOIN runs r ON r.session_id = :sid AND r.id = path.id
        CROSS JOIN LATERAL (
            SELECT count(*) AS sibling_count,
                   count(*) FILTER (WHERE s.id <= r.id) AS sibling_index,
                   max(s.id) FILTER (WHERE s.id < r.id) AS previous_id,
                   min(s.id) FILTER (WHERE s.id > r.id) AS next_id
            FROM runs s
            WHERE s.session_id = :sid
              AND (s.parent_id = r.parent_id OR (s.parent_id IS NULL AND r.parent_id IS NULL))
        ) f
        WHERE path.depth BETWEEN :lo AND :hi
        ORDER BY path.depth""",
    # A dataset's record (see sqlite/sql.py): the walk up and each run's items as LATERAL
    # lookups on the session's keys.
    D.DATASET_ITEMS: f"""
        WITH RECURSIVE path (id, up) AS (
            SELECT id, {_VIEW} FROM runs WHERE session_id = :sid AND id = :run_id
            UNION ALL
            SELECT r.id, r.up FROM path CROSS JOIN LATERAL (
                SELECT id, {_VIEW} AS up FROM runs
                WHERE session_id = :sid AND id = path.up LIMIT 1
            ) r
        )
        SELECT path.id AS run_id, i.id, i.data"""
    + _PATH_ITEMS.format(order="", limit="OFFSET 0")
    + " ORDER BY path.id, i.position",
    S.TOOL_CALLS_OF_RUNS: f"""
        SELECT {TOOL_CALL_COLUMNS} FROM tool_calls
        WHERE session_id = :sid
          AND run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb)::bigint)
        ORDER BY run_id, id""",
    # Compaction (see sqlite/sql.py).
    S.MARK_COMPACTED: _path_up(up=_VIEW, stop="WHERE r.depth >= :depth")
    + """
        UPDATE runs SET status = 'compacted', compacted_by = :by
        WHERE session_id = :sid AND id IN (SELECT id FROM path)""",
}


# ---------------------------------------------------------------------------------------------
# Queries and analytics (core/queries.py; see sqlite/sql.py)

# The catalogue's filters (queries.SessionFilter), each NULL for "any". A failed run or tool
# call is a session's total (migration 17); a filter on what else its runs hold probes the
# session's runs by their session_id indexes.
_SESSION_FILTERS = f"""
      (:created_after::timestamptz IS NULL OR created_at > :created_after)
      AND (:created_before::timestamptz IS NULL OR created_at < :created_before)
      AND (:updated_after::timestamptz IS NULL OR updated_at > :updated_after)
      AND (:updated_before::timestamptz IS NULL OR updated_at < :updated_before)
      AND (:failed_calls::boolean IS NULL OR failed_call_count > 0)
      AND (:run_status::text IS NULL OR CASE WHEN :run_status = '{FAILED}'
           THEN failed_run_count > 0
           ELSE EXISTS (SELECT 1 FROM runs r
                        WHERE r.session_id = sessions.session_id AND r.status = :run_status) END)
      AND (:meta::jsonb IS NULL OR metadata @> :meta::jsonb)
      AND (:title::text IS NULL OR strpos(lower(title), lower(:title)) > 0)
      AND (:agent::text IS NULL OR EXISTS (SELECT 1 FROM runs r
           WHERE r.session_id = sessions.session_id AND r.agent_name = :agent))
      AND (:model::text IS NULL OR EXISTS (SELECT 1 FROM runs r
           WHERE r.session_id = sessions.session_id AND r.model = :model))
      AND (:annotated::boolean IS NULL OR EXISTS (SELECT 1 FROM annotations a
           WHERE a.session_id = sessions.session_id
             AND (:annotation::text IS NULL OR a.name = :annotation)
             AND (:annotation_min::double precision IS NULL OR a.value >= :annotation_min)
             AND (:annotation_max::double precision IS NULL OR a.value <= :annotation_max)))"""
# Each order: (the sort key, the cursor's type, the first page's bound): a time, or a
# session's total (its columns, kept by the writes: core/lock.py), each read through its
# index (migration 17), largest first, from the cursor on.
_SESSION_ORDERS = {
    "created_at": ("created_at", "timestamptz", "'infinity'"),
    "updated_at": ("updated_at", "timestamptz", "'infinity'"),
    **{order: (key, "bigint", "9223372036854775807") for order, key in SESSION_TOTALS.items()},
}
_SESSIONS = f"""
    SELECT {session_columns("sessions")}, {{key}} AS sort_key FROM sessions
    WHERE {{user}} ({{key}}, session_id) < (
        coalesce(:cursor_key::{{kind}}, {{first}}), coalesce(:cursor_sid::text, ''))
      AND {_SESSION_FILTERS}
    ORDER BY {{key}} DESC, session_id DESC LIMIT :limit"""
_COUNT_SESSIONS = f"SELECT count(*) AS n FROM sessions WHERE {{user}} {_SESSION_FILTERS}"

# ts_headline's options are constants; search.search turns the marks into offsets.
_HEADLINE = (
    f"StartSel={SNIPPET_MARKS[0]}, StopSel={SNIPPET_MARKS[1]}, MaxWords=24, MinWords=8, "
    "MaxFragments=1"
)
SYNTAX = Syntax(
    casts=True,
    scoped=True,
    true="TRUE",
    same="IS NOT DISTINCT FROM",
    day=lambda column: f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
    values=lambda name: f"SELECT jsonb_array_elements_text(:{name}::jsonb)",
    key_is=_key_is,
    greatest="GREATEST",
    least="LEAST",
    json_members="jsonb_each",
    json_object="jsonb_object_agg",
    json_count=lambda alias: f"jsonb_typeof({alias}.value) = 'number'",
    indexed_by=lambda index: "",
    capped_sum=lambda column: f"LEAST(coalesce(sum({column}), 0), 9223372036854775807)::bigint",
)
"""PostgreSQL's tokens in the statements written once (core.shared_sql)."""


# A search (core.search) reads the newest matches' ids, then ranks a block of them
# (ts_rank_cd reads only the item's own vector: no corpus statistics; normalised by
# 1 + the log of the item's length, as SQLite's rank prefers the shorter), then headlines
# those of the page (ts_headline re-parses the text). The newest matches come from a
# backward scan of items_id filtered by @@ for a common word, from the GIN index for a rare
# one: the planner's choice, by the words' statistics. to_tsquery gets the query as
# rendered by search.SearchQuery: quoted lexemes only, so user text is never tsquery syntax.
# The "_ERROR" statements search tool calls' errors (migration 14's index), each found as
# its item, unless that item's text matches too.
_FILTERS = search_sql.search_filters(SYNTAX)
_QUERY = f"to_tsquery('{TS_CONFIG}', :tsq)"
_ITEM_MATCHES = (
    f"""
            FROM items i, {_QUERY} q
            WHERE i.search_vector @@ q"""
    + _FILTERS
)
_ERROR_MATCHES = (
    f"""
            FROM tool_calls t
                JOIN items i ON i.session_id = t.session_id AND i.id = {search_sql.error_item()},
                {_QUERY} q
            WHERE {SEARCHED_ERROR.format(t="t.")} AND {ERROR_VECTOR.format(t="t.")} @@ q
              AND NOT i.search_vector @@ q"""
    + _FILTERS
)
_IDS = "SELECT i.id{matches} ORDER BY i.id DESC LIMIT :n"
# A word rare lately, read through its index below the head: the query a subquery's value, so
# that the plan is made for a rare word whatever the word's statistics say (for a word common
# long ago they say "read the table and sort it": tens of milliseconds to compile by JIT, for a
# branch that seldom runs).
_RARE_MATCHES = (
    f"""
            FROM items i, (SELECT {_QUERY} AS q OFFSET 0) q
            WHERE i.search_vector @@ q.q"""
    + _FILTERS
)
# The head reads exactly the newest :probe items (a backward scan with a limit), filters and
# all, and stops at :n matches; what it found gates the reads below it (a one-time filter above
# each read, which is not started when the gate is shut: a gate inside it would start a
# parallel plan's workers even so). Below a rare word's head, and between two bounds, ids are
# ordered by an expression, so that no plan walks items_id backwards looking for a word it
# holds only far back (the planner guesses a word it has no statistics for at 0.2% of items).
_HEAD = f"""
        WITH head AS MATERIALIZED (
            SELECT h.id, h.hit, h.place = :probe AS last
            FROM (SELECT i.id, i.search_vector @@ q{_FILTERS} AS hit,
                         row_number() OVER (ORDER BY i.id DESC) AS place
                  FROM (SELECT i.id, i.session_id, i.run_id, i.type, i.role, i.created_at,
                               i.search_vector
                        FROM items i ORDER BY i.id DESC LIMIT :probe) i, {_QUERY} q) h
            WHERE h.hit OR h.place = :probe
            LIMIT :n),
        seen AS (SELECT count(*) FILTER (WHERE hit) AS hits, min(id) AS bottom,
                        coalesce(bool_or(last), FALSE) AS reached
                 FROM head)
        SELECT head.id, head.hit, head.last AND seen.hits BETWEEN 1 AND :scan - 1 AS window
        FROM head, seen
        UNION ALL
        SELECT below.id, TRUE, FALSE
        FROM (SELECT i.id{_ITEM_MATCHES} AND i.id < (SELECT bottom FROM seen)
              ORDER BY i.id DESC LIMIT (SELECT :n - hits FROM seen)) below
        WHERE (SELECT reached AND hits >= :scan FROM seen)
        UNION ALL
        SELECT below.id, TRUE, FALSE
        FROM (SELECT i.id{_RARE_MATCHES} AND i.id + 0 < (SELECT bottom FROM seen)
              ORDER BY i.id + 0 DESC LIMIT :n) below
        WHERE (SELECT reached AND hits = 0 FROM seen)"""
_IDS_BETWEEN = (
    "SELECT i.id" + _ITEM_MATCHES + " AND i.id BETWEEN :lo AND :hi ORDER BY i.id + 0 DESC LIMIT :n"
)
_HITS = f"""
        SELECT h.id, h.session_id, h.run_id, h.type, h.role, h.created_at,
            CASE WHEN :snippets THEN ts_headline('{TS_CONFIG}', left(h.text, 100000), {_QUERY},
                                                 '{_HEADLINE}') END AS snippet,
            h.rank, h.exact
        FROM (
            SELECT i.id, i.session_id, i.run_id, i.type, i.role, i.created_at, {{text}} AS text,
                CASE WHEN :ranked THEN ts_rank_cd({{vector}}, q, 1) ELSE 0.0 END AS rank,
                coalesce({{vector}} @@ to_tsquery('{TS_CONFIG}', :phrase_tsq::text), FALSE)
                    AS exact
            {{matches}}
              AND i.id = ANY (ARRAY(SELECT jsonb_array_elements_text(:ids::jsonb)::bigint))
        ) h"""


def _statements(matches: str, vector: str, text: str) -> tuple[str, str]:
    """A source's ids and hits statements."""
    return (
        _IDS.format(matches=matches),
        _HITS.format(vector=vector, text=text, matches=matches),
    )


_SOURCES: dict[tuple[Statement, ...], tuple[str, ...]] = {
    (Q.SEARCH_ITEM_IDS, Q.SEARCH_ITEM_HITS): _statements(
        _ITEM_MATCHES, "i.search_vector", "i.text"
    ),
    (Q.SEARCH_ERROR_IDS, Q.SEARCH_ERROR_HITS): _statements(
        _ERROR_MATCHES, ERROR_VECTOR.format(t="t."), "t.error"
    ),
}
_SEARCHES = {
    # On one line: psycopg keeps its parse of a text's placeholders for texts of up to 4 KiB
    # only, and parses a longer one again at every call (~0.5 ms of CPU); its only literal is
    # the text search configuration's name.
    Q.SEARCH_ITEM_HEAD: " ".join(_HEAD.split()),
    Q.SEARCH_ITEM_COUNT: f"SELECT count(*) AS matches FROM (SELECT i.id{_ITEM_MATCHES}"
    " LIMIT :cap) c",
    Q.SEARCH_ITEM_IDS_BETWEEN: _IDS_BETWEEN,
    **{
        statement: sql
        for group, sqls in _SOURCES.items()
        for statement, sql in zip(group, sqls, strict=True)
    },
}

_QUERIES: dict[Statement, str] = {
    **{
        statement: _SESSIONS.format(
            key=_SESSION_ORDERS[order][0],
            kind=_SESSION_ORDERS[order][1],
            first=_SESSION_ORDERS[order][2],
            user="user_id = :user_id AND" if user else "",
        )
        for (order, user), statement in C.SESSION_PAGES.items()
    },
    C.COUNT_SESSIONS: _COUNT_SESSIONS.format(user=""),
    C.COUNT_SESSIONS_USER: _COUNT_SESSIONS.format(user="user_id = :user_id AND"),
    **_SEARCHES,
}


DIALECT = Dialect(
    "PostgreSQL",
    {**_OWN, **_QUERIES},
    render=pyformat,
    capabilities=CAPABILITIES,
    syntax=SYNTAX,
    returning_id=True,
)
SQL = DIALECT.sql
"""Every statement PostgreSQL runs, as psycopg runs it."""

BYTES = frozenset((S.PATH_ITEMS, S.PATH_ITEMS_TAIL, S.PATH_ITEMS_AT, S.PATH_ITEMS_TAIL_AT))
"""The reads whose text columns (the item JSON) come as UTF-8 bytes, as SQLite's CAST(data AS
BLOB) gives them: msgspec decodes those directly, where from a str of non-ASCII text (most
items hold some) psycopg decodes the UTF-8 and msgspec encodes it back, a third of a full
read's client CPU."""

"""SQLite's SQL: its ``SYNTAX``, and the statements whose text differs in shape.

Written with ``:name`` placeholders, which are SQLite's own. The statements every dialect
runs alike are in ``core.statements``, those that differ only in small tokens in
``core.shared_sql`` (rendered with ``SYNTAX``); ``DIALECT`` joins them into the table the
driver runs.
"""

from __future__ import annotations

from ..core import catalogue_sql as C
from ..core import dataset_sql as D
from ..core import search_sql
from ..core import search_sql as Q
from ..core import statements as S
from ..core.catalogue_sql import SESSION_TOTALS
from ..core.dialect import Dialect, named
from ..core.ops import Capability, Statement
from ..core.sql import claim_operation_sql, ensure_session_sql
from ..core.syntax import Syntax
from ..core.tables import (
    RUN_COLUMNS,
    TOOL_CALL_COLUMNS,
    RunRow,
    columns,
    session_columns,
)
from ..domain.model import FAILED

__all__ = ["CAPABILITIES", "DIALECT", "SQL", "SYNTAX"]

CAPABILITIES = Capability.UPSERT_HEAD | Capability.SEARCH_BACKLOG | Capability.SDK_ADOPTION

# The active path is walked from the head up through parent_id: each step is one primary-key
# lookup, and a tail read stops as soon as the runs seen hold ``limit`` items, so reading the
# last N items costs O(N) whatever the depth of the tree or the size of the database.
_PATH_UP = """
WITH RECURSIVE path (id, parent_id, depth, seen) AS (
    SELECT r.id, {up}, r.depth, r.item_count
    {start}
    UNION ALL
    SELECT r.id, {up}, r.depth, path.seen + r.item_count
    FROM runs r JOIN path ON r.id = path.parent_id
    {stop}
)"""
# The step up: the tree's (the transcript: every run that was written), or the model's view,
# where a compaction run continues at prior_run_id above the runs it replaced.
_TREE = "r.parent_id"
_VIEW = "CASE WHEN r.kind IS NULL THEN r.parent_id ELSE r.prior_run_id END"

# Where a path starts: at the session's head, or at the run :leaf (a branch read without
# moving the head).
_FROM_HEAD = "FROM sessions s JOIN runs r ON r.id = s.head_run_id WHERE s.session_id = :sid"
_FROM_LEAF = "FROM runs r WHERE r.session_id = :sid AND r.id = :leaf"


def _path_up(up: str, stop: str, start: str = _FROM_HEAD) -> str:
    return _PATH_UP.format(up=up, stop=stop, start=start)


_INDEXED_THROUGH = "(SELECT indexed_through FROM items_fts_state)"

# A run and every run below it (runs_parent at each step).
_BELOW = """
WITH RECURSIVE below (id) AS (
    SELECT id FROM runs WHERE id = :id AND session_id = :sid
    UNION ALL
    SELECT r.id FROM runs r JOIN below ON r.parent_id = below.id
    WHERE r.session_id = :sid
)"""

# What UPSERT_HEAD returns: the head, read in the statement that creates or locks the session.
_HEAD_RETURNED = f"""
        RETURNING head_run_id AS id,
            (SELECT depth FROM runs WHERE id = head_run_id) AS depth,
            (SELECT item_count FROM runs WHERE id = head_run_id) AS item_count,
            (SELECT CASE WHEN kind IS NULL THEN parent_id ELSE prior_run_id END
             FROM runs WHERE id = head_run_id) AS parent_id,
            EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = head_run_id) AS has_children,
            {_INDEXED_THROUGH} AS indexed_through,
            (SELECT status FROM runs WHERE id = head_run_id) AS status"""

_OWN: dict[Statement, str] = {
    S.CREATE_VERSION_TABLE: """CREATE TABLE IF NOT EXISTS turnstore_schema (
        version INTEGER PRIMARY KEY,
        applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'))
    )""",
    S.VERSION_TABLE_EXISTS: """
        SELECT count(*) AS present FROM sqlite_master
        WHERE type = 'table' AND name = 'turnstore_schema'""",
    S.DATABASE_IDENTITY: "SELECT file AS identity FROM pragma_database_list WHERE name = 'main'",
    # BEGIN IMMEDIATE already holds the database's write lock: creating the session and
    # reading its head is one statement.
    S.UPSERT_HEAD: f"{S.ENSURE_SESSION.sql}{_HEAD_RETURNED}",
    **{
        statement: f"{ensure_session_sql('min', groups)}{_HEAD_RETURNED}"
        for groups, statement in C.UPSERT_HEAD_COUNTED.items()
    },
    # Whether old keys wait is one probe of the key index inside the claim, so that the
    # DELETE forgetting them runs only when there are some (rarely: a day after a key). The
    # head read for a guess is the head the write starts from, and AUTOINCREMENT's counter
    # the id of the first run it inserts: BEGIN IMMEDIATE holds the lock.
    S.CLAIM_OPERATION: claim_operation_sql(
        "EXISTS (SELECT 1 FROM operations WHERE session_id = :sid AND op_id < :before)",
        """coalesce(:result, (SELECT CAST(head_run_id AS TEXT) FROM sessions
                              WHERE session_id = :sid AND :head),
                  (SELECT CAST(seq + 1 AS TEXT) FROM sqlite_sequence
                   WHERE name = 'runs' AND :new_run))""",
    ),
    # BEGIN IMMEDIATE holds the database's write lock already: nothing more to take.
    S.LOCK_SESSION: "SELECT 1 FROM sessions WHERE session_id = :sid",
    S.LOCK_HEAD: f"""
        SELECT s.head_run_id AS id, r.depth, r.item_count, {_VIEW} AS parent_id,
            EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = r.id) AS has_children,
            {_INDEXED_THROUGH} AS indexed_through, r.status
        FROM sessions s LEFT JOIN runs r ON r.id = s.head_run_id
        WHERE s.session_id = :sid""",
    # Adopting the SDK's SQLiteSession tables in the same file (core/adoption.py).
    S.SDK_MESSAGES_TABLE: """
        SELECT 1 AS present FROM sqlite_master
        WHERE type = 'table' AND lower(name) = 'agent_messages'""",
    S.SDK_ADOPTED_IDS: "SELECT session_id FROM sdk_adopted",
    # Through the SDK's index on agent_messages (session_id, id) and sdk_adopted's key.
    S.SDK_UNADOPTED: """
        SELECT 1 AS present FROM agent_messages WHERE session_id = :sid
        AND NOT EXISTS (SELECT 1 FROM sdk_adopted WHERE session_id = :sid) LIMIT 1""",
    # through_id: the SDK's last row taken over (the adopter read up to :through; a clear or
    # delete of a history not adopted yet takes the table's last).
    S.CLAIM_SDK_ADOPTION: """
        INSERT INTO sdk_adopted (session_id, adopted_at, through_id) VALUES (:sid, :now,
            coalesce(:through, (SELECT max(id) FROM agent_messages WHERE session_id = :sid)))
        ON CONFLICT DO NOTHING RETURNING 1 AS claimed""",
    # The last row taken over, if the SDK wrote rows of the session after it.
    S.SDK_BEHIND: """
        SELECT a.through_id AS through FROM sdk_adopted a
        WHERE a.session_id = :sid AND EXISTS (
            SELECT 1 FROM agent_messages m WHERE m.session_id = :sid AND m.id > a.through_id)""",
    # Compare and set: of processes taking up the same rows, one does.
    S.ADVANCE_SDK_ADOPTION: """
        UPDATE sdk_adopted SET through_id = :through
        WHERE session_id = :sid AND through_id = :seen RETURNING 1 AS advanced""",
    S.OPEN_TOOL_CALLS: """
        SELECT call_id, max(id) AS id FROM tool_calls
        WHERE session_id = :sid AND output_item_id IS NULL
          AND call_id IN (SELECT value FROM json_each(:call_ids))
        GROUP BY call_id""",
    # A run's id is larger than its parent's (it is written after it), so a path in run-id
    # order is in depth order: SQLite walks the (run_id, position) index through the path's
    # run ids in order and sorts nothing. Item JSON is read as bytes (CAST), which msgspec
    # decodes without a str in between; the full read leaves the id out (a column less to
    # build for every item).
    S.PATH_ITEMS: _path_up(up=_VIEW, stop="")
    + """
        SELECT CAST(data AS BLOB) AS data FROM items WHERE run_id IN (SELECT id FROM path)
        ORDER BY run_id, position""",
    S.PATH_ITEMS_TAIL: _path_up(up=_VIEW, stop="WHERE path.seen < :limit")
    + """
        SELECT id, CAST(data AS BLOB) AS data FROM items WHERE run_id IN (SELECT id FROM path)
        ORDER BY run_id DESC, position DESC LIMIT :limit""",
    S.PATH_RUNS: _path_up(up=_TREE, stop="")
    + f"""
        SELECT {RUN_COLUMNS} FROM runs WHERE id IN (SELECT id FROM path) ORDER BY depth""",
    S.PATH_ITEMS_AT: _path_up(up=_VIEW, stop="", start=_FROM_LEAF)
    + """
        SELECT CAST(data AS BLOB) AS data FROM items WHERE run_id IN (SELECT id FROM path)
        ORDER BY run_id, position""",
    S.PATH_ITEMS_TAIL_AT: _path_up(up=_VIEW, stop="WHERE path.seen < :limit", start=_FROM_LEAF)
    + """
        SELECT id, CAST(data AS BLOB) AS data FROM items WHERE run_id IN (SELECT id FROM path)
        ORDER BY run_id DESC, position DESC LIMIT :limit""",
    S.PATH_RUNS_AT: _path_up(up=_TREE, stop="", start=_FROM_LEAF)
    + f"""
        SELECT {RUN_COLUMNS} FROM runs WHERE id IN (SELECT id FROM path) ORDER BY depth""",
    S.CHILDREN: f"""
        SELECT {RUN_COLUMNS} FROM runs
        WHERE session_id = :sid AND parent_id IS :parent_id ORDER BY id""",
    S.HEAD_LEAVES: """
        WITH RECURSIVE below (id) AS (
            SELECT head_run_id FROM sessions WHERE session_id = :sid
            UNION ALL
            SELECT r.id FROM runs r JOIN below ON r.parent_id = below.id
        )
        SELECT b.id FROM below b
        WHERE NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = b.id)""",
    # The climb stops past the first ancestor that is a fork or the head (delete_branch's
    # climb ends there): a short branch deep in a long conversation reads a few rows.
    S.ANCESTORS_CHILD_COUNTS: """
        WITH RECURSIVE up (id, parent_id, children, level) AS (
            SELECT p.id, p.parent_id, (SELECT count(*) FROM runs c WHERE c.parent_id = p.id), 1
            FROM runs r JOIN runs p ON p.id = r.parent_id
            WHERE r.id = :id
            UNION ALL
            SELECT p.id, p.parent_id, (SELECT count(*) FROM runs c WHERE c.parent_id = p.id),
                up.level + 1
            FROM runs p JOIN up ON p.id = up.parent_id
            WHERE up.children = 1 AND up.id IS NOT :head
        )
        SELECT id, parent_id, children FROM up ORDER BY level""",
    S.DELETE_SUBTREE: _BELOW + " DELETE FROM runs WHERE id IN (SELECT id FROM below)",
    S.DELETE_RUN: "DELETE FROM runs WHERE session_id = :sid AND id = :id",
    S.IS_ANCESTOR: _path_up(up=_TREE, stop="WHERE r.depth >= :depth")
    + """
        SELECT 1 AS found FROM path WHERE id = :id""",
    # Migration 3: feed the search index the items it lacks.
    S.INDEX_PENDING: f"""
        SELECT (SELECT coalesce(max(id), 0) FROM items) > {_INDEXED_THROUGH} AS pending""",
    S.INDEX_BACKLOG: f"""
        INSERT INTO items_fts (rowid, text)
        SELECT id, text FROM items WHERE id > {_INDEXED_THROUGH} AND text IS NOT NULL""",
    S.MARK_INDEXED: """
        UPDATE items_fts_state SET indexed_through = (SELECT coalesce(max(id), 0) FROM items)""",
    # A read-only store's searches: the backlog is copied into an index in the connection's
    # own (in-memory) temp database, which even a mode=ro or immutable connection may write.
    S.CREATE_BACKLOG_COPY: """
        CREATE VIRTUAL TABLE IF NOT EXISTS temp.items_fts_backlog USING fts5 (
            text, tokenize = 'porter unicode61 remove_diacritics 2'
        )""",
    S.CLEAR_BACKLOG_COPY: "DELETE FROM temp.items_fts_backlog",
    S.COPY_BACKLOG: f"""
        INSERT INTO temp.items_fts_backlog (rowid, text)
        SELECT id, text FROM items WHERE id > {_INDEXED_THROUGH} AND text IS NOT NULL""",
    # Through runs (indexed by session) so that items need no session index of their own.
    S.SESSION_ITEMS: """
        SELECT i.run_id, i.id, i.data FROM runs r JOIN items i ON i.run_id = r.id
        WHERE r.session_id = :sid ORDER BY r.id, i.position""",
    # The web viewer: the branch below a run (the head's if the head is below it, else the
    # newest run's), a window of a branch with each run's place among its siblings, and
    # the tool calls of a window's runs.
    S.DESCEND: _BELOW
    + """
        SELECT id, depth FROM runs WHERE id = coalesce(
            (SELECT b.id FROM below b JOIN sessions s ON s.head_run_id = b.id
             WHERE s.session_id = :sid),
            (SELECT max(id) FROM below))""",
    S.PATH_WINDOW: f"""
        WITH RECURSIVE path (id, parent_id, depth) AS (
            SELECT id, parent_id, depth FROM runs WHERE id = :leaf AND session_id = :sid
            UNION ALL
            SELECT r.id, r.parent_id, r.depth FROM runs r JOIN path ON r.id = path.parent_id
            WHERE path.depth > :lo
        )
        SELECT {columns(RunRow, "r")},
            (SELECT count(*) FROM runs s
             WHERE s.session_id = :sid AND s.parent_id IS r.parent_id) AS sibling_count,
            (SELECT count(*) FROM runs s
             WHERE s.session_id = :sid AND s.parent_id IS r.parent_id AND s.id <= r.id)
                AS sibling_index,
            (SELECT max(s.id) FROM runs s
             WHERE s.session_id = :sid AND s.parent_id IS r.parent_id AND s.id < r.id)
                AS previous_id,
            (SELECT min(s.id) FROM runs s
             WHERE s.session_id = :sid AND s.parent_id IS r.parent_id AND s.id > r.id)
                AS next_id
        FROM path JOIN runs r ON r.id = path.id
        WHERE path.depth BETWEEN :lo AND :hi
        ORDER BY path.depth""",
    # "+session_id": not an index for SQLite's planner, which would otherwise walk every call
    # of the session instead of the window's runs (tool_calls_run).
    # A dataset's record (core/dataset.py): the model's view from one run up, each step a
    # primary-key lookup, its items in run-id order (a path's ids grow downwards).
    D.DATASET_ITEMS: """
        WITH RECURSIVE path (id, up) AS (
            SELECT r.id, CASE WHEN r.kind IS NULL THEN r.parent_id ELSE r.prior_run_id END
            FROM runs r WHERE r.id = :run_id AND r.session_id = :sid
            UNION ALL
            SELECT r.id, CASE WHEN r.kind IS NULL THEN r.parent_id ELSE r.prior_run_id END
            FROM runs r JOIN path ON r.id = path.up
        )
        SELECT run_id, id, CAST(data AS BLOB) AS data FROM items
        WHERE run_id IN (SELECT id FROM path) ORDER BY run_id, position""",
    S.TOOL_CALLS_OF_RUNS: f"""
        SELECT {TOOL_CALL_COLUMNS} FROM tool_calls
        WHERE +session_id = :sid AND run_id IN (SELECT value FROM json_each(:run_ids))
        ORDER BY run_id, id""",
    # Compaction (core/compaction.py): the mark on the runs of the model's view from the head
    # up to the first one it replaced.
    S.MARK_COMPACTED: _path_up(up=_VIEW, stop="WHERE r.depth >= :depth")
    + """
        UPDATE runs SET status = 'compacted', compacted_by = :by
        WHERE id IN (SELECT id FROM path)""",
}

# ---------------------------------------------------------------------------------------------
# Queries and analytics (core/queries.py and the write side of append.py's hooks telemetry)

# The catalogue's filters (queries.SessionFilter), each NULL for "any". Metadata that is not
# JSON (SQL by hand) matches no filter, rather than failing the listing. A failed run or tool
# call is a session's total (migration 18), tested before the filters that probe the session's
# runs by their session_id indexes (SQLite tests the terms in the order written).
# A session's runs, through the covering index of what the list reads of them (migration 16).
_RUNS_OF = "FROM runs r INDEXED BY runs_session_totals WHERE r.session_id = sessions.session_id"
_SESSION_FILTERS = f"""
      (:created_after IS NULL OR created_at > :created_after)
      AND (:created_before IS NULL OR created_at < :created_before)
      AND (:updated_after IS NULL OR updated_at > :updated_after)
      AND (:updated_before IS NULL OR updated_at < :updated_before)
      AND (:failed_calls IS NULL OR failed_call_count > 0)
      AND (:run_status IS NULL OR CASE WHEN :run_status = '{FAILED}'
           THEN failed_run_count > 0
           ELSE EXISTS (SELECT 1 {_RUNS_OF} AND r.status = :run_status) END)
      AND (:meta IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:meta) f WHERE NOT EXISTS (
            SELECT 1 FROM json_each(
                CASE WHEN json_valid(sessions.metadata) THEN sessions.metadata END) m
            WHERE m.key = f.key AND m.atom IS f.atom
              AND (m.type = f.type
                   OR (m.type IN ('integer', 'real') AND f.type IN ('integer', 'real'))))))
      AND (:title IS NULL OR instr(lower(title), lower(:title)) > 0)
      AND (:agent IS NULL OR EXISTS (SELECT 1 {_RUNS_OF} AND r.agent_name = :agent))
      AND (:model IS NULL OR EXISTS (SELECT 1 {_RUNS_OF} AND r.model = :model))
      AND (:annotated IS NULL OR EXISTS (SELECT 1 FROM annotations a
           WHERE a.session_id = sessions.session_id
             AND (:annotation IS NULL OR a.name = :annotation)
             AND (:annotation_min IS NULL OR a.value >= :annotation_min)
             AND (:annotation_max IS NULL OR a.value <= :annotation_max)))"""
# Each order's key and its first page's bound: a time, or a session's total (its columns, kept
# by the writes: core/lock.py), each read through its index (migration 18), largest first,
# from the cursor on.
_SESSION_KEYS = {
    "created_at": ("created_at", "'~'"),
    "updated_at": ("updated_at", "'~'"),
    **{order: (key, "9223372036854775807") for order, key in SESSION_TOTALS.items()},
}
_SESSIONS = f"""
    SELECT {session_columns("sessions")}, {{key}} AS sort_key FROM sessions
    WHERE {{user}} ({{key}}, session_id)
          < (coalesce(:cursor_key, {{first}}), coalesce(:cursor_sid, ''))
      AND {_SESSION_FILTERS}
    ORDER BY {{key}} DESC, session_id DESC LIMIT :limit"""
_COUNT_SESSIONS = f"SELECT count(*) AS n FROM sessions WHERE {{user}} {_SESSION_FILTERS}"
_USER = "user_id = :user_id AND"

SYNTAX = Syntax(
    casts=False,
    scoped=False,
    true="1 = 1",
    same="IS",
    day=lambda column: f"substr({column}, 1, 10)",
    values=lambda name: f"SELECT value FROM json_each(:{name})",
    key_is=lambda column, param: f"{column} = :{param}",
    greatest="max",
    least="min",
    json_members="json_each",
    json_object="json_group_object",
    json_count=lambda alias: f"{alias}.type = 'integer'",
    indexed_by=lambda index: f"INDEXED BY {index}",
    # total() is a float: exact while the sum is below 2**53, capped by the cast above 2**63.
    capped_sum=lambda column: f"CAST(min(total({column}), 9223372036854775807.0) AS INTEGER)",
)
"""SQLite's tokens in the statements written once (core.shared_sql)."""


# A search (core.search) reads the newest matches' ids, then ranks a block of them, then
# snippets those of the page. bm25 is not used: it needs each query term's
# document count, which FTS5 gets by walking the term's whole index entry (a word in every
# item costs as much as ranking them all). The rank is bm25 without those statistics, over
# the block: each item's number of matched tokens (FTS5's highlight() marks them: one mark
# character each), saturated (k1 = 1.2) and normalised by the item's length against the
# block's mean (b = 0.75). A MATCH with a rowid range stops at the range (FTS5 seeks it);
# the page's ids are then a plain filter (+rowid: not an FTS5 lookup per id, which walks).
# The "_ERRORS" statements read tool calls' errors (migration 15), each found as its item,
# unless that item's text matches too; the "_BACKLOG" ones the private copy of the items
# the index lacks that a read-only store makes (see copy_backlog).
_FILTERS = search_sql.search_filters(SYNTAX)
_RANGE = "AND {fts}.rowid BETWEEN :lo AND :hi"
_ITEM_MATCHES = (
    """
        FROM {fts} JOIN items i ON i.id = {fts}.rowid
        WHERE {fts} MATCH :fts"""
    + _FILTERS
)
_ERROR_MATCHES = (
    f"""
        FROM tool_errors_fts JOIN tool_calls t ON t.id = tool_errors_fts.rowid
            JOIN items i ON i.id = {search_sql.error_item()}
        WHERE tool_errors_fts MATCH :fts
          AND i.id NOT IN (SELECT rowid FROM items_fts WHERE items_fts MATCH :fts AND rowid = i.id)
"""
    + _FILTERS
)
_IDS = "SELECT i.id{matches} ORDER BY {order} DESC LIMIT :n"
_HITS = """
        SELECT id, session_id, run_id, type, role, created_at, snippet,
            CASE WHEN :ranked
                 THEN hits / (hits + 1.2 * (0.25 + 0.75 * size / max(avg(size) OVER (), 1)))
                 ELSE 0.0 END AS rank,
            exact
        FROM (
            SELECT i.id, i.session_id, i.run_id, i.type, i.role, i.created_at,
                CASE WHEN :snippets
                     THEN snippet({fts}, 0, :open, :close, '…', 16) END AS snippet,
                CASE WHEN :ranked
                     THEN length(highlight({fts}, 0, :open, '')) - length({text}) END AS hits,
                length({text}) AS size,
                CASE WHEN :phrase_fts IS NULL THEN 0 ELSE {fts}.rowid IN (
                    SELECT rowid FROM {fts} WHERE {fts} MATCH :phrase_fts {range}) END AS exact
            {matches} {outer_range}
              AND +i.id IN (SELECT value FROM json_each(:ids))
        )"""


def _statements(fts: str, matches: str, text: str, by_rowid: bool) -> tuple[str, str]:
    """A source's ids and hits statements: ``by_rowid`` where the index's rowid is the
    item's id (a range seeks), else the range filters item ids."""
    matches = matches.replace("{fts}", fts)
    inner = _RANGE.format(fts=fts)
    outer = inner if by_rowid else "AND i.id BETWEEN :lo AND :hi"
    return (
        _IDS.format(matches=matches, order=f"{fts}.rowid" if by_rowid else "i.id"),
        _HITS.format(fts=fts, text=text, matches=matches, range=inner if by_rowid else "",
                     outer_range=outer),
    )  # fmt: skip


_SOURCES: dict[tuple[Statement, ...], tuple[str, ...]] = {
    (Q.SEARCH_ITEM_IDS, Q.SEARCH_ITEM_HITS): _statements(
        "items_fts", _ITEM_MATCHES, "i.text", True
    ),
    (Q.SEARCH_BACKLOG_IDS, Q.SEARCH_BACKLOG_HITS): _statements(
        "items_fts_backlog", _ITEM_MATCHES, "i.text", True
    ),
    (Q.SEARCH_ERROR_IDS, Q.SEARCH_ERROR_HITS): _statements(
        "tool_errors_fts", _ERROR_MATCHES, "t.error", False
    ),
}
_SEARCHES = {
    **{
        statement: sql
        for group, sqls in _SOURCES.items()
        for statement, sql in zip(group, sqls, strict=True)
    },
}

_QUERIES: dict[Statement, str] = {
    **{
        statement: _SESSIONS.format(
            key=_SESSION_KEYS[order][0], first=_SESSION_KEYS[order][1], user=_USER if user else ""
        )
        for (order, user), statement in C.SESSION_PAGES.items()
    },
    C.COUNT_SESSIONS: _COUNT_SESSIONS.format(user=""),
    C.COUNT_SESSIONS_USER: _COUNT_SESSIONS.format(user=_USER),
    **_SEARCHES,
}

DIALECT = Dialect(
    "SQLite", {**_OWN, **_QUERIES}, render=named, capabilities=CAPABILITIES, syntax=SYNTAX
)
SQL = DIALECT.sql
"""Every statement SQLite runs, as it runs it."""

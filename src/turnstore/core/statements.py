"""Every SQL statement the core runs, declared once: its symbol, fetch kind and row type.

An operation runs a statement by its symbol (``row: RunRow | None = yield SESSION_RUN(params)``),
so a misspelt statement is a type error and grep finds each use. A statement that every dialect
runs alike carries its SQL here, written with ``:name`` placeholders (each dialect renders
them: ``core.dialect``); the others (``sql=None``) are written by each dialect's ``sql``
module, in the same placeholder style. A statement that ``needs`` a capability is provided
only by the dialects of backends that have it. ``tests/test_statements.py`` checks that each
dialect provides exactly the statements it must.
"""

from __future__ import annotations

from . import annotation_sql, append_sql, catalogue_sql, dataset_sql, search_sql, usage_sql
from .ops import All, Capability, Execute, Insert, One, Statement, Value, Values
from .results import (
    AncestorRow,
    BranchNameRow,
    ClaimRow,
    CopyItemRow,
    HeadRow,
    ItemPlaceRow,
    ItemRow,
    LastItemRow,
    LeafRow,
    ModelResponseRow,
    OpenCallRow,
    RunDepthRow,
    RunIdsRow,
    RunItemRow,
    RunLinkRow,
    SessionItemsRow,
    SessionSummaryRow,
    SpanRow,
    ToolStatsRow,
)
from .sql import USAGE, USAGE_PARAMS, ensure_session_sql, set_usage_sql
from .tables import (
    RUN_COLUMNS,
    SESSION_COLUMNS,
    TOOL_CALL_COLUMNS,
    CopyToolCallRow,
    PathWindowRow,
    RunRow,
    SessionRow,
    ToolCallRow,
    columns,
)

SPAN_COLUMNS = ", ".join(SpanRow._fields)


# ---------------------------------------------------------------------------------------------
# Schema versions (core.schema)

CREATE_VERSION_TABLE = Execute("create_version_table")
SCHEMA_VERSION = Value(
    "schema_version",
    "SELECT max(version) AS version FROM turnstore_schema",
    column="version",
    holds=int,
)
VERSION_TABLE_EXISTS = Value("version_table_exists", column="present", holds=int)
# Which database a store is on, however its path or URL spells it (``turnstore copy`` refuses
# to copy one onto itself): SQLite's file (empty for ':memory:'); on PostgreSQL, the server's
# start time, the database's oid and the schema.
DATABASE_IDENTITY = Value("database_identity", column="identity", holds=str)
# Whether a bulk write of :runs runs has outgrown the planner's statistics, and taking them
# again (core.transfer.refresh_statistics).
STATISTICS_BEHIND = Value(
    "statistics_behind", needs=Capability.STATISTICS, column="behind", holds=bool
)
ANALYZE_TABLES = Execute("analyze_tables", needs=Capability.STATISTICS)
RECORD_VERSION = Execute(
    "record_version", "INSERT INTO turnstore_schema (version) VALUES (:version)"
)

# ---------------------------------------------------------------------------------------------
# The session's head (core.lock)

ENSURE_SESSION = Execute("ensure_session", ensure_session_sql())
UPSERT_HEAD = One("upsert_head", needs=Capability.UPSERT_HEAD, row=HeadRow)
# Lock the row of a session that may not exist (nothing to lock then), without creating it.
LOCK_SESSION = Execute("lock_session")
LOCK_HEAD = One("lock_head", row=HeadRow)
SET_HEAD = Execute(
    "set_head",
    """
        UPDATE sessions SET head_run_id = :head, updated_at = :now WHERE session_id = :sid""",
)

# ---------------------------------------------------------------------------------------------
# Write keys (core.once): a claim returns a row only when the key is new

FORGET_OPERATIONS = Execute(
    "forget_operations", "DELETE FROM operations WHERE session_id = :sid AND op_id < :before"
)
FORGET_OTHER_OPERATIONS = Execute(
    "forget_other_operations", "DELETE FROM operations WHERE session_id = :sid AND op_id <> :key"
)
CLAIM_OPERATION = One("claim_operation", row=ClaimRow)


OPERATION_RESULT = Value(
    "operation_result",
    "SELECT result FROM operations WHERE session_id = :sid AND op_id = :key",
    column="result",
    holds=str,
)
KEEP_OPERATION_RESULT = Execute(
    "keep_operation_result",
    """
        UPDATE operations SET result = :result WHERE session_id = :sid AND op_id = :key""",
)

# ---------------------------------------------------------------------------------------------
# Adopting the SDK's SQLiteSession tables in the same file (core/adoption.py)

SDK_MESSAGES_TABLE = Value(
    "sdk_messages_table", needs=Capability.SDK_ADOPTION, column="present", holds=int
)
SDK_ADOPTED_IDS = Values(
    "sdk_adopted_ids", needs=Capability.SDK_ADOPTION, column="session_id", holds=str
)
SDK_UNADOPTED = Value("sdk_unadopted", needs=Capability.SDK_ADOPTION, column="present", holds=int)
CLAIM_SDK_ADOPTION = Value(
    "claim_sdk_adoption", needs=Capability.SDK_ADOPTION, column="claimed", holds=int
)
# The SDK's rows written after a session's adoption (core/adoption.py, take_up).
SDK_BEHIND = Value("sdk_behind", needs=Capability.SDK_ADOPTION, column="through", holds=int)
ADVANCE_SDK_ADOPTION = Value(
    "advance_sdk_adoption", needs=Capability.SDK_ADOPTION, column="advanced", holds=int
)

# ---------------------------------------------------------------------------------------------
# Appending (core.append)

# Statements keyed by a row's id name its session too: PostgreSQL's shards need it, and to
# SQLite it is one comparison more on the row its primary key finds. A run's status
# (model.RunStatus) follows its writes (NULL: as it is); a compacted run stays so, and a
# compaction run (a kind) has none.
_RUN_STATUS = """status = CASE WHEN CAST(:status AS TEXT) IS NULL OR status = 'compacted'
                               OR kind IS NOT NULL
                          THEN status ELSE :status END"""
_RUN_APPEND = """
        UPDATE runs SET item_count = :item_count, updated_at = :now,
            assistant_message = CASE WHEN :assistant_changed THEN :assistant_message
                                     ELSE assistant_message END{status}
        WHERE session_id = :sid AND id = :id"""
UPDATE_RUN_APPEND = Execute(
    "update_run_append", _RUN_APPEND.format(status=f",\n            {_RUN_STATUS}")
)
# The same where the append leaves the run's status as it is stored: SQLite rewrites the
# index entry of every column assigned, changed or not (runs_session_totals holds status).
UPDATE_RUN_ITEMS = Execute("update_run_items", _RUN_APPEND.format(status=""))
# A Runner call's usage since its last write: each call's tokens add up on its run (each
# dialect writes it with its own two-argument minimum: ``add_usage_sql``).
ADD_RUN_USAGE = Execute("add_run_usage")
SET_RUN_USAGE = Execute("set_run_usage", set_usage_sql("session_id = :sid AND id = :id"))
SET_RUN_ANSWER = Execute(
    "set_run_answer",
    f"""
        UPDATE runs SET updated_at = :now,
            assistant_message = CASE WHEN :assistant_changed THEN :assistant_message
                                     ELSE assistant_message END,
            {_RUN_STATUS}
        WHERE session_id = :sid AND id = :id""",
)
# A new question below a run still under way: its Runner call ended without an answer.
FAIL_RUN = Execute(
    "fail_run",
    """
        UPDATE runs SET status = 'failed', updated_at = :now
        WHERE session_id = :sid AND id = :id AND status = 'in_progress'""",
)
INSERT_ITEM = Insert(
    "insert_item",
    """
        INSERT INTO items (session_id, run_id, position, type, role, call_id, name, text, data,
                           created_at)
        VALUES (:sid, :run_id, :position, :type, :role, :call_id, :name, :text, :data, :now)""",
)
# INSERT_ITEM's text without the id back: PostgreSQL queues it with the next statement
# instead of a round trip (copy, and appends of items no tool-call row names).
STORE_ITEM = Execute("store_item", INSERT_ITEM.sql)
OPEN_TOOL_CALLS = All("open_tool_calls", row=OpenCallRow)
UPDATE_SESSION_INFO = Execute("update_session_info")
# Telemetry from session.hooks
INSERT_MODEL_RESPONSE = Execute(
    "insert_model_response",
    f"""
        INSERT INTO model_responses (session_id, run_id, agent_name, model, response_id,
            request_id, {USAGE}, started_at, completed_at, latency_ms)
        VALUES (:sid, :run_id, :agent_name, :model, :response_id, :request_id,
            {USAGE_PARAMS},
            :started_at, :completed_at, :latency_ms)""",
)
SET_RUN_AGENT = Execute(
    "set_run_agent",
    """
        UPDATE runs SET agent_name = :agent_name, model = :model
        WHERE session_id = :sid AND id = :id""",
)
SET_TOOL_TIMING = Execute("set_tool_timing")

# The search index, where it is fed in batches (SQLite): what it lacks, and feeding it.
INDEX_PENDING = Value("index_pending", needs=Capability.SEARCH_BACKLOG, column="pending", holds=int)
INDEX_BACKLOG = Execute("index_backlog", needs=Capability.SEARCH_BACKLOG)
MARK_INDEXED = Execute("mark_indexed", needs=Capability.SEARCH_BACKLOG)
# A read-only store's searches: a private copy of the backlog, searched too.
CREATE_BACKLOG_COPY = Execute("create_backlog_copy", needs=Capability.SEARCH_BACKLOG)
CLEAR_BACKLOG_COPY = Execute("clear_backlog_copy", needs=Capability.SEARCH_BACKLOG)
COPY_BACKLOG = Execute("copy_backlog", needs=Capability.SEARCH_BACKLOG)

# ---------------------------------------------------------------------------------------------
# Reading (core.reads): the active path, the tree, runs and sessions

# The model's view of the active path, oldest first: each item's JSON only.
PATH_ITEMS = Values("path_items", column="data", holds=object)
# Its newest ``limit`` items, newest first.
PATH_ITEMS_TAIL = All("path_items_tail", row=ItemRow)
PATH_RUNS = All("path_runs", row=RunRow)
# The same, of the path that ends at the run :leaf (a branch read without moving the head).
PATH_ITEMS_AT = Values("path_items_at", column="data", holds=object)
PATH_ITEMS_TAIL_AT = All("path_items_tail_at", row=ItemRow)
PATH_RUNS_AT = All("path_runs_at", row=RunRow)
# By id alone, whatever the session (deep links).
RUN = One("run", f"SELECT {RUN_COLUMNS} FROM runs WHERE id = :id", row=RunRow)
SESSION_RUN = One(
    "session_run",
    f"SELECT {RUN_COLUMNS} FROM runs WHERE session_id = :sid AND id = :id",
    row=RunRow,
)
CHILDREN = All("children", row=RunRow)
LEAVES = All("leaves", row=LeafRow)
HEAD_LEAVES = Values("head_leaves", column="id", holds=int)
SESSION = One(
    "session", f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = :sid", row=SessionRow
)
SESSION_RUNS = All(
    "session_runs",
    f"SELECT {RUN_COLUMNS} FROM runs WHERE session_id = :sid ORDER BY id",
    row=RunRow,
)
SESSION_ITEMS = All("session_items", row=RunItemRow)
# Branches (core.branches): the tree's links, and the names kept by each branch's fork run.
RUN_LINKS = All(
    "run_links",
    "SELECT id, parent_id, user_message, kind, item_count FROM runs WHERE session_id = :sid "
    "ORDER BY id",
    row=RunLinkRow,
)
BRANCH_NAMES = All(
    "branch_names",
    "SELECT run_id, name FROM branch_names WHERE session_id = :sid",
    row=BranchNameRow,
)
NAME_BRANCH = Execute(
    "name_branch",
    "INSERT INTO branch_names (session_id, run_id, name) VALUES (:sid, :id, :name)",
)
UNNAME_BRANCH = Execute(
    "unname_branch", "DELETE FROM branch_names WHERE session_id = :sid AND run_id = :id"
)
MOVE_BRANCH_NAME = Execute(
    "move_branch_name",
    "UPDATE branch_names SET run_id = :to WHERE session_id = :sid AND run_id = :id",
)
# The web viewer: the branch below a run, a window of a branch with each run's place among
# its siblings, and the tool calls of a window's runs.
DESCEND = One("descend", row=RunDepthRow)
PATH_WINDOW = All("path_window", row=PathWindowRow)
TOOL_CALLS_OF_RUNS = All("tool_calls_of_runs", row=ToolCallRow)
# By id alone (deep links).
TOOL_CALL = One(
    "tool_call", f"SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE id = :id", row=ToolCallRow
)
RUN_ITEMS_BEFORE = All("run_items_before", row=ItemRow)

# ---------------------------------------------------------------------------------------------
# Changing history (core.history) and compaction (core.compaction)

DELETE_SESSION = Execute("delete_session", "DELETE FROM sessions WHERE session_id = :sid")
LAST_ITEM = One("last_item", row=LastItemRow)
FIRST_ITEM = One("first_item", row=ItemRow)
FIRST_CHILD = Value(
    "first_child",
    "SELECT id FROM runs WHERE session_id = :sid AND parent_id = :id LIMIT 1",
    column="id",
    holds=int,
)
DROP_CALL_OF_ITEM = Execute("drop_call_of_item")
REOPEN_CALL_OF_OUTPUT = Execute("reopen_call_of_output")
DELETE_ITEM = Execute("delete_item", "DELETE FROM items WHERE session_id = :sid AND id = :id")
# A run, with its rows (SQLite: its foreign keys cascade; PostgreSQL: deleted by the
# statement, postgres/migrations.py's step 18).
DELETE_RUN = Execute("delete_run")
# A run and every run below it, with their rows, in one statement (runs.parent_id does not
# cascade: a chain of cascades stopped at SQLite's 1,000 trigger levels; sqlite/migrations.py,
# step 12).
DELETE_SUBTREE = Execute("delete_subtree")
SHRINK_RUN = Execute("shrink_run")
ANCESTORS_CHILD_COUNTS = All("ancestors_child_counts", row=AncestorRow)
IS_ANCESTOR = Value("is_ancestor", column="found", holds=int)
ITEM_PLACE = One(
    "item_place",
    "SELECT run_id, position FROM items WHERE session_id = :sid AND id = :id",
    row=ItemPlaceRow,
)
INSERT_COMPACTION_RUN = Insert(
    "insert_compaction_run",
    """
        INSERT INTO runs (session_id, parent_id, depth, item_count, kind, prior_run_id,
                          created_at, updated_at)
        VALUES (:sid, :parent_id, :depth, :item_count, 'compaction', :prior_run_id, :now, :now)""",
)
MARK_COMPACTED = Execute("mark_compacted")

# ---------------------------------------------------------------------------------------------
# Queries and analytics (core.queries)

# What each of a page of sessions holds: one grouped query (docs/scaling.md).
SESSION_SUMMARIES = All("session_summaries", row=SessionSummaryRow)
DELETE_SESSION_RETURNING = Value(
    "delete_session_returning",
    "DELETE FROM sessions WHERE session_id = :sid RETURNING session_id",
    column="session_id",
    holds=str,
)
# Retention (``turnstore prune``): the session goes only if no write has come since the cutoff,
# checked by the delete itself, so a write that lands after the catalogue was read keeps it.
DELETE_IDLE_SESSION_RETURNING = Value(
    "delete_idle_session_returning",
    """
        DELETE FROM sessions WHERE session_id = :sid AND updated_at < :before
        RETURNING session_id""",
    column="session_id",
    holds=str,
)

# The session of a run named by id alone: a query filtered by run is then run on that
# session's rows (one shard on Citus), by the (session_id, run_id) indexes.
SESSION_OF_RUN = Value(
    "session_of_run",
    "SELECT session_id FROM runs WHERE id = :run_id",
    column="session_id",
    holds=str,
)
# A run's rows, once its session is known (SESSION_OF_RUN).
BY_RUN = "session_id = :sid AND run_id = :run_id"

# Tool calls, each family by the filter whose index drives it: run, session, tool, or none.
TOOL_CALLS_BY_RUN = All("tool_calls_by_run", row=ToolCallRow)
TOOL_CALLS_BY_SESSION = All("tool_calls_by_session", row=ToolCallRow)
TOOL_CALLS_BY_TOOL = All("tool_calls_by_tool", row=ToolCallRow)
TOOL_CALLS_BY_ALL = All("tool_calls_by_all", row=ToolCallRow)
SLOWEST_TOOL_CALLS_BY_RUN = All("slowest_tool_calls_by_run", row=ToolCallRow)
SLOWEST_TOOL_CALLS_BY_SESSION = All("slowest_tool_calls_by_session", row=ToolCallRow)
SLOWEST_TOOL_CALLS_BY_TOOL = All("slowest_tool_calls_by_tool", row=ToolCallRow)
SLOWEST_TOOL_CALLS_BY_ALL = All("slowest_tool_calls_by_all", row=ToolCallRow)
TOOL_STATS_BY_RUN = All("tool_stats_by_run", row=ToolStatsRow)
TOOL_STATS_BY_SESSION = All("tool_stats_by_session", row=ToolStatsRow)
TOOL_STATS_BY_TOOL = All("tool_stats_by_tool", row=ToolStatsRow)
TOOL_STATS_BY_ALL = All("tool_stats_by_all", row=ToolStatsRow)

# Model calls recorded by session.hooks.
MODEL_RESPONSES = f"""
        SELECT {columns(ModelResponseRow)}
        FROM model_responses WHERE {{condition}} ORDER BY id DESC LIMIT :limit"""
MODEL_RESPONSES_BY_RUN = All(
    "model_responses_by_run",
    MODEL_RESPONSES.format(condition=BY_RUN),
    row=ModelResponseRow,
)
MODEL_RESPONSES_BY_SESSION = All(
    "model_responses_by_session",
    MODEL_RESPONSES.format(condition="session_id = :sid"),
    row=ModelResponseRow,
)
MODEL_RESPONSES_BY_ALL = All(
    "model_responses_by_all",
    MODEL_RESPONSES.format(condition="1 = 1"),
    row=ModelResponseRow,
)


# The SDK's trace spans (core.spans). A span is stored only with a run of its session that
# still exists (a run deleted since its turn takes its spans along).
INSERT_SPAN = Execute(
    "insert_span",
    """
        INSERT INTO spans (session_id, run_id, trace_id, span_id, parent_span_id, kind, name,
                           started_at, ended_at, duration_ms, error, data)
        SELECT :sid, :run_id, :trace_id, :span_id, :parent_span_id, :kind, :name,
               :started_at, :ended_at, :duration_ms, :error, :data
        WHERE EXISTS (SELECT 1 FROM runs WHERE session_id = :sid AND id = :run_id)""",
)
# What a function span says of its tool call: the nth call of that tool (with those arguments,
# when the span has them) in the run, in the order the spans started. A span without the
# exception's text leaves the error the output gave.
SET_TOOL_OUTCOME = Execute(
    "set_tool_outcome",
    """
        UPDATE tool_calls SET status = :status, error = coalesce(CAST(:error AS TEXT), error)
        WHERE session_id = :sid AND id = (
            SELECT id FROM tool_calls
            WHERE session_id = :sid AND run_id = :run_id AND tool_name = :tool_name
              AND (CAST(:arguments AS TEXT) IS NULL OR arguments = :arguments)
            ORDER BY id LIMIT 1 OFFSET :nth)""",
)
_SPANS = f"SELECT {SPAN_COLUMNS} FROM spans WHERE {{condition}} ORDER BY {{order}} LIMIT :limit"
_SPAN_FILTER = "(CAST(:kind AS TEXT) IS NULL OR kind = :kind)"
SPANS_BY_RUN = All(
    "spans_by_run",
    _SPANS.format(condition="session_id = :sid AND run_id = :run_id", order="started_at, id"),
    row=SpanRow,
)
SPANS_BY_SESSION = All(
    "spans_by_session",
    _SPANS.format(condition="session_id = :sid", order="run_id, started_at, id"),
    row=SpanRow,
)
SLOWEST_SPANS_BY_SESSION = All(
    "slowest_spans_by_session",
    _SPANS.format(
        condition=f"session_id = :sid AND duration_ms IS NOT NULL AND {_SPAN_FILTER}",
        order="duration_ms DESC, id DESC",
    ),
    row=SpanRow,
)
# Through spans_kind_duration when a kind is given, which each dialect names as its index
# holds it (PostgreSQL: a prefix).
SLOWEST_SPANS_BY_ALL = All("slowest_spans_by_all", row=SpanRow)


def slowest_spans_sql(kind_is: str) -> str:
    """``SLOWEST_SPANS_BY_ALL`` in a dialect, ``kind_is`` being how it matches ``:kind``."""
    return _SPANS.format(
        condition=f"duration_ms IS NOT NULL AND (CAST(:kind AS TEXT) IS NULL OR {kind_is})",
        order="duration_ms DESC, id DESC",
    )


ERROR_SPANS_BY_SESSION = All(
    "error_spans_by_session",
    _SPANS.format(
        condition=f"session_id = :sid AND error IS NOT NULL AND {_SPAN_FILTER}",
        order="id DESC",
    ),
    row=SpanRow,
)
ERROR_SPANS_BY_ALL = All(
    "error_spans_by_all",
    _SPANS.format(condition=f"error IS NOT NULL AND {_SPAN_FILTER}", order="id DESC"),
    row=SpanRow,
)

# ---------------------------------------------------------------------------------------------
# Copying sessions between databases (core.transfer): each session's rows read a range of runs
# at a time (source ids, in order), written with new ids and the links mapped.

ITEMS_PER_SESSION = All(
    "items_per_session",
    "SELECT session_id, sum(item_count) AS items FROM runs GROUP BY session_id",
    row=SessionItemsRow,
)
# The id range of each run's rows, table by table: a copy cuts a session into chunks only where
# every row before the cut is older than every row of its table after it, so the target
# numbers each table's rows in the source's order (an item added to an older branch's open
# run comes after newer runs' items; so can its model calls, spans and tool calls).


def _run_ids(name: str, table: str) -> All[RunIdsRow]:
    return All(
        name,
        f"""
        SELECT run_id, min(id) AS first, max(id) AS last
        FROM {table} WHERE session_id = :sid GROUP BY run_id""",
        row=RunIdsRow,
    )


RUN_ITEM_IDS = _run_ids("run_item_ids", "items")
RUN_RESPONSE_IDS = _run_ids("run_response_ids", "model_responses")
RUN_SPAN_IDS = _run_ids("run_span_ids", "spans")
# A tool call's by the run whose range writes it (``copy_tool_calls_sql``).
RUN_TOOL_CALL_IDS = All("run_tool_call_ids", row=RunIdsRow)
COPY_RUNS = All(
    "copy_runs",
    f"SELECT {RUN_COLUMNS} FROM runs "
    "WHERE session_id = :sid AND id BETWEEN :first AND :last ORDER BY id",
    row=RunRow,
)
COPY_ITEMS = All(
    "copy_items",
    """
        SELECT id, run_id, position, type, role, call_id, name, text, data, created_at
        FROM items WHERE session_id = :sid AND run_id BETWEEN :first AND :last ORDER BY id""",
    row=CopyItemRow,
)


# A tool call is written with the last of its run and its items' runs (an output can land in
# a later run than its call's): ``core.transfer.written_with`` says the same of a row.
_CALL_ITEMS = """
        FROM tool_calls t
        LEFT JOIN items c ON c.session_id = :sid AND c.id = t.call_item_id
        LEFT JOIN items o ON o.session_id = :sid AND o.id = t.output_item_id
        WHERE t.session_id = :sid"""


def _written_with(greatest: str) -> str:
    return f"{greatest}(t.run_id, coalesce(c.run_id, 0), coalesce(o.run_id, 0))"


def copy_tool_calls_sql(greatest: str) -> str:
    """The tool calls a range of runs completes: those whose run and items all lie at or
    before its last run, each once."""
    return f"""
        SELECT {columns(ToolCallRow, "t")},
            c.run_id AS call_item_run, c.position AS call_item_position,
            o.run_id AS output_item_run, o.position AS output_item_position{_CALL_ITEMS}
          AND {_written_with(greatest)} BETWEEN :first AND :last
        ORDER BY t.id"""


def run_tool_call_ids_sql(greatest: str) -> str:
    """``RUN_TOOL_CALL_IDS``: the id range of the tool calls each run's range writes."""
    run = _written_with(greatest)
    return f"""
        SELECT {run} AS run_id, min(t.id) AS first, max(t.id) AS last{_CALL_ITEMS}
        GROUP BY {run}"""


COPY_TOOL_CALLS = All("copy_tool_calls", row=CopyToolCallRow)
COPY_MODEL_RESPONSES = All(
    "copy_model_responses",
    f"""
        SELECT {columns(ModelResponseRow)}
        FROM model_responses
        WHERE session_id = :sid AND run_id BETWEEN :first AND :last ORDER BY id""",
    row=ModelResponseRow,
)
COPY_SPANS = All(
    "copy_spans",
    f"""
        SELECT {SPAN_COLUMNS} FROM spans
        WHERE session_id = :sid AND run_id BETWEEN :first AND :last ORDER BY id""",
    row=SpanRow,
)
COPY_BRANCH_NAMES = All(
    "copy_branch_names",
    """
        SELECT run_id, name FROM branch_names
        WHERE session_id = :sid AND run_id BETWEEN :first AND :last ORDER BY run_id""",
    row=BranchNameRow,
)
# A session's catalogue row as its source holds it (metadata is JSON text; PostgreSQL casts
# it to jsonb): created before its runs, given its head once they are all there.
PUT_SESSION = Execute("put_session")


def put_session_sql(metadata: str) -> str:
    """``PUT_SESSION`` in a dialect, ``metadata`` being how it binds the JSON text."""
    return f"""
        INSERT INTO sessions (session_id, user_id, title, metadata, head_run_id, created_at,
                              updated_at)
        VALUES (:sid, :user_id, :title, {metadata}, :head, :created_at, :updated_at)
        ON CONFLICT (session_id) DO UPDATE SET user_id = excluded.user_id,
            title = excluded.title, metadata = excluded.metadata,
            head_run_id = excluded.head_run_id, created_at = excluded.created_at,
            updated_at = excluded.updated_at"""


COPY_RUN = Insert(
    "copy_run",
    f"""
        INSERT INTO runs (session_id, parent_id, depth, user_message, assistant_message,
                          agent_name, model, status, {USAGE}, item_count, created_at,
                          updated_at, kind, prior_run_id, compacted_by)
        VALUES (:sid, :parent_id, :depth, :user_message, :assistant_message, :agent_name,
                :model, :status, {USAGE_PARAMS},
                :item_count, :created_at, :updated_at, :kind, :prior_run_id, :compacted_by)""",
)
SET_COMPACTED_BY = Execute(
    "set_compacted_by",
    "UPDATE runs SET compacted_by = :by WHERE session_id = :sid AND id = :id",
)
# Its items found by place, as an append's calls (``core.append_sql``).
# Every column of ToolCallRow but the ids the target gives (its own id, the session's).
_COPIED_CALL = [name for name in ToolCallRow._fields if name not in ("id", "session_id")]
COPY_TOOL_CALL = Execute(
    "copy_tool_call",
    f"""
        INSERT INTO tool_calls (session_id, {", ".join(_COPIED_CALL)}, call_item_id,
                                output_item_id)
        SELECT :sid, {", ".join(":" + name for name in _COPIED_CALL)},
               {append_sql.item_at("call_item")}, {append_sql.item_at("output_item")}""",
)

# ---------------------------------------------------------------------------------------------

STATEMENTS: tuple[Statement, ...] = (
    tuple(value for value in list(globals().values()) if isinstance(value, Statement))
    + append_sql.STATEMENTS
    + catalogue_sql.STATEMENTS
    + usage_sql.STATEMENTS
    + annotation_sql.STATEMENTS
    + dataset_sql.STATEMENTS
    + search_sql.STATEMENTS
)
"""Every statement, in declaration order (the append's by place, the catalogue's pages,
usage, annotations, datasets, then search's last: ``core.append_sql``,
``core.catalogue_sql``, ``core.usage_sql``, ``core.annotation_sql``, ``core.dataset_sql``,
``core.search_sql``)."""

"""The statements both dialects write alike but for small tokens, written once.

``shared_sql(syntax)`` renders them in a dialect's ``Syntax`` (``core.syntax``); a backend's
``Dialect`` takes them between its own statements (which win) and the ones every dialect runs
verbatim (``Statement.sql``). A dialect whose text differs in shape (a walk written as a
LATERAL join, a planner hint) still writes its own in its ``sql`` module.
"""

from __future__ import annotations

from ..domain.toolcalls import failed_sql
from . import annotation_sql as A
from . import catalogue_sql as C
from . import statements as S
from . import usage_sql as U
from .annotation_sql import annotation_stats_sql
from .ops import Statement
from .sql import (
    add_usage_sql,
    cost_parts_sql,
    details_sum_sql,
    details_sums_sql,
    ensure_session_sql,
    response_usage_sql,
    token_sums,
)
from .syntax import Syntax
from .tables import TOOL_CALL_COLUMNS

__all__ = ["shared_sql"]

_FAILED = failed_sql()  # the one rule: toolcalls.call_failed


def _items_of_run(syntax: Syntax) -> dict[Statement, str]:
    """The reads and rewrites of one run's items and tool calls (core.history, core.ops)."""
    scope = syntax.session()
    call_is = syntax.key_is("call_id", "call_id")
    return {
        S.LAST_ITEM: f"""
        SELECT id, position, call_id, data FROM items
        WHERE {scope}run_id = :run_id ORDER BY position DESC LIMIT 1""",
        S.FIRST_ITEM: f"""
        SELECT id, data FROM items WHERE {scope}run_id = :run_id AND position = 0""",
        S.RUN_ITEMS_BEFORE: f"""
        SELECT id, data FROM items WHERE {scope}run_id = :run_id AND position < :position
        ORDER BY position""",
        S.DROP_CALL_OF_ITEM: f"""
        DELETE FROM tool_calls
        WHERE session_id = :sid AND {call_is}
          AND (call_item_id = :item OR (call_item_id IS NULL AND output_item_id = :item))""",
        S.REOPEN_CALL_OF_OUTPUT: f"""
        UPDATE tool_calls SET output = NULL, output_item_id = NULL, error = NULL,
            status = 'pending', completed_at = NULL, duration_ms = NULL, started_at = NULL
        WHERE session_id = :sid AND {call_is} AND output_item_id = :item""",
        S.SHRINK_RUN: f"""
        UPDATE runs SET item_count = :item_count, updated_at = :now,
            assistant_message = (
                SELECT text FROM items
                WHERE {scope}run_id = :id AND type = 'message' AND role = 'assistant'
                ORDER BY position DESC LIMIT 1),
            -- As a write would leave it (model.RunStatus); compaction runs have none.
            status = CASE
                WHEN status IS NULL OR status = 'compacted' THEN status
                WHEN EXISTS (SELECT 1 FROM tool_calls
                             WHERE {scope}run_id = :id AND status = 'pending') THEN 'interrupted'
                WHEN (SELECT type = 'message' AND role = 'assistant' FROM items
                      WHERE {scope}run_id = :id ORDER BY position DESC LIMIT 1) THEN 'completed'
                ELSE 'in_progress' END
        WHERE {scope}id = :id""",
        S.LEAVES: f"""
        SELECT r.id, r.depth, r.user_message, r.created_at FROM runs r
        WHERE r.session_id = :sid
          AND NOT EXISTS (SELECT 1 FROM runs c WHERE {syntax.session("c")}c.parent_id = r.id)
        ORDER BY r.id""",
        S.SET_TOOL_TIMING: f"""
        UPDATE tool_calls SET started_at = :started_at, completed_at = :completed_at,
            duration_ms = :duration_ms
        WHERE {scope}id = (SELECT max(id) FROM tool_calls
                           WHERE session_id = :sid AND {call_is})""",
    }


def _copies(syntax: Syntax) -> dict[Statement, str]:
    """The reads and writes of a copy between databases (core.transfer) and the usage sums."""
    return {
        S.COPY_TOOL_CALLS: S.copy_tool_calls_sql(syntax.greatest),
        S.RUN_TOOL_CALL_IDS: S.run_tool_call_ids_sql(syntax.greatest),
        S.PUT_SESSION: S.put_session_sql(syntax.param("metadata", "jsonb")),
        S.ADD_RUN_USAGE: add_usage_sql(
            syntax.least, "session_id = :sid AND id = :id", lambda c: details_sum_sql(syntax, c)
        ),
        S.SLOWEST_SPANS_BY_ALL: S.slowest_spans_sql(syntax.key_is("kind", "kind")),
    }


def _tool_calls(syntax: Syntax) -> dict[Statement, str]:
    """Tool calls, the slowest tool calls and tool statistics, by the filter that drives each
    family (run, session, tool, none)."""
    filters = f"""
      AND {syntax.optional("sid", "text", "session_id = :sid")}
      AND {syntax.optional("run_id", "bigint", "run_id = :run_id")}
      AND {syntax.optional("tool_name", "text", "tool_name = :tool_name")}
      AND {syntax.optional("since", "timestamptz", "created_at >= :since")}
      AND {syntax.optional("until", "timestamptz", "created_at < :until")}"""
    status = syntax.optional(
        "status", "text", f"status = :status OR (:status = 'failed' AND {_FAILED})"
    )
    calls = f"""
        SELECT {TOOL_CALL_COLUMNS} FROM tool_calls
        WHERE {{condition}} {filters} {{extra}}
          AND {status}
        ORDER BY {{order}} LIMIT :limit"""
    # Nearest-rank percentiles: the value at rank ceil(p * n / 100) of the sorted durations.
    stats = f"""
        WITH c AS (
            SELECT tool_name, duration_ms, CASE WHEN {_FAILED} THEN 1 ELSE 0 END AS failed
            FROM tool_calls WHERE {{condition}} {filters}
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
        SELECT c.tool_name, count(*) AS calls, sum(c.failed) AS failed,
            count(c.duration_ms) AS timed_calls, avg(c.duration_ms) AS mean_ms,
            p.p50 AS p50_ms, p.p95 AS p95_ms, max(c.duration_ms) AS max_ms
        FROM c LEFT JOIN p ON p.tool_name {syntax.same} c.tool_name
        GROUP BY c.tool_name, p.p50, p.p95
        ORDER BY count(*) DESC, c.tool_name"""
    families = (
        (S.BY_RUN, S.TOOL_CALLS_BY_RUN, S.SLOWEST_TOOL_CALLS_BY_RUN, S.TOOL_STATS_BY_RUN),
        (
            "session_id = :sid",
            S.TOOL_CALLS_BY_SESSION,
            S.SLOWEST_TOOL_CALLS_BY_SESSION,
            S.TOOL_STATS_BY_SESSION,
        ),
        (
            syntax.key_is("tool_name", "tool_name"),
            S.TOOL_CALLS_BY_TOOL,
            S.SLOWEST_TOOL_CALLS_BY_TOOL,
            S.TOOL_STATS_BY_TOOL,
        ),
        (syntax.true, S.TOOL_CALLS_BY_ALL, S.SLOWEST_TOOL_CALLS_BY_ALL, S.TOOL_STATS_BY_ALL),
    )
    table: dict[Statement, str] = {}
    for condition, of_calls, slowest, of_stats in families:
        table[of_calls] = calls.format(condition=condition, extra="", order="id DESC")
        table[slowest] = calls.format(
            condition=condition,
            extra="AND duration_ms IS NOT NULL",
            order="duration_ms DESC, id DESC",
        )
        table[of_stats] = stats.format(condition=condition)
    return table


def _usage(syntax: Syntax) -> dict[Statement, str]:
    """Usage by session, user, day, model and agent (tokens, their cost, annotations);
    annotation statistics by day."""
    on_branch = f"CAST(r.id AS TEXT) IN ({syntax.values('run_ids')})"
    filters = f"""
      {syntax.optional("sid", "text", "r.session_id = :sid")}
      AND {syntax.optional("user_id", "text", "s.user_id = :user_id")}
      AND {syntax.optional("since", "timestamptz", "r.created_at >= :since")}
      AND {syntax.optional("until", "timestamptz", "r.created_at < :until")}
      AND {syntax.optional("run_ids", "text", on_branch)}"""
    # Sessions, users and days sum the runs' token columns.
    by_run = f"""
        SELECT {{key}} AS key, count(*) AS runs, {token_sums("r")}
        FROM runs r JOIN sessions s ON s.session_id = r.session_id
        WHERE {filters}
        GROUP BY 1"""
    run_of_call = f"{syntax.joined('r', 'm')}r.id = m.run_id"
    calls_of_run = f"{syntax.joined('m', 'r')}m.run_id = r.id"
    run_day = syntax.day("r.created_at")
    days = (syntax.day("m.completed_at"), run_day)

    def cost(call_key: str, run_key: str | None = None) -> str:
        keys = (call_key, call_key if run_key is None else run_key)
        return cost_parts_sql(keys, days, filters, run_of_call, calls_of_run)

    def details(run_key: str, call_key: str | None = None) -> str:
        return details_sums_sql(syntax, (call_key, run_key), filters, run_of_call, calls_of_run)

    def notes(run_key: str) -> str:
        return annotation_stats_sql(run_key, f"a.name = :name AND {filters}")

    return {
        U.USAGE_ANNOTATIONS_BY_SESSION: notes("r.session_id"),
        U.USAGE_ANNOTATIONS_BY_USER: notes("s.user_id"),
        U.USAGE_ANNOTATIONS_BY_DAY: notes(run_day),
        U.USAGE_ANNOTATIONS_BY_MODEL: notes("r.model"),
        U.USAGE_ANNOTATIONS_BY_AGENT: notes("r.agent_name"),
        U.USAGE_ANNOTATIONS_BY_RUN: notes("r.id"),
        U.USAGE_BY_RUN: by_run.format(key="r.id"),
        U.USAGE_DETAILS_BY_SESSION: details("r.session_id"),
        U.USAGE_DETAILS_BY_USER: details("s.user_id"),
        U.USAGE_DETAILS_BY_DAY: details(run_day),
        U.USAGE_DETAILS_BY_MODEL: details("r.model", "m.model"),
        U.USAGE_DETAILS_BY_AGENT: details("r.agent_name", "m.agent_name"),
        U.USAGE_DETAILS_BY_RUN: details("r.id"),
        U.USAGE_COST_BY_SESSION: cost("r.session_id"),
        U.USAGE_COST_BY_USER: cost("s.user_id"),
        U.USAGE_COST_BY_DAY: cost(run_day),
        U.USAGE_COST_BY_MODEL: cost("m.model", "r.model"),
        U.USAGE_COST_BY_AGENT: cost("m.agent_name", "r.agent_name"),
        U.USAGE_COST_BY_RUN: cost("r.id"),
        U.USAGE_BY_SESSION: by_run.format(key="r.session_id"),
        U.USAGE_BY_USER: by_run.format(key="s.user_id"),
        U.USAGE_BY_DAY: by_run.format(key=syntax.day("r.created_at")),
        A.ANNOTATION_STATS_BY_DAY: annotation_stats_sql(syntax.day("a.created_at")),
        U.USAGE_BY_MODEL: response_usage_sql("model", filters, run_of_call, calls_of_run),
        U.USAGE_BY_AGENT: response_usage_sql("agent_name", filters, run_of_call, calls_of_run),
    }


def _totals(syntax: Syntax) -> dict[Statement, str]:
    """The writes of each session's totals (catalogue_sql's COUNT_ROWS …; core/lock.py)."""
    runs = "FROM runs r WHERE r.session_id = :sid"
    calls = "FROM tool_calls t WHERE t.session_id = :sid"
    # Through runs_session_failed and tool_calls_session_failed: a session's failures only.
    # failure_count is their sum, which an UPDATE's SET, reading the row as it was, repeats.
    failed_runs = f"""(SELECT count(*) FROM runs r {syntax.indexed_by("runs_session_failed")}
                       WHERE r.session_id = :sid AND r.status = 'failed')"""
    failed_calls = f"(SELECT count(*) {calls} AND {_FAILED})"
    failures = {
        "failed_run_count": (failed_runs, ":failed_runs"),
        "failed_call_count": (failed_calls, ":failed_calls"),
        "failure_count": (f"{failed_runs} + {failed_calls}", ":failed_runs + :failed_calls"),
    }
    # Counted: what the write added (failed runs and calls written failed included); its
    # failures recounted instead where :failures says a stored row's status or error was
    # written (a CASE reads no subquery it does not take). Each group of totals is assigned
    # only by the statements of the writes that change it (catalogue_sql.TOTALS).
    assigned = {
        "runs": "run_count = run_count + :runs",
        "tool_calls": "tool_call_count = tool_call_count + :tool_calls",
        "tokens": f"total_tokens = {syntax.least}(total_tokens, :max - :tokens) + :tokens",
        "failures": ",\n            ".join(
            f"{column} = CASE WHEN :failures THEN {count} ELSE {column} + {added} END"
            for column, (count, added) in failures.items()
        ),
    }

    def counted(groups: tuple[str, ...]) -> str:
        return ",\n            ".join(assigned[group] for group in groups)

    recounted = f"""
            run_count = (SELECT count(*) {runs}),
            total_tokens = (SELECT {syntax.capped_sum("r.total_tokens")} {runs}),
            tool_call_count = (SELECT count(*) {calls}),""" + ",".join(
        f"\n            {column} = {count}" for column, (count, _) in failures.items()
    )
    head = "head_run_id = :head, updated_at = :now"
    where = "WHERE session_id = :sid"
    return {
        **{
            statement: ensure_session_sql(syntax.least, groups)
            for groups, statement in C.ENSURE_SESSION_COUNTED.items()
        },
        **{
            statement: f"UPDATE sessions SET {counted(groups)} {where}"
            for groups, statement in C.COUNT_ROWS.items()
        },
        **{
            statement: f"UPDATE sessions SET {head},\n            {counted(groups)} {where}"
            for groups, statement in C.SET_HEAD_COUNTED.items()
        },
        C.RECOUNT_ROWS: f"UPDATE sessions SET {recounted} {where}",
    }


def _catalogue(syntax: Syntax) -> dict[Statement, str]:
    """The session catalogue's writes and its page summaries (core.queries)."""
    return {
        S.UPDATE_SESSION_INFO: f"""
        UPDATE sessions SET user_id = coalesce({syntax.param("user_id", "text")}, user_id),
            title = coalesce({syntax.param("title", "text")}, title),
            metadata = coalesce({syntax.param("metadata", "jsonb")}, metadata),
            updated_at = :now
        WHERE session_id = :sid""",
        # Through runs_session_parent for the runs and each one's children, and
        # tool_calls_session_call for the failed calls.
        S.SESSION_SUMMARIES: f"""
        SELECT r.session_id, count(*) AS runs,
            count(CASE WHEN NOT EXISTS (
                SELECT 1 FROM runs c WHERE {syntax.joined("c", "r")}c.parent_id = r.id
            ) THEN 1 END) AS branches,
            sum(r.total_tokens) AS total_tokens,
            count(CASE WHEN r.status = 'failed' THEN 1 END) AS failed_runs,
            (SELECT count(*) FROM tool_calls t WHERE t.session_id = r.session_id)
                AS tool_calls,
            (SELECT count(*) FROM tool_calls t
             WHERE t.session_id = r.session_id AND {_FAILED}) AS failed_tool_calls
        FROM runs r
        WHERE r.session_id IN ({syntax.values("sids")})
        GROUP BY r.session_id""",
    }


def shared_sql(syntax: Syntax) -> dict[Statement, str]:
    """Every statement written once against a ``Syntax``, in ``syntax``."""
    return {
        **_items_of_run(syntax),
        **_copies(syntax),
        **_tool_calls(syntax),
        **_usage(syntax),
        **_catalogue(syntax),
        **_totals(syntax),
    }

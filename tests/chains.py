"""Long conversations built fast: a chain of runs written by set-based SQL, not by the API.

``build_chain(store, session_id, runs)`` writes, in a few ``INSERT ... SELECT`` statements
over a number series, what ``runs`` plain turns would leave: one root and each next run the
child of the one before (depth 0 … runs - 1), the head at the last. Run ``i`` holds the user
message ``question i`` and the answer ``answer i``; every ``calls_every``-th run also holds a
tool call between them (``lookup``, call ``c{i}``), with its ``tool_calls`` row, a model
response and a trace span. The rows are the ones the API writes (tests/builders.py's item
shapes), so the store then reads, changes and deletes them as its own. 100,000 runs take about
a second on SQLite, a few on PostgreSQL, where writing them through the API would take minutes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from builders import assistant, call, output, user
from support import rendered, sql
from turnstore import Store
from turnstore.core.catalogue_sql import RECOUNT_ROWS
from turnstore.core.ops import Fetch, Op, Query

__all__ = ["SESSION_TABLES", "Chain", "build_chain", "chain_items", "count_rows"]

# The tables that hold a session's rows (``operations`` keeps the last write's key).
SESSION_TABLES = (
    "sessions",
    "runs",
    "items",
    "tool_calls",
    "model_responses",
    "spans",
    "branch_names",
)
_SESSION = """INSERT INTO sessions (session_id, title, head_run_id, created_at, updated_at)
    VALUES ({sid}, 'question 0', {head}, {now}, {now})"""
_NAME = "INSERT INTO branch_names (session_id, run_id, name) VALUES ({sid}, {root}, 'long')"
# On PostgreSQL, when the role may: no foreign-key check row by row (the rows are consistent by
# construction), which would take most of the time.
_NO_KEY_CHECKS = """SELECT set_config('session_replication_role', 'replica', true)
    WHERE current_setting('is_superuser') = 'on'"""
# Room for each run's items: an item's id is the chain's first item id + 4 * i + position.
_SLOTS = 4


@dataclass(frozen=True)
class Chain:
    """What ``build_chain`` wrote: the ids of its runs are ``first_run`` … ``last_run``."""

    session_id: str
    runs: int
    first_run: int
    calls_every: int

    @property
    def last_run(self) -> int:
        return self.first_run + self.runs - 1

    def run_id(self, i: int) -> int:
        """The id of run ``i`` (its depth)."""
        return self.first_run + i

    def calls(self) -> int:
        """How many of the runs hold a tool call."""
        return (self.runs - 1) // self.calls_every + 1

    def items(self) -> int:
        return 2 * self.runs + 2 * self.calls()


def chain_items(i: int, calls_every: int) -> list[Any]:
    """The items run ``i`` of a chain holds, as the API returns them."""
    middle = [call(f"c{i}", "lookup"), output(f"c{i}", f"out {i}")] if i % calls_every == 0 else []
    return [user(f"question {i}"), *middle, assistant(f"answer {i}")]


def _json_sql(item: dict[str, Any]) -> str:
    """SQL that makes ``item``'s JSON text (as json.dumps writes it) with each ``{i}`` in its
    values replaced by the run's number ``i``; braces doubled for ``conftest.sql``."""
    parts = json.dumps(item).replace("'", "''").split("{i}")
    escaped = [part.replace("{", "{{").replace("}", "}}") for part in parts]
    return "'" + "' || i || '".join(escaped) + "'"


def _reserve(dialect: str, table: str, count: int) -> str:
    """SQL for the first of ``count`` ids of ``table`` that no row has had and the table's own
    counter will not hand out (SQLite: AUTOINCREMENT's sqlite_sequence, which an explicit id
    moves on; PostgreSQL: the identity, moved on here)."""
    if dialect == "sqlite":
        return f"""SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = '{table}'), 0),
                       coalesce((SELECT max(id) FROM {table}), 0)) + 1"""
    sequence = f"pg_get_serial_sequence('{table}', 'id')"
    return f"SELECT setval({sequence}, nextval({sequence}) + {count} - 1) - {count} + 1"


def _series(dialect: str) -> str:
    """A CTE ``n (i)`` of the numbers 0 … {count} - 1."""
    if dialect == "sqlite":
        return (
            "WITH RECURSIVE n (i) AS "
            "(SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {count}) "
        )
    return "WITH n (i) AS (SELECT generate_series(0, {count} - 1)) "


def _inserts(
    dialect: str, first_run: int, first_item: int, first_call: int, calls_every: int
) -> list[str]:
    """The statements that write a chain's rows but its session's."""
    modulo = "%" if dialect == "sqlite" else "%%"  # psycopg's literal %
    with_call = f"i {modulo} {calls_every} = 0"
    run = f"{first_run} + i"
    item = f"{first_item} + {_SLOTS} * i"
    return [
        f"""INSERT INTO runs (id, session_id, parent_id, depth, user_message, assistant_message,
                status, requests, input_tokens, output_tokens, total_tokens, item_count,
                created_at, updated_at)
            SELECT {run}, {{sid}}, CASE WHEN i = 0 THEN NULL ELSE {run} - 1 END, i,
                'question ' || i, 'answer ' || i, 'completed', 1, 10, 5, 15,
                CASE WHEN {with_call} THEN 4 ELSE 2 END, {{now}}, {{now}}
            FROM n""",
        f"""INSERT INTO items (id, session_id, run_id, position, type, role, text, data,
                created_at)
            SELECT {item}, {{sid}}, {run}, 0, 'message', 'user', 'question ' || i,
                {_json_sql(user("question {i}"))}, {{now}}
            FROM n""",
        f"""INSERT INTO items (id, session_id, run_id, position, type, role, call_id, name,
                text, data, created_at)
            SELECT {item} + 1, {{sid}}, {run}, 1, 'function_call', NULL, 'c' || i, 'lookup',
                '{{{{}}}}', {_json_sql(call("c{i}", "lookup"))}, {{now}}
            FROM n WHERE {with_call}""",
        f"""INSERT INTO items (id, session_id, run_id, position, type, role, call_id, text,
                data, created_at)
            SELECT {item} + 2, {{sid}}, {run}, 2, 'function_call_output', NULL, 'c' || i,
                'out ' || i, {_json_sql(output("c{i}", "out {i}"))}, {{now}}
            FROM n WHERE {with_call}""",
        f"""INSERT INTO items (id, session_id, run_id, position, type, role, text, data,
                created_at)
            SELECT {item} + CASE WHEN {with_call} THEN 3 ELSE 1 END, {{sid}}, {run},
                CASE WHEN {with_call} THEN 3 ELSE 1 END, 'message', 'assistant', 'answer ' || i,
                {_json_sql(assistant("answer {i}"))}, {{now}}
            FROM n""",
        f"""INSERT INTO tool_calls (id, session_id, run_id, call_id, tool_name, kind, arguments,
                output, status, call_item_id, output_item_id, created_at, completed_at)
            SELECT {first_call} + i / {calls_every}, {{sid}}, {run}, 'c' || i, 'lookup',
                'function', '{{{{}}}}', 'out ' || i, 'completed', {item} + 1, {item} + 2,
                {{now}}, {{now}}
            FROM n WHERE {with_call}""",
        f"""INSERT INTO model_responses (session_id, run_id, model, response_id, requests,
                input_tokens, output_tokens, total_tokens, completed_at)
            SELECT {{sid}}, {run}, 'scripted', 'resp-' || i, 1, 10, 5, 15, {{now}}
            FROM n WHERE {with_call}""",
        f"""INSERT INTO spans (session_id, run_id, trace_id, span_id, kind, name, started_at,
                ended_at, duration_ms, data)
            SELECT {{sid}}, {run}, 'trace_' || i, 'span_' || i, 'function', 'lookup', {{now}},
                {{now}}, 1.0, '{{{{}}}}'
            FROM n WHERE {with_call}""",
    ]


async def build_chain(
    store: Store,
    session_id: str,
    runs: int,
    *,
    calls_every: int = 100,
    when: datetime | None = None,
) -> Chain:
    """Write a new session ``session_id`` of ``runs`` runs in a chain (see the module), in one
    transaction."""
    dialect = store.backend.dialect
    params = {
        "sid": session_id,
        "now": store.backend.bind_time(when or datetime.now(timezone.utc)),
        "count": runs,
    }
    calls = (runs - 1) // calls_every + 1

    def op() -> Op[int]:
        first = []
        for table, count in (("runs", runs), ("items", _SLOTS * runs), ("tool_calls", calls)):
            rows = yield Query(_reserve(dialect, table, count), fetch=Fetch.ALL, raw=True)
            first.append(int(rows[0][0]))
        if dialect != "sqlite":
            yield Query(_NO_KEY_CHECKS, fetch=Fetch.ALL, raw=True)
        head = first[0] + runs - 1
        yield Query(
            rendered(store, _SESSION, [*params, "head"]),
            {**params, "head": head},
            raw=True,
        )
        for statement in _inserts(dialect, *first, calls_every):
            yield Query(rendered(store, _series(dialect) + statement, params), params, raw=True)
        yield Query(
            rendered(store, _NAME, [*params, "root"]), {**params, "root": first[0]}, raw=True
        )
        # Its totals, as the writes keep them (rows written by SQL are not counted).
        yield RECOUNT_ROWS({"sid": session_id})
        return first[0]

    first_run = await store.backend.run(op, write=True)
    if dialect != "sqlite":
        # As autovacuum would after so many rows, before the test reads them: a schema of the
        # pool keeps the statistics of the test before (a few sessions of a few runs), with
        # which the planner walked the chain's parents through runs_session_totals, a scan of
        # the session's 100,000 runs at each step (a delete_branch ran for over 13 minutes).
        await store.backend.run(_analyze, write=True)
    return Chain(session_id, runs, first_run, calls_every)


def _analyze() -> Op[None]:
    yield Query(f"ANALYZE {', '.join(SESSION_TABLES)}", raw=True)


async def count_rows(store: Store, session_id: str) -> dict[str, int]:
    """How many rows of ``session_id`` each table holds."""
    counts = {}
    for table in SESSION_TABLES:
        rows = await sql(
            store, f"SELECT count(*) FROM {table} WHERE session_id = {{sid}}", sid=session_id
        )
        counts[table] = int(rows[0][0])
    return counts

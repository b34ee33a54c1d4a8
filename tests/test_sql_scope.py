"""Every per-session statement names its session; every key lets a store shard by session.

A sharded Postgres (Citus) places each session's rows on one node by ``session_id``: a
statement reaches a single node only when every table it reads or writes is filtered by the
session itself, joins between distributed tables are planned only on ``session_id``, and a
unique or foreign key is only allowed when it includes ``session_id`` (tests/sqlscope.py says
what Citus requires, read from the text). These tests read each backend's SQL table (every
statement it runs, rendered) and migrations, so that a new statement or table that breaks the
rule fails here, not in production. The exceptions are listed by statement name, with reasons
(CROSS_SESSION in tests/sqlscope.py, shared with tests/citus.py).
On a real cluster, tests/citus.py checks the same by EXPLAIN.
"""

from __future__ import annotations

import re
from types import ModuleType

import pytest

from sqlscope import CROSS_SESSION, DISTRIBUTED, SESSION_PARAMETER, refs, uncolocated, unfiltered
from support import require_module
from turnstore import sqlite
from turnstore.core.statements import LOCK_HEAD, STATEMENTS

psycopg = require_module("psycopg")
from turnstore import postgres  # noqa: E402

BACKENDS = [pytest.param(sqlite, id="sqlite"), pytest.param(postgres, id="postgres")]

# SQLite only: statements keyed by the primary key of a row that the same operation has
# already read from this session's own rows (the locked head, a run found by session, an
# item or call of that run). Postgres names session_id in these too, for its shards.
SQLITE_KEYED_BY_ID = {
    "ancestors_child_counts": "walks up from a run found by session",
    "first_item": "the first item of a run found by session",
    "last_item": "the last item of the locked head run",
    "run_items_before": "items of the locked head run, or of a run found by id",
    "shrink_run": "the locked head run",
}

# The head-lock statement as it was before Citus was tried: its subquery and its join name the
# session only through the outer row, and Citus refused every write ("could not run
# distributed query with FOR UPDATE/SHARE commands").
CORRELATED_LOCK_HEAD = """
    SELECT s.head_run_id AS id, r.depth, r.item_count, r.parent_id,
        EXISTS (SELECT 1 FROM runs c
                WHERE c.session_id = s.session_id AND c.parent_id = r.id) AS has_children,
        NULL::bigint AS indexed_through
    FROM sessions s
    LEFT JOIN runs r ON r.session_id = s.session_id AND r.id = s.head_run_id
    WHERE s.session_id = %(sid)s
    FOR UPDATE OF s"""


def _statements(module: ModuleType) -> list[tuple[str, str]]:
    """(name, SQL) of the statements a backend runs."""
    return [(statement.name, sql) for statement, sql in module.SQL.items()]


def test_the_backends_run_every_statement_but_those_of_capabilities() -> None:
    # Every statement, the shared ones included, is checked below on each backend it runs on.
    assert {s.name for s in sqlite.SQL} | {s.name for s in postgres.SQL} == {
        s.name for s in STATEMENTS
    }


def test_exceptions_name_real_statements() -> None:
    names = {statement.name for statement in STATEMENTS}
    for name in [*CROSS_SESSION, *SQLITE_KEYED_BY_ID]:
        assert name in names, f"{name} is listed here but no longer exists"


@pytest.mark.parametrize("module", BACKENDS)
def test_every_per_session_statement_names_session_id(module: ModuleType) -> None:
    allowed = CROSS_SESSION.keys() | (SQLITE_KEYED_BY_ID.keys() if module is sqlite else set())
    offenders = sorted(
        name
        for name, statement in _statements(module)
        if name not in allowed and refs(statement) and "session_id" not in statement
    )
    assert offenders == [], "statements on session rows that never name session_id"


def test_postgres_filters_every_table_it_touches_by_the_session_parameter() -> None:
    # Stricter than the above: each table a statement reads or writes is itself filtered by
    # the session parameter (a join that keys only its first table, or a subquery correlated
    # to a filtered outer row, still fans out on Citus, and FOR UPDATE is then refused).
    offenders = {
        name: missing
        for name, statement in _statements(postgres)
        if name not in CROSS_SESSION and (missing := unfiltered(statement))
    }
    assert offenders == {}


def test_postgres_joins_distributed_tables_on_session_id() -> None:
    # Cross-session statements included: Citus refuses other joins ("repartitioning").
    offenders = {
        name: missing
        for name, statement in _statements(postgres)
        if (missing := uncolocated(statement, SESSION_PARAMETER))
    }
    assert offenders == {}


def test_postgres_migrations_join_distributed_tables_on_session_id() -> None:
    # A migration may run on a cluster already distributed (docs/scaling.md: migrations).
    offenders = [
        statement
        for step in postgres.MIGRATIONS
        for statement in step
        if not statement.lstrip().startswith("CREATE VIEW") and uncolocated(statement)
    ]
    assert offenders == []


def test_the_correlated_head_lock_fails_the_check() -> None:
    assert unfiltered(CORRELATED_LOCK_HEAD) == ["runs c", "runs r"]
    assert unfiltered(postgres.SQL[LOCK_HEAD]) == []


def test_the_checks_can_fail() -> None:
    assert unfiltered("SELECT id FROM runs r JOIN items i ON i.run_id = r.id") == [
        "runs r",
        "items i",
    ]
    assert unfiltered("DELETE FROM items WHERE id = %(id)s") == ["items"]
    assert unfiltered("INSERT INTO runs (id) VALUES (1)") == ["INSERT INTO runs"]
    # Optional (under OR) or only through another table: not a filter.
    assert unfiltered("SELECT 1 FROM items WHERE (%(sid)s IS NULL OR session_id = %(sid)s)") == [
        "items"
    ]
    joined = (
        "SELECT 1 FROM runs r JOIN items i ON i.session_id = r.session_id AND i.run_id = r.id"
        " WHERE r.session_id = %(sid)s"
    )
    assert unfiltered(joined) == ["items i"]
    assert uncolocated(joined, SESSION_PARAMETER) == []
    assert (
        unfiltered(
            "SELECT 1 FROM runs r JOIN items i ON i.session_id = %(sid)s AND i.run_id = r.id"
            " WHERE r.session_id = %(sid)s"
        )
        == []
    )
    assert uncolocated("SELECT 1 FROM tool_calls t JOIN runs r ON r.id = t.run_id") == [
        "tool_calls t",
        "runs r",
    ]
    assert uncolocated(
        "WITH RECURSIVE p AS (SELECT id FROM runs WHERE session_id = 's'"
        " UNION ALL SELECT r.id FROM runs r JOIN p ON r.id = p.parent_id) SELECT * FROM p"
    ) == ["runs r"]


# ---------------------------------------------------------------------------------------------
# Keys: every unique and foreign key of a per-session table starts with session_id


def _create_tables() -> list[tuple[str, str]]:
    statements = [s for step in postgres.MIGRATIONS for s in step]
    found = []
    for statement in statements:
        match = re.match(r"\s*CREATE TABLE (\w+) \((.*)\)\s*$", statement, re.S)
        if match and match.group(1) in DISTRIBUTED:
            found.append((match.group(1), match.group(2)))
    return found


def test_postgres_keys_allow_distribution_by_session() -> None:
    tables = _create_tables()
    assert {name for name, _ in tables} >= {"sessions", "runs", "items", "tool_calls"}
    for name, body in tables:
        assert re.search(r"^\s*session_id TEXT", body, re.M), f"{name} lacks session_id"
        for kind, columns in re.findall(r"(PRIMARY KEY|UNIQUE|FOREIGN KEY) \(([^)]*)\)", body):
            assert columns.split(",")[0].strip() == "session_id", f"{name}: {kind} ({columns})"
        for line in body.splitlines():
            if "REFERENCES" in line and "FOREIGN KEY" not in line:  # an inline reference
                assert line.strip().startswith("session_id "), f"{name}: {line.strip()}"
            if "PRIMARY KEY" in line and "PRIMARY KEY (" not in line:
                assert name == "sessions", line
                assert line.strip().startswith("session_id "), line
    for step in postgres.MIGRATIONS:
        for statement in step:
            unique = re.match(r"\s*CREATE UNIQUE INDEX \w+ ON (\w+) \((\w+)", statement)
            if unique and unique.group(1) in DISTRIBUTED:
                assert unique.group(2) == "session_id", statement

"""Every per-session statement names its session; every key lets a store shard by session.

A sharded Postgres (Citus) places each session's rows on one node by ``session_id``: a
statement reaches a single node only when every table it reads or writes is filtered by
``session_id``, and a unique or foreign key is only allowed when it includes ``session_id``.
These tests read each backend's SQL table (every statement it runs, rendered) and migrations,
so that a new statement or table that breaks the rule fails here, not in production. The
exceptions are listed by statement name, with reasons.
"""

from __future__ import annotations

import re
from types import ModuleType

import pytest

from conftest import require_module
from turnstore import sqlite
from turnstore.core.statements import STATEMENTS

psycopg = require_module("psycopg")
from turnstore import postgres  # noqa: E402

BACKENDS = [pytest.param(sqlite, id="sqlite"), pytest.param(postgres, id="postgres")]

# The tables whose rows belong to one session.
PER_SESSION = ("sessions", "runs", "items", "tool_calls", "model_responses", "spans")

# Statements that are about the whole store by design, not about one session.
CROSS_SESSION = {
    "run": "a run by id alone, whatever its session (Store.run: deep links)",
    "tool_call": "a tool call by row id alone (Store.tool_call: deep links)",
    "index_pending": "whether the store-wide search index lacks items (SQLite)",
    "index_backlog": "feeds the store-wide search index the items it lacks (SQLite)",
    "mark_indexed": "records how far the store-wide search index reaches (SQLite)",
    "copy_backlog": "a read-only store's private copy of what the search index lacks (SQLite)",
    "sessions_by_created_at": "the session catalogue, newest first",
    "sessions_by_created_at_user": "the session catalogue of one user",
    "sessions_by_updated_at": "the session catalogue, recently active first",
    "sessions_by_updated_at_user": "the session catalogue of one user",
    "model_responses_by_all": "model responses across the store (analytics)",
    "slowest_spans_by_all": "the slowest trace spans across the store (analytics)",
    "error_spans_by_all": "the failed trace spans across the store (analytics)",
    "items_per_session": "how many items each session holds (turnstore copy's progress)",
}

# SQLite only: statements keyed by the primary key of a row that the same operation has
# already read from this session's own rows (the locked head, a run found by session, an
# item or call of that run). Postgres names session_id in these too, for its shards.
SQLITE_KEYED_BY_ID = {
    "ancestors_child_counts": "walks up from a run found by session",
    "first_item": "the first item of a run found by session",
    "items_of_runs": "runs of a window read by session",
    "last_item": "the last item of the locked head run",
    "run_items_before": "items of the locked head run, or of a run found by id",
    "shrink_run": "the locked head run",
}

_TABLE_REF = re.compile(
    r"\b(from|join|update|into|delete\s+from)\s+(" + "|".join(PER_SESSION) + r")\b"
    r"(?:\s+(?:as\s+)?([a-z_][a-z0-9_]*))?",
    re.IGNORECASE,
)
_NOT_ALIASES = {
    "where", "on", "join", "left", "right", "inner", "cross", "set", "order", "group", "limit",
    "using", "values", "natural", "full", "union", "returning", "having", "lateral", "for",
}  # fmt: skip


def _per_session_refs(statement: str) -> list[tuple[str, str, str]]:
    """(keyword, table, alias) of each reference to a per-session table."""
    refs = []
    for match in _TABLE_REF.finditer(statement):
        alias = (match.group(3) or "").lower()
        refs.append(
            (match.group(1).lower(), match.group(2), "" if alias in _NOT_ALIASES else alias)
        )
    return refs


def _unscoped_refs(statement: str) -> list[str]:
    """The references to per-session tables that no ``session_id`` condition reaches."""
    missing = []
    for keyword, table, alias in _per_session_refs(statement):
        if keyword == "into":  # an INSERT must write the column
            columns = statement[statement.index(table) : statement.index(")")]
            if "session_id" not in columns:
                missing.append(f"INSERT INTO {table}")
        elif alias:
            if not re.search(rf"\b{alias}\.session_id\b", statement):
                missing.append(f"{table} {alias}")
        elif not re.search(rf"(?<![\w.])session_id\s*(=|IN\b)|\b{table}\.session_id\b", statement):
            missing.append(table)
    return missing


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
        if name not in allowed and _per_session_refs(statement) and "session_id" not in statement
    )
    assert offenders == [], "statements on session rows that never name session_id"


def test_postgres_filters_every_table_it_touches_by_session() -> None:
    # Stricter than the above: each table a statement reads or writes is itself filtered by
    # session (a join that keys only its first table still fans out across shards).
    offenders = {
        name: missing
        for name, statement in _statements(postgres)
        if name not in CROSS_SESSION and (missing := _unscoped_refs(statement))
    }
    assert offenders == {}


def test_the_checks_can_fail() -> None:
    assert _unscoped_refs("SELECT id FROM runs r JOIN items i ON i.run_id = r.id") == [
        "runs r",
        "items i",
    ]
    assert _unscoped_refs("DELETE FROM items WHERE id = %(id)s") == ["items"]
    assert _unscoped_refs("INSERT INTO runs (id) VALUES (1)") == ["INSERT INTO runs"]
    assert (
        _unscoped_refs(
            "SELECT 1 FROM runs r JOIN items i ON i.session_id = r.session_id AND i.run_id = r.id"
            " WHERE r.session_id = %(sid)s"
        )
        == []
    )


# ---------------------------------------------------------------------------------------------
# Keys: every unique and foreign key of a per-session table starts with session_id


def _create_tables() -> list[tuple[str, str]]:
    statements = [s for step in postgres.MIGRATIONS for s in step]
    found = []
    for statement in statements:
        match = re.match(r"\s*CREATE TABLE (\w+) \((.*)\)\s*$", statement, re.S)
        if match and match.group(1) in PER_SESSION:
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
            if unique and unique.group(1) in PER_SESSION:
                assert unique.group(2) == "session_id", statement

"""Statements are declared once (``core.statements``) and every dialect provides what it must.

Each statement the core runs is provided by every backend's dialect, unless it needs a
capability that the backend lacks (then the core asks ``supports`` before running it, and the
dialect must not provide it); rows come back as the statement's row type, read by name.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import NamedTuple

import pytest

from support import require_module
from turnstore import sqlite
from turnstore.core import (
    annotation_sql,
    append_sql,
    catalogue_sql,
    dataset_sql,
    search_sql,
    tables,
    usage_sql,
)
from turnstore.core import results as R
from turnstore.core import statements as S
from turnstore.core.dialect import Dialect, check_columns, named, pyformat
from turnstore.core.ops import (
    All,
    Capability,
    Execute,
    Fetch,
    Insert,
    One,
    Query,
    Statement,
    Value,
    Values,
)
from turnstore.core.tables import DETAIL_COLUMNS, TOKEN_COLUMNS, usage_from_row, usage_params
from turnstore.domain.model import Usage
from turnstore.sqlite.sql import SYNTAX as SQLITE_SYNTAX

psycopg = require_module("psycopg")
from turnstore import postgres  # noqa: E402
from turnstore.postgres.driver import PostgresBackend  # noqa: E402

BACKENDS = [
    pytest.param(sqlite, sqlite.SQLiteBackend.capabilities, id="sqlite"),
    pytest.param(postgres, PostgresBackend.capabilities, id="postgres"),
]


@pytest.mark.parametrize(("module", "capabilities"), BACKENDS)
def test_each_dialect_provides_every_statement_it_can_run(
    module: ModuleType, capabilities: Capability
) -> None:
    expected = {s for s in S.STATEMENTS if not s.needs & ~capabilities}
    assert set(module.SQL) == expected
    assert module.sql.DIALECT.capabilities == capabilities


@pytest.mark.parametrize(("module", "capabilities"), BACKENDS)
def test_capabilities_guard_what_a_backend_lacks(
    module: ModuleType, capabilities: Capability
) -> None:
    lacking = {s.name for s in S.STATEMENTS if s not in module.SQL}
    assert lacking == {s.name for s in S.STATEMENTS if s.needs & ~capabilities}
    assert lacking  # each backend lacks something the other has (or the flag is for nothing)


def _declared(module: ModuleType, name: str) -> object:
    """What ``module`` declares as the statement ``name``: the symbol of that name in
    capitals, or a member of a family of statements (catalogue_sql's totals: a dict keyed by
    the groups a member assigns, named the family's name and its groups)."""
    if hasattr(module, name.upper()):
        return getattr(module, name.upper())
    for symbol, family in vars(module).items():
        if isinstance(family, dict):
            for key, member in family.items():
                if isinstance(key, tuple) and name == "_".join(map(str, (symbol.lower(), *key))):
                    return member
    return None


def test_statements_are_declared_once_by_name() -> None:
    names = [s.name for s in S.STATEMENTS]
    assert len(names) == len(set(names))
    for statement in S.STATEMENTS:  # the symbol is the name, in capitals: grep finds both
        modules = (annotation_sql, append_sql, catalogue_sql, usage_sql, dataset_sql, search_sql)
        module = next((m for m in modules if statement in m.STATEMENTS), S)
        assert _declared(module, statement.name) is statement


@pytest.mark.parametrize("module", [sqlite, postgres], ids=["sqlite", "postgres"])
def test_placeholders_are_rendered_in_the_dialects_style(module: ModuleType) -> None:
    for statement, sql in module.SQL.items():
        if module is sqlite:
            assert "%(" not in sql, statement
        else:
            assert re.search(r"(?<![:\w]):[a-z_]", sql) is None, (statement, sql)


def test_pyformat_rendering() -> None:
    assert pyformat("a = :a AND b::jsonb = :b::jsonb AND c LIKE '5%'") == (
        "a = %(a)s AND b::jsonb = %(b)s::jsonb AND c LIKE '5%%'"
    )
    assert named("a = :a") == "a = :a"


def test_a_dialect_must_provide_every_statement_it_can_run() -> None:
    def dialect(own: dict[Statement, str], statement: Statement) -> Dialect:
        return Dialect(
            "x",
            own,
            render=named,
            capabilities=Capability.NONE,
            syntax=SQLITE_SYNTAX,
            statements=[statement],
        )

    lone = Execute("lone")
    with pytest.raises(AssertionError, match="lacks the statement lone"):
        dialect({}, lone)
    guarded = Execute("guarded", needs=Capability.UPSERT_HEAD)
    with pytest.raises(AssertionError, match="cannot run"):
        dialect({guarded: "SELECT 1"}, guarded)
    with pytest.raises(LookupError, match="x cannot run guarded"):
        dialect({}, guarded)[guarded]


def test_inserts_return_their_id() -> None:
    inserts = [s for s in S.STATEMENTS if isinstance(s, Insert)]
    assert inserts
    for statement in inserts:
        assert postgres.SQL[statement].rstrip().endswith("RETURNING id")
        assert "RETURNING" not in sqlite.SQL[statement]


def test_fetch_kinds_and_row_types() -> None:
    assert S.SESSION_RUN.fetch is Fetch.ONE
    assert S.SESSION_RUN.columns[0] == "id"
    assert isinstance(S.PATH_RUNS, All)
    assert isinstance(S.LOCK_HEAD, One)
    assert isinstance(S.PATH_ITEMS, Values)
    assert S.PATH_ITEMS.columns == ("data",)
    assert isinstance(S.FIRST_CHILD, Value)
    assert S.FIRST_CHILD.fetch is Fetch.VALUE
    assert Query(S.SET_HEAD, {}).fetch is Fetch.NONE
    with pytest.raises(AttributeError):  # and a type error: raw SQL needs raw=True
        Query("SELECT 1")  # type: ignore[call-overload]


def test_a_column_out_of_place_fails_loudly() -> None:
    description = [(name, None) for name in R.HeadRow._fields]
    check_columns(S.LOCK_HEAD, description)
    moved = [description[1], description[0], *description[2:]]
    with pytest.raises(AssertionError, match="lock_head returned the columns"):
        check_columns(S.LOCK_HEAD, moved)
    with pytest.raises(AssertionError):
        check_columns(S.LOCK_HEAD, [*description, ("extra", None)])


def test_row_types_that_extend_another_keep_its_columns_first() -> None:
    # Records are built from the leading fields (``run_from_row`` reads a window's row as a
    # run's; a copied tool call begins as a tool call), and usage from the token columns.
    assert S.PathWindowRow._fields[: len(S.RunRow._fields)] == S.RunRow._fields
    assert tables.CopyToolCallRow._fields[: len(S.ToolCallRow._fields)] == S.ToolCallRow._fields

    class Short(NamedTuple):
        id: int

    with pytest.raises(TypeError, match="must be ToolCallRow's columns then"):
        tables.check_extends(Short, tables.ToolCallRow, ())
    for row in (S.RunRow, R.ModelResponseRow, R.UsageSumRow):
        assert set(TOKEN_COLUMNS) <= set(row._fields), row


def test_the_token_columns_are_usage_s_fields() -> None:
    assert tuple(Usage.__slots__) == TOKEN_COLUMNS + DETAIL_COLUMNS
    usage = Usage(1, 2, 3, 4, 5, 6, {"cache_write_tokens": 7}, {"reasoning_tokens": 6})
    assert usage_params(usage) == {
        **dict(zip(TOKEN_COLUMNS, range(1, 7), strict=True)),
        "input_tokens_details": '{"cache_write_tokens": 7}',
        "output_tokens_details": '{"reasoning_tokens": 6}',
    }
    row = R.UsageSumRow("k", 1, *range(1, 7))
    assert usage_from_row(row) == Usage(1, 2, 3, 4, 5, 6)
    for statement in (S.INSERT_MODEL_RESPONSE, S.ADD_RUN_USAGE, S.SET_RUN_USAGE):
        for sql in (sqlite.SQL[statement], postgres.SQL[statement]):
            assert all(column in sql for column in TOKEN_COLUMNS + DETAIL_COLUMNS), statement.name

"""A backend's dialect: its SQL for every statement, rendered once, and the check of its rows.

Every statement's SQL is written with ``:name`` placeholders, here (the shared ones, in
``core.statements``) and in each dialect's ``sql`` module (the ones that differ). A dialect
renders them once, at import, into a table keyed by the statement symbols; its driver looks
statements up there and builds each row as the statement's row type, after checking once per
statement that the database returns the columns the row type names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .ops import Capability, Fetch, Insert, Statement
from .shared_sql import shared_sql
from .statements import STATEMENTS
from .syntax import Syntax

__all__ = ["Dialect", "check_columns", "named", "pyformat", "result_row", "result_rows"]

# A ``:name`` placeholder; not a PostgreSQL cast (``x::int``) nor part of a word.
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def named(sql: str) -> str:
    """SQLite's placeholders are ``:name`` themselves."""
    return sql


def pyformat(sql: str) -> str:
    """``:name`` placeholders as psycopg's ``%(name)s`` (a literal % becomes %%)."""
    return _PLACEHOLDER.sub(r"%(\1)s", sql.replace("%", "%%"))


class Dialect:
    """The SQL of one backend: every statement it can run, rendered, by statement symbol.

    ``own`` holds the dialect's text of the statements that differ in shape (and may replace a
    shared one's); ``syntax`` renders the statements written once with small per-dialect
    tokens (``core.shared_sql``); every other statement it can run (all but those needing a
    capability it lacks) must be shared verbatim. ``returning_id``: an ``Insert`` returns its
    id by ``RETURNING id`` (PostgreSQL; SQLite's driver reads ``lastrowid``).
    """

    def __init__(
        self,
        name: str,
        own: Mapping[Statement, str],
        *,
        render: Callable[[str], str],
        capabilities: Capability,
        syntax: Syntax,
        returning_id: bool = False,
        statements: Iterable[Statement] = STATEMENTS,
    ) -> None:
        self.name = name
        self.capabilities = capabilities
        self.render = render
        shared = shared_sql(syntax)
        sql: dict[Statement, str] = {}
        for statement in statements:
            text = own.get(statement, shared.get(statement, statement.sql))
            if statement.needs & ~capabilities:
                if statement in own:
                    raise AssertionError(f"{name} writes {statement.name}, which it cannot run")
                continue
            if text is None:
                raise AssertionError(f"{name} lacks the statement {statement.name}")
            if returning_id and isinstance(statement, Insert):
                text += "\n        RETURNING id"
            sql[statement] = render(text)
        unknown = [statement.name for statement in own if statement not in sql]
        if unknown:
            raise AssertionError(f"{name} writes statements the core does not declare: {unknown}")
        self.sql: Mapping[Statement, str] = sql
        self.checked: set[Statement] = set()
        """The statements whose rows ``check`` found right (drivers skip it for those)."""

    def __getitem__(self, statement: Statement) -> str:
        try:
            return self.sql[statement]
        except KeyError:
            raise LookupError(
                f"{self.name} cannot run {statement.name}: it lacks {statement.needs!r}"
            ) from None

    def check(self, statement: Statement, description: Sequence[Any] | None) -> None:
        """``check_columns``, once per statement in this process."""
        if statement not in self.checked:
            check_columns(statement, description)
            self.checked.add(statement)


def result_rows(statement: Statement, rows: Iterable[Any]) -> list[Any]:
    """What a query of ``statement`` (fetch ALL or VALUES) returns for the rows fetched."""
    if statement.fetch is Fetch.VALUES:
        return [value for (value,) in rows]
    return list(map(statement.make, rows))  # type: ignore[arg-type]


def result_row(statement: Statement, row: Any) -> Any:
    """What a query of ``statement`` (fetch ONE, VALUE or ID) returns for the row fetched."""
    if row is None:
        return None
    if statement.fetch is Fetch.ONE:
        return statement.make(row)  # type: ignore[misc]
    (value,) = row
    return value


def check_columns(statement: Statement, description: Sequence[Any] | None) -> None:
    """Refuse rows whose columns are not those the statement's row type names, in order.

    Drivers call it once per statement (the first time it returns rows), so that a column
    added, dropped or moved fails loudly instead of shifting every field after it.
    """
    found = tuple(column[0] for column in description or ())
    if found != statement.columns:
        raise AssertionError(
            f"statement {statement.name} returned the columns {found}, "
            f"but its row type names {statement.columns}"
        )

"""The opt-in Citus run: the PostgreSQL tests again, on a Citus cluster, tables distributed.

Set ``TURNSTORE_TEST_CITUS_URL`` to a Citus coordinator's URL (a database with the citus
extension, workers added) and run the PostgreSQL tests (``pytest -m postgres``). Then:

- the tests' PostgreSQL server is the coordinator (support.POSTGRES_URL);
- every turnstore schema a test creates is distributed right after its creation, by the SQL
  of docs/scaling.md (its distribution block, with the test's schema in its ``SET
  search_path``): the suite runs on what the page tells operators to build;
- the first time each statement of the library runs (postgres/sql.py), it is EXPLAINed on the
  same transaction; at the end, every per-session statement (tests/sqlscope.py's
  CROSS_SESSION lists the others) must have planned as one task, or the run fails. The
  summary lists the task count of every statement seen, the cross-session ones included.

Unset (CI: Citus is not in the package registries), nothing here is active and
tests/test_citus.py skips. Build Citus from its public source (its README) to run this.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from sqlscope import CROSS_SESSION, refs

CITUS_URL = os.environ.get("TURNSTORE_TEST_CITUS_URL", "")

SCALING_DOC = Path(__file__).resolve().parent.parent / "docs" / "scaling.md"

# Whether each new schema is distributed (tests/test_scaling_doc.py distributes its own).
AUTO_DISTRIBUTE = True

# Statement name -> the task counts of its plan, as EXPLAINed the first time it ran.
PLANS: dict[str, list[int]] = {}

_EXPLAINABLE = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", re.I)

# An INSERT ... SELECT into a table with an identity column runs through the coordinator (it
# draws the ids); Citus runs it with parameters but cannot EXPLAIN it so ("could not create
# distributed plan"): it is EXPLAINed with its parameters written in as literals.
_INSERT_SELECT = re.compile(r"\s*INSERT\s+INTO\s+\w+\s*\([^)]*\)\s*SELECT\b", re.I)


def distribution_sql() -> list[str]:
    """The statements docs/scaling.md gives to distribute a schema, in order (the SQL block
    that calls create_distributed_table), its comments dropped."""
    blocks = re.findall(r"```sql\n(.*?)```", SCALING_DOC.read_text(encoding="utf-8"), re.S)
    (block,) = [b for b in blocks if "create_distributed_table" in b]
    text = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in text.split(";") if s.strip()]


def inlined(text: str, params: Mapping[str, Any]) -> str:
    """``text`` (psycopg's ``%(name)s`` placeholders) with ``params`` written in as literals."""
    from psycopg import sql

    def literal(match: re.Match[str]) -> str:
        name = match.group(1)
        return sql.Literal(params[name]).as_string(None) if name else "%"

    return re.sub(r"%\((\w+)\)s|%%", literal, text)


def task_counts(plan: list[str]) -> list[int]:
    """The task count of every distributed step of an EXPLAIN (none: planned locally)."""
    return [int(n) for line in plan for n in re.findall(r"Task Count: (\d+)", line)]


async def _distribute(conn: Any, schema: str) -> None:
    """Distribute ``schema``'s tables as docs/scaling.md says (those that exist and are not
    yet: a test may stop the migrations early, or migrate again), in one transaction. Not in
    a database without Citus (a test's own CREATE DATABASE): its tables stay local."""
    from psycopg import sql

    cursor = await conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'")
    if await cursor.fetchone() is None:
        return
    for statement in distribution_sql():
        if statement.upper().startswith("SET SEARCH_PATH"):
            path = sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema))
            await conn.execute(path)
            continue
        table = re.search(r"\('(\w+)'", statement)
        assert table is not None, statement
        cursor = await conn.execute(
            "SELECT to_regclass(%(t)s) IS NOT NULL AND NOT EXISTS ("
            " SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass(%(t)s))",
            {"t": table.group(1)},
        )
        if (await cursor.fetchone())[0]:
            await conn.execute(statement)


def _install() -> None:
    """Distribute each schema turnstore creates, and EXPLAIN each statement's first run."""
    from turnstore.core.ops import Fetch, Op, Query
    from turnstore.postgres import driver, transaction
    from turnstore.postgres.sql import DIALECT

    names = {text: statement.name for statement, text in DIALECT.sql.items()}
    prepare = driver.PostgresBackend._prepare_schema

    async def prepare_and_distribute(self: Any, conn: Any) -> None:
        await prepare(self, conn)
        if self.found_version is not None or self.read_only or not AUTO_DISTRIBUTE:
            return
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", [driver._lock_key(self.schema)])
            await _distribute(conn, self.schema)

    drive = transaction.Transactions.drive

    def explained(op: Op[Any]) -> Op[Any]:
        result: Any = None
        while True:
            try:
                query = op.send(result)
            except StopIteration as stop:
                return stop.value
            if not query.raw:
                text = DIALECT.sql[query.statement]
                name = names.get(text)  # None: SQL a test substituted (an old version's)
                # DDL cannot be EXPLAINed; statements on no distributed table run locally.
                if name and name not in PLANS and refs(text) and _EXPLAINABLE.match(text):
                    params = query.params
                    if _INSERT_SELECT.match(text):
                        text, params = inlined(text, params), {}
                    plan = yield Query(f"EXPLAIN (COSTS OFF) {text}", params, Fetch.ALL, raw=True)
                    PLANS[name] = task_counts([row[0] for row in plan])
            result = yield query

    async def drive_explained(conn: Any, op: Op[Any]) -> Any:
        return await drive(conn, explained(op))

    driver.PostgresBackend._prepare_schema = prepare_and_distribute  # type: ignore[method-assign]
    transaction.Transactions.drive = staticmethod(drive_explained)  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    if CITUS_URL:
        _install()


def misrouted(cross_session: Callable[[str], bool]) -> dict[str, list[int]]:
    """The per-session statements seen that did not plan as exactly one task."""
    return {
        name: counts
        for name, counts in sorted(PLANS.items())
        if not cross_session(name) and counts != [1]
    }


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not CITUS_URL or not PLANS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("Citus: task count of each statement's plan (EXPLAIN)")
    for name, counts in sorted(PLANS.items()):
        kind = "cross-session" if name in CROSS_SESSION else "per-session"
        write(f"{name:40} {kind:14} tasks {counts or 'local'}")
    wrong = misrouted(CROSS_SESSION.__contains__)
    if wrong:
        write(f"NOT ONE TASK: {wrong}", red=True)
        terminalreporter._session.exitstatus = pytest.ExitCode.TESTS_FAILED

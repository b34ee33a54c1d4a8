"""The floor of a write (issue 32): the rows turnstore stores for an SDK turn, inserted into
turnstore's own tables by plain ``executemany`` in one transaction, with no turnstore logic.

The rows are turnstore's own. The turns are first written through ``StructuredSession`` into a
template session of the same database (untimed), and the rows it stored (each turn's run, its
items, its tool calls) are read back. A timed call then inserts the next turn's rows into the
measured session, which already holds its history:

- ids are allocated up front (explicit ``id`` values), so nothing waits for a ``RETURNING``;
- the run hangs below the session's head, one level deeper;
- three ``operations`` rows: the keys turnstore's exactly-once writes store, one per
  ``add_items`` call of the SDK turn;
- one ``UPDATE`` moves the session's head and ``updated_at``.

What the floor leaves out is turnstore's work: classifying and encoding the items, the three
transactions (one per ``add_items``) and their thread hops (SQLite), the session upserts and
checks, the run's updates as the turn grows. What it keeps is the schema's cost: the same
indexes and triggers (SQLite's search index) run for its rows as for turnstore's. SQLite runs
on the calling thread with the store's settings (WAL, ``synchronous=NORMAL``, foreign keys);
PostgreSQL sends the whole transaction in one pipeline: one round trip.
"""

from __future__ import annotations

import itertools
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import Action

Row = dict[str, Any]
Statements = list[tuple[str, list[Row]]]  # (SQL, the rows it is run for), in order
TEMPLATE = "write-floor-template"
TABLES = ("runs", "items", "tool_calls")
ADD_ITEMS_PER_TURN = 3  # the SDK's three add_items calls: three operation keys


@dataclass
class TurnRows:
    """One turn's rows as turnstore stored them."""

    run: Row
    items: list[Row]
    tool_calls: list[Row]


def group_turns(
    runs: Sequence[Row], items: Sequence[Row], tool_calls: Sequence[Row]
) -> list[TurnRows]:
    """The template session's rows, one ``TurnRows`` per run, oldest first."""
    turns = {run["id"]: TurnRows(dict(run), [], []) for run in sorted(runs, key=lambda r: r["id"])}
    for item in sorted(items, key=lambda r: (r["run_id"], r["position"])):
        turns[item["run_id"]].items.append(dict(item))
    for call in sorted(tool_calls, key=lambda r: r["id"]):
        turns[call["run_id"]].tool_calls.append(dict(call))
    return list(turns.values())


class FloorPlan:
    """The statements that insert each next turn's rows into ``session_id``, ids allocated
    here: ``head`` and ``depth`` are the session's head run and its depth, ``next_id`` the
    first free id of each table."""

    def __init__(
        self,
        session_id: str,
        turns: Sequence[TurnRows],
        *,
        head: int,
        depth: int,
        next_id: dict[str, int],
        placeholder: Callable[[str], str],
    ) -> None:
        self.session_id = session_id
        self.turns = iter(turns)
        self.head, self.depth = head, depth
        self.ids = {table: itertools.count(next_id[table]) for table in TABLES}
        self.placeholder = placeholder
        self.sql: dict[tuple[str, tuple[str, ...]], str] = {}

    def insert(self, table: str, rows: list[Row]) -> tuple[str, list[Row]]:
        """``INSERT INTO table`` for ``rows`` (all with the same columns)."""
        columns = tuple(rows[0])
        key = (table, columns)
        if key not in self.sql:
            values = ", ".join(self.placeholder(column) for column in columns)
            self.sql[key] = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values})"
        return self.sql[key], rows

    def next_turn(self) -> Statements:
        """The next turn's statements (``StopIteration`` when the template runs out)."""
        turn = next(self.turns)
        run_id = next(self.ids["runs"])
        sid = self.session_id
        run = {**turn.run, "id": run_id, "session_id": sid, "parent_id": self.head}
        run["depth"] = self.depth + 1
        item_ids = {item["id"]: next(self.ids["items"]) for item in turn.items}
        items = [
            {**item, "id": item_ids[item["id"]], "session_id": sid, "run_id": run_id}
            for item in turn.items
        ]
        calls = [
            {
                **call,
                "id": next(self.ids["tool_calls"]),
                "session_id": sid,
                "run_id": run_id,
                "call_item_id": item_ids.get(call["call_item_id"]),
                "output_item_id": item_ids.get(call["output_item_id"]),
            }
            for call in turn.tool_calls
        ]
        keys = [
            {"session_id": sid, "op_id": uuid.uuid4().hex, "result": str(run_id)}
            for _ in range(ADD_ITEMS_PER_TURN)
        ]
        self.head, self.depth = run_id, run["depth"]
        head = {"session_id": sid, "head": run_id, "now": run["updated_at"]}
        p = self.placeholder
        statements = [self.insert("runs", [run]), self.insert("items", items)]
        if calls:
            statements.append(self.insert("tool_calls", calls))
        statements.append(self.insert("operations", keys))
        statements.append(
            (
                f"UPDATE sessions SET head_run_id = {p('head')}, updated_at = {p('now')}"
                f" WHERE session_id = {p('session_id')}",
                [head],
            )
        )
        return statements


# ---------------------------------------------------------------------------------------------
# SQLite


def _sqlite_rows(conn: sqlite3.Connection, sql: str, *params: Any) -> list[Row]:
    cursor = conn.execute(sql, params)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def sqlite_floor_writer(path: Path, session_id: str) -> tuple[Action, Callable[[], None]]:
    """The floor's action on a turnstore SQLite file whose session ``TEMPLATE`` holds the
    turns to copy and whose ``session_id`` holds the measured history (each call inserts the
    next turn in one transaction, on the calling thread), and the closer of its connection."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    # turnstore's connection settings (sqlite/driver.py, sqlite/files.py).
    for pragma in ("synchronous = NORMAL", "foreign_keys = ON", "temp_store = MEMORY"):
        conn.execute(f"PRAGMA {pragma}")
    conn.execute("PRAGMA cache_size = -32768")
    template = [
        _sqlite_rows(conn, f"SELECT * FROM {table} WHERE session_id = ?", TEMPLATE)
        for table in TABLES
    ]
    (head,) = _sqlite_rows(
        conn,
        "SELECT r.id, r.depth FROM sessions s JOIN runs r ON r.id = s.head_run_id"
        " WHERE s.session_id = ?",
        session_id,
    )
    next_id = {
        table: conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").fetchone()[0]
        for table in TABLES
    }
    plan = FloorPlan(
        session_id,
        group_turns(*template),
        head=head["id"],
        depth=head["depth"],
        next_id=next_id,
        placeholder=lambda name: f":{name}",
    )

    async def write() -> None:
        statements = plan.next_turn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, rows in statements:
                conn.executemany(sql, rows)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    return write, conn.close


# ---------------------------------------------------------------------------------------------
# PostgreSQL


async def postgres_floor_writer(
    url: str, schema: str, session_id: str
) -> tuple[Action, Callable[[], Awaitable[None]]]:
    """The floor's action on a turnstore PostgreSQL schema (as ``sqlite_floor_writer``), and
    the closer of its connection. Each call sends its transaction in one pipeline."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute("SELECT set_config('search_path', %s, false)", [f'"{schema}"'])
    await conn.execute("SET TIME ZONE 'UTC'")  # as turnstore's connections (postgres/)

    async def rows(sql: str, *params: Any) -> list[Row]:
        cursor = await conn.execute(sql, params)
        names = [column.name for column in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in await cursor.fetchall()]

    # Generated columns (the search vector) are the server's to fill.
    generated = {
        (row["table_name"], row["column_name"])
        for row in await rows(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = %s AND is_generated = 'ALWAYS'",
            schema,
        )
    }
    template = []
    for table in TABLES:
        found = await rows(f"SELECT * FROM {table} WHERE session_id = %s", TEMPLATE)
        template.append(
            [{k: v for k, v in row.items() if (table, k) not in generated} for row in found]
        )
    (head,) = await rows(
        "SELECT r.id, r.depth FROM sessions s JOIN runs r ON r.id = s.head_run_id"
        " WHERE s.session_id = %s",
        session_id,
    )
    next_id = {}
    for table in TABLES:
        (found,) = await rows(f"SELECT coalesce(max(id), 0) + 1 AS next FROM {table}")
        next_id[table] = found["next"]
    plan = FloorPlan(
        session_id,
        group_turns(*template),
        head=head["id"],
        depth=head["depth"],
        next_id=next_id,
        placeholder=lambda name: f"%({name})s",
    )

    async def write() -> None:
        statements = plan.next_turn()
        async with conn.pipeline():
            await conn.execute("BEGIN")
            async with conn.cursor() as cursor:
                for sql, params in statements:
                    await cursor.executemany(sql, params)
            await conn.execute("COMMIT")

    return write, conn.close

"""Retention by time, as docs/scaling.md shows it: idle conversations go whole (their
annotations too), others stay."""

from __future__ import annotations

import contextlib
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from builders import assistant, call, output, user
from support import sql
from turnstore import ConflictError, SessionNotFoundError, Store
from turnstore.core.ops import Op, Query

DOC = (Path(__file__).resolve().parents[1] / "docs" / "scaling.md").read_text(encoding="utf-8")
LONG_AGO = "'2020-01-01 00:00:00.000000+00:00'"
TABLES = ("sessions", "runs", "items", "tool_calls", "annotations")


async def _write(store: Store, statement: str) -> None:
    def op() -> Op[None]:
        yield Query(statement, raw=True)

    await store.backend.run(op, write=True)


async def _two_old_one_new(store: Store) -> None:
    for session_id in ("old-1", "old-2", "new"):
        await store.add_items(session_id, [user("q"), call("c", "tool"), output("c", "o")])
        run = await store.add_items(session_id, [assistant("a")])
        assert run is not None
        (tool,) = await store.tool_calls(session_id=session_id)
        await store.annotate(run, "thumbs", value=0)
        await store.annotate(run, "correct", value=1, tool_call_id=tool.id)
    await _write(
        store,
        f"UPDATE sessions SET updated_at = {LONG_AGO} WHERE session_id IN ('old-1', 'old-2')",
    )


async def _left(store: Store) -> dict[str, Any]:
    counts = {}
    for table in TABLES:
        rows = await sql(store, f"SELECT DISTINCT session_id FROM {table} ORDER BY session_id")
        counts[table] = [row[0] for row in rows]
    return counts


async def test_python_retention_loop_removes_idle_sessions_whole(store: Store) -> None:
    await _two_old_one_new(store)
    # The loop of docs/scaling.md, with a page size that needs more than one page.
    cutoff = datetime.now(timezone.utc) - timedelta(days=90)
    while sessions := (
        await store.sessions(updated_before=cutoff, order_by="updated_at", limit=1)
    ).sessions:
        for info in sessions:
            # Written since the page was read (kept), or deleted meanwhile.
            with contextlib.suppress(ConflictError, SessionNotFoundError):
                await store.delete_session(info.session_id, updated_before=cutoff)
    assert await _left(store) == {table: ["new"] for table in TABLES}
    assert await store.get_items("new") == [
        user("q"),
        call("c", "tool"),
        output("c", "o"),
        assistant("a"),
    ]


async def test_a_delete_of_an_idle_session_keeps_one_written_since(store: Store) -> None:
    """``delete_session(updated_before=)`` deletes only a session still idle: a write between
    reading the catalogue and deleting keeps the session (``ConflictError``), whole."""
    await _two_old_one_new(store)
    cutoff = datetime.now(timezone.utc) - timedelta(days=90)
    page = await store.sessions(updated_before=cutoff, order_by="updated_at", limit=10)
    assert sorted(info.session_id for info in page.sessions) == ["old-1", "old-2"]
    await store.add_items("old-1", [user("back again")])  # after the page was read
    with pytest.raises(ConflictError, match="old-1"):
        await store.delete_session("old-1", updated_before=cutoff)
    await store.delete_session("old-2", updated_before=cutoff)
    with pytest.raises(SessionNotFoundError):
        await store.delete_session("old-2", updated_before=cutoff)
    assert await _left(store) == {table: ["new", "old-1"] for table in TABLES}
    assert (await store.get_items("old-1"))[-1] == user("back again")


async def test_sql_retention_statement_of_the_docs(store: Store, backend_name: str) -> None:
    (statement,) = [
        block for block in re.findall(r"```sql\n(.*?)```", DOC, re.S) if "DELETE FROM" in block
    ]
    if backend_name != "postgres":  # the docs' statement is PostgreSQL's; SQLite spells time so
        statement = statement.replace("now() - interval '90 days'", "datetime('now', '-90 days')")
    await _two_old_one_new(store)
    await _write(store, statement)
    assert await _left(store) == {table: ["new"] for table in TABLES}

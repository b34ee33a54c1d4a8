"""Schema migrations: every earlier version upgrades to the newest with its data, safely.

For each backend that keeps its database between opens (a SQLite file, Postgres), and for each
version ``v`` below the newest, a database is created at ``v`` (by opening it while the
backend's ``MIGRATIONS`` is cut to its first ``v`` steps), given data with the columns of that
version, then opened with the full list: every step lands with its version row and the data
reads back through the API. New migrations are covered as they are appended; a migration that
renames or drops a column the seed uses must say so here.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import turnstore
import workers
from builders import assistant, call, output, span_record, user
from catalogue import SDK_ERROR as FAILED_OUTPUT
from catalogue import assert_kept, kept
from chains import SESSION_TABLES, build_chain, count_rows
from support import POSTGRES_URL, require_postgres, writes_before_totals
from turnstore import SchemaError, Store, Usage
from turnstore.core.ops import Fetch, Query
from turnstore.core.spans import ToolOutcome

PERSISTENT = [
    pytest.param("sqlite-file", id="sqlite-file"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]

STAMP = "'2024-01-02 03:04:05.000000+00:00'"

# Data in the columns of version 1 (the first schema), written as plain SQL that both
# backends accept: one session whose head is a run of two items.
SEED: list[str] = [
    f"""INSERT INTO sessions (session_id, title, created_at, updated_at)
        VALUES ('old', 'Old', {STAMP}, {STAMP})""",
    f"""INSERT INTO runs (session_id, parent_id, depth, user_message, assistant_message,
                          item_count, created_at, updated_at)
        VALUES ('old', NULL, 0, 'hello', 'hi there', 2, {STAMP}, {STAMP})""",
    f"""INSERT INTO items (session_id, run_id, position, type, role, text, data, created_at)
        SELECT 'old', id, 0, 'message', 'user', 'hello',
               '{{"role": "user", "content": "hello"}}', {STAMP}
        FROM runs WHERE session_id = 'old'""",
    f"""INSERT INTO items (session_id, run_id, position, type, role, text, data, created_at)
        SELECT 'old', id, 1, 'message', 'assistant', 'hi there',
               '{{"role": "assistant", "content": "hi there", "type": "message"}}', {STAMP}
        FROM runs WHERE session_id = 'old'""",
    """UPDATE sessions SET head_run_id = (SELECT id FROM runs WHERE session_id = 'old')
        WHERE session_id = 'old'""",
]
SEEDED_ITEMS = [
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi there", "type": "message"},
]


def _module(backend: str) -> ModuleType:
    if backend == "postgres":
        from turnstore.postgres import migrations

        return migrations
    from turnstore.sqlite import migrations

    return migrations


class Databases:
    """Fresh databases of one backend: (target, options) pairs, removed afterwards."""

    def __init__(self, backend: str, tmp_path: Path) -> None:
        self.backend, self.tmp_path = backend, tmp_path
        self.schemas: list[str] = []

    def new(self) -> tuple[str, dict[str, Any]]:
        label = uuid.uuid4().hex[:12]
        if self.backend == "postgres":
            self.schemas.append(f"m_{label}")
            return POSTGRES_URL, {"schema": self.schemas[-1]}
        return str(self.tmp_path / f"{label}.db"), {}

    def drop(self) -> None:
        if self.schemas:
            import psycopg

            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                for schema in self.schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=PERSISTENT)
def databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Databases]:
    """A factory of fresh persistent databases of the test's backend."""
    if request.param == "postgres":
        require_postgres()
    made = Databases(request.param, tmp_path)
    yield made
    made.drop()


async def _raw(store: Store, statement: str, fetch: Fetch = Fetch.NONE, *, write: bool) -> Any:
    def op() -> Any:
        return (yield Query(statement, fetch=fetch, raw=True))

    return await store.backend.run(op, write=write)


async def _versions(store: Store) -> list[int]:
    rows = await _raw(
        store, "SELECT version FROM turnstore_schema ORDER BY version", Fetch.ALL, write=False
    )
    return [row[0] for row in rows]


def _open_at(
    monkeypatch: pytest.MonkeyPatch, databases: Databases, version: int
) -> tuple[Store, tuple[str, dict[str, Any]]]:
    """A new database at schema ``version``, open."""
    module = _module(databases.backend)
    target = databases.new()
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", module.MIGRATIONS[:version])
        store = Store.open(target[0], **target[1])
    return store, target


async def test_every_earlier_version_upgrades_with_its_data(
    databases: Databases, monkeypatch: pytest.MonkeyPatch
) -> None:
    newest = len(_module(databases.backend).MIGRATIONS)
    for version in range(newest):
        store, (target, options) = _open_at(monkeypatch, databases, version)
        try:
            if version >= 1:
                assert await _versions(store) == list(range(1, version + 1))
                for statement in SEED:
                    await _raw(store, statement, write=True)
        finally:
            await store.aclose()

        upgraded = Store.open(target, **options)
        try:
            assert upgraded.backend.found_version == (version or None)
            assert await _versions(upgraded) == list(range(1, newest + 1)), f"from {version}"
            if version >= 1:
                assert await upgraded.get_items("old") == SEEDED_ITEMS, f"from {version}"
                (run,) = await upgraded.runs("old")
                assert (run.user_message, run.assistant_message) == ("hello", "hi there")
                # Filled in by the migration that brought statuses (SQLite 9, PostgreSQL 8);
                # the seed writes none, so a database past it keeps the seed's NULL.
                with_status = 8 if databases.backend == "postgres" else 9
                assert run.status == ("completed" if version < with_status else None)
                info = await upgraded.session("old")
                assert info is not None
                assert info.title == "Old"
                # Old items are indexed for search, under the newest configuration: "there" is
                # an english stop word that PostgreSQL's search dropped before migration 7.
                assert [hit.role for hit in await upgraded.search("there")] == ["assistant"]
            # The upgraded database takes new writes on the old history.
            await upgraded.add_items("old", [user("again"), assistant("sure")])
            tail = await upgraded.get_items("old", limit=2)
            assert tail == [user("again"), assistant("sure")]
        finally:
            await upgraded.aclose()


async def test_reopening_the_newest_version_changes_nothing(databases: Databases) -> None:
    target, options = databases.new()
    newest = len(_module(databases.backend).MIGRATIONS)
    assert turnstore.migrate(target, **options) is None  # it held no turnstore schema
    assert turnstore.migrate(target, **options) == newest  # the version it found
    with Store.open(target, **options) as store:
        assert store.backend.found_version == newest
        assert await _versions(store) == list(range(1, newest + 1))
    with Store.open(target, read_only=True, **options) as reader:
        assert reader.backend.found_version == newest


async def test_a_newer_schema_is_refused(databases: Databases) -> None:
    target, options = databases.new()
    with Store.open(target, **options) as store:
        newest = len(_module(databases.backend).MIGRATIONS)
        await _raw(
            store, f"INSERT INTO turnstore_schema (version) VALUES ({newest + 1})", write=True
        )
    with pytest.raises(SchemaError, match="upgrade turnstore"):
        Store.open(target, **options)


async def test_concurrent_migrate_from_several_processes(databases: Databases) -> None:
    target, options = databases.new()
    ctx = workers.context()
    start = ctx.Barrier(4)
    processes = [
        ctx.Process(target=workers.migrate_process, args=(target, options, start)) for _ in range(4)
    ]
    for process in processes:
        process.start()
    for process in processes:
        await asyncio.to_thread(process.join, 120)
    assert [process.exitcode for process in processes] == [0] * 4
    with Store.open(target, **options) as store:
        newest = len(_module(databases.backend).MIGRATIONS)
        assert await _versions(store) == list(range(1, newest + 1))  # each step once
        await store.add_items("s", [user("works")])
        assert await store.get_items("s") == [user("works")]


async def test_a_long_conversation_written_before_the_cascade_went_can_be_deleted(
    databases: Databases, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step 12 of both backends: runs.parent_id stops cascading (SQLite stopped a chain of
    cascades at 1,000 levels). A session of 1,000 runs written before it is cleared after it,
    and the rebuild of SQLite's runs table keeps its AUTOINCREMENT counter: the id of a run
    deleted before the upgrade is not handed out again."""
    store, (target, options) = _open_at(monkeypatch, databases, 11)
    try:
        with writes_before_totals(store.dialect):
            await build_chain(store, "long", 1_000)
            await store.add_items("s", [user("q1"), assistant("a1")])
            await store.add_items("s", [user("q2")])
            # Read by that version's columns: today's runs() selects columns it lacks.
            ((newest,),) = await _raw(
                store, "SELECT max(id) FROM runs WHERE session_id = 's'", Fetch.ALL, write=False
            )
            assert await store.pop_item("s") == user("q2")  # the newest run goes
    finally:
        await store.aclose()
    with Store.open(target, **options) as upgraded:
        await upgraded.clear_session("long")
        assert await count_rows(upgraded, "long") == dict.fromkeys(SESSION_TABLES, 0)
        await upgraded.add_items("s", [user("q3")])
        assert (await upgraded.runs("s"))[-1].id > newest


async def test_tool_errors_stored_before_they_were_searchable_are_found(
    databases: Databases, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's step 15, PostgreSQL's 14: tool calls' errors get a search index, filled with the
    errors already stored (one the output does not say: here, a trace span's); an error that
    is the output's text is left to the items' index."""
    before = 14 if databases.backend == "sqlite-file" else 13
    store, (target, options) = _open_at(monkeypatch, databases, before)
    try:
        with writes_before_totals(store.dialect):
            await store.add_items(
                "s",
                [
                    user("q"),
                    call("c1", "divide"),
                    output("c1", "An error occurred while running the tool. Please try again."),
                    call("c2", "lookup"),
                    output("c2", "Tool 'lookup' timed out after 5 seconds."),
                ],
            )
            ((run_id,),) = await _raw(  # that version's columns (see above)
                store, "SELECT id FROM runs WHERE session_id = 's'", Fetch.ALL, write=False
            )
            outcome = ToolOutcome("divide", "{}", 0, "failed", "ZeroDivisionError: by zero")
            await store._record_spans("s", [span_record(store, run_id, 1, outcome=outcome)])
    finally:
        await store.aclose()
    with Store.open(target, **options) as upgraded:
        [hit] = await upgraded.search("ZeroDivisionError")
        assert (hit.type, hit.tool_error) == ("function_call_output", True)
        [timeout] = await upgraded.search("timed")
        assert not timeout.tool_error


async def test_the_sessions_totals_are_counted_from_the_rows_stored_before_them(
    databases: Databases, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's step 18, PostgreSQL's 17: each session's totals (the sessions list's orders),
    from then on kept by the writes, are filled from the rows already stored; a session
    without runs counts none."""
    before = 17 if databases.backend == "sqlite-file" else 16
    store, (target, options) = _open_at(monkeypatch, databases, before)
    try:
        with writes_before_totals(store.dialect):
            for session_id, n in (("a", 1), ("b", 2)):
                await store.add_items("a", [user(f"q{n}")], Usage(total_tokens=10 * n))
                await store.add_items(
                    session_id,
                    [user("q"), call("c", "t"), output("c", FAILED_OUTPUT), assistant("a")],
                    Usage(total_tokens=n),
                )
            await store.update_session("empty", title="nothing yet")
    finally:
        await store.aclose()
    with Store.open(target, **options) as upgraded:
        await assert_kept(upgraded)
        rows = await kept(upgraded)
        assert [row[:4] for row in rows] == [("a", 3, 31, 1), ("b", 1, 2, 1), ("empty", 0, 0, 0)]
        # A failed run (a question below one still under way) and each failed tool call.
        assert [row[4:] for row in rows] == [(1, 1, 2), (0, 1, 1), (0, 0, 0)]
        page = await upgraded.sessions(order_by="tokens")
        assert [info.session_id for info in page] == ["a", "b", "empty"]

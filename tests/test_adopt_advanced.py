"""Files of the SDK's ``AdvancedSQLiteSession`` adopted in place and imported (issue 30).

Both layouts: the 0.24 file is written here by the installed SDK (``write_advanced``); the
0.22.1 file is the same scenario written by that release (``fixtures/advanced_sqlite_0.22.1.sql``,
its ``iterdump``, loaded into a fresh file). The SDK's own class reading the file is the
reference: each branch's items, and its usage per turn.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession
from agents.extensions.memory.advanced_sqlite_session import AdvancedSQLiteSession
from agents.testing import ModelStep, ScriptedModel, assistant_message
from agents.usage import InputTokensDetails, OutputTokensDetails, Usage

from turnstore import SchemaError, Store, StructuredSession, adopt_sdk_sessions
from turnstore.importers import import_source, open_source

pytestmark = pytest.mark.e2e

FIXTURE = Path(__file__).parent / "fixtures" / "advanced_sqlite_0.22.1.sql"
LAYOUTS = ["0.22.1", "0.24"]


def usage(inp: int, out: int) -> Usage:
    return Usage(
        requests=1,
        input_tokens=inp,
        output_tokens=out,
        total_tokens=inp + out,
        input_tokens_details=InputTokensDetails(cached_tokens=3, cache_write_tokens=0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=2),
    )


async def write_advanced(path: Path) -> None:
    """Session "adv": q1-q3 on main, each run's usage stored, then a branch "alt" from turn 2
    answered with usage; session "plain": two items without branches."""
    steps = [
        ModelStep(output=[assistant_message(f"a{n}", item_id=f"m{n}")], usage=usage(10 * n, n))
        for n in range(1, 5)
    ]
    agent = Agent("A", model=ScriptedModel(steps))
    session = AdvancedSQLiteSession(session_id="adv", db_path=path, create_tables=True)
    for question in ("q1", "q2", "q3"):
        await session.store_run_usage(await Runner.run(agent, question, session=session))
    await session.create_branch_from_turn(2, "alt")
    await session.store_run_usage(await Runner.run(agent, "q2 again", session=session))
    session.close()
    plain = AdvancedSQLiteSession(session_id="plain", db_path=path)
    await plain.add_items(
        [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    )
    plain.close()


@pytest.fixture(params=LAYOUTS)
async def sdk_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """An AdvancedSQLiteSession file of one layout."""
    path = tmp_path / "advanced.db"
    if request.param == "0.24":
        await write_advanced(path)
    else:
        with sqlite3.connect(path) as conn:
            conn.executescript(FIXTURE.read_text())
        conn.close()
    return path


async def sdk_view(path: Path) -> tuple[dict[str, list[Any]], dict[tuple[str, int], int]]:
    """What the SDK's class reads from a copy of ``path``: each branch's items, and each
    (branch, turn)'s total tokens."""
    copy = path.with_name("sdk-copy.db")
    # The backup API, not a file copy: the store holds ``path`` open in WAL mode, and its main
    # file alone is torn while a checkpoint is partway (the SDK read "malformed" under load).
    with sqlite3.connect(path) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    source.close()
    target.close()
    sdk = AdvancedSQLiteSession(session_id="adv", db_path=copy)
    try:
        branches = [row["branch_id"] for row in await sdk.list_branches()]
        items = {branch: await sdk.get_items(branch_id=branch) for branch in branches}
    finally:
        sdk.close()
    with sqlite3.connect(copy) as conn:
        rows = conn.execute(
            "SELECT branch_id, user_turn_number, total_tokens FROM turn_usage"
        ).fetchall()
    conn.close()
    return items, {(branch, turn): total for branch, turn, total in rows}


async def branch_items(store: Store, session_id: str) -> dict[str | None, list[Any]]:
    """Each branch's items by its name (the head moved to its leaf, then put back)."""
    head = (await store.session(session_id)).head_run_id  # type: ignore[union-attr]
    found = {}
    for branch in await store.branches(session_id):
        await store.move_head(session_id, branch.leaf_run_id, to_parent=False)
        found[branch.name] = await store.get_items(session_id)
    await store.move_head(session_id, head, to_parent=False)  # type: ignore[arg-type]
    return found


async def check_as_the_sdk_reads_it(store: Store, path: Path) -> None:
    items, usage_by_turn = await sdk_view(path)
    assert set(items) == {"main", "alt"}
    # A new AdvancedSQLiteSession is on main: so is the adopted session's head.
    assert await store.get_items("adv") == items["main"]
    assert await branch_items(store, "adv") == items
    # Usage per turn, on the runs of each branch (alt's turn 1 is main's).
    runs = {run.user_message: run for run, _ in await store.tree("adv")}
    assert runs["q1"].usage.total_tokens == usage_by_turn[("main", 1)] == 11
    assert runs["q2"].usage.total_tokens == usage_by_turn[("main", 2)]
    assert runs["q3"].usage.total_tokens == usage_by_turn[("main", 3)]
    assert runs["q2 again"].usage.total_tokens == usage_by_turn[("alt", 2)]
    assert (runs["q1"].usage.cached_tokens, runs["q1"].usage.reasoning_tokens) == (3, 2)
    assert await store.get_items("plain") == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
    ]


async def test_a_file_is_adopted_in_place_with_its_branch_names_and_usage(sdk_file: Path) -> None:
    before = {table: rows(sdk_file, table) for table in ("agent_messages", "message_structure")}
    async with StructuredSession("adv", sdk_file) as session:
        assert [b.name for b in await session.branches()] == ["main", "alt"]
        assert [b.active for b in await session.branches()] == [True, False]
    async with StructuredSession("plain", sdk_file) as session:
        await session.get_items()
    with Store.open(sdk_file) as store:
        await check_as_the_sdk_reads_it(store, sdk_file)
        # The SDK's tables are only read.
        assert {t: rows(sdk_file, t) for t in before} == before
        # The session continues where the SDK left it, and the branch can be switched to.
        session = StructuredSession("adv", store)
        await session.switch_to_branch("alt")
        await session.add_items([{"role": "user", "content": "q3 on alt"}])
        assert (await session.get_items())[-1] == {"role": "user", "content": "q3 on alt"}


async def test_adopt_sdk_sessions_takes_the_whole_file(sdk_file: Path) -> None:
    with Store.open(sdk_file) as store:
        assert await adopt_sdk_sessions(store) == 2
        assert await adopt_sdk_sessions(store) == 0
        await check_as_the_sdk_reads_it(store, sdk_file)


async def test_import_keeps_the_branch_names(sdk_file: Path, tmp_path: Path) -> None:
    target = tmp_path / "copy.db"
    with Store.open(target) as store:
        source = open_source(str(sdk_file), "sqlite")
        try:
            summary = await import_source(store, source)
            again = await import_source(store, source)
        finally:
            await source.aclose()
        assert (summary.sessions, again.runs, again.items) == (2, 0, 0)
        assert [b.name for b in await store.branches("adv")] == ["main", "alt"]
        await check_as_the_sdk_reads_it(store, sdk_file)


async def test_an_import_never_renames_a_branch(sdk_file: Path, tmp_path: Path) -> None:
    """A stored branch keeps its name, and a name another branch holds is not given twice."""
    target = tmp_path / "copy.db"
    with Store.open(target) as store:
        source = open_source(str(sdk_file), "sqlite")
        try:
            await import_source(store, source)
            [main, alt] = await store.branches("adv")
            await store.name_branch("adv", main.fork_run_id, "mine")
            await store.name_branch("adv", alt.fork_run_id, "main")
            await import_source(store, source)
        finally:
            await source.aclose()
        assert [b.name for b in await store.branches("adv")] == ["mine", "main"]


def rows(path: Path, table: str) -> list[Any]:
    with sqlite3.connect(path) as conn:
        found = conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
    conn.close()
    return [json.dumps(row) for row in found]


# ---------------------------------------------------------------------------------------------
# What the SDK's classes write after the adoption: taken up, or refused loudly


def user_item(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def test_what_sqlite_session_writes_after_adoption_is_taken_up(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    sdk = SQLiteSession("s", path)
    await sdk.add_items([user_item("sdk 1")])
    session = StructuredSession("s", path)  # long-lived: it adopts once
    assert await session.get_items() == [user_item("sdk 1")]
    await sdk.add_items([user_item("sdk 2"), {"role": "assistant", "content": "a2"}])
    # Seen by the session that adopted before, and by a new one: taken up once.
    expected = [user_item("sdk 1"), user_item("sdk 2"), {"role": "assistant", "content": "a2"}]
    assert await session.get_items() == expected
    assert await StructuredSession("s", path).get_items() == expected
    await session.add_items([user_item("turnstore 3")])
    await sdk.add_items([user_item("sdk 4")])
    assert [item["content"] for item in await session.get_items()] == [
        "sdk 1",
        "sdk 2",
        "a2",
        "turnstore 3",
        "sdk 4",
    ]
    assert [run.user_message for run in await session.runs()] == [
        "sdk 1",
        "sdk 2",
        "turnstore 3",
        "sdk 4",
    ]
    sdk.close()
    session.close()


async def test_stores_taking_up_at_once_take_up_once(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    sdk = SQLiteSession("s", path)
    await sdk.add_items([user_item("sdk 1")])
    with Store.open(path) as first, Store.open(path) as second:
        assert await StructuredSession("s", first).get_items() == [user_item("sdk 1")]
        await sdk.add_items([user_item("sdk 2")])
        views = await asyncio.gather(
            *(StructuredSession("s", store).get_items() for store in (first, second, first))
        )
        assert views == [[user_item("sdk 1"), user_item("sdk 2")]] * 3
    sdk.close()


async def test_what_advanced_sqlite_session_writes_after_adoption(sdk_file: Path) -> None:
    session = StructuredSession("adv", sdk_file)
    before = await session.get_items()
    # A new AdvancedSQLiteSession is on main, as turnstore's head is: taken up there.
    sdk = AdvancedSQLiteSession(session_id="adv", db_path=sdk_file)
    await sdk.add_items([user_item("q4"), {"role": "assistant", "content": "a4"}])
    assert (
        await session.get_items()
        == await sdk.get_items()
        == [
            *before,
            user_item("q4"),
            {"role": "assistant", "content": "a4"},
        ]
    )
    # Written to another branch than the head's: refused loudly, on every use, changing
    # nothing; once the head is on that branch, taken up there.
    await sdk.switch_to_branch("alt")
    await sdk.add_items([user_item("q3 on alt")])
    with Store.open(sdk_file) as store:
        runs = len(await store.tree("adv"))
        for _ in range(2):
            with pytest.raises(SchemaError, match="branch 'alt'"):
                await StructuredSession("adv", store).get_items()
        assert len(await store.tree("adv")) == runs
        [alt] = [b for b in await store.branches("adv") if b.name == "alt"]
        await store.move_head("adv", alt.leaf_run_id, to_parent=False)
        assert await StructuredSession("adv", store).get_items() == await sdk.get_items()
    sdk.close()
    session.close()

"""Swapping ``SQLiteSession`` for ``StructuredSession`` keeps the history (issue 12).

A file the SDK's ``SQLiteSession`` wrote is adopted: each session's history is imported into
turnstore's tables on its first use, once (also when processes race), and the SDK's tables
are left as they were. The files are written by the real SDK (``Runner`` with
``ScriptedModel``, tool calls included), and ``SQLiteSession`` itself is the reference.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

import workers
from builders import assistant, user
from support import sql
from turnstore import Store, StructuredSession, adopt_sdk_sessions
from turnstore.errors import ReadOnlyError
from turnstore.importers import import_source, open_source

pytestmark = pytest.mark.e2e


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Rain in {city}"


def weather_turn(city: str, answer: str, call_id: str) -> list[ModelStep]:
    """The model's steps of one turn: a tool call, then the answer."""
    return [
        ModelStep(output=[function_call("get_weather", {"city": city}, call_id=call_id)]),
        ModelStep(output=[assistant_message(answer, item_id=f"m_{call_id}")]),
    ]


async def converse(session: Any, turns: list[tuple[str, str, str]]) -> None:
    """Run one Runner call per (question, city, answer) on ``session``, each with a tool call."""
    steps = [
        step
        for index, (_, city, answer) in enumerate(turns)
        for step in weather_turn(city, answer, f"{session.session_id}-{index}")
    ]
    agent = Agent("A", model=ScriptedModel(steps), tools=[get_weather])
    for question, _, _ in turns:
        await Runner.run(agent, question, session=session)


async def sdk_items(path: Path, session_id: str, limit: int | None = None) -> list[Any]:
    sdk = SQLiteSession(session_id, str(path))
    try:
        return await sdk.get_items(limit)
    finally:
        sdk.close()


async def turnstore_items(path: Path, session_id: str, limit: int | None = None) -> list[Any]:
    session = StructuredSession(session_id, path)
    try:
        return await session.get_items(limit)
    finally:
        await session.aclose()


def as_json(items: list[Any]) -> list[str]:
    return [json.dumps(item) for item in items]  # key order counts, as the SDK compares


def sdk_rows(path: Path) -> list[Any]:
    with sqlite3.connect(path) as conn:
        return [
            conn.execute("SELECT * FROM agent_sessions ORDER BY session_id").fetchall(),
            conn.execute("SELECT * FROM agent_messages ORDER BY id").fetchall(),
        ]


@pytest.fixture
async def sdk_file(tmp_path: Path) -> Path:
    """A file ``SQLiteSession`` wrote: three sessions, one of them with odd rows."""
    path = tmp_path / "app.db"
    sdk = SQLiteSession("weather", str(path))
    await converse(sdk, [("Oslo?", "Oslo", "Rainy."), ("And Rome?", "Rome", "Also rainy.")])
    sdk.close()
    sdk = SQLiteSession(7, str(path))  # type: ignore[arg-type]  # the SDK stores it as "7"
    await converse(sdk, [("Bergen?", "Bergen", "Wet.")])
    sdk.close()
    sdk = SQLiteSession("odd", str(path))
    await sdk.add_items([{"role": "developer", "content": "be brief"}, user("hi")])
    await sdk.add_items([assistant("hello")])
    sdk.close()
    with sqlite3.connect(path) as conn:  # a row the SDK skips on reading, and so does turnstore
        conn.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('odd', '{corrupt')"
        )
    sdk = SQLiteSession("odd", str(path))
    await sdk.add_items([user("again")])
    sdk.close()
    return path


async def test_every_session_reads_as_sqlite_session_reads_it(sdk_file: Path) -> None:
    before = sdk_rows(sdk_file)
    for session_id in ("weather", "7", "odd"):
        expected = await sdk_items(sdk_file, session_id)
        assert expected  # the fixture wrote it
        assert as_json(await turnstore_items(sdk_file, session_id)) == as_json(expected)
        for limit in (1, 3):
            assert as_json(await turnstore_items(sdk_file, session_id, limit)) == as_json(
                await sdk_items(sdk_file, session_id, limit)
            )
    assert sdk_rows(sdk_file) == before  # the SDK's tables are only read


async def test_an_adopted_session_carries_on_as_sqlite_session_does(
    sdk_file: Path, tmp_path: Path
) -> None:
    twin = tmp_path / "twin.db"
    shutil.copy(sdk_file, twin)
    more = [("Paris?", "Paris", "Sunny."), ("Lima?", "Lima", "Foggy.")]
    session = StructuredSession("weather", sdk_file)
    await converse(session, more)
    await converse(SQLiteSession("weather", str(twin)), more)
    assert as_json(await session.get_items()) == as_json(await sdk_items(twin, "weather"))
    # The adopted turns are turnstore's runs, with their tool calls, like the new ones.
    runs = await session.runs()
    assert [run.user_message for run in runs] == ["Oslo?", "And Rome?", "Paris?", "Lima?"]
    calls = await session.store.tool_calls(session_id="weather")
    assert sorted(call.output for call in calls) == sorted(
        f"Rain in {city}" for city in ("Oslo", "Rome", "Paris", "Lima")
    )
    await session.aclose()


async def test_adoption_happens_once(sdk_file: Path) -> None:
    session = StructuredSession("weather", sdk_file)
    adopted = await session.get_items()
    popped = await session.pop_item()
    await session.aclose()  # the last user: the shared store closes, its cache goes with it
    sdk = SQLiteSession("weather", str(sdk_file))
    await sdk.add_items([user("written by the SDK after the switch")])
    sdk.close()
    # A new store (as in a new process) does not import the session again: the popped item
    # stays popped. What the SDK wrote to its own tables since is taken up, once
    # (tests/test_adopt_advanced.py), by a session's use.
    taken_up = [*adopted[:-1], user("written by the SDK after the switch")]
    assert as_json(await turnstore_items(sdk_file, "weather")) == as_json(taken_up)
    assert popped == adopted[-1]
    async with Store.open(sdk_file) as store:
        assert await sql(store, "SELECT session_id FROM sdk_adopted") == [("weather",)]


async def test_a_cleared_session_is_not_adopted_again(sdk_file: Path) -> None:
    session = StructuredSession("odd", sdk_file)
    await session.clear_session()  # before any other use
    await session.aclose()
    assert await turnstore_items(sdk_file, "odd") == []
    assert await sdk_items(sdk_file, "odd")  # the SDK's rows are left as they were


async def test_a_store_that_lost_the_race_adopts_nothing(sdk_file: Path) -> None:
    expected = await sdk_items(sdk_file, "weather")
    first, second = Store.open(sdk_file), Store.open(sdk_file)
    try:
        # Both stores list the unadopted sessions before either adopts "weather".
        await StructuredSession("7", first).get_items()
        await StructuredSession("7", second).get_items()
        await StructuredSession("weather", first).get_items()
        items = await StructuredSession("weather", second).get_items()
        assert as_json(items) == as_json(expected)
        assert len(await second.runs("weather")) == 2
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.slow
def test_processes_adopting_at_once_import_each_session_once(sdk_file: Path) -> None:
    ctx = workers.context()
    start = ctx.Barrier(4)
    sessions = ["weather", "7", "odd"]
    processes = [
        ctx.Process(target=workers.adopting_process, args=(str(sdk_file), sessions, start))
        for _ in range(4)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    with sqlite3.connect(sdk_file) as conn:
        runs = dict(conn.execute("SELECT session_id, count(*) FROM runs GROUP BY session_id"))
        marks = conn.execute("SELECT count(*) FROM sdk_adopted").fetchone()[0]
    assert runs == {"weather": 2, "7": 1, "odd": 3}
    assert marks == 3


async def test_a_session_turnstore_holds_gains_the_sdk_history_as_a_branch(
    sdk_file: Path,
) -> None:
    async with Store.open(sdk_file) as store:  # written without adoption, as turnstore 0.1 did
        await store.add_items("weather", [user("new start"), assistant("ok")])
    session = StructuredSession("weather", sdk_file)
    assert as_json(await session.get_items()) == as_json([user("new start"), assistant("ok")])
    branches = await session.branches()
    assert sorted(b.last_user_message or "" for b in branches) == ["And Rome?", "new start"]
    assert [b.active for b in branches if b.last_user_message == "new start"] == [True]
    await session.aclose()


async def test_a_session_imported_by_the_cli_is_not_imported_twice(sdk_file: Path) -> None:
    source = open_source(str(sdk_file), "sqlite")
    try:
        async with Store.open(sdk_file) as store:
            await import_source(store, source)
    finally:
        await source.aclose()
    for session_id in ("weather", "7", "odd"):
        assert as_json(await turnstore_items(sdk_file, session_id)) == as_json(
            await sdk_items(sdk_file, session_id)
        )
    with sqlite3.connect(sdk_file) as conn:
        runs = dict(conn.execute("SELECT session_id, count(*) FROM runs GROUP BY session_id"))
    assert runs == {"weather": 2, "7": 1, "odd": 3}


async def test_every_session_can_be_adopted_at_once(sdk_file: Path) -> None:
    async with Store.open(sdk_file) as store:
        assert (await store.sessions()).sessions == []  # nothing used yet
        assert await StructuredSession("odd", store).get_items()  # adopts "odd"
        assert await adopt_sdk_sessions(store) == 2
        assert await adopt_sdk_sessions(store) == 0
        listed = sorted(info.session_id for info in (await store.sessions()).sessions)
    assert listed == ["7", "odd", "weather"]
    for session_id in listed:
        assert as_json(await turnstore_items(sdk_file, session_id)) == as_json(
            await sdk_items(sdk_file, session_id)
        )


async def test_a_session_the_sdk_wrote_after_the_store_opened_is_adopted(
    sdk_file: Path,
) -> None:
    async with Store.open(sdk_file) as store:
        assert await StructuredSession("weather", store).get_items()  # the store is in use
        sdk = SQLiteSession("late", str(sdk_file))  # a process still on SQLiteSession
        await sdk.add_items([user("written while turnstore ran"), assistant("ok")])
        sdk.close()
        items = await StructuredSession("late", store).get_items()
    assert as_json(items) == as_json(await sdk_items(sdk_file, "late"))


async def test_a_read_only_store_refuses_an_unadopted_session(sdk_file: Path) -> None:
    async with Store.open(sdk_file) as store:  # migrated, nothing adopted
        assert await StructuredSession("7", store).get_items()
    before = sdk_rows(sdk_file)
    async with Store.open(sdk_file, read_only=True) as store:
        with pytest.raises(ReadOnlyError, match=r"'weather'.*not adopted"):
            await StructuredSession("weather", store).get_items()  # not an empty history
        adopted = await StructuredSession("7", store).get_items()
    assert as_json(adopted) == as_json(await sdk_items(sdk_file, "7"))
    assert sdk_rows(sdk_file) == before
    async with Store.open(sdk_file) as store:
        assert await sql(store, "SELECT session_id FROM sdk_adopted") == [("7",)]


async def test_ids_turnstore_cannot_hold_are_not_adopted(sdk_file: Path) -> None:
    for session_id in ("a\x00b", "x" * 1025):
        sdk = SQLiteSession(session_id, str(sdk_file))
        await sdk.add_items([user("hi")])
        sdk.close()
    async with Store.open(sdk_file) as store:
        assert await adopt_sdk_sessions(store) == 3
        listed = (await store.sessions()).sessions
        assert sorted(info.session_id for info in listed) == ["7", "odd", "weather"]
        for info in listed:  # every session listed can be read
            assert await store.get_items(info.session_id)


@pytest.mark.parametrize("end", ["clear_session", "delete_session"])
async def test_a_session_the_store_ends_is_not_adopted_afterwards(sdk_file: Path, end: str) -> None:
    async with Store.open(sdk_file) as store:
        await store.add_items("weather", [user("held before adoption existed")])
        for session_id in ("weather", "7"):  # held by turnstore too, or only by the SDK
            await getattr(store, end)(session_id)
    for session_id in ("weather", "7"):
        assert await turnstore_items(sdk_file, session_id) == []  # not brought back
        assert await sdk_items(sdk_file, session_id)  # the SDK's rows are left as they were

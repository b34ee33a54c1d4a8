"""The ``turnstore`` command line, driven by typer's ``CliRunner``.

The databases are written by the real Agents SDK ``Runner`` with ``ScriptedModel``: the demo
conversation of ``turnstore.agents.demo`` through ``StructuredSession`` (and a branch made by
``edit``), and the same conversation through the SDK's own ``SQLiteSession``,
``AdvancedSQLiteSession`` (with two branches and per-turn usage) and ``SQLAlchemySession``
for the importers. Every command runs against a SQLite file and a PostgreSQL schema (the
``target_backend`` of conftest.py); what only a file can show (sqlite:// URLs, the default
``./turnstore.db``, files of another kind) runs on SQLite alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Runner
from agents.extensions.memory.advanced_sqlite_session import AdvancedSQLiteSession
from agents.memory import SQLiteSession
from agents.testing import assistant_message, function_call
from typer.testing import CliRunner

from support import MISSING_DATABASE, POSTGRES_URL, database_target, target_exists, target_sql
from turnstore import Store, StructuredSession, postgres, sqlite
from turnstore.agents.demo import QUESTIONS, _agents, _scripted_model, run_demo
from turnstore.cli import _shown, app
from turnstore.core.statements import CREATE_VERSION_TABLE

pytestmark = pytest.mark.e2e

runner = CliRunner()


@pytest.fixture(autouse=True)
def _scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    # The demo talks to a real model when a key is set; the tests never do.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("TURNSTORE_DB", raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps at the terminal's width, else 80


def cli(*args: str, code: int = 0) -> Any:
    """Run ``turnstore ARGS``; check the exit status; return the result."""
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


def cli_json(*args: str) -> Any:
    return json.loads(cli(*args, "--json").stdout)


def error_line(result: Any) -> str:
    """The one line a failing command prints on stderr."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    return str(lines[0])


async def store_items(db: Path | str, session_id: str) -> list[Any]:
    store = Store.open(db)
    try:
        return await store.get_items(session_id)
    finally:
        await store.aclose()


async def tree_shape(db: Path | str, session_id: str) -> list[tuple[int | None, Any, Any]]:
    """The session's tree independent of run ids: (parent's index, items, usage) per run."""
    store = Store.open(db)
    try:
        tree = await store.tree(session_id)
        head = (await store.session(session_id)).head_run_id  # type: ignore[union-attr]
    finally:
        await store.aclose()
    index = {run.id: i for i, (run, _) in enumerate(tree)}
    shape: list[tuple[int | None, Any, Any]] = [
        (index.get(run.parent_id) if run.parent_id is not None else None, items, run.usage)
        for run, items in tree
    ]
    shape.append((None, "head", index.get(head)))
    return shape


async def branch_paths(db: Path | str, session_id: str) -> list[list[Any]]:
    """``get_items()`` at the leaf of every branch, in the order of the branches."""
    store = Store.open(db)
    try:
        paths = []
        for branch in await store.branches(session_id):
            await store.move_head(session_id, branch.leaf_run_id, to_parent=False)
            paths.append(await store.get_items(session_id))
        return paths
    finally:
        await store.aclose()


def count(db: str, table: str) -> int:
    return int(target_sql(db, f"SELECT count(*) FROM {table}")[0][0])


# ---------------------------------------------------------------------------------------------
# Databases written by the Runner


async def _write_branched(db: str) -> None:
    """The demo conversation, then run 2 edited and continued: a fork with two branches."""
    model = _scripted_model()
    agent = _agents(model)
    session = StructuredSession("branched", db)
    try:
        for question in QUESTIONS:
            await Runner.run(agent, question, session=session)
        second = (await session.runs())[1]
        await session.edit(second.id, "And in Osaka?")
        model.extend(
            [
                [function_call("get_weather", {"city": "Osaka"}, call_id="call_osaka")],
                [assistant_message("Osaka: no data.", item_id="msg_osaka")],
            ]
        )
        await Runner.run(agent, [], session=session)
    finally:
        await session.aclose()


@pytest.fixture(scope="module")
def demo_db(target_backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo session and a branched one, written by the Runner; tests only read it."""
    with database_target(target_backend, tmp_path_factory.mktemp("demo")) as db:
        asyncio.run(run_demo(db))
        asyncio.run(_write_branched(db))
        yield db


@pytest.fixture
def small_file(tmp_path: Path) -> Path:
    """A SQLite turnstore file of two sessions, for what only a file can show."""
    db = tmp_path / "small.db"

    async def write() -> None:
        async with Store.open(db) as store:
            for sid in ("one", "two"):
                await store.add_items(sid, [{"role": "user", "content": sid}])

    asyncio.run(write())
    return db


async def _sdk_conversation(session: Any, *, usage: bool = False) -> None:
    model = _scripted_model()
    agent = _agents(model)
    for question in QUESTIONS:
        result = await Runner.run(agent, question, session=session)
        if usage:
            await session.store_run_usage(result)


@pytest.fixture(scope="module")
def sqlite_session_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two conversations by the SDK's SQLiteSession, one in custom-named tables."""
    db = tmp_path_factory.mktemp("sdk") / "sdk.db"

    async def write() -> None:
        for session in (
            SQLiteSession("plain", db),
            SQLiteSession("custom", db, sessions_table="convs", messages_table="msgs"),
        ):
            try:
                await _sdk_conversation(session)
            finally:
                session.close()

    asyncio.run(write())
    return db


@pytest.fixture(scope="module")
def advanced_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[Any]]]:
    """An AdvancedSQLiteSession conversation on main and two branches, with turn usage.

    Returns the file and what the SDK's ``get_items`` returns on each branch.
    """
    db = tmp_path_factory.mktemp("advanced") / "advanced.db"

    async def write() -> dict[str, list[Any]]:
        model = _scripted_model()
        agent = _agents(model)
        session = AdvancedSQLiteSession(session_id="adv", db_path=db, create_tables=True)
        try:
            for question in QUESTIONS:
                await session.store_run_usage(await Runner.run(agent, question, session=session))
            # From turn 2 of main: turn 1 shared, then a different second question.
            await session.create_branch_from_turn(2, "osaka")
            model.extend([[assistant_message("Osaka is mild.", item_id="msg_osaka")]])
            result = await Runner.run(agent, "What about Osaka?", session=session)
            await session.store_run_usage(result)
            # From turn 3 of main: turns 1-2 shared, then a tool call.
            await session.switch_to_branch("main")
            await session.create_branch_from_turn(3, "rome")
            model.extend(
                [
                    [function_call("get_weather", {"city": "Rome"}, call_id="call_rome")],
                    [assistant_message("Rome: unknown.", item_id="msg_rome")],
                ]
            )
            result = await Runner.run(agent, "Weather in Rome?", session=session)
            await session.store_run_usage(result)
            return {
                branch: await session.get_items(branch_id=branch)
                for branch in ("main", "osaka", "rome")
            }
        finally:
            session.close()

    return db, asyncio.run(write())


# ---------------------------------------------------------------------------------------------
# Help, and the database option


def test_every_command_has_help() -> None:
    commands = [
        "sessions",
        "show",
        "runs",
        "tools",
        "search",
        "usage",
        "export",
        "import",
        "migrate",
        "demo",
    ]
    top = cli("--help").stdout
    for command in commands:
        assert command in top
        text = cli(command, "--help").stdout
        assert "--db" in text
        assert "--json" in text


def test_database_from_env_and_global_option(
    demo_db: str, monkeypatch: pytest.MonkeyPatch, cli_target: str
) -> None:
    monkeypatch.setenv("TURNSTORE_DB", demo_db)
    assert [s["session_id"] for s in cli_json("sessions")["sessions"]] == ["branched", "demo"]
    # --db before the command, and after it, win over the environment.
    cli("migrate", "--db", cli_target)
    assert cli_json("--db", cli_target, "sessions")["sessions"] == []
    assert cli_json("sessions", "--db", cli_target)["sessions"] == []


# SQLite only: sqlite:// URLs, the default file, and files that are not turnstore's.


def test_sqlite_url_targets(small_file: Path, tmp_path: Path) -> None:
    assert len(cli_json("sessions", "--db", f"sqlite:///{small_file}")["sessions"]) == 2
    missing = tmp_path / "missing.db"
    line = error_line(cli("sessions", "--db", f"sqlite:///{missing}", code=1))
    assert "no database at" in line
    assert not missing.exists()


def test_default_database_is_turnstore_db_in_the_working_directory(
    small_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("sessions", code=1)
    assert "no database at turnstore.db" in error_line(result)
    small_file.rename(tmp_path / "turnstore.db")
    assert len(cli_json("sessions")["sessions"]) == 2


# ---------------------------------------------------------------------------------------------
# Errors: one line, non-zero status


def test_missing_database_is_an_error_and_is_not_created(
    cli_target: str, target_backend: str
) -> None:
    expected = MISSING_DATABASE[target_backend]
    for args in (
        ["sessions"],
        ["show", "demo"],
        ["runs", "demo"],
        ["tools"],
        ["search", "x"],
        ["usage"],
        ["export", "demo"],
        ["query", "SELECT 1"],
    ):
        result = cli(*args, "--db", cli_target, code=1)
        assert expected in error_line(result)
    assert not target_exists(cli_target)


def test_not_a_database(tmp_path: Path, sqlite_session_db: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_text("hello, I am text\n" * 100)
    for args in (["sessions"], ["migrate"], ["import", str(sqlite_session_db)]):
        result = cli(*args, "--db", str(junk), code=1)
        assert "not a SQLite database" in error_line(result)
    assert junk.read_text() == "hello, I am text\n" * 100


def test_database_of_another_kind_is_refused_untouched(
    sqlite_session_db: Path, tmp_path: Path
) -> None:
    before = sqlite_session_db.read_bytes()
    for args in (["sessions"], ["show", "plain"], ["migrate"], ["demo"]):
        line = error_line(cli(*args, "--db", str(sqlite_session_db), code=1))
        assert "Agents SDK session database" in line
        assert "turnstore import" in line
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    line = error_line(cli("runs", "x", "--db", str(other), code=1))
    assert "database of another kind (tables invoices)" in line
    assert sqlite_session_db.read_bytes() == before


def test_adopt_takes_over_an_sdk_file_in_place(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    ids = ["first", "second"]

    async def sdk_items(write: bool) -> list[list[Any]]:
        held = []
        for sid in ids:
            session = SQLiteSession(sid, db)
            try:
                if write:
                    await _sdk_conversation(session)
                held.append(await session.get_items())
            finally:
                session.close()
        return held

    expected = asyncio.run(sdk_items(write=True))
    sdk_rows = count(str(db), "agent_messages")
    assert cli_json("adopt", "--db", str(db)) == {"database": str(db), "adopted_sessions": 2}
    # Every command now shows the conversations, as the SDK holds them; its tables untouched.
    assert sorted(s["session_id"] for s in cli_json("sessions", "--db", str(db))["sessions"]) == ids
    assert [r["user_message"] for r in cli_json("runs", "first", "--db", str(db))] == QUESTIONS
    assert [asyncio.run(store_items(db, sid)) for sid in ids] == expected
    assert asyncio.run(sdk_items(write=False)) == expected
    assert count(str(db), "agent_messages") == sdk_rows
    # Once only: a second adopt adopts nothing and changes nothing.
    counts = {t: count(str(db), t) for t in ("sessions", "runs", "items", "tool_calls")}
    assert "0 sessions adopted" in cli("adopt", "--db", str(db)).stdout
    assert {t: count(str(db), t) for t in counts} == counts


def test_adopt_takes_an_advanced_file_and_refuses_what_it_cannot_adopt(
    advanced_db: tuple[Path, Any], tmp_path: Path
) -> None:
    source, sdk_branches = advanced_db
    advanced = tmp_path / "advanced.db"
    shutil.copy(source, advanced)
    assert "1 session adopted" in cli("adopt", "--db", str(advanced)).stdout
    assert asyncio.run(store_items(advanced, "adv")) == sdk_branches["main"]
    names = [b["name"] for b in cli_json("branches", "adv", "--db", str(advanced))]
    assert sorted(names) == ["main", "osaka", "rome"]
    missing = tmp_path / "missing.db"
    assert "no database at" in error_line(cli("adopt", "--db", str(missing), code=1))
    assert not missing.exists()


def test_empty_database_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    assert "empty database" in error_line(cli("sessions", "--db", str(empty), code=1))
    cli("migrate", "--db", str(empty))  # a write command may start a database there
    assert cli_json("sessions", "--db", str(empty))["sessions"] == []


def test_unwritable_output(demo_db: str, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "out.jsonl"
    line = error_line(cli("export", "demo", "-o", str(target), "--db", str(demo_db), code=1))
    assert "No such file or directory" in line
    assert str(target) in line


def test_unknown_session(demo_db: str) -> None:
    for args in (["show", "nope"], ["runs", "nope"], ["export", "nope"]):
        line = error_line(cli(*args, "--db", str(demo_db), code=1))
        assert line == "error: no session 'nope'"


def test_bad_option_values(demo_db: str) -> None:
    db = str(demo_db)
    assert "ISO 8601" in error_line(cli("usage", "--since", "yesterday", "--db", db, code=1))
    assert "KEY=VALUE" in error_line(cli("sessions", "--meta", "oops", "--db", db, code=1))
    # After --json, the error is JSON too (docs/cli.md, "Output for scripts").
    result = cli("export", "demo", "--json", "--db", db, code=1)
    assert "--output" in json.loads(result.stderr)["error"]["message"]


# ---------------------------------------------------------------------------------------------
# Reading commands on Runner-written stores


def test_sessions(demo_db: str) -> None:
    db = str(demo_db)
    page = cli_json("sessions", "--db", db)
    assert [s["session_id"] for s in page["sessions"]] == ["branched", "demo"]
    assert page["sessions"][1]["title"] == "What's the weather in Paris?"
    assert page["next_cursor"] is None
    first = cli_json("sessions", "--limit", "1", "--db", db)
    assert [s["session_id"] for s in first["sessions"]] == ["branched"]
    rest = cli_json("sessions", "--limit", "1", "--after", first["next_cursor"], "--db", db)
    assert [s["session_id"] for s in rest["sessions"]] == ["demo"]
    text = cli("sessions", "--limit", "1", "--db", db).stdout
    assert "branched" in text
    assert f"--after {first['next_cursor']}" in text
    assert cli_json("sessions", "--user", "nobody", "--db", db)["sessions"] == []


def test_sessions_show_what_each_holds(demo_db: str) -> None:
    db = str(demo_db)

    async def expected() -> dict[str, Any]:
        async with Store.open(db) as store:
            summaries = await store.session_summaries(["branched", "demo"])
            return {sid: dataclasses.asdict(summary) for sid, summary in summaries.items()}

    want = asyncio.run(expected())
    assert want["branched"]["branches"] == 2
    assert want["demo"]["runs"] == 3
    assert want["demo"]["total_tokens"] > 0
    listed = cli_json("sessions", "--db", db)["sessions"]
    for entry in listed:
        assert {key: entry[key] for key in want["demo"]} == want[entry["session_id"]]
    lines = cli("sessions", "--db", db).stdout.splitlines()
    header = next(line for line in lines if "┃" in line)  # rich's heavy header row
    rows = [line for line in lines if "│" in line]
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == [
        "session", "title", "user", "runs", "branches", "tokens", "tools", "failed", "created",
        "updated",
    ]  # fmt: skip
    demo_row = next(row for row in rows if row.split("│")[1].strip() == "demo")
    cells = [cell.strip() for cell in demo_row.split("│")[1:-1]]
    assert cells[3:6] == ["3", "1", f"{want['demo']['total_tokens']:,}"]


def test_sessions_metadata_filter(cli_target: str) -> None:
    db = cli_target

    async def write() -> None:
        async with Store.open(db) as store:
            await store.add_items("a", [{"role": "user", "content": "hi"}])
            await store.update_session("a", user_id="u1", metadata={"env": "prod", "n": 3})
            await store.add_items("b", [{"role": "user", "content": "yo"}])
            await store.update_session("b", metadata={"env": "dev"})

    asyncio.run(write())
    ids = [
        s["session_id"]
        for s in cli_json("sessions", "--meta", "env=prod", "--db", str(db))["sessions"]
    ]
    assert ids == ["a"]
    both = cli_json("sessions", "--meta", "env=prod", "--meta", "n=3", "--db", str(db))
    assert [s["session_id"] for s in both["sessions"]] == ["a"]
    assert cli_json("sessions", "--meta", "n=4", "--db", str(db))["sessions"] == []
    by_user = cli_json("sessions", "--user", "u1", "--db", str(db))["sessions"]
    assert [s["session_id"] for s in by_user] == ["a"]


def test_show_demo(demo_db: str) -> None:
    text = cli("show", "demo", "--db", str(demo_db)).stdout
    for expected in (
        "What's the weather in Paris?",
        "It is 18°C and sunny in Paris.",
        "get_weather",
        '{"city":"Paris"}',
        "18°C, sunny",
        "to_fahrenheit",
        "71.6°F",
        "transfer_to_refunds_agent",
        "Refund for order 1234 is on its way.",
        "completed",
        "288 tokens",
        "← head",
    ):
        assert expected in text, expected
    assert "branches" not in text.split("\n", 1)[1]  # one branch: no fork drawn


def test_show_marks_branches(demo_db: str) -> None:
    text = cli("show", "branched", "--db", str(demo_db)).stdout
    assert re.search(r"⑂ fork after run \d+: 2 branches", text)
    assert "branch 1/2" in text
    assert "branch 2/2  active" in text
    first = cli_json("branches", "branched", "--db", str(demo_db))[0]
    cli(
        "branches",
        "branched",
        "--name",
        "tokyo",
        "--run",
        str(first["leaf_run_id"]),
        "--db",
        str(demo_db),
    )
    named = cli("show", "branched", "--db", str(demo_db)).stdout
    assert "branch 1/2  tokyo" in named  # the branch a name goes through says so
    cli(
        "branches", "branched", "--unname", "--run", str(first["leaf_run_id"]), "--db", str(demo_db)
    )
    assert text.index("And in Tokyo?") < text.index("And in Osaka?")
    assert "Osaka: no data." in text
    data = cli_json("show", "branched", "--db", str(demo_db))
    runs = data["runs"]
    assert data["session"]["session_id"] == "branched"
    assert len(runs) == 4
    by_user = {run["user_message"]: run for run in runs}
    assert by_user["And in Osaka?"]["active"] is True
    assert by_user["And in Tokyo? Convert it to Fahrenheit."]["active"] is False
    # The edit moved the head to the new branch, where the conversation continued.
    assert data["session"]["head_run_id"] == by_user["And in Osaka?"]["id"]
    osaka_calls = by_user["And in Osaka?"]["tool_calls"]
    assert [(c["tool_name"], c["arguments"], c["output"]) for c in osaka_calls] == [
        ("get_weather", '{"city":"Osaka"}', "unknown")
    ]
    tokyo = by_user["And in Tokyo? Convert it to Fahrenheit."]
    assert tokyo["parent_id"] == by_user["And in Osaka?"]["parent_id"]  # siblings at the fork


def test_show_clips_long_messages_unless_full(cli_target: str) -> None:
    db = cli_target
    long_text = "word " * 200

    async def write() -> None:
        async with Store.open(db) as store:
            await store.add_items("long", [{"role": "user", "content": long_text}])

    asyncio.run(write())
    clipped = cli("show", "long", "--db", str(db)).stdout
    assert "…" in clipped
    assert clipped.count("word") < 100
    full = cli("show", "long", "--full", "--db", str(db)).stdout
    assert full.count("word") >= 200


def test_runs(demo_db: str) -> None:
    db = str(demo_db)
    active = cli_json("runs", "branched", "--db", db)
    assert [r["user_message"] for r in active] == ["What's the weather in Paris?", "And in Osaka?"]
    every = cli_json("runs", "branched", "--all", "--db", db)
    assert len(every) == 4
    demo = cli_json("runs", "demo", "--db", db)
    assert [r["assistant_message"] for r in demo] == [
        "It is 18°C and sunny in Paris.",
        "Tokyo is 22°C, which is 71.6°F.",
        "Refund for order 1234 is on its way.",
    ]
    assert all(r["usage"]["total_tokens"] == 288 for r in demo)
    text = cli("runs", "demo", "--db", db).stdout
    assert "What's the weather" in text
    assert "288" in text


def test_tools(demo_db: str) -> None:
    db = str(demo_db)
    stats = {s["tool_name"]: s for s in cli_json("tools", "--session", "demo", "--db", db)}
    assert {name: s["calls"] for name, s in stats.items()} == {
        "get_weather": 2,
        "to_fahrenheit": 1,
        "transfer_to_refunds_agent": 1,
    }
    assert all(s["failed"] == 0 and s["failure_rate"] == 0 for s in stats.values())
    overall = {s["tool_name"]: s["calls"] for s in cli_json("tools", "--db", db)}
    assert overall["get_weather"] == 5  # demo 2, branched 2 + 1 on the Osaka branch
    calls = cli_json("tools", "--calls", "--tool", "get_weather", "--session", "demo", "--db", db)
    assert [(c["arguments"], c["output"], c["status"]) for c in calls] == [
        ('{"city":"Paris"}', "18°C, sunny", "completed"),
        ('{"city":"Tokyo"}', "22°C, cloudy", "completed"),
    ]
    assert cli_json("tools", "--calls", "--status", "failed", "--db", db) == []
    text = cli("tools", "--db", db).stdout
    assert "get_weather" in text
    assert "failure rate" in text
    assert "18°C" in cli("tools", "--calls", "--session", "demo", "--db", db).stdout


def test_search(demo_db: str) -> None:
    db = str(demo_db)
    hits = cli_json("search", "refund", "--db", db)
    assert {(h["session_id"], h["role"]) for h in hits} >= {("demo", "user"), ("demo", "assistant")}
    tokyo = cli_json("search", "Tokyo", "--session", "demo", "--role", "assistant", "--db", db)
    assert [h["run_id"] for h in tokyo]
    assert all(h["role"] == "assistant" for h in tokyo)
    outputs = cli_json("search", "cloudy", "--type", "function_call_output", "--db", db)
    assert outputs
    assert all(h["type"] == "function_call_output" for h in outputs)
    assert cli_json("search", "zebra", "--db", db) == []
    assert cli_json("search", '"unbalanced AND (', "--db", db) == []  # never a syntax error
    text = cli("search", "sunny", "--db", db).stdout
    assert "sunny" in text
    assert "**" not in text
    assert "No matches." in cli("search", "zebra", "--db", db).stdout
    # Pages, filters and the count (issue 29).
    weather = cli_json("search", "weather", "--db", db)
    assert cli_json("search", "weather", "--offset", "1", "--db", db) == weather[1:]
    assert cli("search", "weather", "--count", "--db", db).stdout == f"{len(weather)} matches\n"
    assert cli_json("search", "weather", "--count", "--db", db) == [
        {"matches": len(weather), "exact": True}
    ]
    assert cli_json("search", "weather", "--agent", "nobody", "--db", db) == []
    assert cli_json("search", "weather", "--model", "nobody", "--db", db) == []
    assert cli_json("search", "weather", "--since", "1d", "--db", db) == weather
    assert cli_json("search", "weather", "--until", "2000-01-01", "--db", db) == []
    assert "offset" in error_line(cli("search", "x", "--offset", "10001", "--db", db, code=1))


def test_usage(demo_db: str) -> None:
    db = str(demo_db)
    rows = {r["key"]: r for r in cli_json("usage", "--db", db)}
    assert rows["demo"]["runs"] == 3
    assert rows["demo"]["usage"]["total_tokens"] == 3 * 288
    assert rows["demo"]["usage"]["requests"] == 6
    one = cli_json("usage", "--session", "demo", "--by", "day", "--db", db)
    assert len(one) == 1
    assert one[0]["usage"]["input_tokens"] == 720
    assert cli_json("usage", "--until", "2000-01-01", "--db", db) == []
    text = cli("usage", "--db", db).stdout
    assert "total" in text
    assert "864" in text


def test_export_formats(demo_db: str, tmp_path: Path) -> None:
    db = str(demo_db)
    lines = [json.loads(line) for line in cli("export", "demo", "--db", db).stdout.splitlines()]
    assert len(lines) == 14
    assert {line["session_id"] for line in lines} == {"demo"}
    assert asyncio.run(store_items(demo_db, "demo")) == [line["item"] for line in lines]
    document = json.loads(cli("export", "branched", "-f", "json", "--db", db).stdout)
    assert len(document["runs"]) == 4
    active = json.loads(cli("export", "branched", "-f", "json", "--active", "--db", db).stdout)
    assert len(active["runs"]) == 2
    markdown = cli("export", "demo", "--format", "markdown", "--db", db).stdout
    assert markdown.startswith("# What's the weather in Paris?")
    out = tmp_path / "all.jsonl"
    summary = cli_json("export", "--output", str(out), "--db", db)
    assert summary == {"sessions": 2, "format": "jsonl", "output": str(out)}
    assert {json.loads(line)["session_id"] for line in out.read_text().splitlines()} == {
        "demo",
        "branched",
    }
    text = cli("export", "demo", "-o", str(tmp_path / "d.md"), "-f", "markdown", "--db", db)
    assert "Exported 1 session as markdown" in text.stdout


# ---------------------------------------------------------------------------------------------
# Writing commands


def migrations(target: str) -> list[list[str]]:
    """The schema history of the backend ``target`` names."""
    return (postgres if "://" in target else sqlite).MIGRATIONS


def test_migrate_creates_and_reports(new_target: Callable[[], str]) -> None:
    db = new_target()
    report = cli_json("migrate", "--db", db)
    assert report["from_version"] is None
    latest = len(migrations(db))
    assert report["schema_version"] == latest
    assert target_sql(db, "SELECT max(version) FROM turnstore_schema") == [(latest,)]
    assert cli_json("migrate", "--db", db)["from_version"] == latest  # idempotent
    assert f"schema already at version {latest}" in cli("migrate", "--db", db).stdout
    assert f"created at version {latest}" in cli("migrate", "--db", new_target()).stdout


def _leave_at_version_one(target: str) -> None:
    """A database at ``target`` as the first turnstore left it: schema version 1."""
    if "://" not in target:
        with sqlite3.connect(target) as conn:
            for statement in [*sqlite.MIGRATIONS[0], sqlite.SQL[CREATE_VERSION_TABLE]]:
                conn.execute(statement)
            conn.execute("INSERT INTO turnstore_schema (version) VALUES (1)")
        return
    import psycopg

    schema = target.rsplit("schema=", 1)[1]
    with psycopg.connect(POSTGRES_URL) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET LOCAL search_path TO "{schema}"')
        for statement in [*postgres.MIGRATIONS[0], postgres.SQL[CREATE_VERSION_TABLE]]:
            conn.execute(statement)  # type: ignore[call-overload]
        conn.execute("INSERT INTO turnstore_schema (version) VALUES (1)")


def test_migrate_upgrades_an_older_database(cli_target: str) -> None:
    _leave_at_version_one(cli_target)
    text = cli("migrate", "--db", cli_target).stdout
    assert f"migrated from version 1 to {len(migrations(cli_target))}" in text


def test_urls_are_printed_without_their_password() -> None:
    assert _shown("postgresql://me:s3cret@db.example/app") == "postgresql://me:***@db.example/app"
    assert _shown("postgresql://me@db.example/app") == "postgresql://me@db.example/app"
    assert _shown("conversations.db") == "conversations.db"


def test_demo(cli_target: str) -> None:
    db = cli_target
    text = cli("demo", "--db", str(db)).stdout
    assert "Wrote session demo (3 runs)" in text
    report = cli_json("demo", "--session", "again", "--db", str(db))
    assert report["session_id"] == "again"
    assert [r["user_message"] for r in report["runs"]] == QUESTIONS
    # Run twice, the demo rewrites its session rather than appending to it.
    cli("demo", "--db", str(db))
    assert len(cli_json("runs", "demo", "--db", str(db))) == 3


# ---------------------------------------------------------------------------------------------
# import


def test_import_sqlite_session(sqlite_session_db: Path, cli_target: str) -> None:
    db = cli_target
    summary = cli_json("import", str(sqlite_session_db), "--db", str(db))
    assert summary["kind"] == "sqlite"
    assert (summary["sessions"], summary["new_sessions"], summary["runs"], summary["items"]) == (
        1,
        1,
        3,
        14,
    )

    async def sdk_items(session: SQLiteSession) -> list[Any]:
        try:
            return await session.get_items()
        finally:
            session.close()

    expected = asyncio.run(sdk_items(SQLiteSession("plain", sqlite_session_db)))
    assert asyncio.run(store_items(db, "plain")) == expected
    runs = cli_json("runs", "plain", "--db", str(db))
    assert [r["user_message"] for r in runs] == QUESTIONS
    # The tool calls are paired as if the Runner had written to turnstore directly.
    calls = cli_json("tools", "--calls", "--session", "plain", "--db", str(db))
    assert [(c["tool_name"], c["output"]) for c in calls][:2] == [
        ("get_weather", "18°C, sunny"),
        ("get_weather", "22°C, cloudy"),
    ]
    # Custom table names.
    summary = cli_json(
        "import", str(sqlite_session_db), "--messages-table", "msgs", "--db", str(db)
    )
    assert (summary["sessions"], summary["new_sessions"], summary["items"]) == (1, 1, 14)
    custom = asyncio.run(sdk_items(SQLiteSession("custom", sqlite_session_db, "convs", "msgs")))
    assert asyncio.run(store_items(db, "custom")) == custom


def test_second_import_is_a_no_op(sqlite_session_db: Path, cli_target: str) -> None:
    db = cli_target
    cli("import", str(sqlite_session_db), "--db", str(db))
    counts = {t: count(str(db), t) for t in ("sessions", "runs", "items", "tool_calls")}
    shape = asyncio.run(tree_shape(db, "plain"))
    again = cli_json("import", str(sqlite_session_db), "--db", str(db))
    assert (again["new_sessions"], again["updated_sessions"], again["runs"], again["items"]) == (
        0,
        0,
        0,
        0,
    )
    assert again["unchanged_items"] == 14
    assert {t: count(str(db), t) for t in counts} == counts
    assert asyncio.run(tree_shape(db, "plain")) == shape
    text = cli("import", str(sqlite_session_db), "--db", str(db)).stdout
    assert "0 runs and 0 items added, 14 items already present" in text


def test_import_adds_only_what_the_source_gained(tmp_path: Path, cli_target: str) -> None:
    source = tmp_path / "sdk.db"
    db = cli_target
    model = _scripted_model()
    agent = _agents(model)

    async def run(questions: list[str]) -> list[Any]:
        session = SQLiteSession("grow", source)
        try:
            for question in questions:
                await Runner.run(agent, question, session=session)
            return await session.get_items()
        finally:
            session.close()

    asyncio.run(run(QUESTIONS[:2]))
    cli("import", str(source), "--db", str(db))
    run_ids = [r["id"] for r in cli_json("runs", "grow", "--db", str(db))]
    expected = asyncio.run(run(QUESTIONS[2:]))
    summary = cli_json("import", str(source), "--db", str(db))
    assert (summary["runs"], summary["items"], summary["unchanged_items"]) == (1, 4, 10)
    assert asyncio.run(store_items(db, "grow")) == expected
    assert [r["id"] for r in cli_json("runs", "grow", "--db", str(db))][:2] == run_ids


def test_import_resumes_a_run_that_grew(tmp_path: Path, cli_target: str) -> None:
    """A stored leaf run that holds the start of the source's run is extended, not forked."""
    source = tmp_path / "sdk.db"
    db = cli_target
    first = [
        {"role": "user", "content": "hi"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello", "annotations": []}],
        },
    ]
    more = [
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]

    async def add(items: list[Any]) -> None:
        session = SQLiteSession("s", source)
        try:
            await session.add_items(items)
        finally:
            session.close()

    asyncio.run(add(first))
    cli("import", str(source), "--db", str(db))
    asyncio.run(add(more))
    summary = cli_json("import", str(source), "--db", str(db))
    assert (summary["runs"], summary["items"], summary["unchanged_items"]) == (1, 2, 2)
    assert count(db, "runs") == 1
    assert asyncio.run(store_items(db, "s")) == first + more
    calls = cli_json("tools", "--calls", "--db", str(db))
    assert [(c["tool_name"], c["output"], c["status"]) for c in calls] == [("f", "ok", "completed")]


def test_import_advanced_sqlite_session_with_branches(
    advanced_db: tuple[Path, dict[str, list[Any]]], cli_target: str
) -> None:
    source, sdk_branches = advanced_db
    db = cli_target
    summary = cli_json("import", str(source), "--db", str(db))
    assert summary["kind"] == "advanced-sqlite"
    # main: 3 runs; osaka shares run 1 and adds 1; rome shares runs 1-2 and adds 1.
    assert (summary["runs"], summary["items"]) == (5, 14 + 2 + 4)
    # Every branch comes back exactly as the SDK returns it; main is the head.
    assert asyncio.run(store_items(db, "adv")) == sdk_branches["main"]
    # With the SDK's branch names.
    names = [b["name"] for b in cli_json("branches", "adv", "--db", str(db))]
    assert sorted(names) == sorted(sdk_branches)
    paths = asyncio.run(branch_paths(db, "adv"))
    assert sorted(paths, key=json.dumps) == sorted(sdk_branches.values(), key=json.dumps)
    # Branches are siblings at their fork points.
    runs = cli_json("runs", "adv", "--all", "--db", str(db))
    by_user = {r["user_message"]: r for r in runs}
    root = by_user["What's the weather in Paris?"]
    assert by_user["What about Osaka?"]["parent_id"] == root["id"]
    tokyo = by_user["And in Tokyo? Convert it to Fahrenheit."]
    assert tokyo["parent_id"] == root["id"]
    assert by_user["Weather in Rome?"]["parent_id"] == tokyo["id"]
    assert by_user["I need help with a refund for order 1234."]["parent_id"] == tokyo["id"]
    # Usage from turn_usage lands on the runs, branch turns included.
    with sqlite3.connect(source) as conn:
        usage = dict(
            conn.execute(
                "SELECT branch_id || ':' || user_turn_number, total_tokens FROM turn_usage"
            ).fetchall()
        )
    assert root["usage"]["total_tokens"] == usage["main:1"] == 288
    assert by_user["What about Osaka?"]["usage"]["total_tokens"] == usage["osaka:2"]
    assert by_user["Weather in Rome?"]["usage"]["total_tokens"] == usage["rome:3"]
    assert by_user["Weather in Rome?"]["usage"]["requests"] == 2
    # And the second import adds nothing.
    counts = {t: count(db, t) for t in ("runs", "items", "tool_calls")}
    again = cli_json("import", str(source), "--db", str(db))
    assert (again["runs"], again["items"], again["unchanged_items"]) == (0, 0, 20)
    assert {t: count(str(db), t) for t in counts} == counts


def test_show_of_an_imported_advanced_session(
    advanced_db: tuple[Path, dict[str, list[Any]]], cli_target: str
) -> None:
    source, _ = advanced_db
    db = cli_target
    cli("import", str(source), "--db", str(db))
    text = cli("show", "adv", "--db", str(db)).stdout
    assert len(re.findall(r"⑂ fork after run \d+: 2 branches", text)) == 2
    assert "What about Osaka?" in text
    assert "Weather in Rome?" in text


def test_import_only_named_sessions(
    sqlite_session_db: Path, tmp_path: Path, cli_target: str
) -> None:
    db = cli_target
    sdk = tmp_path / "two.db"

    async def write() -> None:
        for sid in ("one", "two"):
            session = SQLiteSession(sid, sdk)
            try:
                await session.add_items([{"role": "user", "content": sid}])
            finally:
                session.close()

    asyncio.run(write())
    summary = cli_json("import", str(sdk), "--session", "two", "--db", str(db))
    assert summary["sessions"] == 1
    assert [s["session_id"] for s in cli_json("sessions", "--db", str(db))["sessions"]] == ["two"]
    line = error_line(cli("import", str(sdk), "--session", "three", "--db", str(db), code=1))
    assert "holds no session 'three'" in line


def test_import_sqlalchemy_session(tmp_path: Path, cli_target: str) -> None:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

    source = tmp_path / "alchemy.db"
    url = f"sqlite+aiosqlite:///{source}"

    async def write() -> list[Any]:
        session = SQLAlchemySession.from_url("alchemy", url=url, create_tables=True)
        try:
            await _sdk_conversation(session)
            return await session.get_items()
        finally:
            await session.engine.dispose()

    expected = asyncio.run(write())
    db = cli_target
    summary = cli_json("import", url, "--db", str(db))
    assert (summary["kind"], summary["sessions"], summary["items"]) == ("sqlalchemy", 1, 14)
    assert asyncio.run(store_items(db, "alchemy")) == expected
    again = cli_json("import", url, "--db", str(db))
    assert again["items"] == 0
    assert again["unchanged_items"] == 14
    # A synchronous driver URL works too, and a missing table is one clear error.
    assert cli_json("import", f"sqlite:///{source}", "--db", str(db))["items"] == 0
    line = error_line(cli("import", url, "--messages-table", "nope", "--db", str(db), code=1))
    assert "cannot read" in line
    assert "nope" in line


def test_a_turnstore_file_is_not_an_sdk_source(small_file: Path, cli_target: str) -> None:
    line = error_line(
        cli("import", str(small_file), "--from", "sqlite", "--db", cli_target, code=1)
    )
    assert "turnstore database" in line
    assert not target_exists(cli_target)


def test_export_then_import_reproduces_the_tree(
    demo_db: str,
    advanced_db: tuple[Path, dict[str, list[Any]]],
    tmp_path: Path,
    new_target: Callable[[], str],
) -> None:
    source, _ = advanced_db
    first = new_target()
    cli("import", str(source), "--db", str(first))
    exported = tmp_path / "adv.jsonl"
    cli("export", "adv", "-o", str(exported), "--db", str(first))
    copy = new_target()
    summary = cli_json("import", str(exported), "--db", str(copy))
    assert (summary["kind"], summary["runs"], summary["items"]) == ("jsonl", 5, 20)
    original, copied = (asyncio.run(tree_shape(db, "adv")) for db in (first, copy))
    # JSONL carries the tree and every item (not the usage, nor the head).
    assert [(p, items) for p, items, _ in original[:-1]] == [
        (p, items) for p, items, _ in copied[:-1]
    ]
    assert cli_json("import", str(exported), "--db", str(copy))["items"] == 0
    # Importing it back where it came from adds nothing either.
    assert cli_json("import", str(exported), "--db", str(first))["items"] == 0
    # The JSON document carries usage and the head as well: the same tree exactly.
    document = tmp_path / "adv.json"
    cli("export", "adv", "-f", "json", "-o", str(document), "--db", str(first))
    exact = new_target()
    assert cli_json("import", str(document), "--db", str(exact))["kind"] == "json"
    assert asyncio.run(tree_shape(exact, "adv")) == original
    # Branched sessions written by the Runner round-trip too, several sessions in one file.
    both = tmp_path / "both.jsonl"
    cli("export", "-o", str(both), "--db", str(demo_db))
    again = new_target()
    assert cli_json("import", str(both), "--db", str(again))["sessions"] == 2
    for sid in ("demo", "branched"):
        a, b = asyncio.run(tree_shape(demo_db, sid)), asyncio.run(tree_shape(again, sid))
        assert [(p, items) for p, items, _ in a[:-1]] == [(p, items) for p, items, _ in b[:-1]]
    assert asyncio.run(branch_paths(again, "branched")) == asyncio.run(
        branch_paths(demo_db, "branched")
    )


def test_import_errors(tmp_path: Path, cli_target: str, sqlite_session_db: Path) -> None:
    db = cli_target
    line = error_line(cli("import", str(tmp_path / "nope.db"), "--db", db, code=1))
    assert "no such file" in line
    text = tmp_path / "notes.txt"
    text.write_text("just text\n")
    assert "neither a SQLite database nor a turnstore export" in error_line(
        cli("import", str(text), "--db", db, code=1)
    )
    line = error_line(
        cli("import", str(sqlite_session_db), "--messages-table", "nope", "--db", db, code=1)
    )
    assert "holds no 'nope' table" in line
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"oops": 1}\n{oops\n')
    line = error_line(cli("import", str(bad), "--db", db, code=1))
    assert "holds no importable turnstore export record (line 1 has no session_id)" in line
    orphan = tmp_path / "orphan.jsonl"
    orphan.write_text(
        '{"session_id": "s", "run_id": 2, "parent_id": 1, "item": {"role": "user"}}\n'
    )
    assert "no run whose parent" in error_line(cli("import", str(orphan), "--db", db, code=1))
    # A source is read before the store is opened: nothing was created.
    assert not target_exists(db)


ITEMS = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": "again"},
]


def _json_export(tmp_path: Path, fmt: str = "json") -> Any:
    """A two-run session's export: the JSON document (parsed), or the JSONL text."""

    async def export() -> str:
        async with Store.open(tmp_path / "source.db") as store:
            await store.add_items("s", ITEMS)
            return await store.export("s", fmt)

    text = asyncio.run(export())
    return json.loads(text) if fmt == "json" else text


@pytest.mark.parametrize("how", ["json on one line", "json after a BOM", "jsonl after a BOM"])
def test_an_export_on_one_line_or_after_a_byte_order_mark_imports(tmp_path: Path, how: str) -> None:
    # Before: a JSON document on one line was taken for JSONL ("line 1 has no session_id"),
    # and a file starting with a UTF-8 byte order mark was "neither a SQLite database nor a
    # turnstore export".
    path = tmp_path / "export"
    if how == "json on one line":
        path.write_text(json.dumps(_json_export(tmp_path)))
    elif how == "json after a BOM":
        path.write_text(json.dumps(_json_export(tmp_path), indent=2), encoding="utf-8-sig")
    else:
        path.write_text(_json_export(tmp_path, "jsonl"), encoding="utf-8-sig")
    target = str(tmp_path / "t.db")
    summary = cli_json("import", str(path), "--db", target)
    assert (summary["kind"], summary["items"], summary["skipped"]) == (how[:5].strip(), 3, 0)
    assert asyncio.run(store_items(target, "s")) == ITEMS


@pytest.mark.parametrize(
    ("version", "why"),
    [
        (
            99,
            '"version" 99 is not one this turnstore reads (1 to 3): a newer turnstore wrote '
            "it, so import it with that one",
        ),
        (0, '"version" 0 is not one this turnstore reads (1 to 3)'),
        (True, '"version" must be a whole number, not true'),
        ("2", '"version" must be a whole number, not a string'),
        (1.5, '"version" must be a whole number, not the number 1.5'),
        (None, '"version" must be a whole number, not null'),
    ],
    ids=["99", "0", "true", "a string", "1.5", "null"],
)
def test_an_export_of_a_version_this_turnstore_does_not_read_is_refused(
    tmp_path: Path, version: Any, why: str
) -> None:
    # Before: 99, true, 0 and 1.5 were imported (99 as version 2, the others as 1), and "2"
    # and null refused with Python's words ("'>=' not supported between ...").
    path = tmp_path / "export.json"
    path.write_text(json.dumps({**_json_export(tmp_path), "version": version}, indent=2))
    target = tmp_path / "t.db"
    line = error_line(cli("import", str(path), "--db", str(target), code=1))
    assert line == f"error: {path} is not a turnstore JSON export: {why}"
    assert not target.exists()


def _spoiled(document: dict[str, Any], how: str) -> Any:
    """``document`` with one thing in it wrong."""
    if how == "not an object":
        return 3
    spoiled = json.loads(json.dumps(document))
    runs = spoiled["runs"]
    if how == "session null":
        spoiled["session"] = None
    elif how == "no session_id":
        del spoiled["session"]["session_id"]
    elif how == "runs not a list":
        spoiled["runs"] = {"0": runs[0]}
    elif how == "a run null":
        runs[1] = None
    elif how == "a run without id":
        del runs[1]["id"]
    elif how == "a run id twice":
        runs[1]["id"] = runs[0]["id"]
    elif how == "items null":
        runs[1]["items"] = None
    elif how == "a parent after its child":
        runs.reverse()
    return spoiled


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("not an object", "a document must be an object, not the number 3"),
        ("session null", '"session" must be an object, not null'),
        ("no session_id", '"session"\'s "session_id" is missing'),
        ("runs not a list", '"runs" must be an array, not an object'),
        ("a run null", 'run 2 of "runs" is null, not an object'),
        ("a run without id", 'run 2 of "runs" has no "id" (a number or a string)'),
        ("a run id twice", 'run 2 of "runs" has the "id" of an earlier run'),
        ("items null", '\'s "items" must be an array of objects'),
        ("a parent after its child", "is not a run before it"),
    ],
)
def test_one_bad_document_of_an_array_refuses_the_file_naming_it(
    tmp_path: Path, how: str, why: str
) -> None:
    # Before: "'NoneType' object is not subscriptable", naming neither the document nor what
    # in it is wrong.
    document = _json_export(tmp_path)
    path = tmp_path / "export.json"
    path.write_text(json.dumps([document, _spoiled(document, how)], indent=2))
    target = tmp_path / "t.db"
    line = error_line(cli("import", str(path), "--db", str(target), code=1))
    assert line.startswith(f"error: {path} is not a turnstore JSON export: document 2 of 2: ")
    assert why in line
    assert not target.exists()


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_session_named_twice_is_exported_once(tmp_path: Path, cli_target: str, fmt: str) -> None:
    # Before: `export demo demo` wrote the session twice ("Exported 2 sessions"), and the
    # JSONL file imported as one session with every run and item twice.
    source = str(tmp_path / "source.db")
    asyncio.run(run_demo(source))
    out = tmp_path / f"twice.{fmt}"
    written = cli_json("export", "demo", "demo", "-f", fmt, "-o", str(out), "--db", source)
    assert written["sessions"] == 1
    cli("import", str(out), "--db", cli_target)
    assert asyncio.run(store_items(cli_target, "demo")) == asyncio.run(store_items(source, "demo"))


def test_exports_of_one_session_concatenated_import_as_the_newest(
    tmp_path: Path, cli_target: str
) -> None:
    # `cat monday.jsonl tuesday.jsonl > week.jsonl`: before, every run and item of the
    # session the two files share was imported twice (one JSONL file is read as one export).
    source = str(tmp_path / "source.db")
    asyncio.run(run_demo(source))
    monday, tuesday = tmp_path / "monday.jsonl", tmp_path / "tuesday.jsonl"
    cli("export", "demo", "-o", str(monday), "--db", source)

    async def grow() -> None:
        async with Store.open(source) as store:
            await store.add_items("demo", [{"role": "assistant", "content": "and more"}])
            await store.add_items("demo", [{"role": "user", "content": "next"}])

    asyncio.run(grow())
    cli("export", "demo", "-o", str(tuesday), "--db", source)
    week = tmp_path / "week.jsonl"
    week.write_text(monday.read_text() + tuesday.read_text())
    summary = cli_json("import", str(week), "--db", cli_target)
    assert summary["skipped"] == 0
    assert asyncio.run(store_items(cli_target, "demo")) == asyncio.run(store_items(source, "demo"))


def test_an_export_nested_past_the_parser_is_skipped_or_refused(
    tmp_path: Path, cli_target: str
) -> None:
    # Before: RecursionError tracebacks from json.loads (when telling the file's kind, reading
    # a JSONL line, reading a JSON document).
    deep = "[" * 100_000 + "]" * 100_000
    good = {"session_id": "s", "run_id": 1, "parent_id": None, "position": 0}
    line = json.dumps({**good, "item": {"role": "user", "content": "hi"}})
    bad_line = line.replace('"hi"', deep)
    lines = tmp_path / "deep.jsonl"
    lines.write_text(f"{bad_line}\n{line}\n")
    summary = cli_json("import", str(lines), "--db", cli_target)
    assert (summary["items"], summary["skipped"]) == (1, 1)
    assert asyncio.run(store_items(cli_target, "s")) == [{"role": "user", "content": "hi"}]
    only = tmp_path / "only.jsonl"
    only.write_text(f"{bad_line}\n")
    assert "line 1 is not JSON" in error_line(cli("import", str(only), "--db", cli_target, code=1))
    document = tmp_path / "deep.json"
    document.write_text(f'{{"format": "turnstore-export", "version": 2,\n"session": {deep}}}')
    line = error_line(cli("import", str(document), "--db", cli_target, code=1))
    assert "is not a turnstore JSON export" in line


def test_import_skips_rows_the_sdk_cannot_return(tmp_path: Path, cli_target: str) -> None:
    source = tmp_path / "sdk.db"

    async def write() -> list[Any]:
        session = SQLiteSession("s", source)
        try:
            await session.add_items([{"role": "user", "content": "hi"}])
            return await session.get_items()
        finally:
            session.close()

    write_items = asyncio.run(write())
    with sqlite3.connect(source) as conn:
        conn.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('s', '{corrupt')"
        )
    db = cli_target
    summary = cli_json("import", str(source), "--db", str(db))
    assert (summary["items"], summary["skipped"]) == (1, 1)
    assert asyncio.run(store_items(db, "s")) == write_items
    assert "1 unreadable rows skipped" in cli("import", str(source), "--db", str(db)).stdout


@pytest.fixture
def unicode_items() -> Iterator[list[Any]]:
    return [
        {"role": "user", "content": "naïve café ☕ \u2028 'quotes' \"double\" -- ; DROP TABLE"},
        {
            "type": "message",
            "role": "assistant",
            "id": "m",
            "status": "completed",
            "content": [{"type": "output_text", "text": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "annotations": []}],
            "extra": {"nested": [1, 2.5, None, True]},
        },
    ]


def test_import_keeps_odd_values_verbatim(
    tmp_path: Path, cli_target: str, unicode_items: list[Any]
) -> None:
    source = tmp_path / "sdk.db"

    async def write() -> list[Any]:
        session = SQLiteSession("odd", source)
        try:
            await session.add_items(unicode_items)
            return await session.get_items()
        finally:
            session.close()

    expected = asyncio.run(write())
    db = cli_target
    cli("import", str(source), "--db", str(db))
    got = asyncio.run(store_items(db, "odd"))
    assert got == expected
    assert [json.dumps(i) for i in got] == [json.dumps(i) for i in expected]  # key order too


@pytest.mark.postgres
def test_import_sqlalchemy_session_from_postgres(cli_target: str) -> None:
    import uuid

    import psycopg

    from support import POSTGRES_URL, require_postgres

    require_postgres()
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

    url = POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    suffix = uuid.uuid4().hex[:10]
    tables = {"sessions_table": f"cli_s_{suffix}", "messages_table": f"cli_m_{suffix}"}

    async def write() -> list[Any]:
        session = SQLAlchemySession.from_url("pg", url=url, create_tables=True, **tables)
        try:
            await _sdk_conversation(session)
            return await session.get_items()
        finally:
            await session.engine.dispose()

    try:
        expected = asyncio.run(write())
        db = cli_target
        args = ("import", url, "--messages-table", tables["messages_table"], "--db", str(db))
        summary = cli_json(*args)
        assert (summary["kind"], summary["items"]) == ("sqlalchemy", 14)
        assert asyncio.run(store_items(db, "pg")) == expected
        assert cli_json(*args)["items"] == 0
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP TABLE IF EXISTS "{tables["messages_table"]}"')
            conn.execute(f'DROP TABLE IF EXISTS "{tables["sessions_table"]}"')

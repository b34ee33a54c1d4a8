"""Rules defined once and applied alike everywhere (issue 13, item 4).

"Failed": a tool call failed when ``turnstore.domain.toolcalls.call_failed`` says so. The Python
side (``ToolCall.failed``), the SQL side (``Store.tool_calls(status="failed")``,
``Store.tool_stats``, the views) and what the CLI and the viewer show all agree, for calls of
every status with and without an error.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from builders import assistant, call, output, user
from support import sql
from turnstore import Store
from turnstore.cli import app
from turnstore.domain.model import ToolCall
from turnstore.domain.toolcalls import FAILED_STATUSES, call_failed, failed_sql
from turnstore.web import format as web_format

DOCS = Path(__file__).resolve().parent.parent / "docs"

# Every status a tool call can have: turnstore's own (pending), the Responses API's, and one
# that none of them uses ("error", which the CLI once counted as failed), and none.
STATUSES = [
    None,
    "pending",
    "completed",
    "rejected",
    "failed",
    "incomplete",
    "timed_out",
    "cancelled",
    "in_progress",
    "searching",
    "calling",
    "generating",
    "interpreting",
    "error",
]
CASES = [(status, error) for status in STATUSES for error in (None, "it broke")]


def test_the_rule() -> None:
    assert {"failed", "incomplete", "timed_out", "cancelled"} == FAILED_STATUSES
    assert [case for case in CASES if call_failed(*case)] == [
        (None, "it broke"),
        ("pending", "it broke"),
        ("completed", "it broke"),
        ("rejected", "it broke"),
        ("failed", None),
        ("failed", "it broke"),
        ("incomplete", None),
        ("incomplete", "it broke"),
        ("timed_out", None),
        ("timed_out", "it broke"),
        ("cancelled", None),
        ("cancelled", "it broke"),
        *[(status, "it broke") for status in STATUSES[8:]],
    ]
    statuses = "'cancelled', 'failed', 'incomplete', 'timed_out'"
    assert failed_sql() == f"(status IN ({statuses}) OR error IS NOT NULL)"
    assert failed_sql("t.status", "t.error") == (
        f"(t.status IN ({statuses}) OR t.error IS NOT NULL)"
    )


def test_docs_state_the_rule() -> None:
    # docs/queries.md's hand-written failure rate counts what failed_sql does.
    text = (DOCS / "queries.md").read_text()
    rule = "status IN ('cancelled', 'failed', 'incomplete', 'timed_out') OR error IS NOT NULL"
    assert rule in text
    assert failed_sql()[1:-1] == rule


async def _write_calls(store: Store) -> dict[int, tuple[str | None, str | None]]:
    """One run with a call of every case; each call's id with its (status, error)."""
    items: list[Any] = [user("go")]
    for n in range(len(CASES)):
        items += [call(f"c{n}", "probe", f'{{"n": {n}}}'), output(f"c{n}", f"out-{n}")]
    await store.add_items("s", items)
    rows = await sql(store, "SELECT id, call_id FROM tool_calls")
    ids = {call_id: id_ for id_, call_id in rows}
    cases: dict[int, tuple[str | None, str | None]] = {}
    for n, (status, error) in enumerate(CASES):
        id_ = ids[f"c{n}"]
        await sql(
            store,
            "UPDATE tool_calls SET status = {status}, error = {error} WHERE id = {id}",
            write=True,
            status=status,
            error=error,
            id=id_,
        )
        cases[id_] = (status, error)
    return cases


@pytest.fixture
def calls_db(cli_target: str) -> tuple[str, dict[int, tuple[str | None, str | None]]]:
    async def go() -> dict[int, tuple[str | None, str | None]]:
        async with Store.open(cli_target) as store:
            return await _write_calls(store)

    return cli_target, asyncio.run(go())


def test_failed_agrees_everywhere(
    calls_db: tuple[str, dict[int, tuple[str | None, str | None]]],
) -> None:
    target, cases = calls_db
    expected = {id_ for id_, case in cases.items() if call_failed(*case)}
    assert len(expected) == 18

    async def go() -> tuple[list[ToolCall], list[ToolCall], Any, Any, Any]:
        async with Store.open(target) as store:
            every = await store.tool_calls(limit=None)
            failed = await store.tool_calls(status="failed", limit=None)
            stats = await store.tool_stats()
            view = await sql(store, "SELECT tool_call_id, failed FROM tool_call_overview")
            runs = await sql(store, "SELECT failed_tool_calls FROM run_overview")
            return every, failed, stats, view, runs

    every, failed, stats, view, runs = asyncio.run(go())
    assert {c.id for c in every} == set(cases)
    # Python: ToolCall.failed
    assert {c.id for c in every if c.failed} == expected
    # SQL: the failed filter, the statistics, the views
    assert {c.id for c in failed} == expected
    assert [(s.tool_name, s.calls, s.failed) for s in stats] == [("probe", 28, 18)]
    assert {id_ for id_, flag in view if flag} == expected
    assert runs == [(18,)]
    # The viewer's badge
    assert {c.id for c in every if web_format.call_class(c) == "bad"} == expected
    # The CLI: a failed call's status is shown in red, any other's is not
    result = CliRunner().invoke(
        app, ["show", "s", "--db", target], env={"FORCE_COLOR": "1", "COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    red = set()
    for n, (id_, (status, _)) in enumerate(sorted(cases.items())):
        line = next(line for line in result.stdout.splitlines() if f"out-{n}" in line)
        shown = re.escape(status or "?")
        if re.search(rf"\x1b\[31m{shown}\x1b\[0m", line):
            red.add(id_)
    assert red == expected


# ---------------------------------------------------------------------------------------------
# Search snippets: the matches are offsets, not marks in the text

BOLD = "Use **bold** here, then ask about the refund."


async def test_stored_marks_are_not_matches(store: Store) -> None:
    await store.add_items(
        "s", [user(BOLD), assistant("a \ufdd0refund\ufdd1 with the marks search once used")]
    )
    hits = await store.search("refund")
    assert len(hits) == 2
    by_role = {hit.role: hit for hit in hits}
    question = by_role["user"]
    # PostgreSQL's headline leaves out the first word and the full stop.
    assert question.snippet in (BOLD, "bold** here, then ask about the refund")
    assert [question.snippet[a:b] for a, b in question.matches] == ["refund"]
    assert question.pieces()[-2:] in (
        [("refund", True), (".", False)],
        [(question.snippet[:-6], False), ("refund", True)],
    )
    # Stored text never holds the marks the backends use: they are replaced on the way in.
    answer = by_role["assistant"]
    assert "\ufdd0" not in answer.snippet
    assert "\ufdd1" not in answer.snippet
    assert [answer.snippet[a:b] for a, b in answer.matches] == ["refund"]
    # A phrase: one match per word.
    [phrase] = await store.search('"about the refund"')
    matched = " ".join(phrase.snippet[a:b] for a, b in phrase.matches)
    # SQLite marks the phrase, PostgreSQL each word but the stop word "the".
    assert matched in ("about the refund", "about refund")


def test_unmark() -> None:
    from turnstore.core.search import SNIPPET_MARKS, unmark

    o, c = SNIPPET_MARKS
    assert unmark(f"a {o}b{c} c {o}dd{c}") == ("a b c dd", ((2, 3), (6, 8)))
    assert unmark("**x**") == ("**x**", ())
    # A mark without its partner marks nothing.
    assert unmark(f"a {c}b {o}c") == ("a b c", ())
    assert unmark(f"{o}{c}x") == ("x", ())


def test_pieces() -> None:
    from datetime import datetime, timezone

    from turnstore.domain.model import SearchResult

    def hit(snippet: str, *matches: tuple[int, int]) -> SearchResult:
        now = datetime.now(timezone.utc)
        return SearchResult("s", 1, 1, "message", "user", snippet, 0.0, False, now, matches)

    assert hit("abc").pieces() == [("abc", False)]
    assert hit("").pieces() == []
    assert hit("abc", (0, 3)).pieces() == [("abc", True)]
    assert hit("a bc d", (2, 4)).pieces() == [("a ", False), ("bc", True), (" d", False)]
    assert hit("ab cd", (0, 2), (3, 5)).pieces() == [("ab", True), (" ", False), ("cd", True)]


@pytest.fixture
def bold_db(cli_target: str) -> str:
    async def go() -> None:
        async with Store.open(cli_target) as store:
            await store.add_items("s", [user(BOLD)])

    asyncio.run(go())
    return cli_target


def test_cli_and_viewer_mark_only_matches(bold_db: str) -> None:
    from starlette.testclient import TestClient

    from turnstore.web import create_app

    result = CliRunner().invoke(
        app, ["search", "refund", "--db", bold_db], env={"FORCE_COLOR": "1", "COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "bold**" in result.stdout  # PostgreSQL's headline starts at "bold"
    assert "\x1b[1;33mrefund\x1b[0m" in result.stdout
    assert "\x1b[1;33mbold" not in result.stdout
    as_json = CliRunner().invoke(app, ["search", "refund", "--db", bold_db, "--json"])
    [hit] = json.loads(as_json.stdout)
    assert hit["snippet"] in (BOLD, "bold** here, then ask about the refund")
    assert [hit["snippet"][a:b] for a, b in hit["matches"]] == ["refund"]

    with Store.open(bold_db) as store:
        page = TestClient(create_app(store), base_url="http://127.0.0.1").get("/sessions?q=refund")
    assert page.status_code == 200
    assert "<mark>refund</mark>" in page.text
    assert "bold** here" in page.text
    assert page.text.count("<mark>") == 1


# ---------------------------------------------------------------------------------------------
# JSON output: one writer (turnstore.domain.jsonout); stored items have their own codec

SRC = Path(__file__).resolve().parent.parent / "src" / "turnstore"


def test_jsonout_writes_records() -> None:
    from datetime import datetime, timezone

    from turnstore.domain import jsonout
    from turnstore.domain.model import SessionInfo

    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    info = SessionInfo("s", None, "é", 7, when, when, {"k": (1, 2)})
    assert json.loads(jsonout.dumps({"sessions": [info], 3: None})) == {
        "sessions": [
            {
                "session_id": "s",
                "user_id": None,
                "title": "é",
                "head_run_id": 7,
                "created_at": "2025-01-02T03:04:05+00:00",
                "updated_at": "2025-01-02T03:04:05+00:00",
                "metadata": {"k": [1, 2]},
                "unreadable_metadata": None,
            }
        ],
        "3": None,
    }
    assert jsonout.dumps("é") == '"é"'  # readable UTF-8
    assert jsonout.dumps("\ud800 é") == '"\\ud800 \\u00e9"'  # no UTF-8 holds a lone surrogate
    with pytest.raises(TypeError):
        jsonout.dumps(object())


def test_one_json_writer_for_output() -> None:
    # Output (the CLI, the viewer, exports) is written by jsonout alone. json.dumps elsewhere
    # encodes what is stored or bound (items' columns, metadata, cursors, statement
    # parameters), never output.
    internal = {"jsonout.py", "items.py", "validate.py"}
    writers = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if re.search(r"json\.dumps?\(|JSONEncoder\(", path.read_text())
        and path.name not in internal
        and path.parent.name != "core"
    )
    assert writers == []


def test_viewer_shows_items_no_utf8_can_hold(tmp_path: Path) -> None:
    # A stored item may hold a lone surrogate: the viewer writes it \\u-escaped, as exports do,
    # rather than failing the page.
    from starlette.testclient import TestClient

    from turnstore.web import create_app

    db = str(tmp_path / "t.db")
    items = [user("lone \ud800 surrogate"), call("c1", "f", '{"a": "lone \\ud800"}')]

    async def go() -> int:
        async with Store.open(db) as store:
            await store.add_items("s", items)
            return (await store.runs("s"))[0].id

    run_id = asyncio.run(go())
    with Store.open(db) as store:
        client = TestClient(create_app(store), base_url="http://127.0.0.1")
        for url in (f"/runs/{run_id}", "/sessions/s"):  # the call's arguments
            page = client.get(url)
            assert page.status_code == 200, url
            assert "lone \\ud800" in page.text
        page = client.get(f"/runs/{run_id}/items")  # the items themselves
        assert page.status_code == 200
        assert "lone \\ud800 surrogate" in page.text


# ---------------------------------------------------------------------------------------------
# runs.status, written by the session's writes, with the real Runner


async def _statuses(store: Store, sid: str = "s") -> list[tuple[str | None, str | None]]:
    return [(run.user_message, run.status) for run in await store.runs(sid)]


@pytest.mark.parametrize("mode", ["run", "run_sync", "run_streamed"])
async def test_run_status_follows_the_runner(store: Store, mode: str) -> None:
    from scripted import converse
    from turnstore import StructuredSession

    session = StructuredSession("s", store)
    seen: list[Any] = []

    async def while_interrupted() -> None:
        seen.append(await _statuses(store))

    await converse(mode, session, while_interrupted)
    done = [
        ("What's the weather in Oslo?", "completed"),
        ("I have a billing question", "completed"),
        # The input guardrail tripped: the Runner raised, and the next question came.
        ("tell me something forbidden", "failed"),
    ]
    assert seen == [[*done, ("Delete /tmp/r.txt", "interrupted")]]
    assert await _statuses(store) == [*done, ("Delete /tmp/r.txt", "completed")]


async def test_run_status_of_a_runner_call_that_raised(store: Store) -> None:
    from agents import Agent, Runner, function_tool
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    from turnstore import StructuredSession

    @function_tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    model = ScriptedModel(
        [
            ModelStep(output=[function_call("lookup", {"key": "a"}, call_id="c1")]),
            ModelStep.raise_error(RuntimeError("the model is down")),
            ModelStep(output=[assistant_message("Here you are.")]),
        ]
    )
    agent = Agent("A", model=model, tools=[lookup])
    session = StructuredSession("s", store)
    with pytest.raises(RuntimeError):
        await Runner.run(agent, "first", session=session)
    # Nothing tells a session that a Runner call raised: the run is left under way...
    assert await _statuses(store) == [("first", "in_progress")]
    await Runner.run(agent, "second", session=session)
    # ...until the next question shows that it ended without an answer.
    assert await _statuses(store) == [("first", "failed"), ("second", "completed")]


async def test_run_status_of_written_items(store: Store) -> None:
    await store.add_items("a", [user("q1"), assistant("a1"), user("q2")])
    assert await _statuses(store, "a") == [("q1", "completed"), ("q2", "in_progress")]
    await store.add_items("a", [call("c1", "f"), output("c1", "ok")])
    assert await _statuses(store, "a") == [("q1", "completed"), ("q2", "in_progress")]
    await store.add_items("a", [assistant("a2"), call("c2", "f")])
    assert await _statuses(store, "a") == [("q1", "completed"), ("q2", "interrupted")]
    await store.add_items("a", [output("c2", "ok")])
    assert await _statuses(store, "a") == [("q1", "completed"), ("q2", "in_progress")]
    await store.add_items("a", [assistant("a3")])
    assert await _statuses(store, "a") == [("q1", "completed"), ("q2", "completed")]
    # An interrupted run stays so when a new question comes (its approval may still come);
    # a question another follows in the same input needs no answer of its own; one under
    # way when a later write brings a question has failed.
    await store.add_items("b", [user("q1"), call("c1", "f"), user("q2"), user("q3")])
    assert await _statuses(store, "b") == [
        ("q1", "interrupted"),
        ("q2", "completed"),
        ("q3", "in_progress"),
    ]
    await store.add_items("b", [user("q4")])
    assert await _statuses(store, "b") == [
        ("q1", "interrupted"),
        ("q2", "completed"),
        ("q3", "failed"),
        ("q4", "in_progress"),
    ]
    # A call the model left incomplete awaits no approval.
    incomplete = {**call("c3", "f"), "status": "incomplete"}
    await store.add_items("c", [user("q1"), incomplete])
    assert await _statuses(store, "c") == [("q1", "in_progress")]


async def test_run_status_of_several_user_messages_in_one_runner_input(store: Store) -> None:
    from agents import Agent, Runner
    from agents.testing import ModelStep, ScriptedModel, assistant_message

    from turnstore import StructuredSession

    model = ScriptedModel([ModelStep(output=[assistant_message("answer")])])
    session = StructuredSession("s", store)
    await Runner.run(
        Agent("A", model=model), [user("Some context."), user("The question?")], session=session
    )
    assert await _statuses(store) == [
        ("Some context.", "completed"),
        ("The question?", "completed"),
    ]


async def test_run_status_of_runs_added_whole_is_as_if_each_were_one_write(store: Store) -> None:
    from turnstore import NewRun

    await store.add_runs(
        "s",
        [
            NewRun([user("q1")]),
            NewRun([user("q2"), assistant("a2")], parent=0),
            NewRun([user("q3"), call("c1", "f")], parent=1),
        ],
        head=2,
    )
    assert await _statuses(store) == [("q1", "failed"), ("q2", "completed"), ("q3", "interrupted")]


async def test_a_compaction_run_never_gets_a_status(store: Store) -> None:
    await store.add_items("s", [user("q1"), assistant("a1")])
    assert await store.compact("s", [user("summary of q1 and a1")])
    await store.add_items("s", [assistant("more")])
    await store.add_items("s", [user("q2"), assistant("a2")])
    rows = await sql(store, "SELECT status FROM runs WHERE kind = 'compaction'")
    assert [tuple(row) for row in rows] == [(None,)]


async def test_the_migration_gives_stored_runs_the_status_writes_give(store: Store) -> None:
    from turnstore.postgres import migrations as postgres_migrations
    from turnstore.sqlite import migrations as sqlite_migrations

    await store.add_items("a", [user("q1"), assistant("a1"), user("q2"), call("c1", "f")])
    await store.add_items("b", [user("q1"), call("c1", "f"), output("c1", "ok")])
    await store.add_items("b", [user("q2")])
    await store.add_items("c", [user("q1"), assistant("a1"), call("c1", "f"), output("c1", "x")])
    written = {sid: await _statuses(store, sid) for sid in "abc"}
    assert written == {
        "a": [("q1", "completed"), ("q2", "interrupted")],
        "b": [("q1", "failed"), ("q2", "in_progress")],
        "c": [("q1", "in_progress")],
    }
    sqlite = store.backend.dialect == "sqlite"
    # sqlite's step 9, postgres's step 8
    [backfill] = sqlite_migrations.MIGRATIONS[8] if sqlite else postgres_migrations.MIGRATIONS[7]
    await sql(store, "UPDATE runs SET status = NULL", write=True)
    await sql(store, backfill, write=True)
    assert {sid: await _statuses(store, sid) for sid in "abc"} == written


async def test_pop_item_leaves_the_status_a_write_would(store: Store) -> None:
    await store.add_items("s", [user("q"), call("c1", "f"), output("c1", "ok"), assistant("a")])
    assert await _statuses(store) == [("q", "completed")]
    await store.pop_item("s")  # the answer
    assert await _statuses(store) == [("q", "in_progress")]
    await store.pop_item("s")  # the output: the call waits again
    assert await _statuses(store) == [("q", "interrupted")]
    await store.pop_item("s")  # the call
    assert await _statuses(store) == [("q", "in_progress")]


# ---------------------------------------------------------------------------------------------
# Tool call statuses (issue 17): timed out, cancelled and rejected calls told apart

TIMEOUT = "Tool 'slow' timed out after 5 seconds."
REJECTION = "Tool execution was not approved."


async def test_outputs_tell_timed_out_and_rejected_calls(store: Store) -> None:
    await store.add_items(
        "s",
        [
            user("go"),
            call("c1", "slow"),
            output("c1", TIMEOUT),
            call("c2", "rm"),
            output("c2", REJECTION),
            call("c3", "f"),
            output("c3", "An error occurred while running the tool. Please try again."),
            call("c4", "f"),
            output("c4", "Tool execution was not approved, says the tool itself."),
        ],
    )
    calls = {c.call_id: c for c in await store.tool_calls(session_id="s")}
    assert [(c.status, c.error, c.failed) for c in calls.values()] == [
        ("timed_out", TIMEOUT, True),
        ("rejected", None, False),
        ("failed", "An error occurred while running the tool. Please try again.", True),
        ("completed", None, False),
    ]
    assert {c.call_id for c in await store.tool_calls(status="failed")} == {"c1", "c3"}
    assert [c.call_id for c in await store.tool_calls(status="rejected")] == ["c2"]


async def test_the_migration_tells_stored_timed_out_and_rejected_calls_apart(store: Store) -> None:
    from turnstore.postgres import migrations as postgres_migrations
    from turnstore.sqlite import migrations as sqlite_migrations

    await store.add_items(
        "s", [user("go"), call("c1", "slow"), output("c1", TIMEOUT), call("c2", "rm")]
    )
    await store.add_items("s", [output("c2", REJECTION), assistant("ok")])
    # As a version before statuses told them apart stored them.
    await sql(store, "UPDATE tool_calls SET status = 'failed' WHERE call_id = 'c1'", write=True)
    await sql(store, "UPDATE tool_calls SET status = 'completed' WHERE call_id = 'c2'", write=True)
    sqlite = store.backend.dialect == "sqlite"
    step = (sqlite_migrations if sqlite else postgres_migrations).MIGRATIONS[9 if sqlite else 8]
    for statement in step:
        if statement.startswith("UPDATE tool_calls"):
            await sql(store, statement.replace("{", "{{").replace("}", "}}"), write=True)
    calls = await store.tool_calls(session_id="s")
    assert [(c.call_id, c.status) for c in calls] == [("c1", "timed_out"), ("c2", "rejected")]

"""``StructuredSession`` as a drop-in for ``SQLiteSession`` under the SDK's lifecycles (issue 12).

Usage and runs per Runner call (the SDK's ``wrapper`` tells calls apart), the SDK's
constructor and limits. E2E tests drive the real ``Runner`` with ``ScriptedModel``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, RunState, SQLiteSession, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import InputTokensDetails, OutputTokensDetails, Usage

from builders import user
from support import sql
from turnstore import ConfigurationError, Store, StructuredSession

pytestmark = pytest.mark.e2e


def usage(inp: int, out: int) -> Usage:
    return Usage(
        requests=1,
        input_tokens=inp,
        output_tokens=out,
        total_tokens=inp + out,
        input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
    )


RUN_USAGE = (
    "SELECT user_message, assistant_message, requests, input_tokens, output_tokens, total_tokens"
    " FROM runs WHERE session_id = {sid} ORDER BY id"
)


# ---------------------------------------------------------------------------------------------
# Usage and runs per Runner call


async def test_runner_calls_that_continue_a_run_add_their_usage(store: Store) -> None:
    model = ScriptedModel(
        [
            ModelStep(output=[assistant_message("a1", item_id="m1")], usage=usage(100, 10)),
            ModelStep(output=[assistant_message("a2", item_id="m2")], usage=usage(100, 10)),
            ModelStep(output=[assistant_message("a3", item_id="m3")], usage=usage(100, 10)),
        ]
    )
    agent = Agent("A", model=model)
    session = StructuredSession("s", store)
    await Runner.run(agent, "q", session=session)
    await Runner.run(agent, [], session=session)  # no user message: the run goes on
    await Runner.run(agent, [{"role": "developer", "content": "go on"}], session=session)
    assert await sql(store, RUN_USAGE, sid="s") == [("q", "a3", 3, 300, 30, 330)]
    [row] = await store.usage(session_id="s")
    assert (row.runs, row.usage.requests, row.usage.total_tokens) == (1, 3, 330)


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    return f"deleted {path}"


@pytest.mark.parametrize("resume", ["in-process", "serialised"])
async def test_a_resumed_run_counts_the_interrupted_part_once(store: Store, resume: str) -> None:
    model = ScriptedModel(
        [
            ModelStep(
                output=[function_call("delete_file", {"path": "/x"}, call_id="c1")],
                usage=usage(50, 4),
            ),
            ModelStep(output=[assistant_message("Deleted.")], usage=usage(60, 6)),
        ]
    )
    agent = Agent("A", model=model, tools=[delete_file])
    result = await Runner.run(agent, "Delete /x", session=StructuredSession("s", store))
    state = result.to_state()
    if resume == "serialised":  # as another process would: a wrapper turnstore never saw
        state = await RunState.from_json(agent, state.to_json())
    state.approve(state.get_interruptions()[0])
    result = await Runner.run(agent, state, session=StructuredSession("s", store))
    assert result.final_output == "Deleted."
    assert await sql(store, RUN_USAGE, sid="s") == [("Delete /x", "Deleted.", 2, 110, 10, 120)]


class Gate:
    """Lets a scripted model answer only once the test opens the gate."""

    def __init__(self, step: ModelStep) -> None:
        self.called = asyncio.Event()
        self.open = asyncio.Event()
        self.step = step

    async def __call__(self, call: Any) -> ModelStep:
        self.called.set()
        await self.open.wait()
        return self.step


@function_tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


async def test_interleaved_runner_calls_keep_their_answers_tool_calls_and_usage(
    store: Store,
) -> None:
    # A starts, then B starts before A's model answers: A's answer, tool call and tokens
    # belong to A's run although B's run is the head by then.
    gate_a = Gate(ModelStep(output=[function_call("lookup", {"q": "a"}, call_id="ca")]))
    model_a = ScriptedModel(
        [
            ModelStep.respond(gate_a),
            ModelStep(output=[assistant_message("answer A", item_id="ma")], usage=usage(7, 3)),
        ],
    )
    model_a.set_default_usage(usage(10, 1))
    model_b = ScriptedModel(
        [
            ModelStep(output=[function_call("lookup", {"q": "b"}, call_id="cb")]),
            ModelStep(output=[assistant_message("answer B", item_id="mb")], usage=usage(20, 2)),
        ]
    )
    model_b.set_default_usage(usage(30, 3))
    session = StructuredSession("s", store)
    agent_a = Agent("A", model=model_a, tools=[lookup])
    agent_b = Agent("B", model=model_b, tools=[lookup])
    task_a = asyncio.create_task(Runner.run(agent_a, "question A", session=session))
    await asyncio.wait_for(gate_a.called.wait(), 30)  # A's input is stored, its model waits
    result_b = await Runner.run(agent_b, "question B", session=session)
    gate_a.open.set()
    result_a = await task_a
    assert (result_a.final_output, result_b.final_output) == ("answer A", "answer B")

    assert await sql(store, RUN_USAGE, sid="s") == [
        ("question A", "answer A", 2, 17, 4, 21),
        ("question B", "answer B", 2, 50, 5, 55),
    ]
    rows = await sql(
        store,
        "SELECT r.user_message, t.call_id, t.output FROM tool_calls t"
        " JOIN runs r ON r.session_id = t.session_id AND r.id = t.run_id ORDER BY t.id",
    )
    assert rows == [("question B", "cb", "found b"), ("question A", "ca", "found a")]
    # The history keeps the order of the writes, as SQLiteSession's does.
    items = await session.get_items()
    assert [item.get("role") or item.get("call_id") for item in items][:2] == ["user", "user"]
    assert len(items) == 8


@function_tool
def flaky(q: str) -> str:
    """Fails."""
    raise RuntimeError("database is down")


async def test_a_tool_that_raised_is_a_failed_call_in_the_installed_sdks_words(
    store: Store,
) -> None:
    # openai-agents before 0.23 words the failure with the exception's text, later ones
    # without it: a failed call either way.
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("flaky", {"q": "x"}, call_id="c1")]),
            ModelStep(output=[function_call("flaky", '{"q": ', call_id="c2")]),  # bad JSON
            ModelStep(output=[assistant_message("sorry", item_id="m1")]),
        ]
    )
    session = StructuredSession("s", store)
    await Runner.run(Agent("A", model=model, tools=[flaky]), "q", session=session)
    calls = await store.tool_calls(session_id="s")
    outputs = [item["output"] for item in await session.get_items() if "output" in item]
    assert [(c.call_id, c.status, c.error) for c in calls] == [
        ("c1", "failed", outputs[0]),
        ("c2", "failed", outputs[1]),
    ]


# ---------------------------------------------------------------------------------------------
# The SDK's constructor, limits and ids


async def test_db_path_keyword_opens_the_file(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    session = StructuredSession("s", db_path=str(path))
    await session.add_items([user("q")])
    await session.aclose()
    again = StructuredSession("s", db_path=path)
    assert await again.get_items() == [user("q")]
    await again.aclose()


@pytest.mark.parametrize(
    "kwargs",
    [{"sessions_table": "my_sessions"}, {"messages_table": "my_messages"}],
)
def test_table_names_are_refused_with_the_reason(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="turnstore's own tables"):
        StructuredSession("s", **kwargs)


def test_the_sdk_default_table_names_are_accepted() -> None:
    session = StructuredSession(
        "s", sessions_table="agent_sessions", messages_table="agent_messages"
    )
    session.close()


def test_db_and_db_path_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="db_path"):
        StructuredSession("s", str(tmp_path / "a.db"), db_path=str(tmp_path / "b.db"))


@pytest.mark.parametrize("limit", [None, 0, 1, 2, -1, -7])
async def test_limits_match_sqlite_session(store: Store, limit: int | None) -> None:
    items: list[Any] = [user(f"q{n}") for n in range(3)]
    ours = StructuredSession("s", store)
    theirs = SQLiteSession("s")
    bounded_theirs = SQLiteSession("s", session_settings={"limit": limit})
    try:
        await ours.add_items(items)
        await theirs.add_items(items)
        await bounded_theirs.add_items(items)
        assert await ours.get_items(limit) == await theirs.get_items(limit)
        bounded = StructuredSession("s", store, session_settings={"limit": limit})
        assert await bounded.get_items() == await bounded_theirs.get_items()
    finally:
        theirs.close()
        bounded_theirs.close()

"""End to end with the real Agents SDK ``Runner`` and ``agents.testing.ScriptedModel``.

Issue 2: for ``Runner.run``, ``Runner.run_sync`` and ``Runner.run_streamed``, a conversation
with tool calls, a handoff, an input guardrail trip and an interrupted, resumed tool approval
lands in ``runs`` and ``tool_calls`` as plain SQL can read it, with the SDK's usage, while
``get_items()`` returns exactly what the SDK wrote. Issue 3: edit / regenerate / rewind in
the middle of a conversation, then continue it with the Runner.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from agents import (
    Agent,
    Runner,
    SQLiteSession,
    function_tool,
)
from agents.testing import ScriptedModel, assistant_message, function_call

from scripted import MODES, converse, drive
from support import sql
from turnstore import Store, StructuredSession

pytestmark = pytest.mark.e2e


class RecordingSession:
    """Forwards to a session (``wrapper`` included) and records every batch the SDK writes."""

    def __init__(self, inner: StructuredSession) -> None:
        self.inner = inner
        self.session_id = inner.session_id
        self.session_settings = inner.session_settings
        self.written: list[list[Any]] = []

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Any]:
        return await self.inner.get_items(limit, wrapper=wrapper)

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        self.written.append(copy.deepcopy(items))
        await self.inner.add_items(items, wrapper=wrapper)

    async def pop_item(self, *, wrapper: Any = None) -> Any:
        raise AssertionError("the Runner is not expected to pop in these flows")

    async def clear_session(self, *, wrapper: Any = None) -> None:
        raise AssertionError("the Runner is not expected to clear in these flows")

    @property
    def items_written(self) -> list[Any]:
        return [item for batch in self.written for item in batch]


# ---------------------------------------------------------------------------------------------
# Issue 2: one conversation through every SDK feature that writes to the session


@pytest.mark.parametrize("mode", MODES)
async def test_runner_conversation_lands_in_plain_sql(store: Store, mode: str) -> None:
    session = RecordingSession(StructuredSession("s", store))

    async def while_interrupted() -> None:
        # Stored so far: the user input and the call, unanswered.
        assert [item.get("type") for item in (await session.inner.get_items(2))] == [
            None,
            "function_call",
        ]
        rows = await sql(store, "SELECT output, status FROM tool_calls WHERE call_id = 'c2'")
        assert rows == [(None, "pending")]

    await converse(mode, session, while_interrupted)

    # get_items returns exactly what the SDK wrote, batch after batch.
    assert await session.inner.get_items() == session.items_written
    for limit in (1, 3, 7):
        assert await session.inner.get_items(limit) == session.items_written[-limit:]

    # Each user message with its answer, and the run's usage, by plain SQL.
    rows = await sql(
        store,
        "SELECT user_message, assistant_message, requests, input_tokens, output_tokens,"
        " total_tokens, cached_tokens, reasoning_tokens FROM runs"
        " WHERE session_id = {sid} ORDER BY created_at, id",
        sid="s",
    )
    assert rows == [
        ("What's the weather in Oslo?", "It rains in Oslo.", 2, 30, 5, 35, 12, 3),
        ("I have a billing question", "Billing here.", 2, 70, 6, 76, 0, 0),
        ("tell me something forbidden", None, 0, 0, 0, 0, 0, 0),  # only the input is stored
        # The resumed run's usage carries the interrupted part's: the run's total.
        ("Delete /tmp/r.txt", "Deleted /tmp/r.txt.", 2, 110, 10, 120, 0, 0),
    ]

    # Every call of a tool with its arguments and output, by plain SQL.
    rows = await sql(
        store,
        "SELECT r.user_message, t.tool_name, t.kind, t.arguments, t.output, t.status"
        " FROM tool_calls t JOIN runs r ON r.session_id = t.session_id AND r.id = t.run_id"
        " ORDER BY t.id",
    )
    assert rows == [
        (
            "What's the weather in Oslo?",
            "get_weather",
            "function",
            '{"city":"Oslo"}',
            "Rain in Oslo",
            "completed",
        ),
        (
            "I have a billing question",
            "transfer_to_billing",
            "handoff",
            "{}",
            '{"assistant": "Billing"}',
            "completed",
        ),
        (
            "Delete /tmp/r.txt",
            "delete_file",
            "function",
            '{"path":"/tmp/r.txt"}',
            "deleted /tmp/r.txt",
            "completed",
        ),
    ]

    # The approved call and its output came in different batches, and still make one row.
    batches = session.written
    call_batch = next(i for i, b in enumerate(batches) if any(x.get("call_id") == "c2" for x in b))
    output_batch = next(
        i
        for i, b in enumerate(batches)
        if any(x.get("type") == "function_call_output" and x["call_id"] == "c2" for x in b)
    )
    assert call_batch < output_batch
    rows = await sql(
        store,
        "SELECT c.type, o.type, c.run_id = o.run_id FROM tool_calls t"
        " JOIN items c ON c.session_id = t.session_id AND c.id = t.call_item_id"
        " JOIN items o ON o.session_id = t.session_id AND o.id = t.output_item_id"
        " WHERE t.call_id = 'c2'",
    )
    assert rows == [("function_call", "function_call_output", 1)]


@pytest.mark.parametrize("mode", MODES)
async def test_same_items_as_the_sdk_sqlite_session(store: Store, mode: str) -> None:
    ours = StructuredSession("s", store)
    theirs = SQLiteSession("s")
    try:
        await converse(mode, ours)
        await converse(mode, theirs)
        assert await ours.get_items() == await theirs.get_items()
        assert await ours.get_items(5) == await theirs.get_items(5)
    finally:
        theirs.close()


async def test_session_settings_limit_bounds_what_the_model_sees(store: Store) -> None:
    session = StructuredSession("s", store, session_settings={"limit": 3})
    model = ScriptedModel([[assistant_message(f"a{n}", item_id=f"m{n}")] for n in range(3)])
    agent = Agent("Assistant", model=model)
    for n in range(3):
        await Runner.run(agent, f"q{n}", session=session)
    everything = await session.store.get_items("s")
    assert len(everything) == 6
    # The third run saw the newest 3 stored items, then its own input.
    assert model.calls[2].input == [*everything[1:4], {"role": "user", "content": "q2"}]


async def test_encrypted_session_round_trips(store: Store) -> None:
    # Needs cryptography (the test group installs it, as the SDK's "encrypt" extra would).
    from agents.extensions.memory.encrypt_session import EncryptedSession

    inner = StructuredSession("s", store)
    encrypted = EncryptedSession(
        session_id="s", underlying_session=inner, encryption_key="a test key" * 4, ttl=600
    )
    plain = SQLiteSession("s")
    try:
        await converse("run", encrypted)
        await converse("run", plain)
        expected = await plain.get_items()
        assert await encrypted.get_items() == expected
        assert await encrypted.get_items(3) == expected[-3:]
        # What turnstore holds is the SDK's envelopes, stored losslessly and in order.
        envelopes = await inner.get_items()
        assert len(envelopes) == len(expected)
        assert all(envelope.get("__enc__") == 1 for envelope in envelopes)
        assert "Oslo" not in str(await sql(store, "SELECT data FROM items"))
        assert await encrypted.pop_item() == expected[-1]
        assert await encrypted.get_items() == expected[:-1]
        await encrypted.clear_session()
        assert await inner.get_items() == []
    finally:
        plain.close()


# ---------------------------------------------------------------------------------------------
# Issue 3: change the course of a conversation, then continue it with the Runner


@function_tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def run_steps(tag: str, call_id: str | None = None) -> list[Any]:
    """The model's side of one run: a lookup, then the answer."""
    return [
        [function_call("lookup", {"q": tag}, call_id=call_id or f"c-{tag}")],
        [assistant_message(f"answer {tag}", item_id=f"m-{tag}")],
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["edit", "regenerate", "rewind"])
async def test_change_run_3_of_5_and_continue(store: Store, mode: str, how: str) -> None:
    tags = ["q1", "q2", "q3", "q4", "q5"]
    new_tag = {"edit": "q3 edited", "regenerate": "q3", "rewind": "q3 rewritten"}[how]
    steps = [step for tag in tags for step in run_steps(tag)]
    model = ScriptedModel([*steps, *run_steps(new_tag, call_id="c-new")])
    agent = Agent("Assistant", model=model, tools=[lookup])
    session = StructuredSession("s", store)
    for tag in tags:
        await drive(mode, agent, tag, session)
    before = await session.get_items()
    runs_before = await session.runs()
    assert len(before) == 20
    assert len(runs_before) == 5
    run3 = runs_before[2]

    if how == "edit":
        await session.edit(run3.id, new_tag)
        result = await drive(mode, agent, [], session)  # the history ends in the new question
    elif how == "regenerate":
        await session.regenerate(run3.id)
        result = await drive(mode, agent, [], session)
    else:
        await session.rewind(run3.id)
        result = await drive(mode, agent, new_tag, session)
    assert result.final_output == f"answer {new_tag}"
    assert model.remaining_steps == 0

    # The model saw runs 1-2 and the new question, nothing of the old runs 3-5.
    first_call = model.calls[-2].input
    assert first_call == [*before[:8], {"role": "user", "content": new_tag}]
    assert not any(item in first_call for item in before[9:])
    assert [item.get("call_id") for item in model.calls[-1].input[-2:]] == ["c-new"] * 2

    after = await session.get_items()
    assert after[:9] == first_call
    assert len(after) == 12
    new_runs = await session.runs()
    assert [run.user_message for run in new_runs] == ["q1", "q2", new_tag]
    assert new_runs[2].assistant_message == f"answer {new_tag}"
    siblings = await session.siblings(run3.id)
    assert [run.id for run in siblings] == [run3.id, new_runs[2].id]
    assert [run.user_message for run in siblings] == ["q3", new_tag]
    rows = await sql(
        store,
        "SELECT t.tool_name, t.arguments, t.output FROM tool_calls t WHERE t.run_id = {id}",
        id=new_runs[2].id,
    )
    assert rows == [("lookup", f'{{"q":"{new_tag}"}}', f"found {new_tag}")]
    assert await sql(store, "SELECT count(*) FROM runs") == [(6,)]

    # Checking out the old leaf restores the old course exactly.
    await session.checkout(runs_before[-1].id)
    assert await session.get_items() == before
    assert [(r.id, r.user_message, r.assistant_message) for r in await session.runs()] == [
        (r.id, r.user_message, r.assistant_message) for r in runs_before
    ]
    await session.checkout(new_runs[-1].id)
    assert await session.get_items() == after


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pinned", [False, True])
async def test_a_runner_call_after_branching_keeps_its_output_when_the_tree_changed(
    store: Store, mode: str, pinned: bool
) -> None:
    # create_branch_from_turn(3, "alt"), then another writer pops turn 3: a Runner call
    # given no new question (the model answers turn 2 again) writes items that join turn 2's
    # run, starting no run. They are stored, the model's output with them, and turn 2's
    # branch takes the name; the next question continues it.
    tags = ["q1", "q2", "q3"]
    steps = [step for tag in tags for step in run_steps(tag)]
    model = ScriptedModel([*steps, *run_steps("again", call_id="c-again"), *run_steps("q3b")])
    agent = Agent("Assistant", model=model, tools=[lookup])
    session = StructuredSession("s", store, branch="main" if pinned else None)
    for tag in tags:
        await drive(mode, agent, tag, session)
    if not pinned:
        await session.name_branch("main")
    await session.create_branch_from_turn(3, "alt")
    for _ in range(4):  # turn 3's items: its question, the call and output, the answer
        await store.pop_item("s", branch="main")
    result = await drive(mode, agent, [], session)
    assert result.final_output == "answer again"
    await drive(mode, agent, "q3b", session)
    assert model.remaining_steps == 0
    (alt,) = await store.branches("s")
    assert alt.name == "alt"
    runs = await store.runs("s", branch="alt")
    assert [(run.user_message, run.assistant_message) for run in runs] == [
        ("q1", "answer q1"),
        ("q2", "answer again"),
        ("q3b", "answer q3b"),
    ]
    assert session.branch == ("alt" if pinned else None)

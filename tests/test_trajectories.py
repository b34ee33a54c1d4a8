"""Trajectories out (issue 33): a session as an ATIF trajectory and as Vercel AI SDK
``UIMessage``s, each checked against the shape its format publishes (ATIF's RFC 0001 fields and
rules; the AI SDK's ``UIMessage`` part types), with what each cannot hold listed in the docs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builders import assistant, call, output, run_in_new_loop, user
from support import cli
from turnstore import InvalidOperationError, Store, StructuredSession, Usage

FAILED = "An error occurred while running the tool. Please try again. Error: timeout"


async def _session(store: Store) -> None:
    await store.add_items(
        "t",
        [
            {"role": "system", "content": "Be terse."},
            user("Weather in Paris and Rome?"),
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Two cities."}],
            },
            call("c1", "weather", '{"city": "Paris"}'),
            call("c2", "weather", '{"city": "Rome"}'),
            output("c1", "18C"),
            output("c2", FAILED),
            assistant("Paris 18C; Rome unknown."),
        ],
        Usage(requests=2, input_tokens=90, output_tokens=20, total_tokens=110, cached_tokens=40),
    )
    await store.add_items("t", [user("Thanks"), assistant("You're welcome.", "msg_2")])


def _check_atif(document: dict[str, Any]) -> None:
    """ATIF's rules (Harbor's RFC 0001): the root's required fields, step ids 1, 2, … in order,
    a source per step, every observation naming a tool call of its step."""
    assert document["schema_version"].startswith("ATIF-v1.")
    assert isinstance(document["session_id"], str)
    assert {"name", "version"} <= document["agent"].keys()
    assert [step["step_id"] for step in document["steps"]] == list(
        range(1, len(document["steps"]) + 1)
    )
    for step in document["steps"]:
        assert step["source"] in ("system", "user", "agent")
        assert isinstance(step["message"], str)
        calls = {c["tool_call_id"] for c in step.get("tool_calls", [])}
        for call_ in step.get("tool_calls", []):
            assert isinstance(call_["function_name"], str)
            assert isinstance(call_["arguments"], dict)
        for result in step.get("observation", {}).get("results", []):
            assert result["source_call_id"] in calls
        for name, value in step.get("metrics", {}).items():
            assert name in ("prompt_tokens", "completion_tokens", "cached_tokens")
            assert isinstance(value, int)
    json.dumps(document)


async def test_a_session_as_an_atif_trajectory(store: Store) -> None:
    await _session(store)
    document = json.loads(await store.export("t", "atif"))
    _check_atif(document)
    steps = document["steps"]
    assert [(s["source"], s["message"]) for s in steps] == [
        ("system", "Be terse."),
        ("user", "Weather in Paris and Rome?"),
        ("agent", ""),
        ("agent", "Paris 18C; Rome unknown."),
        ("user", "Thanks"),
        ("agent", "You're welcome."),
    ]
    assert steps[2]["reasoning_content"] == "Two cities."
    assert steps[2]["tool_calls"] == [
        {"tool_call_id": "c1", "function_name": "weather", "arguments": {"city": "Paris"}},
        {"tool_call_id": "c2", "function_name": "weather", "arguments": {"city": "Rome"}},
    ]
    assert steps[2]["observation"]["results"] == [
        {"source_call_id": "c1", "content": "18C"},
        {"source_call_id": "c2", "content": FAILED},
    ]
    assert steps[3]["metrics"] == {
        "prompt_tokens": 90,
        "completion_tokens": 20,
        "cached_tokens": 40,
    }
    assert document["final_metrics"]["total_prompt_tokens"] == 90
    assert document["final_metrics"]["total_steps"] == 6


# The AI SDK's UIMessage parts (ai 5: UIMessagePart), by type: the fields each must have.
UI_PARTS = {
    "text": {"text"},
    "reasoning": {"text"},
    "step-start": set(),
}
TOOL_STATES = {
    "input-available": {"toolCallId", "input"},
    "output-available": {"toolCallId", "input", "output"},
    "output-error": {"toolCallId", "input", "errorText"},
}


def _check_ui(messages: list[dict[str, Any]]) -> None:
    ids = [m["id"] for m in messages]
    assert len(set(ids)) == len(ids)
    for message in messages:
        assert message["role"] in ("system", "user", "assistant")
        assert message["parts"]
        for part in message["parts"]:
            kind = part["type"]
            if kind.startswith("tool-"):
                assert TOOL_STATES[part["state"]] <= part.keys()
            else:
                assert UI_PARTS[kind] <= part.keys()


async def test_a_session_as_ui_messages(store: Store) -> None:
    await _session(store)
    messages = json.loads(await store.export("t", "ui-messages"))
    _check_ui(messages)
    assert [(m["role"], m["parts"][0]["type"]) for m in messages] == [
        ("system", "text"),
        ("user", "text"),
        ("assistant", "step-start"),
        ("user", "text"),
        ("assistant", "step-start"),
    ]
    answer = messages[2]["parts"]
    assert [p["type"] for p in answer] == [
        "step-start",
        "reasoning",
        "tool-weather",
        "tool-weather",
        "step-start",
        "text",
    ]
    assert answer[2] == {
        "type": "tool-weather",
        "toolCallId": "c1",
        "input": {"city": "Paris"},
        "state": "output-available",
        "output": "18C",
    }
    assert answer[3]["state"] == "output-error"
    assert messages[2]["metadata"]["totalTokens"] == 110


async def test_a_tree_is_refused_and_a_pending_call_has_no_output(store: Store) -> None:
    session = StructuredSession("p", store)
    await session.add_items([user("Book it"), call("c9", "book", "not json")])
    with pytest.raises(InvalidOperationError, match="one course"):
        await store.export("p", "atif", all_branches=True)
    (message,) = [m for m in json.loads(await store.export("p", "ui-messages"))[1:]]
    assert message["parts"][1] == {
        "type": "tool-book",
        "toolCallId": "c9",
        "input": {"input": "not json"},
        "state": "input-available",
    }
    _check_atif(json.loads(await store.export("p", "atif")))


def test_the_cli_exports_trajectories(tmp_path: Path, cli_target: str) -> None:
    async def write() -> None:
        async with Store.open(cli_target) as store:
            await _session(store)

    run_in_new_loop(write)
    out = tmp_path / "t.json"
    cli("export", "t", "--format", "atif", "-o", str(out), "--db", cli_target)
    _check_atif(json.loads(out.read_text()))
    text = cli("export", "t", "--format", "ui-messages", "--db", cli_target).stdout
    _check_ui(json.loads(text))

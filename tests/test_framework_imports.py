"""Other frameworks' histories in (issue 33): LangChain messages and Pydantic AI messages as the
real libraries write them, ADK sessions as its documented JSON has them, imported with their
runs, tool calls and tokens; idempotent; a file of something else refused with nothing
stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support import cli
from turnstore import SchemaError, Store, Usage
from turnstore.importers import import_source, open_source


def cli_json(*args: str) -> Any:
    return json.loads(cli(*args, "--json").stdout)


async def _import(store: Store, path: Path, kind: str) -> Any:
    source = open_source(str(path), kind)
    try:
        return await import_source(store, source)
    finally:
        await source.aclose()


async def _calls(store: Store, sid: str) -> list[tuple[Any, ...]]:
    calls = await store.tool_calls(session_id=sid)
    return sorted((c.call_id, c.tool_name, c.arguments, c.output, c.status) for c in calls)


def _langchain_history() -> list[dict[str, Any]]:
    messages = pytest.importorskip("langchain_core.messages")
    return messages.messages_to_dict(  # type: ignore[no-any-return]
        [
            messages.SystemMessage("Be terse."),
            messages.HumanMessage("Weather in Paris?"),
            messages.AIMessage(
                content="",
                tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}],
                usage_metadata={
                    "input_tokens": 40,
                    "output_tokens": 8,
                    "total_tokens": 48,
                    "input_token_details": {"cache_read": 32},
                    "output_token_details": {"reasoning": 3},
                },
            ),
            messages.ToolMessage("18C", tool_call_id="call_1"),
            messages.AIMessage(
                "18C in Paris.",
                usage_metadata={"input_tokens": 60, "output_tokens": 5, "total_tokens": 65},
            ),
            messages.HumanMessage(
                content=[
                    {"type": "text", "text": "And this image?"},
                    {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                ]
            ),
            messages.AIMessage("A cat."),
        ]
    )


async def test_langchain_messages_are_imported_with_runs_calls_and_tokens(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "support-7.json"
    path.write_text(json.dumps(_langchain_history()))
    summary = await _import(store, path, "langchain")
    assert (summary.sessions, summary.new_sessions, summary.skipped) == (1, 1, 0)
    system, *runs = await store.runs("support-7")
    assert system.user_message is None
    assert [r.user_message for r in runs] == ["Weather in Paris?", "And this image?"]
    assert [r.assistant_message for r in runs] == ["18C in Paris.", "A cat."]
    assert runs[0].usage == Usage(
        requests=2,
        input_tokens=100,
        output_tokens=13,
        total_tokens=113,
        cached_tokens=32,
        reasoning_tokens=3,
    )
    assert await _calls(store, "support-7") == [
        ("call_1", "weather", '{"city": "Paris"}', "18C", "completed")
    ]
    items = await store.get_items("support-7")
    assert items[-2]["content"] == [
        {"type": "input_text", "text": "And this image?"},
        {"type": "image_url", "image_url": {"url": "https://x/a.png"}},  # kept verbatim
    ]
    # Again: nothing new.
    again = await _import(store, path, "langchain")
    assert (again.new_sessions, again.updated_sessions, again.runs, again.items) == (0, 0, 0, 0)
    assert await store.get_items("support-7") == items


async def test_pydantic_ai_messages_are_imported(store: Store, tmp_path: Path) -> None:
    messages = pytest.importorskip("pydantic_ai.messages")
    usage = pytest.importorskip("pydantic_ai.usage")
    history = [
        messages.ModelRequest(
            parts=[messages.SystemPromptPart("Be terse."), messages.UserPromptPart("Rome?")]
        ),
        messages.ModelResponse(
            parts=[
                messages.ThinkingPart("Need the weather."),
                messages.ToolCallPart("weather", {"city": "Rome"}, tool_call_id="c1"),
            ],
            usage=usage.RequestUsage(input_tokens=30, output_tokens=9, cache_read_tokens=10),
            model_name="gpt-4o",
        ),
        messages.ModelRequest(
            parts=[
                messages.ToolReturnPart("weather", "city unknown", "c1", outcome="retried"),
            ]
        ),
        messages.ModelResponse(
            parts=[messages.ToolCallPart("weather", '{"city": "Roma"}', tool_call_id="c2")],
            usage=usage.RequestUsage(input_tokens=50, output_tokens=7),
        ),
        messages.ModelRequest(parts=[messages.ToolReturnPart("weather", {"c": 22}, "c2")]),
        messages.ModelResponse(parts=[messages.TextPart("22C in Rome.")]),
    ]
    path = tmp_path / "h.json"
    path.write_bytes(b'{"rome": ' + messages.ModelMessagesTypeAdapter.dump_json(history) + b"}")
    summary = await _import(store, path, "pydantic-ai")
    assert (summary.sessions, summary.skipped) == (1, 0)
    _, run = await store.runs("rome")
    assert (run.user_message, run.assistant_message) == ("Rome?", "22C in Rome.")
    assert run.usage == Usage(
        requests=3, input_tokens=80, output_tokens=16, total_tokens=96, cached_tokens=10
    )
    calls = await _calls(store, "rome")
    assert [(c[0], c[2], c[3]) for c in calls] == [
        ("c1", '{"city": "Rome"}', "city unknown"),
        ("c2", '{"city": "Roma"}', '{"c": 22}'),
    ]
    items = await store.get_items("rome")
    reasoning = [i for i in items if i.get("type") == "reasoning"]
    assert reasoning[0]["content"] == [{"type": "reasoning_text", "text": "Need the weather."}]


TEMP = {"t": -3}


def _adk_session(camel: bool) -> dict[str, Any]:
    """An ADK ``Session`` as its JSON has it (snake_case, or its aliases' camelCase)."""

    def key(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(w.title() for w in rest) if camel else name

    def event(author: str, parts: list[Any], when: float, usage: Any = None) -> dict[str, Any]:
        role = "user" if author == "user" else "model"
        found = {"author": author, key("invocation_id"): "e-1", "timestamp": when}
        found["content"] = {"role": role, "parts": parts}
        if usage:
            found[key("usage_metadata")] = usage
        return found

    return {
        "id": "adk-1",
        key("app_name"): "weather_app",
        key("user_id"): "u-9",
        "state": {},
        "events": [
            event("user", [{"text": "Weather in Oslo?"}], 1_767_000_000.0),
            event(
                "weather_agent",
                [
                    {"text": "Let me check.", "thought": True},
                    {key("function_call"): {"id": "f1", "name": "weather", "args": {"c": "Oslo"}}},
                ],
                1_767_000_001.0,
                {
                    key("prompt_token_count"): 20,
                    key("candidates_token_count"): 4,
                    key("total_token_count"): 24,
                    key("thoughts_token_count"): 2,
                },
            ),
            event(
                "user",
                [{key("function_response"): {"id": "f1", "name": "weather", "response": TEMP}}],
                1_767_000_002.0,
            ),
            event("weather_agent", [{"text": "-3C"}], 1_767_000_003.0),
            {"author": "weather_agent", "partial": True, "content": {"parts": [{"text": "-"}]}},
        ],
    }


@pytest.mark.parametrize("camel", [False, True], ids=["snake_case", "camelCase"])
async def test_adk_sessions_are_imported(store: Store, tmp_path: Path, camel: bool) -> None:
    path = tmp_path / "adk.json"
    path.write_text(json.dumps([_adk_session(camel)]))
    summary = await _import(store, path, "adk")
    assert (summary.sessions, summary.skipped) == (1, 0)
    (run,) = await store.runs("adk-1")
    assert (run.user_message, run.assistant_message) == ("Weather in Oslo?", "-3C")
    assert run.usage == Usage(
        requests=1, input_tokens=20, output_tokens=4, total_tokens=24, reasoning_tokens=2
    )
    assert run.created_at.timestamp() == 1_767_000_000.0
    assert await _calls(store, "adk-1") == [
        ("f1", "weather", '{"c": "Oslo"}', '{"t": -3}', "completed")
    ]
    assert (await store.session("adk-1")).user_id == "u-9"


def test_the_cli_imports_each_framework(tmp_path: Path, cli_target: str) -> None:
    path = tmp_path / "lc.json"
    path.write_text(json.dumps({"a": _langchain_history(), "b": _langchain_history()[:2]}))
    summary = cli_json("import", str(path), "--from", "langchain", "--db", cli_target)
    assert (summary["kind"], summary["sessions"], summary["new_sessions"]) == ("langchain", 2, 2)
    runs = cli_json("runs", "a", "--db", cli_target)
    assert [r["user_message"] for r in runs][1:] == ["Weather in Paris?", "And this image?"]
    again = cli_json("import", str(path), "--from", "langchain", "--db", cli_target)
    assert (again["runs"], again["items"]) == (0, 0)


@pytest.mark.parametrize(
    ("kind", "content", "says"),
    [
        ("langchain", "not json", "is not a JSON file of langchain histories"),
        ("langchain", '"a string"', "neither a list of messages"),
        ("pydantic-ai", '{"s": 3}', "neither a list of messages"),
        ("adk", '{"id": "x"}', "no list of events"),
    ],
)
def test_a_file_of_something_else_is_refused(
    tmp_path: Path, kind: str, content: str, says: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SchemaError, match=says):
        open_source(str(path), kind)
    db = tmp_path / "t.db"
    result = cli("import", str(path), "--from", kind, "--db", str(db), code=1)
    assert says in " ".join(result.stderr.split())
    assert not db.exists()


async def test_entries_that_are_not_messages_are_skipped_and_counted(
    store: Store, tmp_path: Path
) -> None:
    history = [*_langchain_history()[:2], {"type": "robot", "data": {}}, 7, {"nonsense": 1}]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(history))
    summary = await _import(store, path, "langchain")
    assert summary.skipped == 3
    assert [r.user_message for r in await store.runs("s")] == [None, "Weather in Paris?"]

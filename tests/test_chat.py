"""Chat Completions messages (issue 33, "In"): a ``messages`` list stored as the items it is and
read back exactly; its runs, tool calls and tokens in the same columns as the Agents SDK's;
the SDK's converter agreeing on what the SDK writes; bad input refused with nothing stored.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import snapshot
from turnstore import ChatSession, InvalidOperationError, Store, TurnstoreError, Usage
from turnstore.formats.chat import EXTRA, items_to_messages, messages_to_items

WEATHER = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "error: upstream timed out"},
    {"role": "assistant", "content": "Paris 18C; Rome unknown."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And this?"},
            {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}},
        ],
    },
    {"role": "assistant", "content": "A cat."},
]


def test_canonical_messages_are_plain_responses_items() -> None:
    items = messages_to_items(WEATHER)
    assert not any(EXTRA in item for item in items)
    assert items[2:4] == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city": "Paris"}',
        },
        {
            "type": "function_call",
            "call_id": "call_2",
            "name": "weather",
            "arguments": '{"city": "Rome"}',
        },
    ]
    assert items[4] == {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
    assert items[-2]["content"][1] == {
        "type": "input_image",
        "image_url": "https://x/a.png",
        "detail": "low",
    }
    assert items_to_messages(items) == WEATHER


async def test_messages_round_trip_through_the_store_with_runs_tool_calls_and_usage(
    store: Store,
) -> None:
    first = await store.add_messages(
        "c",
        WEATHER[:6],
        usage={
            "prompt_tokens": 120,
            "completion_tokens": 30,
            "total_tokens": 150,
            "prompt_tokens_details": {"cached_tokens": 100},
            "completion_tokens_details": {"reasoning_tokens": 7},
        },
    )
    await store.add_messages("c", WEATHER[6:])
    assert await store.get_messages("c") == WEATHER
    assert await store.get_messages("c", 2) == WEATHER[-2:]
    # The system message before the first user message is a run of its own (as the SDK's are).
    system, *runs = await store.runs("c")
    assert system.user_message is None
    assert [run.user_message for run in runs] == ["Weather in Paris and Rome?", "And this?"]
    assert runs[0].id == first
    assert runs[0].usage == Usage(
        requests=1,
        input_tokens=120,
        output_tokens=30,
        total_tokens=150,
        cached_tokens=100,
        reasoning_tokens=7,
    )
    assert runs[0].assistant_message == "Paris 18C; Rome unknown."
    calls = sorted(await store.tool_calls(session_id="c"), key=lambda call: call.call_id or "")
    assert [(c.call_id, c.tool_name, c.arguments, c.output) for c in calls] == [
        ("call_1", "weather", '{"city": "Paris"}', "18C"),
        ("call_2", "weather", '{"city": "Rome"}', "error: upstream timed out"),
    ]


async def test_chat_session_keeps_a_messages_list() -> None:
    async with ChatSession.open("chat-1") as chat:
        await chat.add_messages(WEATHER[:2])
        await chat.add_messages(WEATHER[2:6], usage=None)
        assert await chat.get_messages() == WEATHER[:6]
        await chat.clear()
        assert await chat.get_messages() == []


def test_the_openai_types_dump_round_trips() -> None:
    chat = pytest.importorskip("openai.types.chat")
    message = chat.ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": "{}"},
                }
            ],
        }
    )
    for dumped in (message.model_dump(), message.to_dict(), message.model_dump(exclude_none=True)):
        messages = [{"role": "user", "content": "hi"}, dumped]
        assert items_to_messages(messages_to_items(copy.deepcopy(messages))) == messages


def test_items_the_sdk_writes_read_as_its_converter_reads_them() -> None:
    converter = pytest.importorskip("agents.models.chatcmpl_converter").Converter
    items: list[Any] = [
        {"role": "user", "content": "Weather?"},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "weather",
            "arguments": "{}",
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "It is", "annotations": []},
                {"type": "output_text", "text": "18C.", "annotations": []},
            ],
        },
    ]
    assert items_to_messages(items) == converter.items_to_messages(items)


# Chat Completions messages as applications hold them, with the fields the items cannot hold.
_text = st.text(max_size=12)
_part = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _text}),
    st.fixed_dictionaries(
        {
            "type": st.just("image_url"),
            "image_url": st.fixed_dictionaries(
                {"url": _text}, optional={"detail": st.sampled_from(["low", "high", None])}
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("file"),
            "file": st.fixed_dictionaries({}, optional={"file_id": _text, "filename": _text}),
        }
    ),
    st.fixed_dictionaries({"type": st.just("input_audio"), "input_audio": st.just({"data": "AA"})}),
)
_content = st.one_of(_text, st.lists(_part, max_size=3))
_input = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user"]), "content": _content},
    optional={"name": _text},
)
_call = st.fixed_dictionaries(
    {
        "id": _text,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": _text, "arguments": _text}),
    }
)
_assistant = st.fixed_dictionaries(
    {"role": st.just("assistant")},
    optional={
        "content": st.one_of(st.none(), _text, st.lists(st.fixed_dictionaries(
            {"type": st.just("text"), "text": _text}), max_size=2)),
        "tool_calls": st.one_of(st.none(), st.lists(_call, max_size=3)),
        "refusal": st.one_of(st.none(), _text),
        "name": _text,
    },
)  # fmt: skip
_tool = st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": _text, "content": _content})


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_input, _assistant, _tool), max_size=8))
def test_any_messages_list_reads_back_exactly(messages: list[dict[str, Any]]) -> None:
    items = messages_to_items(copy.deepcopy(messages))
    assert items_to_messages(items) == messages


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ("hello", "must be a list"),
        ([{"content": "no role"}], "with a role"),
        ([{"role": "robot", "content": "x"}], "role 'robot'"),
        ([{"role": "user"}], "has no content"),
        ([{"role": "tool", "content": "x"}], "tool_call_id"),
        ([{"role": "user", "content": "x"}, {"role": "assistant", "content": {1}}], "JSON"),
    ],
)
async def test_bad_messages_are_refused_and_change_nothing(
    store: Store, messages: Any, says: str
) -> None:
    await store.add_messages("c", WEATHER[:2])
    before = await snapshot(store)
    with pytest.raises(TurnstoreError, match=says):
        await store.add_messages("c", messages)
    assert await snapshot(store) == before


async def test_hostile_text_reads_back_exactly(store: Store) -> None:
    # Items hold any JSON string exactly (a lone surrogate, NUL): so do messages.
    messages = [
        {"role": "user", "content": "lone \ud800 surrogate, nul \x00"},
        {"role": "assistant", "content": "\udfff" * 3 + "x" * 100_000},
    ]
    await store.add_messages("c", messages)
    assert await store.get_messages("c") == messages


async def test_an_unknown_format_is_refused(store: Store) -> None:
    with pytest.raises(InvalidOperationError, match="format must be 'chat'"):
        await store.add_messages("c", WEATHER, format="responses")  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="format must be 'chat'"):
        await store.get_messages("c", format="xml")  # type: ignore[arg-type]
    assert await store.get_messages("c") == []

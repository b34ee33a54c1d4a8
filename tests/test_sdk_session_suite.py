"""The Agents SDK's own generic session tests, run against ``SQLiteSession`` and
``StructuredSession`` alike (issue 30).

Ported from openai-agents-python's ``tests/memory/test_session.py`` (the SDK's test files are
not installed with it): every check there that goes through the ``Session`` protocol, the
Runner or ``SQLiteSession``'s constructor, with the session class as a parameter and no
adapter: each test builds its session exactly as the SDK's does (``Session(session_id,
db_path)``, ``session_settings=``) and asserts what the SDK asserts. Left out: the checks of
``SQLiteSession``'s private connection handling (``_connections``, ``_locked_connection``,
``_file_locks``, rows written by hand into ``agent_messages``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from agents import Agent, RunConfig, Runner, SessionSettings, SQLiteSession, TResponseInputItem
from agents.memory.session import SessionABC
from agents.testing import ScriptedModel, assistant_message

from turnstore import ArgumentTypeError, InvalidOperationError, StructuredSession

pytestmark = pytest.mark.e2e

RUNNER_METHODS = ["run", "run_sync", "run_streamed"]


@pytest.fixture(params=[SQLiteSession, StructuredSession], ids=["SQLiteSession", "turnstore"])
def Session(request: pytest.FixtureRequest) -> Any:
    """The session class under test."""
    return request.param


@pytest.fixture
def open_session(Session: Any) -> Iterator[Callable[..., Any]]:
    """``Session(...)``, built as the SDK's tests build it; every one is closed when the test
    ends (the SDK's tests close each session at their end)."""
    opened: list[Any] = []

    def open_(*args: Any, **kwargs: Any) -> Any:
        session = Session(*args, **kwargs)
        opened.append(session)
        return session

    yield open_
    for session in opened:
        session.close()


@pytest.fixture
def model() -> ScriptedModel:
    """The model the test's agent runs on: each test enqueues its answers."""
    return ScriptedModel()


@pytest.fixture
def agent(model: ScriptedModel) -> Agent[Any]:
    """The SDK tests' agent, ``Agent(name="test", model=model)``."""
    return Agent(name="test", model=model)


def get_text_message(text: str) -> Any:
    """The SDK tests' helper (tests/test_responses.py): one assistant message."""
    return assistant_message(text)


def _run_sync_wrapper(agent: Agent[Any], input_data: Any, **kwargs: Any) -> Any:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, input_data, **kwargs)
    finally:
        loop.close()


async def run_agent_async(
    runner_method: str, agent: Agent[Any], input_data: Any, **kwargs: Any
) -> Any:
    """Run ``agent`` by one of the Runner's three methods, as the SDK's tests do."""
    if runner_method == "run":
        return await Runner.run(agent, input_data, **kwargs)
    if runner_method == "run_sync":
        return await asyncio.to_thread(_run_sync_wrapper, agent, input_data, **kwargs)
    result = Runner.run_streamed(agent, input_data, **kwargs)
    async for _event in result.stream_events():
        pass
    return result


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_memory_basic_functionality(
    open_session: Any, model: ScriptedModel, agent: Agent[Any], runner_method: str, tmp_path: Path
) -> None:
    session = open_session("test_session_123", tmp_path / "test_memory.db")
    model.enqueue([get_text_message("San Francisco")])
    result1 = await run_agent_async(
        runner_method, agent, "What city is the Golden Gate Bridge in?", session=session
    )
    assert result1.final_output == "San Francisco"
    model.enqueue([get_text_message("California")])
    result2 = await run_agent_async(runner_method, agent, "What state is it in?", session=session)
    assert result2.final_output == "California"
    assert len(model.calls[-1].input) > 1


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_memory_different_sessions(
    open_session: Any, model: ScriptedModel, agent: Agent[Any], runner_method: str, tmp_path: Path
) -> None:
    db_path = tmp_path / "test_memory.db"
    session_1 = open_session("session_1", db_path)
    model.enqueue([get_text_message("I like cats")])
    result1 = await run_agent_async(runner_method, agent, "I like cats", session=session_1)
    assert result1.final_output == "I like cats"
    session_2 = open_session("session_2", db_path)
    model.enqueue([get_text_message("I like dogs")])
    result2 = await run_agent_async(runner_method, agent, "I like dogs", session=session_2)
    assert result2.final_output == "I like dogs"
    model.enqueue([get_text_message("Yes, you mentioned cats")])
    result3 = await run_agent_async(
        runner_method, agent, "What did I say I like?", session=session_1
    )
    assert result3.final_output == "Yes, you mentioned cats"
    assert model.calls[-1].input[0].get("content") == "I like cats"


async def test_session_memory_direct(open_session: Any, tmp_path: Path) -> None:
    session = open_session("direct_test", tmp_path / "test_direct.db")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
    ]
    await session.add_items(items)
    retrieved = await session.get_items()
    assert len(retrieved) == 2
    assert retrieved[0].get("role") == "user"
    assert retrieved[0].get("content") == "Hello"
    assert retrieved[1].get("role") == "assistant"
    assert retrieved[1].get("content") == "Hi there!"
    await session.clear_session()
    assert len(await session.get_items()) == 0


async def test_closed_session_rejects_empty_add_items(Session: Any, tmp_path: Path) -> None:
    session = Session("closed_empty_add_test", tmp_path / "closed_empty_add.db")
    session.close()
    with pytest.raises(RuntimeError, match="closed"):
        await session.add_items([])


async def test_session_memory_pop_item(open_session: Any, tmp_path: Path) -> None:
    session = open_session("pop_test", tmp_path / "test_pop.db")
    assert await session.pop_item() is None
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
        {"role": "user", "content": "How are you?"},
    ]
    await session.add_items(items)
    assert len(await session.get_items()) == 3
    popped = await session.pop_item()
    assert popped is not None
    assert (popped.get("role"), popped.get("content")) == ("user", "How are you?")
    retrieved_after_pop = await session.get_items()
    assert len(retrieved_after_pop) == 2
    assert retrieved_after_pop[-1].get("content") == "Hi there!"
    popped2 = await session.pop_item()
    assert (popped2.get("role"), popped2.get("content")) == ("assistant", "Hi there!")
    popped3 = await session.pop_item()
    assert (popped3.get("role"), popped3.get("content")) == ("user", "Hello")
    assert await session.pop_item() is None
    assert len(await session.get_items()) == 0


async def test_session_memory_pop_different_sessions(open_session: Any, tmp_path: Path) -> None:
    db_path = tmp_path / "test_pop_sessions.db"
    session_1 = open_session("session_1", db_path)
    session_2 = open_session("session_2", db_path)
    await session_1.add_items([{"role": "user", "content": "Session 1 message"}])
    await session_2.add_items(
        [
            {"role": "user", "content": "Session 2 message 1"},
            {"role": "user", "content": "Session 2 message 2"},
        ]
    )
    popped = await session_2.pop_item()
    assert popped is not None
    assert popped.get("content") == "Session 2 message 2"
    session_1_items = await session_1.get_items()
    assert [item.get("content") for item in session_1_items] == ["Session 1 message"]
    session_2_items = await session_2.get_items()
    assert [item.get("content") for item in session_2_items] == ["Session 2 message 1"]


async def test_session_get_items_with_limit(open_session: Any, tmp_path: Path) -> None:
    session = open_session("count_test", tmp_path / "test_count.db")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Message 1"},
        {"role": "assistant", "content": "Response 1"},
        {"role": "user", "content": "Message 2"},
        {"role": "assistant", "content": "Response 2"},
        {"role": "user", "content": "Message 3"},
        {"role": "assistant", "content": "Response 3"},
    ]
    await session.add_items(items)
    all_items = await session.get_items()
    assert len(all_items) == 6
    assert all_items[0].get("content") == "Message 1"
    assert all_items[-1].get("content") == "Response 3"
    latest_2 = await session.get_items(limit=2)
    assert [item.get("content") for item in latest_2] == ["Message 3", "Response 3"]
    latest_4 = await session.get_items(limit=4)
    assert [item.get("content") for item in latest_4] == [
        "Message 2",
        "Response 2",
        "Message 3",
        "Response 3",
    ]
    latest_10 = await session.get_items(limit=10)
    assert len(latest_10) == 6
    assert latest_10[0].get("content") == "Message 1"
    assert latest_10[-1].get("content") == "Response 3"
    assert len(await session.get_items(limit=0)) == 0


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_memory_appends_list_input_by_default(
    open_session: Any, model: ScriptedModel, agent: Agent[Any], runner_method: str, tmp_path: Path
) -> None:
    session = open_session("test_validation_parametrized", tmp_path / "test_validation.db")
    initial_history: list[TResponseInputItem] = [
        {"role": "user", "content": "Earlier message"},
        {"role": "assistant", "content": "Saved reply"},
    ]
    await session.add_items(initial_history)
    list_input = [{"role": "user", "content": "Test message"}]
    model.enqueue([get_text_message("This should run")])
    await run_agent_async(runner_method, agent, list_input, session=session)
    assert model.calls[-1].input == initial_history + list_input


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_callback_prepared_input(
    open_session: Any, model: ScriptedModel, agent: Agent[Any], runner_method: str, tmp_path: Path
) -> None:
    session = open_session("session_1", tmp_path / "test_memory.db")
    initial_history: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello there."},
        {"role": "assistant", "content": "Hi, I'm here to assist you."},
    ]
    await session.add_items(initial_history)

    def filter_assistant_messages(history: list[Any], new_input: list[Any]) -> list[Any]:
        return [item for item in history if item["role"] == "user"] + new_input

    new_turn_input = [{"role": "user", "content": "What your name?"}]
    model.enqueue([get_text_message("I'm gpt-4o")])
    await run_agent_async(
        runner_method,
        agent,
        new_turn_input,
        session=session,
        run_config=RunConfig(session_input_callback=filter_assistant_messages),
    )
    assert model.calls[-1].input == [initial_history[0], new_turn_input[0]]


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_callback_repeating_history_does_not_grow_session(
    open_session: Any, model: ScriptedModel, agent: Agent[Any], runner_method: str, tmp_path: Path
) -> None:
    session = open_session("session_repeat", tmp_path / "test_memory.db")

    def repeat_first(history: list[Any], new_input: list[Any]) -> list[Any]:
        if not history:
            return new_input
        return [*history, history[0], *new_input]

    for turn in range(3):
        model.enqueue([get_text_message(f"assistant {turn}")])
        await run_agent_async(
            runner_method,
            agent,
            f"user {turn}",
            session=session,
            run_config=RunConfig(session_input_callback=repeat_first),
        )
    stored = await session.get_items()
    user_messages = [item for item in stored if item.get("role") == "user"]
    assert [item.get("content") for item in user_messages] == ["user 0", "user 1", "user 2"]
    assert len(stored) == 6


async def test_session_unicode_content(open_session: Any, tmp_path: Path) -> None:
    session = open_session("unicode_test", tmp_path / "test_unicode.db")
    await session.add_items(
        [
            {"role": "user", "content": "こんにちは"},
            {"role": "assistant", "content": "😊👍"},
            {"role": "user", "content": "Привет"},
        ]
    )
    retrieved = await session.get_items()
    assert [item.get("content") for item in retrieved] == ["こんにちは", "😊👍", "Привет"]


async def test_session_special_characters_and_sql_injection(
    open_session: Any, tmp_path: Path
) -> None:
    session = open_session("special_chars_test", tmp_path / "test_special_chars.db")
    contents = [
        "O'Reilly",
        "DROP TABLE sessions;",
        '"SELECT * FROM users WHERE name = "admin";"',
        "Robert'); DROP TABLE students;--",
        "Normal message",
    ]
    roles = ["user", "assistant", "user", "assistant", "user"]
    await session.add_items(
        [{"role": role, "content": content} for role, content in zip(roles, contents, strict=True)]
    )
    assert [item.get("content") for item in await session.get_items()] == contents


async def test_session_concurrent_access(open_session: Any, tmp_path: Path) -> None:
    session = open_session("concurrent_test", tmp_path / "test_concurrent.db")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": f"Message {i}"} for i in range(10)
    ]

    def add_item(item: TResponseInputItem) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.run_until_complete(session.add_items([item]))
        loop.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=5) as executor:
        list(executor.map(add_item, items))
    retrieved = await session.get_items()
    contents = {item.get("content") for item in retrieved}
    assert contents == {f"Message {i}" for i in range(10)}


async def test_failed_add_items_leaves_the_session_usable(
    open_session: Any, tmp_path: Path
) -> None:
    session = open_session("rollback_test", tmp_path / "test_rollback.db")
    unserializable = cast(TResponseInputItem, {"role": "user", "content": object()})
    with pytest.raises(TypeError):
        await session.add_items([unserializable])
    await session.add_items([{"role": "user", "content": "after failure"}])
    assert [item.get("content") for item in await session.get_items()] == ["after failure"]


async def test_session_add_items_exception_propagates_in_streamed(
    open_session: Any, model: ScriptedModel, agent: Agent[Any]
) -> None:
    session = open_session("test_exception_session")

    async def _failing_add_items(_items: Any) -> None:
        raise RuntimeError("Simulated session.add_items failure")

    session.add_items = _failing_add_items
    model.enqueue([get_text_message("This should not be reached")])
    result = Runner.run_streamed(agent, "Hello", session=session)

    async def consume_stream() -> None:
        async for _event in result.stream_events():
            pass

    with pytest.raises(RuntimeError, match=r"Simulated session\.add_items failure"):
        await asyncio.wait_for(consume_stream(), timeout=5.0)


# ---------------------------------------------------------------------------------------------
# SessionSettings


def test_session_settings_default(open_session: Any) -> None:
    session = open_session("default_settings_test")
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit is None


def test_session_settings_constructor(open_session: Any) -> None:
    session = open_session("constructor_settings_test", session_settings=SessionSettings(limit=5))
    assert session.session_settings is not None
    assert session.session_settings.limit == 5


def test_session_settings_constructor_normalizes_dictionary(open_session: Any) -> None:
    session = open_session("dictionary_settings_test", session_settings={"limit": 0})
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit == 0
    assert session.session_settings.resolve({"limit": 4}).limit == 4


def test_session_settings_rejects_unknown_dictionary_fields(open_session: Any) -> None:
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        open_session("invalid_settings_test", session_settings={"limitt": 1})


async def test_get_items_uses_session_settings_limit(open_session: Any, tmp_path: Path) -> None:
    session = open_session(
        "uses_settings_limit_test",
        tmp_path / "test_settings_limit.db",
        session_settings=SessionSettings(limit=3),
    )
    await session.add_items([{"role": "user", "content": f"Message {i}"} for i in range(5)])
    retrieved = await session.get_items()
    assert [item.get("content") for item in retrieved] == ["Message 2", "Message 3", "Message 4"]


async def test_get_items_explicit_limit_overrides_session_settings(
    open_session: Any, tmp_path: Path
) -> None:
    session = open_session(
        "explicit_override_test",
        tmp_path / "test_override.db",
        session_settings=SessionSettings(limit=5),
    )
    await session.add_items([{"role": "user", "content": f"Message {i}"} for i in range(10)])
    retrieved = await session.get_items(limit=2)
    assert [item.get("content") for item in retrieved] == ["Message 8", "Message 9"]


async def test_runner_with_session_settings_override(
    open_session: Any, model: ScriptedModel, agent: Agent[Any], tmp_path: Path
) -> None:
    session = open_session(
        "runner_override_test",
        tmp_path / "test_runner_override.db",
        session_settings=SessionSettings(limit=100),
    )
    await session.add_items([{"role": "user", "content": f"Turn {i}"} for i in range(10)])
    model.enqueue([get_text_message("Got it")])
    await Runner.run(
        agent,
        "New question",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    history = [item for item in model.calls[-1].input if item.get("content") != "New question"]
    assert len(history) == 2


# ---------------------------------------------------------------------------------------------
# SQLiteSession's constructor and attributes, and its TypeErrors (issue 30)


def test_the_positional_constructor_and_attributes(open_session: Any, tmp_path: Path) -> None:
    path = tmp_path / "positional.db"
    session = open_session("s", path, "agent_sessions", "agent_messages", {"limit": 2})
    assert isinstance(session, SessionABC)
    assert session.db_path == path
    assert (session.sessions_table, session.messages_table) == ("agent_sessions", "agent_messages")
    assert session.session_settings == SessionSettings(limit=2)


@pytest.mark.parametrize("settings", [{"limitt": 1}, "limit=1", 5])
def test_session_settings_of_the_wrong_type_are_a_type_error(
    open_session: Any, settings: Any
) -> None:
    with pytest.raises(TypeError):
        open_session("s", session_settings=settings)


async def test_a_limit_that_is_not_an_int_is_a_type_error(open_session: Any) -> None:
    session = open_session("s")
    await session.add_items([{"role": "user", "content": "q"}])
    with pytest.raises(TypeError):
        await session.get_items("2")


async def test_turnstores_type_errors_are_turnstore_errors() -> None:
    """Each is an ``ArgumentTypeError``: a ``TypeError`` and an ``InvalidOperationError``."""
    with pytest.raises(ArgumentTypeError, match="Unknown session settings"):
        StructuredSession("s", session_settings={"limitt": 1})
    with pytest.raises(ArgumentTypeError, match="session_id"):
        StructuredSession(1.5)  # type: ignore[arg-type]
    session = StructuredSession("s")
    for limit in (1.5, "2", [3]):
        with pytest.raises(ArgumentTypeError) as raised:
            await session.get_items(limit)  # type: ignore[arg-type]
        assert isinstance(raised.value, InvalidOperationError)
    with pytest.raises(InvalidOperationError) as out_of_range:
        await session.get_items(2**63)
    assert not isinstance(out_of_range.value, TypeError)  # a value out of range, not a type
    session.close()

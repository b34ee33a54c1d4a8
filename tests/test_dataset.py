"""Conformance tests of datasets (issue 28): runs selected by filters, one record each (the
items the model had, the items it gave, tool calls, annotations, ids), written in each format
and read back with what consumes it; hostile filters refused; a large dataset streamed.
"""

from __future__ import annotations

import io
import json
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from builders import assistant, call, converse, output, run_items, user
from turnstore import (
    DatasetRecord,
    InvalidOperationError,
    NewRun,
    ResponseRecord,
    Store,
    StructuredSession,
    Telemetry,
    TurnstoreError,
    Usage,
)

FAILED_OUTPUT = "An error occurred while running the tool. Please try again."


async def _run(store: Store, session_id: str, items: list[Any], agent: str, model: str) -> int:
    """A run whose model calls (as session.hooks records them) were ``agent``'s on ``model``."""
    run_id = await store.add_items(session_id, items)
    now = datetime.now(timezone.utc)
    record = ResponseRecord(agent, model, None, None, Usage(1, 1, 1, 2), now, now, 1.0)
    await store.add_items(session_id, [], telemetry=Telemetry([record]))
    assert run_id is not None
    return run_id


async def _records(store: Store, **filters: Any) -> list[DatasetRecord]:
    return [record async for record in store.dataset(**filters)]


async def _ids(store: Store, **filters: Any) -> list[tuple[str, int]]:
    return [(r.run.session_id, r.run.id) for r in await _records(store, **filters)]


async def _fixture(store: Store) -> dict[str, int]:
    """Session "a" (alice; agent refund on model m1): a run whose tool failed, then one that
    went well; session "b" (bob; agent triage on m2): one run. Returns the run ids by name."""
    await store.update_session("a", user_id="alice")
    await store.update_session("b", user_id="bob")
    failing = [
        user("refund me"),
        call("c1", "refund"),
        output("c1", FAILED_OUTPUT),
        assistant("no"),
    ]
    bad = await _run(store, "a", failing, "refund", "m1")
    good = await _run(
        store, "a", [user("try again"), assistant("done", item_id="m2")], "refund", "m1"
    )
    other = await _run(store, "b", [user("hello"), assistant("hi", item_id="m3")], "triage", "m2")
    return {"bad": bad, "good": good, "other": other}


async def test_a_record_holds_what_the_model_had_and_gave(store: Store) -> None:
    runs = await converse(StructuredSession("s", store), "q1", "q2", "q3")
    note = await store.annotate(runs[1], "thumbs", value=0, comment="wrong")
    records = await _records(store)
    assert [r.run.id for r in records] == runs
    second = records[1]
    # The input: the path up to and including the run's user message, exactly as stored.
    assert second.input == run_items("q1") + run_items("q2")[:1]
    assert second.output == run_items("q2")[1:]
    assert records[0].input == run_items("q1")[:1]
    assert [c.call_id for c in second.tool_calls] == ["c-q2"]
    assert second.annotations == [note]
    assert records[0].annotations == []
    assert records[2].annotations == []
    assert (second.run.session_id, second.user_id) == ("s", None)


async def test_a_run_off_the_active_path_has_its_own_path_as_input(store: Store) -> None:
    runs = await converse(StructuredSession("s", store), "q1", "q2")
    edited = await store.fork("s", runs[1], "q2 edited")
    await store.add_items("s", [assistant("edited answer", item_id="m-e")])
    records = {r.run.id: r for r in await _records(store)}
    assert set(records) == {*runs, edited.id}
    # The replaced run keeps the input it had; the edit has its own.
    assert records[runs[1]].input == [*run_items("q1"), user("q2")]
    assert records[edited.id].input == [*run_items("q1"), user("q2 edited")]
    assert records[edited.id].output == [assistant("edited answer", item_id="m-e")]


async def test_after_a_compaction_the_input_is_what_the_model_saw(store: Store) -> None:
    await converse(StructuredSession("s", store), "q1", "q2")
    summary = {"type": "compaction", "encrypted_content": "s"}
    assert await store.compact("s", [summary])
    after = await converse(StructuredSession("s", store), "q3")
    records = await _records(store)
    # The compaction run is no model turn: three records, the last seeing the summary only.
    assert len(records) == 3
    assert records[-1].run.id == after[0]
    assert records[-1].input == [summary, user("q3")]


async def test_filters_select_runs(store: Store) -> None:
    ids = await _fixture(store)
    bad, good, other = ("a", ids["bad"]), ("a", ids["good"]), ("b", ids["other"])
    await store.annotate(ids["bad"], "thumbs", value=0, source="user")
    await store.annotate(ids["good"], "thumbs", value=1, source="user")
    await store.annotate(ids["other"], "review", label="hallucinated", author="ann")
    assert await _ids(store) == [bad, good, other]
    assert await _ids(store, failed=True) == [bad]
    assert await _ids(store, agent="refund") == [bad, good]
    assert await _ids(store, model="m2") == [other]
    assert await _ids(store, user_id="bob") == [other]
    assert await _ids(store, session_id="a") == [bad, good]
    assert await _ids(store, annotation="thumbs") == [bad, good]
    assert await _ids(store, annotation="thumbs", max_value=0) == [bad]
    assert await _ids(store, annotation="thumbs", min_value=0.5) == [good]
    assert await _ids(store, label="hallucinated") == [other]
    assert await _ids(store, source="user", session_id="a", agent="refund") == [bad, good]
    assert await _ids(store, annotation="thumbs", model="m2") == []
    assert await _ids(store, search="refund") == [bad]
    assert await _ids(store, search="hello OR done") == [good, other]
    assert await _ids(store, search="nothing-matches-this") == []
    assert await _ids(store, limit=2) == [bad, good]
    later = datetime.now(timezone.utc) + timedelta(days=1)
    assert await _ids(store, since=later) == []
    assert await _ids(store, until=later) == [bad, good, other]
    assert await _ids(store, session_id="nobody") == []


async def test_the_turnstore_format_reads_back_losslessly(store: Store, tmp_path: Path) -> None:
    ids = await _fixture(store)
    note = await store.annotate(ids["bad"], "thumbs", value=0, comment="tool broke")
    target = tmp_path / "data.jsonl"
    assert await store.write_dataset(target, "turnstore") == 3
    lines = [json.loads(line) for line in target.read_text("utf-8").splitlines()]
    first = lines[0]
    assert (first["format"], first["version"], first["session_id"], first["run_id"]) == (
        "turnstore.dataset",
        1,
        "a",
        ids["bad"],
    )
    assert first["user_id"] == "alice"
    assert first["input"] == [user("refund me")]
    assert first["output"] == [call("c1", "refund"), output("c1", FAILED_OUTPUT), assistant("no")]
    assert [(c["tool_name"], c["status"]) for c in first["tool_calls"]] == [
        ("refund", first["tool_calls"][0]["status"])
    ]
    assert first["annotations"][0]["comment"] == "tool broke"
    assert first["annotations"][0]["id"] == note.id
    assert (first["run"]["agent_name"], first["run"]["model"]) == ("refund", "m1")
    # The items as the store holds them: each record's input and output are its run's path.
    assert lines[1]["input"] + lines[1]["output"] == await store.get_items("a")


async def test_the_openai_chat_format_is_what_fine_tuning_accepts(
    store: Store, tmp_path: Path
) -> None:
    from openai.types.chat import ChatCompletionMessageParam

    await converse(StructuredSession("s", store), "q1", "q2")
    await _fixture(store)
    target = tmp_path / "chat.jsonl"
    assert await store.write_dataset(target, format="openai-chat") == 5
    adapter: TypeAdapter[Any] = TypeAdapter(ChatCompletionMessageParam)
    lines = target.read_text("utf-8").splitlines()
    for line in lines:
        record = json.loads(line)
        assert set(record) == {"messages"}
        messages = record["messages"]
        for message in messages:
            adapter.validate_python(message, strict=True)
        _check_fine_tuning_rules(messages)
    assert json.loads(lines[-1])["messages"][-1] == {"role": "assistant", "content": "answer q2"}


async def test_the_openai_chat_format_is_the_agents_sdks_conversion(store: Store) -> None:
    converter = pytest.importorskip("agents.models.chatcmpl_converter").Converter
    await converse(StructuredSession("s", store), "q1", "q2")
    out = io.StringIO()
    await store.write_dataset(out, "openai-chat")
    for line, record in zip(out.getvalue().splitlines(), await _records(store), strict=True):
        expected = converter.items_to_messages([*record.input, *record.output])
        assert json.loads(line)["messages"] == json.loads(json.dumps(expected))


def _check_fine_tuning_rules(messages: list[dict[str, Any]]) -> None:
    """OpenAI's chat fine-tuning file rules: known roles, every tool message answering a tool
    call of an assistant message before it and every tool call answered, ends with the
    assistant's answer."""
    assert messages, "a record needs messages"
    open_calls: set[str] = set()
    for message in messages:
        assert message["role"] in {"system", "developer", "user", "assistant", "tool"}
        if message["role"] == "assistant":
            assert not open_calls, "a tool call left unanswered"
            for tool_call in message.get("tool_calls", []):
                assert tool_call["type"] == "function"
                json.loads(tool_call["function"]["arguments"])
                open_calls.add(tool_call["id"])
            assert message.get("content") is not None or message.get("tool_calls")
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.remove(message["tool_call_id"])
        else:
            assert not open_calls
    assert not open_calls
    assert messages[-1]["role"] == "assistant"
    assert "tool_calls" not in messages[-1]


async def test_the_plain_format_is_question_answer_and_metadata(store: Store) -> None:
    ids = await _fixture(store)
    await store.annotate(ids["bad"], "thumbs", value=0, label="down")
    out = io.StringIO()
    assert await store.write_dataset(out, "plain", failed=True) == 1
    (line,) = out.getvalue().splitlines()
    record = json.loads(line)
    assert (record["input"], record["output"]) == ("refund me", "no")
    metadata = record["metadata"]
    assert (metadata["session_id"], metadata["run_id"], metadata["user_id"]) == (
        "a",
        ids["bad"],
        "alice",
    )
    assert (metadata["agent_name"], metadata["model"]) == ("refund", "m1")
    assert metadata["tool_calls"] == [
        {"name": "refund", "arguments": "{}", "output": FAILED_OUTPUT, "failed": True}
    ]
    assert [(a["name"], a["value"], a["label"]) for a in metadata["annotations"]] == [
        ("thumbs", 0.0, "down")
    ]


HOSTILE: list[dict[str, Any]] = [
    {"agent": "a\x00b"},
    {"model": "\ud800"},
    {"user_id": 5},
    {"session_id": "s" * 100_000},
    {"annotation": "x\x00"},
    {"label": "\udfff"},
    {"min_value": math.nan},
    {"max_value": math.inf},
    {"max_value": "1"},
    {"source": "\x00"},
    {"failed": "yes"},
    {"search": "q\x00"},
    {"since": "yesterday"},
    {"until": 5},
    {"limit": 0},
    {"limit": 1.5},
    {"page_size": 0},
    {"page_size": 10**6},
]


@pytest.mark.parametrize("filters", HOSTILE, ids=lambda filters: repr(filters)[:40])
async def test_hostile_filters_are_refused(
    store: Store, tmp_path: Path, filters: dict[str, Any]
) -> None:
    await converse(StructuredSession("s", store), "q1")
    with pytest.raises(TurnstoreError):
        store.dataset(**filters)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(TurnstoreError):
        await store.write_dataset(out / "refused.jsonl", **filters)
    assert list(out.iterdir()) == []


async def test_an_unknown_format_is_refused_and_nothing_written(
    store: Store, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(InvalidOperationError):
        await store.write_dataset(out / "x.jsonl", "csv")  # type: ignore[arg-type]
    assert list(out.iterdir()) == []


async def test_a_failed_write_leaves_the_target_as_it_was(store: Store, tmp_path: Path) -> None:
    await converse(StructuredSession("s", store), "q1")
    out = tmp_path / "out"
    out.mkdir()
    target = out / "kept.jsonl"
    target.write_text("before\n", "utf-8")

    class Broken(Exception):
        pass

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise Broken

    store.search = broken  # type: ignore[method-assign]
    with pytest.raises(Broken):
        await store.write_dataset(target, search="q1")
    assert target.read_text("utf-8") == "before\n"
    assert [path.name for path in out.iterdir()] == ["kept.jsonl"]


async def test_a_large_dataset_is_streamed_a_page_at_a_time(store: Store) -> None:
    sessions, per_session = 20, 100
    for n in range(sessions):
        chain = [
            NewRun(
                [user(f"q{n}-{i}"), assistant(f"a{n}-{i}", item_id=f"m{i}")],
                parent=None if i == 0 else i - 1,
            )
            for i in range(per_session)
        ]
        await store.add_runs(f"s{n:02}", chain, head=per_session - 1)
    reads = 0
    real_run = store.backend.run

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return await real_run(*args, **kwargs)

    store.backend.run = counted  # type: ignore[method-assign]
    records = store.dataset(page_size=150)
    first = await anext(records)
    assert reads == 1  # one page read, not the dataset
    assert first.input == [user("q0-0")]
    seen = 1
    last = first
    async for record in records:
        assert (record.run.session_id, record.run.id) > (last.run.session_id, last.run.id)
        last = record
        seen += 1
    assert seen == sessions * per_session
    assert reads == math.ceil(seen / 150) + (seen % 150 == 0)
    assert last.input[-1] == user(f"q{sessions - 1}-{per_session - 1}")
    assert len(last.input) == 2 * per_session - 1

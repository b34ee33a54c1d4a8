"""Issue 17: the SDK's trace spans stored beside the conversation (``turnstore.tracing``).

End to end with the real ``Runner`` and ``ScriptedModel``: a turn with a tool that raises, a
handoff, a guardrail trip and a rejected approval stores spans whose kinds, parentage, names
and error texts are asserted, and the tool calls say how each ended; concurrent Runner calls
on two sessions attribute every span to the right run; spans of runs without a turnstore
session are ignored; a failing write is logged, never raised into the Runner.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    RunConfig,
    Runner,
    function_tool,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool import default_tool_error_function
from agents.tracing import custom_span, trace

from scripted import ERROR, MODES, STORED_ERROR, converse_traced, lookup, tracing_on
from support import sql
from turnstore import Store, StructuredSession, TraceSpan, tracing
from turnstore.tracing.processor import SpanStore

pytestmark = pytest.mark.e2e


@pytest.fixture
def spans_on() -> Iterator[SpanStore]:
    with tracing_on() as processor:
        yield processor


# What the SDK's default handler tells the model of a tool that raised (0.23 and later: no
# exception text; 0.22: the text too).
TOLD_THE_MODEL = default_tool_error_function(None, RuntimeError(ERROR))  # type: ignore[arg-type]


@function_tool
def lookup_quietly(key: str) -> str:
    """Look a key up (it always fails; the SDK's default error handler)."""
    raise RuntimeError(ERROR)


def _by_kind(spans: list[TraceSpan], kind: str) -> list[TraceSpan]:
    return [span for span in spans if span.kind == kind]


@pytest.mark.parametrize("mode", MODES)
async def test_a_turn_stores_its_spans(store: Store, spans_on: SpanStore, mode: str) -> None:
    session = StructuredSession("s", store)
    await converse_traced(mode, session)
    await tracing.aflush()
    first, tripped, rejected = await store.runs("s")

    spans = await store.spans(run_id=first.id)
    assert spans == await store.spans(session_id="s", run_id=first.id)
    assert {span.session_id for span in spans} == {"s"}
    ids = {span.span_id: span for span in spans}
    assert len(ids) == len(spans)
    # Parentage: one trace; every parent is a stored span of it.
    assert len({span.trace_id for span in spans}) == 1
    for span in spans:
        assert span.parent_span_id is None or span.parent_span_id in ids, span
    agents = _by_kind(spans, "agent")
    assert [span.name for span in agents] == ["Assistant", "Billing"]
    [failed] = _by_kind(spans, "function")
    assert failed.name == "lookup"
    assert failed.error == STORED_ERROR
    assert failed.data["input"] == '{"key":"k1"}'

    def agent_of(span: TraceSpan) -> TraceSpan:
        while span.kind != "agent":
            assert span.parent_span_id is not None
            span = ids[span.parent_span_id]
        return span

    assert agent_of(failed).name == "Assistant"
    [handoff] = _by_kind(spans, "handoff")
    assert handoff.name == "Assistant -> Billing"
    assert handoff.data["from_agent"] == "Assistant"
    assert handoff.data["to_agent"] == "Billing"
    assert agent_of(handoff).name == "Assistant"
    generations = _by_kind(spans, "generation")
    assert [agent_of(span).name for span in generations] == ["Assistant", "Assistant", "Billing"]
    for span in spans:
        assert span.started_at is not None
        assert span.ended_at is not None
        assert span.duration_ms is not None
        assert span.duration_ms >= 0
    assert [span.error for span in spans if span.error is not None] == [failed.error]

    # The guardrail's trip, in the run it stopped.
    tripped_spans = await store.spans(run_id=tripped.id)
    [guardrail] = _by_kind(tripped_spans, "guardrail")
    assert guardrail.name == "no_forbidden"
    assert guardrail.data["triggered"] is True
    assert not _by_kind(tripped_spans, "generation")

    # The rejected approval: the call that asked (the resumed Runner call's spans join the
    # same trace and run; the SDK runs no tool, so it makes no span of the rejection).
    rejected_spans = await store.spans(run_id=rejected.id)
    [asked] = _by_kind(rejected_spans, "function")
    assert asked.name == "delete_file"
    assert asked.error is None
    assert len({span.trace_id for span in rejected_spans}) == 1
    assert [span.name for span in _by_kind(rejected_spans, "agent")] == ["Assistant"] * 2

    # The tool calls say how each ended.
    calls = {call.call_id: call for call in await store.tool_calls(session_id="s")}
    assert calls["c1"].status == "failed"
    assert calls["c1"].error == failed.error
    [told] = await sql(store, "SELECT output FROM tool_calls WHERE call_id = 'c1'")
    assert told[0].startswith("An error occurred while running the tool.")
    assert "disk on fire" not in TOLD_THE_MODEL or "disk on fire" in told[0]
    assert calls["c2"].status == "rejected"
    assert calls["c2"].error is None
    assert not calls["c2"].failed
    assert calls["h1"].status == "completed"

    # The queries across runs
    errors = await store.error_spans(session_id="s")
    assert errors[-1] == failed
    # The guardrail's trip is the error of the turn (or agent) it stopped.
    assert [(span.run_id, span.error) for span in errors[:-1]] == [
        (tripped.id, "Guardrail tripwire triggered")
    ]
    assert [span.id for span in await store.error_spans(kind="handoff")] == []
    slowest = await store.slowest_spans(kind="function")
    assert {span.id for span in slowest} == {failed.id, asked.id}
    durations = [span.duration_ms for span in await store.slowest_spans(session_id="s")]
    assert durations == sorted(durations, reverse=True)
    every = await store.spans(session_id="s")
    assert [span.run_id for span in every] == sorted(span.run_id for span in every)
    assert {span.id for span in every} >= {span.id for span in spans}
    rows = await sql(
        store,
        "SELECT kind, name, error, failed FROM span_overview WHERE run_id = {run} AND failed",
        run=first.id,
    )
    assert [tuple(row) for row in rows] == [("function", "lookup", failed.error, True)]


async def test_concurrent_runner_calls_attribute_every_span(
    store: Store, spans_on: SpanStore
) -> None:
    def agent(tag: str) -> Agent[Any]:
        steps = []
        for n in range(3):
            steps.append(
                ModelStep(output=[function_call("lookup", {"key": f"{tag}{n}"}, call_id=f"c{n}")])
            )
            steps.append(ModelStep(output=[assistant_message(f"{tag} answer {n}")]))
        return Agent(f"Agent {tag}", model=ScriptedModel(steps, emit_traces=True), tools=[lookup])

    sessions = {tag: StructuredSession(f"s-{tag}", store) for tag in "ab"}
    agents = {tag: agent(tag) for tag in "ab"}

    async def converse_traced(tag: str) -> None:
        for n in range(3):
            await Runner.run(agents[tag], f"{tag} question {n}", session=sessions[tag])
            await asyncio.sleep(0)

    # The two conversations interleave on one event loop, and within one outer trace.
    with trace("both"):
        await asyncio.gather(converse_traced("a"), converse_traced("b"))
    await tracing.aflush()
    attributed = 0
    for tag in "ab":
        runs = await store.runs(f"s-{tag}")
        assert len(runs) == 3
        for n, run in enumerate(runs):
            spans = await store.spans(run_id=run.id)
            assert [span.name for span in _by_kind(spans, "agent")] == [f"Agent {tag}"]
            [function] = _by_kind(spans, "function")
            assert function.data["input"] == f'{{"key":"{tag}{n}"}}'
            assert len(_by_kind(spans, "generation")) == 2
            assert {span.session_id for span in spans} == {f"s-{tag}"}
            attributed += len(spans)
    # Every span stored is one of those (the SDK's task and turn spans too, where it has them).
    every = await sql(store, "SELECT count(*) FROM spans")
    assert every[0][0] == attributed


@pytest.mark.parametrize(
    ("tool", "sensitive"),
    [(lookup, False), (lookup_quietly, True)],
    ids=["trace_tool_error, sensitive data off", "the SDK's default handler"],
)
async def test_a_tool_error_is_kept_only_where_the_sdk_traces_it(
    store: Store, spans_on: SpanStore, tool: Any, sensitive: bool
) -> None:
    """turnstore stores the exception's text only where the SDK lets it into the traces: not
    with ``trace_include_sensitive_data=False``, and not from the default handler of SDK 0.23
    and later (which keeps it from the model too; 0.22 gave it to both)."""
    model = ScriptedModel(
        [
            ModelStep(output=[function_call(tool.name, {"key": "k"}, call_id="c1")]),
            ModelStep(output=[assistant_message("Sorry.")]),
        ],
        emit_traces=True,
    )
    agent = Agent("A", model=model, tools=[tool])
    config = RunConfig(trace_include_sensitive_data=sensitive)
    await Runner.run(agent, "look", session=StructuredSession("s", store), run_config=config)
    await tracing.aflush()
    [call] = await store.tool_calls(session_id="s")
    [span] = [span for span in await store.spans(session_id="s") if span.kind == "function"]
    assert call.status == "failed"
    assert span.error is not None
    told = "disk on fire" in TOLD_THE_MODEL
    assert ("disk on fire" in span.error) is (sensitive and told)
    # What the model was told is in the conversation anyway: the call's error is read from it.
    assert ("disk on fire" in (call.error or "")) is told


async def test_runs_without_a_turnstore_session_are_ignored(
    store: Store, spans_on: SpanStore
) -> None:
    model = ScriptedModel(
        [
            ModelStep(output=[assistant_message("one")]),
            ModelStep(output=[assistant_message("two")]),
        ],
        emit_traces=True,
    )
    agent = Agent("A", model=model)
    session = StructuredSession("s", store)
    await Runner.run(agent, "with a session", session=session)
    await tracing.aflush()
    [run] = await store.runs("s")
    stored = len(await store.spans(run_id=run.id))
    assert stored >= 2  # its agent and generation spans at least
    # The same task, no session: its spans belong to no run of ours.
    await Runner.run(agent, "without")
    await tracing.aflush()
    assert not spans_on.pending()
    rows = await sql(store, "SELECT run_id, count(*) FROM spans GROUP BY run_id")
    assert [tuple(row) for row in rows] == [(run.id, stored)]


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


@function_tool
def hostile_span(key: str) -> str:
    """Record a custom span whose data JSON cannot hold as it is (and say done)."""
    loop: dict[str, Any] = {"key": key}
    loop["self"] = loop
    data = {"loop": loop, ("a", 1): "tuple key", "odd": _Unprintable(), "fine": "kept"}
    with custom_span("hostile", data=data):
        pass
    return "done"


async def test_a_span_whose_data_json_cannot_hold_costs_nothing_else(
    store: Store, spans_on: SpanStore
) -> None:
    """A custom span's data with a cycle, a key that is not text and a value without text:
    the span is stored with what can be told of it, and so is every other span of the run
    (one such span used to drop the whole batch)."""
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("hostile_span", {"key": "k"}, call_id="c1")]),
            ModelStep(output=[assistant_message("ok")]),
        ],
        emit_traces=True,
    )
    agent = Agent("A", model=model, tools=[hostile_span])
    await Runner.run(agent, "go", session=StructuredSession("s", store))
    await tracing.aflush()
    spans = await store.spans(session_id="s")
    assert {"agent", "function", "custom"} <= {span.kind for span in spans}
    [custom] = [span for span in spans if span.kind == "custom"]
    assert custom.name == "hostile"
    assert custom.data["data"]["fine"] == "kept"
    assert custom.data["data"]["('a', 1)"] == "tuple key"


FORK_SCRIPT = """
import asyncio, multiprocessing, sys
from agents import Agent, Runner
from agents.testing import ModelStep, ScriptedModel, assistant_message
from agents.tracing import set_trace_processors, set_tracing_disabled
from turnstore import Store, StructuredSession, tracing

TARGET = sys.argv[1]
processor = tracing.install()
set_trace_processors([processor])
set_tracing_disabled(False)

def turn(session_id):
    model = ScriptedModel([ModelStep(output=[assistant_message("hi")])], emit_traces=True)
    session = StructuredSession(session_id, TARGET)
    asyncio.run(Runner.run(Agent("A", model=model), "q", session=session))
    tracing.flush()

def child():
    turn("child")

turn("parent")  # the writer thread runs in the parent now
process = multiprocessing.get_context("fork").Process(target=child)
process.start()
process.join(60)  # a hang, not slowness
if process.is_alive():
    process.kill()
    sys.exit("the child hung")
assert process.exitcode == 0, process.exitcode
turn("parent")

async def counts():
    async with Store.open(TARGET) as store:
        return [len(await store.spans(session_id=sid)) > 0 for sid in ("parent", "child")]

print(asyncio.run(counts()))
"""


def test_a_forked_child_records_its_own_spans(tmp_path: Path) -> None:
    """The child of a fork (multiprocessing's fork start method) has no writer thread: the
    parent's was not copied. Its spans are written by one of its own, and its flush returns
    (it waited forever on the parent's)."""
    proc = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT, str(tmp_path / "t.db")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[True, True]"


async def test_a_failing_write_is_logged_not_raised(
    store: Store, spans_on: SpanStore, caplog: pytest.LogCaptureFixture, monkeypatch: Any
) -> None:
    async def broken(self: Any, session_id: str, records: Any) -> None:
        raise RuntimeError("the database is gone")

    monkeypatch.setattr(Store, "_record_spans", broken)
    agent = Agent("A", model=ScriptedModel([ModelStep(output=[assistant_message("hi")])]))
    session = StructuredSession("s", store)
    with caplog.at_level(logging.ERROR, logger="turnstore.tracing"):
        result = await Runner.run(agent, "hello", session=session)
        await tracing.aflush()
    assert result.final_output == "hi"
    assert "could not be written" in caplog.text
    assert [run.assistant_message for run in await store.runs("s")] == ["hi"]


async def test_hooks_and_tracing_count_nothing_twice(store: Store, spans_on: SpanStore) -> None:
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("lookup", {"key": "k"}, call_id="c1")]),
            ModelStep(output=[assistant_message("done")]),
        ],
        emit_traces=True,
    )
    session = StructuredSession("s", store)
    await Runner.run(
        Agent("A", model=model, tools=[lookup]), "go", session=session, hooks=session.hooks
    )
    await tracing.aflush()
    [run] = await store.runs("s")
    assert run.usage.requests == 2
    assert len(await store.model_responses(session_id="s")) == 2
    assert [row.usage.requests for row in await store.usage("model")] == [2]
    assert len(_by_kind(await store.spans(run_id=run.id), "generation")) == 2
    [call] = await store.tool_calls(session_id="s")
    assert call.duration_ms is not None
    assert call.status == "failed"


async def test_closing_a_session_writes_its_spans(open_store: Any, spans_on: SpanStore) -> None:
    store = open_store()
    try:
        session = StructuredSession("s", store)
        agent = Agent("A", model=ScriptedModel([ModelStep(output=[assistant_message("hi")])]))
        await Runner.run(agent, "hello", session=session)
        await session.aclose()
        assert not spans_on.pending()
        assert "agent" in {span.kind for span in await store.spans(session_id="s")}
    finally:
        await store.aclose()


WITHOUT_THE_SDK = """
import sys
sys.modules["agents"] = None  # as if the agents extra were not installed: import fails
from turnstore import ConfigurationError, tracing
try:
    tracing.install()
except ConfigurationError as exc:
    print(exc)
print(tracing.installed())
"""


def test_install_without_the_sdk_names_the_agents_extra() -> None:
    """The README's promise: what lacks its extra says so in one line (it was the import's
    ModuleNotFoundError)."""
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_SDK],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "turnstore.tracing needs the agents extra (agents is missing): "
        "pip install 'turnstore[agents]'",
        "None",
    ]

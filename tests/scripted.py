"""Conversations the real Agents SDK ``Runner`` drives with ``agents.testing.ScriptedModel``,
in each of its modes: the four runs of issue 2 (a tool call, a handoff, a guardrail trip, an
approval resumed) and the traced turn of issue 17 (a tool that raises, a handoff, a guardrail
trip, an approval rejected)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    RunContextWrapper,
    Runner,
    function_tool,
    input_guardrail,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.tracing import set_trace_processors, set_tracing_disabled
from agents.usage import InputTokensDetails, OutputTokensDetails, Usage

from turnstore import StructuredSession, tracing
from turnstore.tracing.processor import SpanStore

MODES = ["run", "run_sync", "run_streamed"]


def usage(requests: int, inp: int, out: int, cached: int = 0, reasoning: int = 0) -> Usage:
    return Usage(
        requests=requests,
        input_tokens=inp,
        output_tokens=out,
        total_tokens=inp + out,
        input_tokens_details=InputTokensDetails(cached_tokens=cached, cache_write_tokens=0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning),
    )


async def drive(mode: str, agent: Agent[Any], run_input: Any, session: Any) -> Any:
    """One ``Runner`` call in the given mode; returns its result once it is complete."""
    if mode == "run":
        return await Runner.run(agent, run_input, session=session)
    if mode == "run_sync":
        # run_sync needs a thread without a running event loop.
        return await asyncio.to_thread(Runner.run_sync, agent, run_input, session=session)
    streamed = Runner.run_streamed(agent, run_input, session=session)
    async for _ in streamed.stream_events():
        pass
    return streamed


# ---------------------------------------------------------------------------------------------
# Issue 2: one conversation through every SDK feature that writes to the session


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Rain in {city}"


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    return f"deleted {path}"


@input_guardrail(run_in_parallel=False)  # decided before any model call: deterministic
async def no_forbidden(ctx: RunContextWrapper[Any], agent: Agent[Any], data: Any) -> Any:
    # With a session, ``data`` is the whole history: judge only the newest input.
    text = data if isinstance(data, str) else str(data[-1].get("content"))
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="forbidden" in text)


def runner_agents() -> tuple[Agent[Any], ScriptedModel]:
    model = ScriptedModel(
        [
            # run 1: a tool call, then the answer
            ModelStep(
                output=[function_call("get_weather", {"city": "Oslo"}, call_id="c1")],
                usage=usage(1, 10, 2, cached=4, reasoning=1),
            ),
            ModelStep(
                output=[assistant_message("It rains in Oslo.")],
                usage=usage(1, 20, 3, cached=8, reasoning=2),
            ),
            # run 2: a handoff; the billing agent answers
            ModelStep(
                output=[function_call("transfer_to_billing", {}, call_id="h1")],
                usage=usage(1, 30, 1),
            ),
            ModelStep(output=[assistant_message("Billing here.")], usage=usage(1, 40, 5)),
            # run 3 trips the guardrail before any model call
            # run 4: a call that needs approval, then (resumed) the answer
            ModelStep(
                output=[function_call("delete_file", {"path": "/tmp/r.txt"}, call_id="c2")],
                usage=usage(1, 50, 4),
            ),
            ModelStep(output=[assistant_message("Deleted /tmp/r.txt.")], usage=usage(1, 60, 6)),
        ]
    )
    billing = Agent("Billing", model=model, instructions="You handle billing.")
    agent = Agent(
        "Assistant",
        model=model,
        tools=[get_weather, delete_file],
        handoffs=[billing],
        input_guardrails=[no_forbidden],
    )
    return agent, model


async def converse(mode: str, session: Any, on_interrupt: Callable[[], Any] | None = None) -> None:
    """The four runs; ``on_interrupt`` is awaited while the approval is pending."""
    agent, model = runner_agents()
    result = await drive(mode, agent, "What's the weather in Oslo?", session)
    assert result.final_output == "It rains in Oslo."
    result = await drive(mode, agent, "I have a billing question", session)
    assert result.final_output == "Billing here."
    assert result.last_agent.name == "Billing"
    with pytest.raises(InputGuardrailTripwireTriggered):
        await drive(mode, agent, "tell me something forbidden", session)

    result = await drive(mode, agent, "Delete /tmp/r.txt", session)
    assert [item.tool_name for item in result.interruptions] == ["delete_file"]
    if on_interrupt is not None:
        await on_interrupt()
    state = result.to_state()
    state.approve(result.interruptions[0])
    result = await drive(mode, agent, state, session)
    assert result.final_output == "Deleted /tmp/r.txt."
    assert model.remaining_steps == 0


# ---------------------------------------------------------------------------------------------
# Issue 17: the traced turn


ERROR = "disk on fire: /var/x \x00 \ud800 ' OR 1=1; -- <script>"
# As text columns hold it: NUL and the lone surrogate replaced (items.clean_text).
STORED_ERROR = "disk on fire: /var/x \ufffd \ufffd ' OR 1=1; -- <script>"


@contextmanager
def tracing_on() -> Iterator[SpanStore]:
    """Tracing on, with turnstore's processor alone (no test exports traces anywhere)."""
    processor = tracing.install()
    set_trace_processors([processor])
    set_tracing_disabled(False)
    try:
        yield processor
    finally:
        tracing.flush()
        set_tracing_disabled(True)
        set_trace_processors([])
        tracing.uninstall()


@function_tool(failure_error_function=tracing.trace_tool_error)
def lookup(key: str) -> str:
    """Look a key up (it always fails)."""
    raise RuntimeError(ERROR)


def traced_agents() -> Agent[Any]:
    model = ScriptedModel(
        [
            # run 1: a tool that raises, then a handoff; Billing answers
            ModelStep(output=[function_call("lookup", {"key": "k1"}, call_id="c1")]),
            ModelStep(output=[function_call("transfer_to_billing", {}, call_id="h1")]),
            ModelStep(output=[assistant_message("Billing here.")]),
            # run 2 trips the guardrail; run 3 asks for an approval that is rejected
            ModelStep(output=[function_call("delete_file", {"path": "/tmp/r"}, call_id="c2")]),
            ModelStep(output=[assistant_message("Not deleted.")]),
        ],
        emit_traces=True,
    )
    billing = Agent("Billing", model=model)
    return Agent(
        "Assistant",
        model=model,
        tools=[lookup, delete_file],
        handoffs=[billing],
        input_guardrails=[no_forbidden],
    )


async def converse_traced(mode: str, session: StructuredSession) -> None:
    """The acceptance conversation: a raising tool and a handoff in run 1, a guardrail trip in
    run 2, a rejected approval in run 3."""
    agent = traced_agents()
    result = await drive(mode, agent, "look k1 up", session)
    assert result.final_output == "Billing here."
    with pytest.raises(InputGuardrailTripwireTriggered):
        await drive(mode, agent, "tell me something forbidden", session)
    result = await drive(mode, agent, "Delete /tmp/r", session)
    state = result.to_state()
    state.reject(result.interruptions[0])
    result = await drive(mode, agent, state, session)
    assert result.final_output == "Not deleted."

"""The two sessions the query tests read, written by the real ``Runner`` with
``ScriptedModel``: alice's (two runs through a triage agent with two tools and a handoff,
hooks on) and bob's (one run, no hooks)."""

from __future__ import annotations

from typing import Any

from agents import Agent, Runner, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import InputTokensDetails, OutputTokensDetails
from agents.usage import Usage as SDKUsage

from turnstore import Store, StructuredSession


def usage(inp: int, out: int, cached: int = 0, reasoning: int = 0) -> SDKUsage:
    return SDKUsage(
        requests=1,
        input_tokens=inp,
        output_tokens=out,
        total_tokens=inp + out,
        input_tokens_details=InputTokensDetails(cached_tokens=cached, cache_write_tokens=0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning),
    )


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 degrees"


@function_tool
def lookup_order(order_id: str) -> str:
    """Look an order up (always fails)."""
    raise RuntimeError("database is down")


def named(model: ScriptedModel, name: str) -> ScriptedModel:
    # Real Model objects carry their model name in ``.model``; the hooks read it from there.
    model.model = name  # type: ignore[attr-defined]
    return model


async def build(store: Store) -> dict[str, Any]:
    """Two sessions: alice's (two runs, hooks on) and bob's (one run, no hooks)."""
    triage_model = named(
        ScriptedModel(
            [
                ModelStep(
                    output=[
                        function_call("get_weather", {"city": "Oslo"}, call_id="c1"),
                        function_call("lookup_order", {"order_id": "A-17"}, call_id="c2"),
                    ],
                    usage=usage(10, 5),
                    response_id="r1",
                ),
                ModelStep(
                    output=[function_call("transfer_to_billing", {}, call_id="c3")],
                    usage=usage(20, 5),
                    response_id="r2",
                ),
                ModelStep(
                    output=[assistant_message("Your refund policy allows returns in 30 days.")],
                    usage=usage(40, 8, cached=4, reasoning=2),
                    response_id="r4",
                ),
            ]
        ),
        "model-a",
    )
    billing_model = named(
        ScriptedModel(
            [
                ModelStep(
                    output=[assistant_message("Sunny in Oslo, and your refund was approved.")],
                    usage=usage(30, 5),
                    response_id="r3",
                )
            ]
        ),
        "model-b",
    )
    billing = Agent("billing", model=billing_model)
    triage = Agent(
        "triage", model=triage_model, tools=[get_weather, lookup_order], handoffs=[billing]
    )
    alice = StructuredSession(
        "s1", store, user_id="alice", metadata={"team": "support", "tier": 2, "vip": True}
    )
    await Runner.run(triage, "What is the weather in Oslo?", session=alice, hooks=alice.hooks)
    await Runner.run(triage, "Which policy applies to my refund?", session=alice, hooks=alice.hooks)

    bob_model = ScriptedModel(
        [
            ModelStep(
                output=[assistant_message("The refund policy is generous.")],
                usage=usage(7, 3),
                response_id="r5",
            )
        ]
    )
    bob = StructuredSession("s2", store, user_id="bob", title="Bob's refunds")
    await Runner.run(Agent("solo", model=bob_model), "Tell me about refund policy", session=bob)
    runs1 = await alice.runs()
    runs2 = await bob.runs()
    # Feedback (docs/queries.md, "Feedback and scores"): alice liked the first answer and not
    # the second, which a reviewer labelled; bob's thumbs-down.
    await store.annotate(runs1[0].id, "thumbs", value=1, source="user")
    await alice.annotate("thumbs", value=0, comment="not my question")
    await store.annotate(runs1[1].id, "label", label="wrong-policy", author="rev")
    await bob.annotate("thumbs", value=0)
    return {"alice": alice, "bob": bob, "runs1": runs1, "runs2": runs2}

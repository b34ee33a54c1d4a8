"""The conversations the cost tests read (issue 28): alice's runs on two priced models, one of
them across a price change; bob's on a model no table prices; a run with no model call
recorded; a run with no tokens. ``PRICE_ENTRIES`` is the price file the tests use."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from builders import assistant, user
from turnstore import NewRun, Prices, ResponseRecord, Store, Telemetry, Usage


def at(day: str) -> datetime:
    return datetime.fromisoformat(f"{day}T12:00:00+00:00")


def call(model: str | None, day: str, usage: Usage, agent: str = "agent") -> Telemetry:
    """One model call the hooks saw, completed at noon UTC on ``day``."""
    record = ResponseRecord(agent, model, None, None, usage, None, at(day), None)
    return Telemetry(responses=[record])


async def turn(store: Store, sid: str, text: str, model: str | None, day: str, usage: Usage) -> int:
    # As the SDK writes: the user's message first, then the answer with the hooks' records.
    await store.add_items(sid, [user(text)])
    run = await store.add_items(sid, [assistant("ok")], usage, telemetry=call(model, day, usage))
    assert run is not None
    return run


# 1M input (200k cached) and 1M output (100k reasoning): prices read straight off the table.
BIG = Usage(1, 1_000_000, 1_000_000, 2_000_000, 200_000, 100_000)


def dollars(price: tuple[float, float, float, float], usage: Usage = BIG) -> float:
    inp, cached, out, reasoning = price
    return (
        (usage.input_tokens - usage.cached_tokens) * inp
        + usage.cached_tokens * cached
        + (usage.output_tokens - usage.reasoning_tokens) * out
        + usage.reasoning_tokens * reasoning
    ) / 1e6


PRICE_ENTRIES: list[dict[str, Any]] = [
    {"model": "m-old", "input": 1, "cached_input": 0.5, "output": 2, "reasoning": 4},
    {"model": "m-new", "input": 3, "output": 6, "valid_until": "2025-06-01"},
    {"model": "m-new", "input": 1, "output": 2, "valid_from": "2025-06-01"},
]
PRICES = Prices(PRICE_ENTRIES)
M_OLD = dollars((1, 0.5, 2, 4))


async def build(store: Store) -> dict[str, int]:
    """alice: m-old in May, m-new in May and July (a price change); bob: an unpriced model,
    and a run with no model call recorded (no model: unknown)."""
    await store.update_session("a", user_id="alice")
    await store.update_session("b", user_id="bob")
    runs = {
        "old": await turn(store, "a", "one", "m-old", "2025-05-01", BIG),
        "may": await turn(store, "a", "two", "m-new", "2025-05-02", BIG),
        "july": await turn(store, "a", "three", "m-new", "2025-07-01", BIG),
        "mystery": await turn(store, "b", "four", "mystery-model", "2025-07-01", BIG),
    }
    [runs["bare"]] = await store.add_runs(
        "c", [NewRun([user("five"), assistant("ok")], usage=BIG, created_at=at("2025-07-02"))]
    )
    await store.add_runs(
        "d", [NewRun([user("six"), assistant("ok")], usage=Usage(), created_at=at("2025-07-03"))]
    )
    return runs


MAY, JULY = dollars((3, 3, 6, 6)), dollars((1, 1, 2, 2))
ALICE = M_OLD + MAY + JULY
"""What alice's runs cost at PRICES: m-old, m-new before its price change and after."""

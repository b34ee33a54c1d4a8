"""Cost (issue 28): the price table, its checks, and cost in ``Store.usage`` on every backend:
per run, session, user, agent, model and day; unknown for an unpriced model; a price change by
date applying to history; a user's entries over the shipped table."""

from __future__ import annotations

import json
import math
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from costdata import ALICE, BIG, JULY, M_OLD, MAY, PRICES, build, dollars, turn
from turnstore import (
    ArgumentTypeError,
    InvalidOperationError,
    Price,
    Prices,
    Store,
    Usage,
)

# ---------------------------------------------------------------------------------------------
# The table


def test_shipped_table_prices_the_sdk_models() -> None:
    prices = Prices.default()
    assert prices.as_of
    today = date(2025, 9, 1)
    for model in ("gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o", "gpt-4o-mini", "o3",
                  "o4-mini", "gpt-5", "gpt-5-mini", "gpt-5-nano"):  # fmt: skip
        price = prices.price(model, today)
        assert price is not None
        assert price.model == model
        assert 0 < price.cached_input <= price.input
        assert price.reasoning == price.output
    # A dated snapshot and a provider prefix fall back to the model; a mini is not its model.
    assert prices.price("gpt-4o-2024-08-06", today) == prices.price("gpt-4o", today)
    assert prices.price("openai/gpt-4.1-mini", today) == prices.price("gpt-4.1-mini", today)
    assert prices.price("gpt-4o-mini-2024-07-18", today) == prices.price("gpt-4o-mini", today)
    old_4o = prices.price("gpt-4o-2024-05-13", today)
    assert old_4o is not None
    assert old_4o.input == 5.0
    assert prices.price("gpt-4o-ultra", today) is None
    assert prices.price(None, today) is None
    # o3's price cut of 2025-06-10.
    before, after = prices.price("o3", date(2025, 6, 9)), prices.price("o3", date(2025, 6, 10))
    assert before is not None
    assert after is not None
    assert before.input == 5 * after.input


def test_cost_formula() -> None:
    price = Price("m", input=2.0, cached_input=0.5, output=8.0, reasoning=16.0)
    assert price.cost(BIG) == pytest.approx(dollars((2.0, 0.5, 8.0, 16.0)))
    assert price.cost(BIG) == pytest.approx(0.8 * 2 + 0.2 * 0.5 + 0.9 * 8 + 0.1 * 16)
    prices = Prices([price])
    assert prices.cost("m", date.today(), Usage()) == 0.0
    assert prices.cost("unknown", date.today(), Usage()) == 0.0  # no tokens cost nothing
    assert prices.cost("unknown", date.today(), BIG) is None


def test_entries_override_and_layer() -> None:
    base = Prices.default()
    mine = base.with_entries(
        [
            {"model": "gpt-4o", "input": 1, "output": 2, "valid_from": "2025-01-01"},
            {"model": "my-model", "input": 3, "output": 4},
        ]
    )
    new_4o = mine.price("gpt-4o", date(2025, 2, 1))
    assert new_4o is not None
    assert (new_4o.input, new_4o.cached_input) == (1.0, 1.0)
    # Before the override's range the shipped price still applies.
    assert mine.price("gpt-4o", date(2024, 12, 31)) == base.price("gpt-4o", date(2024, 12, 31))
    assert mine.price("my-model-2025-01-01", date(2025, 2, 1)) is not None
    assert base.price("my-model", date(2025, 2, 1)) is None  # the base is unchanged
    assert len(mine.entries) == len(base.entries) + 2


def test_price_file(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"prices": [{"model": "x", "input": 1, "output": 2}]}))
    loaded = Prices.load(path)
    assert [p.model for p in loaded.entries] == ["x"]
    path.write_text(json.dumps([{"model": "y", "input": 0, "output": 0}]))
    assert [p.model for p in Prices.load(str(path)).entries] == ["y"]


BAD_ENTRIES: list[tuple[Any, type[Exception]]] = [
    ({"model": "x", "input": -1, "output": 1}, InvalidOperationError),
    ({"model": "x", "input": math.nan, "output": 1}, InvalidOperationError),
    ({"model": "x", "input": math.inf, "output": 1}, InvalidOperationError),
    ({"model": "x", "input": "1", "output": 1}, ArgumentTypeError),
    ({"model": "x", "input": True, "output": 1}, ArgumentTypeError),
    ({"model": "x", "input": 1}, InvalidOperationError),
    ({"model": 3, "input": 1, "output": 1}, ArgumentTypeError),
    ({"model": "", "input": 1, "output": 1}, InvalidOperationError),
    ({"model": "a\x00b", "input": 1, "output": 1}, InvalidOperationError),
    ({"model": "\ud800", "input": 1, "output": 1}, InvalidOperationError),
    ({"model": "x", "input": 1, "output": 1, "cost": 1}, InvalidOperationError),
    ({"model": "x", "input": 1, "output": 1, "valid_from": "yesterday"}, InvalidOperationError),
    ({"model": "x", "input": 1, "output": 1, "valid_from": 2025}, ArgumentTypeError),
    (
        {
            "model": "x",
            "input": 1,
            "output": 1,
            "valid_from": "2025-02-01",
            "valid_until": "2025-01-01",
        },
        InvalidOperationError,
    ),
    ("gpt-4o", ArgumentTypeError),
]


@pytest.mark.parametrize(("entry", "error"), BAD_ENTRIES)
def test_bad_entries_refused(entry: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        Prices.default().with_entries([entry])


@pytest.mark.parametrize(
    "ranges",
    [
        [(None, None), ("2025-01-01", None)],
        [(None, "2025-03-01"), ("2025-02-01", None)],
        [("2025-01-01", "2025-03-01"), ("2025-02-01", "2025-02-02")],
    ],
)
def test_overlapping_ranges_refused(ranges: list[tuple[str | None, str | None]]) -> None:
    entries = [
        {"model": "x", "input": 1, "output": 1, "valid_from": a, "valid_until": b}
        for a, b in ranges
    ]
    with pytest.raises(InvalidOperationError, match="overlap"):
        Prices(entries)
    # Ranges that meet (one ends the day the next starts) do not overlap.
    Prices(
        [
            {"model": "x", "input": 1, "output": 1, "valid_until": "2025-01-01"},
            {"model": "x", "input": 2, "output": 2, "valid_from": "2025-01-01"},
        ]
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"prices": [{"model": "x", "input": NaN, "output": 1}]}',
        '{"price": []}',
        '{"prices": {}}',
        "3",
        '{"prices": [], "extra": 1}',
        "[" * 100_000,
    ],
)
def test_bad_price_files_refused(text: str, tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(InvalidOperationError):
        Prices.load(path)


def test_unreadable_price_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidOperationError, match="cannot read"):
        Prices.load(tmp_path / "missing.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe")
    with pytest.raises(InvalidOperationError):
        Prices.load(tmp_path / "bin.json")


# ---------------------------------------------------------------------------------------------
# Cost in Store.usage, every backend


def costs(rows: list[Any]) -> dict[str | None, float | None]:
    return {row.key: row.cost for row in rows}


async def test_cost_per_group(store: Store) -> None:
    runs = await build(store)
    got = costs(await store.usage("session", prices=PRICES))
    assert got == {"a": pytest.approx(ALICE), "b": None, "c": None, "d": 0.0}
    assert costs(await store.usage("user", prices=PRICES)) == {
        None: None,  # sessions c and d have no user; c's tokens have no model
        "alice": pytest.approx(ALICE),
        "bob": None,
    }
    assert costs(await store.usage("model", prices=PRICES)) == {
        None: None,
        "m-new": pytest.approx(MAY + JULY),
        "m-old": pytest.approx(M_OLD),
        "mystery-model": None,
    }
    assert costs(await store.usage("agent", prices=PRICES)) == {None: None, "agent": None}
    assert costs(await store.usage("agent", user_id="alice", prices=PRICES)) == {
        "agent": pytest.approx(ALICE)
    }
    # A price change by date applies to history: May's run at the old price, July's at the new.
    assert costs(await store.usage("run", prices=PRICES)) == {
        str(runs["old"]): pytest.approx(M_OLD),
        str(runs["may"]): pytest.approx(MAY),
        str(runs["july"]): pytest.approx(JULY),
        str(runs["mystery"]): None,
        str(runs["bare"]): None,
        str(runs["bare"] + 1): 0.0,
    }
    days = await store.usage("day", user_id="alice", prices=PRICES)
    assert all(row.cost is not None for row in days)  # days of the runs: today's (or two)
    assert sum(row.cost or 0 for row in days) == pytest.approx(ALICE)
    [bob] = await store.usage("user", user_id="bob", prices=PRICES)
    assert (bob.cost, bob.unpriced) == (None, ("mystery-model",))
    [bare] = await store.usage("session", session_id="c", prices=PRICES)
    assert (bare.cost, bare.unpriced) == (None, (None,))


async def test_corrected_table_applies_to_history(store: Store) -> None:
    await build(store)
    [before] = await store.usage("user", user_id="bob", prices=PRICES)
    assert before.cost is None
    fixed = PRICES.with_entries([{"model": "mystery-model", "input": 1, "output": 1}])
    [after] = await store.usage("user", user_id="bob", prices=fixed)
    assert after.cost == pytest.approx(2.0)
    assert after.unpriced == ()
    cheaper = PRICES.with_entries([{"model": "m-old", "input": 0, "output": 0}])
    [alice] = await store.usage("user", user_id="alice", prices=cheaper)
    assert alice.cost == pytest.approx(MAY + JULY)


async def test_default_prices_and_no_cost(store: Store) -> None:
    await turn(store, "s", "hi", "gpt-4.1-2025-04-14", "2025-08-01", BIG)
    [row] = await store.usage()
    assert row.cost == pytest.approx(dollars((2.0, 0.5, 8.0, 8.0)))
    [row] = await store.usage(cost=False)
    assert (row.cost, row.usage) == (None, BIG)
    with pytest.raises(ArgumentTypeError):
        await store.usage(prices={"gpt-4.1": 1})  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError):
        await store.usage(cost="yes")  # type: ignore[arg-type]

"""Each session's totals (sessions.run_count, total_tokens, tool_call_count, failed_run_count,
failed_call_count, failure_count; issue 29), which the writes keep so that the sessions list
sorts by them through an index: after every kind of write they equal what the session's rows
add up to, computed from scratch, on every backend."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given

from builders import user
from catalogue import assert_kept, kept
from support import sql
from turnstore import Store, Usage
from writes import PLAYED, STEPS, Step, add_runs, below_in_progress, ids, question, tool_turn

# ---------------------------------------------------------------------------------------------
# Every kind of write (tests/writes.py), as random sequences on two sessions


@PLAYED
@given(steps=STEPS)
def test_the_totals_are_what_the_rows_add_up_to_after_any_writes(
    shared_loop_store: tuple[asyncio.AbstractEventLoop, Store], steps: list[Step]
) -> None:
    loop, store = shared_loop_store
    prefix = f"t{next(ids)}-"

    async def play() -> None:
        for write, session, n in steps:
            await write(store, prefix + session, n)
            await assert_kept(store)

    loop.run_until_complete(play())


# ---------------------------------------------------------------------------------------------
# The writes the sequences above do not reach


async def test_copy_carries_the_totals(store: Store, tmp_path: Any) -> None:
    from turnstore import copy

    await question(store, "s", 3)
    await tool_turn(store, "s", 1)
    await below_in_progress(store, "s", 2)
    await add_runs(store, "s", 5)
    target = str(tmp_path / "copy.db")
    await copy(store, target)
    async with Store.open(target) as copied:
        await assert_kept(copied)
        assert await kept(copied) == await kept(store)


async def test_a_deleted_or_pruned_session_takes_its_totals_along(store: Store) -> None:
    for sid in ("a", "b"):
        await tool_turn(store, sid, 3)
    await store.delete_session("a")
    await assert_kept(store)
    assert [row[0] for row in await kept(store)] == ["b"]


async def test_the_tokens_stop_at_the_largest_integer_as_a_runs_do(store: Store) -> None:
    big = Usage(total_tokens=2**63 - 1)
    await store.add_items("s", [user("q")], big)
    await store.add_items("s", [user("r")], big)
    [(tokens,)] = await sql(store, "SELECT total_tokens FROM sessions")
    assert int(tokens) == 2**63 - 1
    await store.pop_item("s")  # recounted from the rows: capped, not an overflow
    [(tokens,)] = await sql(store, "SELECT total_tokens FROM sessions")
    assert int(tokens) == 2**63 - 1


@pytest.mark.parametrize("order", ["runs", "tokens", "tool_calls", "failures"])
async def test_the_list_orders_by_the_kept_totals(store: Store, order: str) -> None:
    for n, sid in enumerate(("x", "y", "z")):
        for _ in range(n + 1):
            await tool_turn(store, sid, 2 * n + 1)
    await below_in_progress(store, "x", 1)
    page = await store.sessions(order_by=order, limit=10)
    summaries = await store.session_summaries([info.session_id for info in page])
    numbers = {
        "runs": lambda s: s.runs,
        "tokens": lambda s: s.total_tokens,
        "tool_calls": lambda s: s.tool_calls,
        "failures": lambda s: s.failed_runs + s.failed_tool_calls,
    }[order]
    shown = [numbers(summaries[info.session_id]) for info in page]
    assert shown == sorted(shown, reverse=True)

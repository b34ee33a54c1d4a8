"""Each session's totals (sessions.run_count, total_tokens, tool_call_count, failed_run_count,
failed_call_count, failure_count; issue 29), which the writes keep so that the sessions list
sorts by them through an index: after every kind of write they equal what the session's rows
add up to, computed from scratch, on every backend."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import assistant, call, output, span_record, user
from catalogue import SDK_ERROR as FAILED_OUTPUT
from catalogue import assert_kept, kept
from support import sql
from turnstore import NewRun, Store, Usage
from turnstore.core.spans import ToolOutcome

# ---------------------------------------------------------------------------------------------
# Every kind of write, as random sequences on two sessions

_ids = itertools.count()


async def _runs(store: Store, sid: str) -> list[Any]:
    return [run for run, _ in await store.tree(sid)]


async def _question(store: Store, sid: str, n: int) -> None:
    await store.add_items(sid, [user(f"q{n}")], Usage(input_tokens=n, total_tokens=n))


async def _tool_turn(store: Store, sid: str, n: int) -> None:
    cid = f"c{next(_ids)}"
    text = FAILED_OUTPUT if n % 2 else "done"
    await store.add_items(sid, [call(cid, "lookup"), output(cid, text)], Usage(total_tokens=n))


async def _open_call(store: Store, sid: str, n: int) -> None:
    """A call left for an approval, answered by the next batch (an interrupted run resumed)."""
    cid = f"c{next(_ids)}"
    await store.add_items(sid, [call(cid, "approve")])
    await store.add_items(sid, [output(cid, FAILED_OUTPUT if n % 2 else "ok")])


async def _answer(store: Store, sid: str, n: int) -> None:
    await store.add_items(sid, [assistant(f"a{n}")], Usage(output_tokens=n, total_tokens=2 * n))


async def _usage_alone(store: Store, sid: str, n: int) -> None:
    await store.add_items(sid, [], Usage(total_tokens=n + 1))


async def _pop(store: Store, sid: str, n: int) -> None:
    await store.pop_item(sid)


async def _edit(store: Store, sid: str, n: int) -> None:
    runs = [run for run in await _runs(store, sid) if run.user_message is not None]
    if runs:
        await store.fork(sid, runs[n % len(runs)].id, f"edited {n}" if n % 2 else None)


async def _delete_branch(store: Store, sid: str, n: int) -> None:
    runs = await _runs(store, sid)
    if runs:
        await store.delete_branch(sid, runs[n % len(runs)].id, force=True)


async def _rewind(store: Store, sid: str, n: int) -> None:
    runs = await _runs(store, sid)
    if runs:
        await store.move_head(sid, runs[n % len(runs)].id, to_parent=bool(n % 2))


async def _compact(store: Store, sid: str, n: int) -> None:
    await store.compact(sid, [{"type": "compaction", "encrypted_content": f"x{n}"}])


async def _add_runs(store: Store, sid: str, n: int) -> None:
    runs = await _runs(store, sid)
    parent = runs[n % len(runs)].id if runs and n % 3 else None
    cid = f"c{next(_ids)}"
    await store.add_runs(
        sid,
        [
            NewRun([user(f"imported {n}"), call(cid, "t"), output(cid, FAILED_OUTPUT)],
                   parent_id=parent, usage=Usage(total_tokens=n)),
            # Items without a user message extend their parent: its tokens are replaced.
            NewRun([assistant(f"more {n}")], parent=0, usage=Usage(total_tokens=3 * n)),
        ],
        head=1,
    )  # fmt: skip


async def _span_outcome(store: Store, sid: str, n: int) -> None:
    calls = await store.tool_calls(session_id=sid)
    if calls:
        target = calls[n % len(calls)]
        status = "failed" if n % 2 else "completed"
        outcome = ToolOutcome(target.tool_name, None, 0, status, None)
        record = span_record(store, target.run_id, next(_ids) + 1, outcome=outcome)
        await store._record_spans(sid, [record])


async def _below_in_progress(store: Store, sid: str, n: int) -> None:
    """A question below a run still under way: that run failed."""
    await store.add_items(sid, [user(f"p{n}")])
    await store.add_items(sid, [user(f"again {n}")])


async def _clear(store: Store, sid: str, n: int) -> None:
    await store.clear_session(sid)


WRITES: list[Callable[[Store, str, int], Awaitable[None]]] = [
    _question,
    _tool_turn,
    _open_call,
    _answer,
    _usage_alone,
    _pop,
    _edit,
    _delete_branch,
    _rewind,
    _compact,
    _add_runs,
    _span_outcome,
    _below_in_progress,
    _clear,
]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(WRITES), st.sampled_from("ab"), st.integers(0, 50)),
        min_size=1,
        max_size=14,
    )
)
def test_the_totals_are_what_the_rows_add_up_to_after_any_writes(
    shared_loop_store: tuple[asyncio.AbstractEventLoop, Store],
    steps: list[tuple[Callable[[Store, str, int], Awaitable[None]], str, int]],
) -> None:
    loop, store = shared_loop_store
    prefix = f"t{next(_ids)}-"

    async def play() -> None:
        for write, session, n in steps:
            await write(store, prefix + session, n)
            await assert_kept(store)

    loop.run_until_complete(play())


# ---------------------------------------------------------------------------------------------
# The writes the sequences above do not reach


async def test_copy_carries_the_totals(store: Store, tmp_path: Any) -> None:
    from turnstore import copy

    await _question(store, "s", 3)
    await _tool_turn(store, "s", 1)
    await _below_in_progress(store, "s", 2)
    await _add_runs(store, "s", 5)
    target = str(tmp_path / "copy.db")
    await copy(store, target)
    async with Store.open(target) as copied:
        await assert_kept(copied)
        assert await kept(copied) == await kept(store)


async def test_a_deleted_or_pruned_session_takes_its_totals_along(store: Store) -> None:
    for sid in ("a", "b"):
        await _tool_turn(store, sid, 3)
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
            await _tool_turn(store, sid, 2 * n + 1)
    await _below_in_progress(store, "x", 1)
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

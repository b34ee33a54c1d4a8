"""Every kind of write a session takes, each a function ``(store, session_id, n)`` that varies
with ``n``: random sequences of them (``WRITES``) drive the property tests of what the writes
keep (tests/test_session_totals.py: the session totals; tests/test_path_read.py: the path
read)."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from builders import assistant, call, output, span_record, user
from catalogue import SDK_ERROR as FAILED_OUTPUT
from turnstore import NewRun, Store, Usage
from turnstore.core.spans import ToolOutcome

ids = itertools.count()


async def tree_runs(store: Store, sid: str) -> list[Any]:
    """The session's runs, every branch, in creation order."""
    return [run for run, _ in await store.tree(sid)]


async def question(store: Store, sid: str, n: int) -> None:
    await store.add_items(sid, [user(f"q{n}")], Usage(input_tokens=n, total_tokens=n))


async def tool_turn(store: Store, sid: str, n: int) -> None:
    cid = f"c{next(ids)}"
    text = FAILED_OUTPUT if n % 2 else "done"
    await store.add_items(sid, [call(cid, "lookup"), output(cid, text)], Usage(total_tokens=n))


async def open_call(store: Store, sid: str, n: int) -> None:
    """A call left for an approval, answered by the next batch (an interrupted run resumed)."""
    cid = f"c{next(ids)}"
    await store.add_items(sid, [call(cid, "approve")])
    await store.add_items(sid, [output(cid, FAILED_OUTPUT if n % 2 else "ok")])


async def answer(store: Store, sid: str, n: int) -> None:
    await store.add_items(sid, [assistant(f"a{n}")], Usage(output_tokens=n, total_tokens=2 * n))


async def usage_alone(store: Store, sid: str, n: int) -> None:
    await store.add_items(sid, [], Usage(total_tokens=n + 1))


async def pop(store: Store, sid: str, n: int) -> None:
    await store.pop_item(sid)


async def edit(store: Store, sid: str, n: int) -> None:
    runs = [run for run in await tree_runs(store, sid) if run.user_message is not None]
    if runs:
        await store.fork(sid, runs[n % len(runs)].id, f"edited {n}" if n % 2 else None)


async def delete_branch(store: Store, sid: str, n: int) -> None:
    runs = await tree_runs(store, sid)
    if runs:
        await store.delete_branch(sid, runs[n % len(runs)].id, force=True)


async def rewind(store: Store, sid: str, n: int) -> None:
    runs = await tree_runs(store, sid)
    if runs:
        await store.move_head(sid, runs[n % len(runs)].id, to_parent=bool(n % 2))


async def compact(store: Store, sid: str, n: int) -> None:
    await store.compact(sid, [{"type": "compaction", "encrypted_content": f"x{n}"}])


async def add_runs(store: Store, sid: str, n: int) -> None:
    runs = await tree_runs(store, sid)
    parent = runs[n % len(runs)].id if runs and n % 3 else None
    cid = f"c{next(ids)}"
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


async def span_outcome(store: Store, sid: str, n: int) -> None:
    calls = await store.tool_calls(session_id=sid)
    if calls:
        target = calls[n % len(calls)]
        status = "failed" if n % 2 else "completed"
        outcome = ToolOutcome(target.tool_name, None, 0, status, None)
        record = span_record(store, target.run_id, next(ids) + 1, outcome=outcome)
        await store._record_spans(sid, [record])


async def below_in_progress(store: Store, sid: str, n: int) -> None:
    """A question below a run still under way: that run failed."""
    await store.add_items(sid, [user(f"p{n}")])
    await store.add_items(sid, [user(f"again {n}")])


async def clear(store: Store, sid: str, n: int) -> None:
    await store.clear_session(sid)


WRITES: list[Callable[[Store, str, int], Awaitable[None]]] = [
    question,
    tool_turn,
    open_call,
    answer,
    usage_alone,
    pop,
    edit,
    delete_branch,
    rewind,
    compact,
    add_runs,
    span_outcome,
    below_in_progress,
    clear,
]

# A step: a write, the session it goes to ("a" or "b"), its n.
Step = tuple[Callable[[Store, str, int], Awaitable[None]], str, int]
# Random sequences of them, and how a property test that plays them is run (one store and loop
# for every example: shared_loop_store).
STEPS = st.lists(
    st.tuples(st.sampled_from(WRITES), st.sampled_from("ab"), st.integers(0, 50)),
    min_size=1,
    max_size=14,
)
PLAYED = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

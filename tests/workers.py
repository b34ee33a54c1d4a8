"""Entry points of the processes that multi-process tests start.

Kept apart from the test modules, and light (turnstore and the item builders only), because a
child process imports the module its target lives in: the tests start these through a
``forkserver`` that has this module preloaded, so a child costs a fork, not an interpreter.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import multiprocessing.context
import sys
import time
from collections.abc import Generator, Sequence
from typing import Any

from builders import assistant, call, output, user
from turnstore import Store, migrate
from turnstore.core import append
from turnstore.core.codec import prepare_items
from turnstore.core.ops import Op
from turnstore.core.statements import INSERT_ITEM, STORE_ITEM


def context() -> multiprocessing.context.BaseContext:
    """The multiprocessing context for test processes: a fork server with this preloaded."""
    ctx = multiprocessing.get_context("forkserver")
    # pytest too: under `python -m pytest` each child re-runs pytest.__main__ as its main.
    ctx.set_forkserver_preload(["pytest", "workers"])
    return ctx


# ---------------------------------------------------------------------------------------------
# Concurrent migrate


def migrate_process(target: str, options: dict[str, Any], start: Any) -> None:
    """Wait for the others, then migrate the database."""
    start.wait()
    migrate(target, **options)


# ---------------------------------------------------------------------------------------------
# Many writers: every turn is three batches, as the SDK writes them, each item tagged


def tag(writer: str, run: int, index: int) -> str:
    """The tag of item ``index`` (0-3) of ``writer``'s ``run``-th turn."""
    return f"{writer}/{run}:{index}"


def turn(writer: str, run: int) -> list[list[dict[str, Any]]]:
    """One SDK turn in its three ``add_items`` batches: [user], [call, output], [answer]."""
    return [
        [user(tag(writer, run, 0))],
        [call(tag(writer, run, 1), "tool"), output(tag(writer, run, 1), tag(writer, run, 2))],
        [assistant(tag(writer, run, 3), tag(writer, run, 3))],
    ]


def tag_of(item: dict[str, Any]) -> str:
    """The tag an item of ``turn`` carries."""
    kind = item.get("type")
    if kind is None:
        return str(item["content"])
    if kind == "function_call":
        return str(item["call_id"])
    if kind == "function_call_output":
        return str(item["output"])
    return str(item["id"])


def writer_process(
    target: str,
    options: dict[str, Any],
    process: int,
    coroutines: int,
    runs: int,
    shared: bool,
    start: Any,
) -> None:
    """``coroutines`` writers on one store, each writing ``runs`` turns.

    Writer ``p{process}c{c}`` writes to the session ``shared`` or to a session of its own
    (named after it).
    """

    async def write(name: str, store: Store) -> None:
        session_id = "shared" if shared else name
        for run in range(runs):
            for batch in turn(name, run):
                await store.add_items(session_id, batch)

    async def main() -> None:
        store = Store.open(target, **options)
        try:
            await asyncio.gather(*(write(f"p{process}c{c}", store) for c in range(coroutines)))
        finally:
            await store.aclose()

    start.wait()
    asyncio.run(main())


# ---------------------------------------------------------------------------------------------
# A writer killed mid-batch


def big_batch(number: int, size: int) -> list[dict[str, Any]]:
    """A batch of ``size`` items starting a run: a question and its answer's many parts."""
    return [user(f"b{number}:0")] + [
        assistant(f"b{number}:{i}", f"b{number}:{i}") for i in range(1, size)
    ]


def _pausing(op: Op[Any], after: int, paused: Any) -> Op[Any]:
    """``op``, stopped for good (inside its transaction) once ``after`` items are inserted."""
    result: Any = None
    inserted = 0
    while True:
        try:
            query = op.send(result)
        except StopIteration as stop:
            return stop.value
        result = yield query
        # STORE_ITEM: an item inserted without its id back (PostgreSQL, no tool call).
        if query.statement is INSERT_ITEM or query.statement is STORE_ITEM:
            inserted += 1
            if inserted == after:
                paused.set()
                time.sleep(3600)  # until killed


def killed_writer_process(
    target: str, options: dict[str, Any], committed: int, size: int, paused: Any
) -> None:
    """Commit ``committed`` batches, then stop half-way through the next one."""

    async def main() -> None:
        store = Store.open(target, **options)
        for number in range(committed):
            await store.add_items("victim", big_batch(number, size))
        batch = prepare_items(big_batch(committed, size))
        now = store.backend.now()

        def op() -> Generator[Any, Any, Any]:
            return _pausing(append.append("victim", batch, now), size // 2, paused)

        await store.backend.run(op, write=True)

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------
# Adopting a SQLiteSession file from several processes at once


def adopting_process(path: str, session_ids: list[str], start: Any) -> None:
    """Wait for the others, then read each session through ``StructuredSession``."""
    from turnstore import StructuredSession

    async def main() -> None:
        for session_id in session_ids:
            session = StructuredSession(session_id, path)
            try:
                await session.get_items()
            finally:
                await session.aclose()

    start.wait()
    asyncio.run(main())


# ---------------------------------------------------------------------------------------------
# Pops racing on one session


async def pop_all(stores: Sequence[Store], session_id: str, pops: int) -> list[Any]:
    """``pops`` pop_item calls on ``session_id`` at once, spread over ``stores``."""
    return list(
        await asyncio.gather(*(stores[n % len(stores)].pop_item(session_id) for n in range(pops)))
    )


def popper_main() -> None:
    """A process of its own, started as ``python [-O] -c "import workers;
    workers.popper_main()" JSON`` (JSON: target, options, session_id, pops, stores).

    Opens the stores, says ``ready`` (``ready optimised`` under ``-O``), waits for a line on
    stdin, then races ``pop_all`` and prints what it popped as one JSON line.
    """
    target, options, session_id, pops, stores = json.loads(sys.argv[1])

    async def main() -> None:
        opened = [Store.open(target, **options) for _ in range(stores)]
        try:
            for store in opened:  # each pool connected before the race
                await store.get_items(session_id, limit=1)
            print("ready" if __debug__ else "ready optimised", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            popped = await pop_all(opened, session_id, pops)
        finally:
            for store in opened:
                await store.aclose()
        print(json.dumps(popped), flush=True)

    asyncio.run(main())

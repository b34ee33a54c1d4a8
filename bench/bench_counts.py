"""Deterministic costs of turnstore's hot paths: SQL statements, round trips and Python calls
per call.

    .venv/bin/python bench/bench_counts.py            # a write turn at 1,000 items, full reads
    .venv/bin/python bench/bench_counts.py --quick    # smaller
    .venv/bin/python bench/bench_counts.py --postgres postgresql://postgres@127.0.0.1/test

Wall times wobble by tens of percent on a shared machine; these counts do not, so they are
what an A/B comparison of two commits quotes first (run this file of each commit on the same
SDK items). Python calls are every Python-level function call and generator resume, on every
thread (the event loop's and SQLite's worker), counted by a profile hook; statements are what
the SQLite connection ran (``BEGIN`` and ``COMMIT`` included), counted by its trace callback.
On SQLite a statement is a call into the library, not a round trip. With ``--postgres``, the
same write turn and reads on PostgreSQL: statements psycopg sent and network round trips (each
point where the client waits for the server: ``_roundtrips.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg

from _common import (
    ITEMS_PER_TURN,
    fill_store,
    history,
    make_turns,
    settle,
    two_batches,
    write_turns,
)
from _roundtrips import counting_round_trips
from turnstore import Store, StructuredSession

TAIL = 20  # the limit of the "last N" read


class Counter:
    """Counts Python calls on the event loop's thread and the store's worker thread."""

    def __init__(self, store: Store) -> None:
        self.calls = 0
        # The thread that runs the store's operations (SQLite's one worker).
        self.executor = store.backend._executor  # type: ignore[attr-defined]

    def hook(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self.calls += 1

    async def count(self, action: Callable[[], Awaitable[Any]]) -> int:
        """The Python calls ``action()`` makes."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.executor, sys.setprofile, self.hook)
        self.calls = 0
        sys.setprofile(self.hook)
        try:
            await action()
        finally:
            sys.setprofile(None)
            calls = self.calls
            await loop.run_in_executor(self.executor, sys.setprofile, None)
        return calls


def _connection(store: Store) -> Any:
    return store.backend._conn  # type: ignore[attr-defined]  # the driver's one connection


async def _statements(store: Store, action: Callable[[], Awaitable[Any]]) -> int:
    """The statements the store's connection was sent during ``action()``: not what SQLite
    runs inside them, which its trace reports as ``-- ...`` (a trigger program, FTS5's own
    ``PRAGMA data_version`` when a trigger writes the tool errors' index)."""
    ran: list[str] = []

    def trace() -> None:
        _connection(store).set_trace_callback(ran.append)

    def untrace() -> None:
        _connection(store).set_trace_callback(None)

    loop = asyncio.get_running_loop()
    executor = store.backend._executor  # type: ignore[attr-defined]  # the connection's thread
    await loop.run_in_executor(executor, trace)
    try:
        await action()
    finally:
        await loop.run_in_executor(executor, untrace)
    return sum(not text.startswith("--") for text in ran)


async def measure_size(directory: Path, size: int, turns: int) -> list[tuple[str, float]]:
    """Per-call counts at ``size`` items: a write turn (three ``add_items``, and the two-batch
    form), a full read."""
    path = directory / f"counts-{size}.db"
    store = Store.open(path)
    try:
        await fill_store(store, "bench", history(size))
        settle(path)
        session = StructuredSession("bench", store)
        counter = Counter(store)
        new = iter(make_turns(4 * turns + 1, seed=99, start=10**6))
        await write_turns(session, [next(new)])  # warm: statements checked, caches filled
        await session.get_items()

        async def write() -> None:
            for _ in range(turns):
                await write_turns(session, [next(new)])

        async def write_two() -> None:
            for _ in range(turns):
                await write_turns(session, [two_batches(next(new))])

        async def read() -> None:
            for _ in range(turns):
                await session.get_items()

        statements = await _statements(store, write)
        calls = await counter.count(write)
        statements_two = await _statements(store, write_two)
        calls_two = await counter.count(write_two)
        read_calls = await counter.count(read)
        read_statements = await _statements(store, read)
        tail_statements = await _statements(store, lambda: session.get_items(TAIL))
        read_size = size + ITEMS_PER_TURN * (4 * turns + 1)
        return [
            (f"write turn @{size}: statements", statements / turns),
            (f"write turn @{size}: Python calls", calls / turns),
            (f"write 2-batch turn @{size}: statements", statements_two / turns),
            (f"write 2-batch turn @{size}: Python calls", calls_two / turns),
            (f"get_items() @{read_size}: statements", read_statements / turns),
            (f"get_items() @{read_size}: Python calls", read_calls / turns),
            (f"get_items({TAIL}) @{read_size}: statements", tail_statements),
        ]
    finally:
        await store.aclose()


async def measure_postgres_size(url: str, size: int, turns: int) -> list[tuple[str, float]]:
    """PostgreSQL's statements and round trips per write turn (three ``add_items``, and the
    two-batch form) and per read, at ``size`` items, in a schema of its own (dropped after)."""
    schema = f"bench_counts_{uuid.uuid4().hex[:8]}"
    store = Store.open(url, schema=schema)
    try:
        await fill_store(store, "bench", history(size))
        session = StructuredSession("bench", store)
        new = iter(make_turns(2 * turns + 1, seed=99, start=10**6))
        await write_turns(session, [next(new)])  # warm: the pool's connection made
        rows: list[tuple[str, float]] = []
        for name, action, times in (
            (f"write turn @{size}", lambda: write_turns(session, [next(new)]), turns),
            (
                f"write 2-batch turn @{size}",
                lambda: write_turns(session, [two_batches(next(new))]),
                turns,
            ),
            ("get_items()", session.get_items, turns),
            (f"get_items({TAIL})", lambda: session.get_items(TAIL), turns),
        ):
            with counting_round_trips() as counted:
                for _ in range(times):
                    await action()
            rows.append((f"postgres {name}: statements", counted.statements / times))
            rows.append((f"postgres {name}: round trips", counted.count / times))
        return rows
    finally:
        await store.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def measure(
    directory: Path, sizes: Sequence[int], turns: int, postgres: str | None = None
) -> list[tuple[str, float]]:
    """``measure_size`` at each size, then ``measure_postgres_size`` on ``postgres`` (a URL)."""
    rows = [row for size in sizes for row in await measure_size(directory, size, turns)]
    if postgres is not None:
        rows += [
            row for size in sizes for row in await measure_postgres_size(postgres, size, turns)
        ]
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--postgres", metavar="URL", help="also count on this PostgreSQL server")
    args = parser.parse_args(argv)
    sizes = (100,) if args.quick else (1_000, 20_000)
    turns = 2 if args.quick else 10
    with tempfile.TemporaryDirectory(prefix="turnstore-counts-") as directory:
        rows = asyncio.run(measure(Path(directory), sizes, turns, args.postgres))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Streaming a dataset (``Store.dataset``) against the floor of reading the same items by hand.

    .venv/bin/python bench/bench_dataset.py                       # 100 sessions x 20 runs
    .venv/bin/python bench/bench_dataset.py --sessions 400 --runs 20 --repeats 5
    .venv/bin/python bench/bench_dataset.py --json bench/results/dataset.json --no-postgres

Each session is a chain of ``--runs`` SDK turns (user question, tool call and output, answer:
``_common.make_turns``), written with ``Store.add_runs`` (not timed). The contenders, each
producing every run's input and output items, decoded:

- ``Store.dataset``: every record (its page size the default), tool calls and annotations
  included;
- ``plain SQL``: per run, one ``SELECT data FROM items`` of its session's runs up to it (a
  chain: the run's path) in order, each item ``json.loads``-ed, through the driver alone
  (sqlite3, psycopg; one connection, no transaction per page): the least any reader of the
  same items does.

Printed: records per second of each, the ratio of their times, and the peak memory
(tracemalloc, a pass of its own) of ``Store.dataset`` at ``--sessions`` and at four times as
many: the same per record, whatever the dataset's size (streamed a page at a time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import Results, environment, flatten, make_turns, measure, write_json
from turnstore import NewRun, Store

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
# A chain: a run's path is its session's runs up to it: those runs (the outer loop: SQLite
# keeps a CROSS JOIN's order), then each one's items by its key (PostgreSQL's items are keyed by
# session first: {scope} names it).
ITEMS_SQL = (
    "SELECT i.data FROM runs r CROSS JOIN items i "
    "WHERE {scope}i.run_id = r.id AND r.session_id = {sid} AND r.id <= {run} "
    "ORDER BY r.id, i.position"
)
RUNS_SQL = "SELECT session_id, id FROM runs ORDER BY session_id, id"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def fill(store: Store, first: int, sessions: int, runs: int) -> None:
    """Sessions ``first`` .. ``first + sessions - 1``, each a chain of ``runs`` SDK turns."""
    for n in range(first, first + sessions):
        turns = make_turns(runs, seed=n)
        chain = [
            NewRun(flatten([turn]), parent=None if i == 0 else i - 1)
            for i, turn in enumerate(turns)
        ]
        await store.add_runs(f"s{n:05}", chain, head=runs - 1)


async def stream(store: Store, expect: int) -> None:
    count = 0
    async for record in store.dataset():
        count += len(record.input) > 0
    assert count == expect, (count, expect)


def sqlite_floor(path: Path, expect: int) -> Callable[[], Awaitable[None]]:
    async def read() -> None:
        with sqlite3.connect(path) as conn:
            runs = conn.execute(RUNS_SQL).fetchall()
            query = ITEMS_SQL.format(scope="", sid=":sid", run=":run")
            for sid, run in runs:
                rows = conn.execute(query, {"sid": sid, "run": run})
                items = [json.loads(data) for (data,) in rows]
                assert items
        conn.close()
        assert len(runs) == expect

    return read


def postgres_floor(url: str, schema: str, expect: int) -> Callable[[], Awaitable[None]]:
    import psycopg

    async def read() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            runs = conn.execute(RUNS_SQL).fetchall()
            scope = "i.session_id = r.session_id AND "
            query = ITEMS_SQL.format(scope=scope, sid="%(sid)s", run="%(run)s")
            for sid, run in runs:
                rows = conn.execute(query, {"sid": sid, "run": run}).fetchall()
                # The column is text or jsonb: the driver decodes jsonb itself.
                items = [json.loads(data) if isinstance(data, str) else data for (data,) in rows]
                assert items
        assert len(runs) == expect

    return read


async def peak_mib(store: Store, expect: int) -> float:
    """The peak memory traced while streaming the whole dataset, in MiB."""
    tracemalloc.start()
    try:
        await stream(store, expect)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


async def bench_store(
    store: Store, label: str, floor: Callable[[int], Callable[[], Awaitable[None]]], args: Any
) -> tuple[Results, list[str]]:
    results, lines = Results(), []
    await fill(store, 0, args.sessions, args.runs)
    records = args.sessions * args.runs
    case = f"{label}: {records:,} runs"
    _log(f"  {case}")
    timings = {
        "Store.dataset": await measure(lambda: stream(store, records), repeats=args.repeats),
        "plain SQL": await measure(floor(records), repeats=args.repeats),
    }
    for contender, timing in timings.items():
        results.add(case, contender, timing)
    ours, theirs = timings["Store.dataset"].median_ms, timings["plain SQL"].median_ms
    lines.append(
        f"{case}: Store.dataset {records / ours * 1000:,.0f} records/s, plain SQL "
        f"{records / theirs * 1000:,.0f} records/s; Store.dataset / plain SQL = "
        f"{ours / theirs:.2f}x (min {timings['Store.dataset'].min_ms / theirs:.2f}x)"
    )
    small = await peak_mib(store, records)
    await fill(store, args.sessions, 3 * args.sessions, args.runs)
    large = await peak_mib(store, 4 * records)
    lines.append(
        f"{label}: peak memory streaming {records:,} runs {small:.1f} MiB, "
        f"{4 * records:,} runs {large:.1f} MiB ({large / small:.2f}x)"
    )
    return results, lines


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100, help="sessions")
    parser.add_argument("--runs", type=int, default=20, help="runs per session")
    parser.add_argument("--repeats", type=int, default=5, help="samples of each contender")
    parser.add_argument("--postgres", default=POSTGRES, help="the PostgreSQL server's URL")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--dir", help="where the SQLite file goes (default: a temporary one)")
    args = parser.parse_args(argv)
    everything, lines = Results(), []
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        path = Path(directory) / "turnstore.db"
        async with Store.open(path) as store:
            found, said = await bench_store(store, "SQLite", lambda n: sqlite_floor(path, n), args)
        everything.rows.extend(found.rows)
        lines += said
    if not args.no_postgres:
        schema = f"bench_dataset_{uuid.uuid4().hex[:6]}"
        try:
            async with Store.open(args.postgres, schema=schema) as store:
                found, said = await bench_store(
                    store,
                    "PostgreSQL",
                    lambda n: postgres_floor(args.postgres, schema, n),
                    args,
                )
            everything.rows.extend(found.rows)
            lines += said
        finally:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    for line in lines:
        print(line)
    if args.json:
        write_json(
            args.json,
            {
                "environment": environment(),
                "sessions": args.sessions,
                "runs": args.runs,
                "summary": lines,
                "results": [row.as_dict() for row in everything.rows],
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))

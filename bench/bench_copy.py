"""``turnstore copy`` throughput, SQLite <-> PostgreSQL, against the floor of a raw table copy.

    .venv/bin/python bench/bench_copy.py                    # 100,000 items, 3 repeats
    .venv/bin/python bench/bench_copy.py --items 20000 --repeats 5
    .venv/bin/python bench/bench_copy.py --json bench/results/copy.json
    .venv/bin/python bench/bench_copy.py --postgres postgresql://postgres@127.0.0.1/test

The source is a turnstore SQLite file of realistic SDK turns (``_common``: user message, tool
call and output, answer; about 1.5 KB a turn) in 100 sessions, written by ``Store.add_runs``.
Each repeat copies it with ``turnstore.copy`` into a fresh SQLite file, into a fresh PostgreSQL
schema, and from that schema back into a fresh file; then copies once more into the first
file, which writes nothing (the idempotent re-run). The floor moves the same rows without
turnstore: ``INSERT INTO … SELECT *`` from an attached file into the same schema (SQLite),
and ``COPY … FROM STDIN`` of every table's rows (PostgreSQL). Items per second are printed as
min / median / max over the repeats, with the ratio of the floor's median to turnstore's.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _common import environment, fill_store, history, write_json
from turnstore import Store, copy

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
# The tables a copy carries, parents first (the floor copies them too).
TABLES = ("sessions", "runs", "items", "tool_calls", "model_responses")


async def build_source(path: Path, items: int) -> int:
    """A turnstore file of ``items`` items (whole turns) in 100 sessions; how many items."""
    n = items - items % 400
    every = history(n)
    per = n // 100
    async with Store.open(path) as store:
        for index in range(100):
            await fill_store(store, f"s{index:03d}", every[index * per : (index + 1) * per])
    return n


def _pg_url(base: str, schema: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def _drop(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def timed_copy(source: str, target: str) -> float:
    """Seconds ``turnstore.copy`` takes from ``source`` to ``target``."""
    start = time.perf_counter()
    await copy(source, target)
    return time.perf_counter() - start


async def floor_sqlite(source: Path, target: Path) -> float:
    """Seconds to move every row into a fresh turnstore file by ``INSERT … SELECT``."""
    async with Store.open(target):
        pass  # the schema, as a copy's target gets it

    def move() -> None:
        conn = sqlite3.connect(target)
        try:
            conn.execute("ATTACH DATABASE ? AS source", (str(source),))
            with conn:
                for table in TABLES:
                    conn.execute(f"INSERT INTO main.{table} SELECT * FROM source.{table}")
        finally:
            conn.close()

    start = time.perf_counter()
    await asyncio.to_thread(move)
    return time.perf_counter() - start


async def floor_postgres(source: Path, base: str, schema: str) -> float:
    """Seconds to move every row into a fresh turnstore schema by ``COPY … FROM STDIN``."""
    import psycopg

    async with Store.open(_pg_url(base, schema)):
        pass

    def move() -> None:
        reader = sqlite3.connect(source)
        try:
            with psycopg.connect(base) as conn:
                conn.execute(f'SET search_path TO "{schema}"')
                for table in TABLES:
                    cursor = reader.execute(f"SELECT * FROM {table}")
                    names = ", ".join(column[0] for column in cursor.description)
                    with conn.cursor().copy(f"COPY {table} ({names}) FROM STDIN") as out:
                        for row in cursor:
                            out.write_row(row)
        finally:
            reader.close()

    start = time.perf_counter()
    await asyncio.to_thread(move)
    return time.perf_counter() - start


def _spread(values: list[float]) -> str:
    return f"{min(values):>9,.0f} {statistics.median(values):>9,.0f} {max(values):>9,.0f}"


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000, help="items in the source")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--postgres", default=POSTGRES, help="server URL (no schema)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite to SQLite only")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    rates: dict[str, list[float]] = {}

    def record(case: str, items: int, seconds: float) -> None:
        rates.setdefault(case, []).append(items / seconds)
        print(f"  {case:32} {seconds:7.2f} s  {items / seconds:>9,.0f} items/s", file=sys.stderr)

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = work / "source.db"
        n = await build_source(source, args.items)
        print(f"source: {n:,} items in 100 sessions", file=sys.stderr)
        for repeat in range(args.repeats):
            files = {name: work / f"{name}{repeat}.db" for name in ("copy", "back", "floor")}
            seconds = await timed_copy(str(source), str(files["copy"]))
            record("copy sqlite -> sqlite", n, seconds)
            record("floor INSERT..SELECT", n, await floor_sqlite(source, files["floor"]))
            seconds = await timed_copy(str(source), str(files["copy"]))
            record("re-copy (writes nothing)", n, seconds)
            if args.no_postgres:
                continue
            schema, floor_schema = (f"bench_{uuid.uuid4().hex[:10]}" for _ in range(2))
            url = _pg_url(args.postgres, schema)
            try:
                record("copy sqlite -> postgres", n, await timed_copy(str(source), url))
                record(
                    "copy postgres -> sqlite",
                    n,
                    await timed_copy(url, str(files["back"])),
                )
                record(
                    "floor COPY FROM STDIN",
                    n,
                    await floor_postgres(source, args.postgres, floor_schema),
                )
            finally:
                _drop(args.postgres, schema)
                _drop(args.postgres, floor_schema)
    print(f"\n{'case':32} {'items/s: min':>12} {'median':>9} {'max':>9}")
    for case, values in rates.items():
        print(f"{case:32}    {_spread(values)}")
    pairs = [("copy sqlite -> sqlite", "floor INSERT..SELECT")]
    if not args.no_postgres:
        pairs.append(("copy sqlite -> postgres", "floor COPY FROM STDIN"))
    print()
    for ours, floor in pairs:
        ratio = statistics.median(rates[floor]) / statistics.median(rates[ours])
        print(f"{ours}: the floor ({floor}) is {ratio:.1f}x faster (medians)")
    if args.json:
        write_json(args.json, {"environment": environment(), "items": n, "items_per_s": rates})
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))

"""What the ANALYZE at the end of a bulk load into PostgreSQL costs (``turnstore copy``,
``turnstore import``: ``store.copying.refresh_statistics``).

    .venv/bin/python bench/bench_analyze.py                      # 100,000 and 1,000,000 runs
    .venv/bin/python bench/bench_analyze.py --runs 100000 --repeats 5
    .venv/bin/python bench/bench_analyze.py --postgres postgresql://postgres@127.0.0.1/test

For each size, a fresh schema holds a chain of that many runs written by the suite's
set-based builder (``tests/chains.py``; not timed: 2.02 items a run, a tool call, model call
and span every 100th), as a copy would leave it. Two cases, each a call of
``refresh_statistics`` as the copy's end makes it: ``analyse`` (the load wrote every run:
past the threshold, so the eight tables are analysed) and ``check only`` (a load of one
run: the threshold read, nothing analysed). Wall-clock milliseconds, min / median / max.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from pathlib import Path

from _common import measure
from turnstore import Store
from turnstore.store import copying

# The suite's set-based builder of long sessions (imported from tests/, as a test helper).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from chains import build_chain

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


async def bench(url: str, runs: int, repeats: int) -> None:
    schema = f"bench_analyze_{uuid.uuid4().hex[:6]}"
    try:
        async with Store.open(url, schema=schema) as store:
            await build_chain(store, "long", runs)
            for case, written in (("analyse", runs), ("check only", 1)):
                timing = await measure(
                    lambda n=written: copying.refresh_statistics(store, n),
                    repeats=repeats,
                    warmup=0,
                )
                print(
                    f"{runs:>9,} runs, {case:<10}: {timing.min_ms:8.1f} / "
                    f"{timing.median_ms:8.1f} / {timing.max_ms:8.1f} ms",
                    flush=True,
                )
    finally:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3, help="samples of each case")
    parser.add_argument("--postgres", default=POSTGRES, help="the PostgreSQL server's URL")
    args = parser.parse_args(argv)
    for runs in args.runs:
        await bench(args.postgres, runs, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))

"""What pricing costs ``Store.usage``: with cost (the default) against ``cost=False``.

    .venv/bin/python bench/bench_cost.py                       # 100,000 runs, SQLite and PostgreSQL
    .venv/bin/python bench/bench_cost.py --runs 20000 --repeats 3 --no-postgres
    .venv/bin/python bench/bench_cost.py --json bench/results/cost.json

The store holds ``--runs`` runs in ten sessions of two users (chains written by the test
suite's set-based builder, ``tests/chains.py``; not timed): every run has its tokens and a
model (``gpt-4.1-mini``), every 100th a recorded model call (``scripted``, priced by an entry
layered over the shipped table). Each case is ``Store.usage(group)`` over the whole store,
timed side by side without cost and with it (the second statement, by model and day, and the
pricing in Python); the ratio printed is with over without.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from pathlib import Path

from _common import Results, environment, measure_side_by_side, medians_table, settle, write_json
from turnstore import Prices, Store
from turnstore.core.ops import Op, Query

# The suite's set-based builder of long sessions (imported from tests/, as a test helper).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from chains import build_chain

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
GROUPS = ("session", "user", "model", "day", "run")
SESSIONS = 10
PRICES = Prices.default().with_entries([{"model": "scripted", "input": 1.0, "output": 2.0}])
WITHOUT, WITH = "tokens only", "with cost"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def fill(store: Store, runs: int) -> None:
    """``runs`` runs in ``SESSIONS`` sessions of two users, each run with a model."""
    for n in range(SESSIONS):
        sid = f"cost-{n}"
        await build_chain(store, sid, max(1, runs // SESSIONS))
        await store.update_session(sid, user_id=f"user-{n % 2}")

    def name_models() -> Op[None]:
        yield Query("UPDATE runs SET model = 'gpt-4.1-mini'", raw=True)

    await store.backend.run(name_models, write=True)


async def bench_store(store: Store, label: str, runs: int, repeats: int) -> Results:
    """Each group with and without cost, side by side."""
    await fill(store, runs)
    if store.dialect == "sqlite":
        settle(store.label)
    results = Results()
    for group in GROUPS:
        _log(f"  {label}: usage by {group} @{runs:,} runs")
        timings = await measure_side_by_side(
            {
                WITHOUT: lambda group=group: store.usage(group, cost=False),
                WITH: lambda group=group: store.usage(group, prices=PRICES),
            },
            repeats=repeats,
        )
        for contender, timing in timings.items():
            results.add(f"{label}: usage by {group}", contender, timing)
    return results


def ratios(results: Results) -> list[str]:
    """Each case's median with cost over its median without."""
    lines = []
    for case in dict.fromkeys(row.case for row in results.rows):
        without, with_cost = results.median_ms(case, WITHOUT), results.median_ms(case, WITH)
        if without and with_cost:
            lines.append(f"{case}: with cost / tokens only = {with_cost / without:.2f}x")
    return lines


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the store")
    parser.add_argument("--repeats", type=int, default=5, help="samples of each case")
    parser.add_argument("--postgres", default=POSTGRES, help="the PostgreSQL server's URL")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--dir", help="where the SQLite file goes (default: a temporary one)")
    args = parser.parse_args(argv)
    everything = Results()
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        async with Store.open(Path(directory) / "turnstore.db") as store:
            found = await bench_store(store, "SQLite", args.runs, args.repeats)
            everything.rows.extend(found.rows)
    if not args.no_postgres:
        schema = f"bench_cost_{uuid.uuid4().hex[:6]}"
        try:
            async with Store.open(args.postgres, schema=schema) as store:
                found = await bench_store(store, "PostgreSQL", args.runs, args.repeats)
                everything.rows.extend(found.rows)
        finally:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print(medians_table(everything, [WITHOUT, WITH]))
    print()
    for line in ratios(everything):
        print(line)
    if args.json:
        write_json(
            args.json,
            {
                "environment": environment(),
                "runs": args.runs,
                "results": [row.as_dict() for row in everything.rows],
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))

"""Write throughput on one node against the same schema distributed across Citus workers.

    .venv/bin/python bench/bench_citus.py --url postgresql://postgres@127.0.0.1:9700/postgres
    .venv/bin/python bench/bench_citus.py --url ... --writers 16 --turns 20 --repeats 5

``--url`` names a Citus coordinator with its workers added (build Citus from its public
source, per its README; it is in no package registry). Two contenders on that one server:

- ``one node``: turnstore's tables in a schema of their own, left local to the coordinator
  (plain PostgreSQL, with Citus loaded);
- ``distributed``: the same, distributed across the workers as docs/scaling.md says.

Each repeat writes ``--turns`` SDK turns (three ``add_items`` each, bench/_common.py) from
each of ``--writers`` concurrent writers, one session each, through one store; the contenders
alternate. Printed: turns per second of each repeat (min/median/max) and the ratio distributed
/ one node. On one machine the workers share its cores with the coordinator: the figure
measures what routing costs and what parallel workers win there, not a fleet of servers.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import environment, format_table, make_turns, write_json, write_turns
from _common import run as run_async
from turnstore import Store, StructuredSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from citus import distribution_sql  # the steps of docs/scaling.md

ONE_NODE = "one node"
DISTRIBUTED = "distributed"


def _admin(url: str, statements: Sequence[str]) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[call-overload]


def open_store(url: str, *, distributed: bool, writers: int) -> tuple[Store, str]:
    """A store in a fresh schema, its tables distributed (or not); and the schema's name."""
    schema = f"bench_citus_{uuid.uuid4().hex[:8]}"
    Store.open(url, schema=schema).close()  # creates the tables
    if distributed:
        steps = distribution_sql()
        _admin(url, [f'SET search_path TO "{schema}"', *steps[1:]])
    return Store.open(url, schema=schema, max_size=writers), schema


async def throughput(store: Store, writers: int, turns: int, repeat: int) -> float:
    """SDK turns per second written by ``writers`` concurrent writers, one session each."""
    sessions = [StructuredSession(f"w{repeat}-{w}", store) for w in range(writers)]
    await asyncio.gather(*(write_turns(s, make_turns(1, seed=9)) for s in sessions))  # warm up
    work = [make_turns(turns, seed=w, start=repeat * 10_000) for w in range(writers)]
    started = time.perf_counter()
    await asyncio.gather(*(write_turns(s, w) for s, w in zip(sessions, work, strict=True)))
    return writers * turns / (time.perf_counter() - started)


async def run_benchmark(url: str, writers: int, turns: int, repeats: int) -> dict[str, Any]:
    """Alternate the contenders ``repeats`` times; the turns per second of each repeat."""
    stores = {
        name: open_store(url, distributed=name == DISTRIBUTED, writers=writers)
        for name in (ONE_NODE, DISTRIBUTED)
    }
    rates: dict[str, list[float]] = {name: [] for name in stores}
    try:
        for repeat in range(repeats):
            for name, (store, _) in stores.items():
                rates[name].append(await throughput(store, writers, turns, repeat))
            print(
                f"  repeat {repeat + 1}: "
                + ", ".join(f"{n} {r[-1]:.0f}/s" for n, r in rates.items()),
                file=sys.stderr,
            )
    finally:
        for store, schema in stores.values():
            await store.aclose()
            await asyncio.to_thread(_admin, url, [f'DROP SCHEMA "{schema}" CASCADE'])
    return {"rates": rates}


def report_table(rates: dict[str, list[float]]) -> str:
    """min / median / max turns per second of each contender, and the ratio of medians."""
    rows = [
        [name, *(f"{f(values):.0f}" for f in (min, statistics.median, max))]
        for name, values in rates.items()
    ]
    ratios = [d / o for d, o in zip(rates[DISTRIBUTED], rates[ONE_NODE], strict=True)]
    rows.append(
        [
            "ratio distributed / one node",
            *(f"{f(ratios):.2f}x" for f in (min, statistics.median, max)),
        ]
    )
    return format_table(["turns/s (3 add_items each)", "min", "median", "max"], rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--url", required=True, help="a Citus coordinator, workers added")
    parser.add_argument("--writers", type=int, default=16, help="concurrent writers")
    parser.add_argument("--turns", type=int, default=20, help="turns each writer writes")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each contender")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    report = run_async(lambda: run_benchmark(args.url, args.writers, args.turns, args.repeats))
    report["table"] = report_table(report["rates"])
    report["environment"] = environment()
    print(report["table"])
    env = report["environment"]
    print(
        f"\n{args.writers} writers x {args.turns} turns, {args.repeats} repeats; "
        f"{env['platform']}, {env['cpus']} CPUs"
    )
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

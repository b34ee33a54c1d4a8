"""Annotating a run and reading a run's annotations, in a short and a long conversation.

    .venv/bin/python bench/bench_annotations.py                  # 1,000 and 100,000 runs
    .venv/bin/python bench/bench_annotations.py --runs 1000 20000 --repeats 50
    .venv/bin/python bench/bench_annotations.py --json bench/results/annotations.json
    .venv/bin/python bench/bench_annotations.py --no-postgres

Each session is a chain of runs written by the test suite's set-based builder
(``tests/chains.py``; not timed). The cases, each an awaited call:

- ``annotate the head @N``: ``StructuredSession.annotate`` (the head run, as a web app's
  thumbs endpoint does) and ``Store.annotate`` of the head run by id;
- ``a run's annotations @N``: ``Store.annotations(run_id=...)`` of the head run, which holds
  the annotations the cases before wrote.

What each costs should not grow with the conversation: the ratio printed is each case's
median at the largest size over its median at the smallest (1.00x: flat).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import Results, environment, measure, medians_table, settle, write_json
from turnstore import Store, StructuredSession

# The suite's set-based builder of long sessions (imported from tests/, as a test helper).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from chains import build_chain

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
CASES = ("session.annotate (head)", "Store.annotate(run)", "Store.annotations(run_id)")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def bench_store(store: Store, label: str, sizes: list[int], repeats: int) -> Results:
    """Every case at every size, in sessions of their own in ``store``."""
    results = Results()
    for runs in sizes:
        sid = f"long-{runs}"
        chain = await build_chain(store, sid, runs)
        if store.dialect == "sqlite":
            settle(store.label)
        session = StructuredSession(sid, store)
        head = chain.last_run
        actions: dict[str, Callable[[], Awaitable[Any]]] = {
            CASES[0]: lambda session=session: session.annotate("thumbs", value=0),
            CASES[1]: lambda head=head: store.annotate(head, "label", label="checked"),
            CASES[2]: lambda head=head: store.annotations(run_id=head),
        }
        for case, action in actions.items():
            _log(f"  {label}: {case} @{runs:,} runs")
            results.add(f"{label}: {case}", f"@{runs:,}", await measure(action, repeats=repeats))
    return results


def _ratios(results: Results, sizes: list[int]) -> list[str]:
    """Each case's median at the largest size over its median at the smallest."""
    small, large = f"@{min(sizes):,}", f"@{max(sizes):,}"
    lines = []
    for case in dict.fromkeys(row.case for row in results.rows):
        low, high = results.median_ms(case, small), results.median_ms(case, large)
        if low and high:
            lines.append(f"{case}: {large} / {small} = {high / low:.2f}x")
    return lines


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--runs", type=int, nargs="+", default=[1_000, 100_000], help="session lengths"
    )
    parser.add_argument("--repeats", type=int, default=30, help="samples of each case")
    parser.add_argument("--postgres", default=POSTGRES, help="the PostgreSQL server's URL")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--dir", help="where the SQLite file goes (default: a temporary one)")
    args = parser.parse_args(argv)
    sizes = sorted(args.runs)
    everything = Results()
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        async with Store.open(Path(directory) / "turnstore.db") as store:
            everything.rows.extend((await bench_store(store, "SQLite", sizes, args.repeats)).rows)
    if not args.no_postgres:
        schema = f"bench_annotations_{uuid.uuid4().hex[:6]}"
        try:
            async with Store.open(args.postgres, schema=schema) as store:
                found = await bench_store(store, "PostgreSQL", sizes, args.repeats)
                everything.rows.extend(found.rows)
        finally:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    contenders = [f"@{runs:,}" for runs in sizes]
    print(medians_table(everything, contenders))
    print()
    for line in _ratios(everything, sizes):
        print(line)
    if args.json:
        write_json(
            args.json,
            {
                "environment": environment(),
                "runs": sizes,
                "results": [row.as_dict() for row in everything.rows],
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))

"""Comparing two long courses of a conversation: ``Store.diff`` of two branches of N runs.

    .venv/bin/python bench/bench_diff.py                  # two branches of 1,000 runs, 5 samples
    .venv/bin/python bench/bench_diff.py --runs 5000 --repeats 7
    .venv/bin/python bench/bench_diff.py --json bench/results/diff.json --no-postgres

The session holds a course of ``--runs`` runs and an edit of its second run continued to as
many runs (the bench's deterministic turns, written by ``Store.add_runs``; not timed), so the
two branches share one run and differ in every run after it. A sample is one awaited call:

- ``diff``: ``Store.diff(first, None, session_id=...)``, the named old course against the
  active one, everything compared;
- ``read both``: the floor of that work, the two branches read whole (``Store.path_view``, the
  reads ``diff`` makes) and nothing compared.

The ratio says what comparing costs on top of reading; the medians what a user waits.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from pathlib import Path

from _common import (
    ITEMS_PER_TURN,
    Results,
    environment,
    fill_store,
    flatten,
    make_turns,
    measure,
    medians_table,
    settle,
    write_json,
)
from turnstore import NewRun, Store

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
SID = "diffed"
DIFF, READ = "diff", "read both"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _two_courses(store: Store, runs: int) -> None:
    """The session: ``runs`` runs, then run 2 edited and continued to ``runs`` runs."""
    await fill_store(store, SID, flatten(make_turns(runs)))
    course = await store.runs(SID)
    await store.name_branch(SID, course[-1].id, "first")
    turns = make_turns(runs - 1, seed=1)
    edited = [NewRun(flatten(turns[:1]), parent_id=course[0].id)]
    edited += [NewRun(flatten([turn]), parent=index) for index, turn in enumerate(turns[1:])]
    for start in range(0, len(edited), 2_000):  # add_runs takes bounded batches
        batch = edited[start : start + 2_000]
        if start:
            head = (await store.session(SID)).head_run_id  # type: ignore[union-attr]
            batch = [NewRun(batch[0].items, parent_id=head), *batch[1:]]
        await store.add_runs(SID, batch, head=len(batch) - 1)


async def _case(label: str, store: Store, runs: int, repeats: int, results: Results) -> None:
    await _two_courses(store, runs)
    first = next(b for b in await store.branches(SID) if b.name == "first").leaf_run_id

    async def diff() -> None:
        result = await store.diff("first", None, session_id=SID)
        if len(result.runs) != runs - 1:
            raise AssertionError(f"expected {runs - 1} aligned runs, got {len(result.runs)}")

    async def read_both() -> None:
        for through in (first, None):
            await store.path_view(SID, through=through, start=0, limit=2**62)

    case = f"{label}: two branches of {runs:,} runs"
    results.add(case, DIFF, await measure(diff, repeats=repeats))
    results.add(case, READ, await measure(read_both, repeats=repeats))


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--postgres", default=POSTGRES)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--dir", default=None, help="where the SQLite file goes")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    results = Results()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "diff.db"
        async with Store.open(path) as store:
            await fill_store(store, "warm", flatten(make_turns(1)))
            settle(path)
            _log(f"SQLite: building two courses of {args.runs:,} runs")
            await _case("SQLite", store, args.runs, args.repeats, results)
    if not args.no_postgres:
        schema = f"bench_diff_{uuid.uuid4().hex[:8]}"
        store = Store.open(args.postgres, schema=schema)
        try:
            _log(f"PostgreSQL: building two courses of {args.runs:,} runs")
            await _case("PostgreSQL", store, args.runs, args.repeats, results)
        finally:
            await store.aclose()
            await _drop(args.postgres, schema)
    print(medians_table(results, [DIFF, READ]))
    for row in results.rows:
        if row.contender == DIFF:
            floor = results.median_ms(row.case, READ)
            ratio = row.timing.median_ms / floor if floor else float("nan")
            samples = sorted(ns / 1e6 for ns in row.timing.samples_ns)
            print(
                f"{row.case}: diff {samples[0]:.1f} / {row.timing.median_ms:.1f} / "
                f"{samples[-1]:.1f} ms (min/median/max), {ratio:.2f}x reading both"
            )
    if args.json:
        write_json(
            args.json,
            {
                "environment": environment(),
                "runs": args.runs,
                "items_per_turn": ITEMS_PER_TURN,
                "results": [row.as_dict() for row in results.rows],
            },
        )
    return 0


async def _drop(url: str, schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))

"""The write and read goals of issue 32, as ratios over rounds that alternate the backends.

    .venv/bin/python bench/bench_goals.py                 # 5 rounds each, 4,000 and 20,000 items
    .venv/bin/python bench/bench_goals.py --rounds 3 --sizes 1000,4000 --no-postgres
    .venv/bin/python bench/bench_goals.py --json bench/results/goals.json
    .venv/bin/python bench/bench_goals.py --reads         # the read goals alone (no write turns)

A round runs the write-turn and read cases of ``bench_session.py`` (SQLite: turnstore against
``SQLiteSession`` and the floors) or of ``bench_postgres.py`` (PostgreSQL: turnstore against
``SQLAlchemySession`` and the write floor) at each size, on fresh databases; SQLite and
PostgreSQL rounds alternate. Each ratio is turnstore's median over the reference's median in
one round; the table gives its min / median / max over the rounds (wall clock), the median of
the CPU ratios (SQLite: every thread of this process; PostgreSQL: the client only), and the
goal (bench/README.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import bench_postgres
import bench_session
from _common import Results, environment, format_table, write_json
from _common import run as run_async


@dataclass(frozen=True)
class Goal:
    """A ratio of two recorded figures (case, contender) and its limit."""

    label: str
    ours: tuple[str, str]
    reference: tuple[str, str]
    limit: float


def sqlite_goals(sizes: Sequence[int]) -> list[Goal]:
    """The SQLite goals at each size."""
    ours, sdk, floor = bench_session.TURNSTORE, bench_session.SQLITE, bench_session.FLOOR
    goals = []
    for n in sizes:
        write, read = f"write turn @{n}", f"get_items() @{n}"
        goals += [
            Goal(f"SQLite write turn vs SQLiteSession @{n}", (write, ours), (write, sdk), 0.5),
            Goal(f"SQLite write turn vs the floor @{n}", (write, ours), (write, floor), 1.5),
            Goal(
                f"SQLite full read vs SQLiteSession @{n}",
                (read, ours),
                (read, sdk),
                0.35 if n >= 20_000 else 0.5,
            ),
            Goal(f"SQLite full read vs the floor @{n}", (read, ours), (read, floor), 1.3),
        ]
    tail = f"get_items({bench_session.TAIL}) @{min(sizes)}"
    goals.append(
        Goal(f"SQLite last-20 vs SQLiteSession @{min(sizes)}", (tail, ours), (tail, sdk), 1.0)
    )
    return goals


def postgres_goals(sizes: Sequence[int]) -> list[Goal]:
    """The PostgreSQL goals at each size."""
    ours, sdk = bench_postgres.TURNSTORE, bench_postgres.SQLALCHEMY
    goals = []
    for n in sizes:
        write, read = f"write turn @{n}", f"get_items() @{n}"
        tail = f"get_items({bench_postgres.TAIL}) @{n}"
        goals += [
            Goal(
                f"PostgreSQL write turn vs SQLAlchemySession @{n}", (write, ours), (write, sdk), 0.5
            ),
            Goal(
                f"PostgreSQL write turn vs the floor @{n}",
                (write, ours),
                (write, bench_postgres.FLOOR),
                1.5,
            ),
            Goal(f"PostgreSQL full read vs SQLAlchemySession @{n}", (read, ours), (read, sdk), 0.5),
            Goal(f"PostgreSQL last-20 vs SQLAlchemySession @{n}", (tail, ours), (tail, sdk), 0.3),
        ]
    return goals


async def sqlite_round(
    directory: Path, sizes: Sequence[int], quick: bool, writes: bool = True
) -> Results:
    """One SQLite round: writes (unless not ``writes``) and full reads at each size, the
    last-20 read at the smallest."""
    base = bench_session.QUICK if quick else bench_session.Config()
    config = replace(
        base,
        history_sizes=tuple(sizes),
        write_sizes=tuple(sizes) if writes else (),
        tail_size=min(sizes),
    )
    results = Results()
    contenders = [
        bench_session.turnstore_contender(directory),
        bench_session.sqlite_session_contender(directory),
    ]
    await bench_session.history_cases(contenders, config, results, directory)
    await bench_session.tail_cases(contenders, [], config, results, lambda _: None)
    return results


async def postgres_round(
    url: str, sizes: Sequence[int], quick: bool, writes: bool = True
) -> Results:
    """One PostgreSQL round: at each size, a write turn (unless not ``writes``), the full read
    and the last-20 read."""
    base = bench_postgres.QUICK if quick else bench_postgres.Config()
    results = Results()
    contenders = [
        bench_postgres.turnstore_contender(url, 2),
        bench_postgres.sqlalchemy_contender(url, 2),
    ]
    for n in sizes:
        config = replace(base, history_sizes=(n,), write_size=n if writes else None, tail_size=n)
        await bench_postgres.history_cases(contenders, config, results, lambda _: None)
    return results


def ratios(results: Results, goal: Goal) -> tuple[float | None, float | None]:
    """The goal's wall and CPU ratios in one round's results."""
    out: list[float | None] = []
    for cpu in (False, True):
        ours, ref = (
            results.median_ms(*goal.ours, cpu=cpu),
            results.median_ms(*goal.reference, cpu=cpu),
        )
        out.append(None if ours is None or not ref else ours / ref)
    return out[0], out[1]


def table(
    backends: Sequence[tuple[Sequence[Goal], Sequence[Results]]],
) -> tuple[str, list[dict[str, Any]]]:
    """The printed table and its rows: min / median / max of each goal's ratio, over the
    rounds of its own backend (both benches name their contenders "turnstore" and "floor")."""
    rows, records = [], []
    for goal, rounds in [(goal, rounds) for goals, rounds in backends for goal in goals]:
        pairs = [ratios(results, goal) for results in rounds]
        wall = sorted(w for w, _ in pairs if w is not None)
        cpu = [c for _, c in pairs if c is not None]
        if not wall:
            continue
        median = statistics.median(wall)
        met = sum(w <= goal.limit for w in wall)
        rows.append(
            [
                goal.label,
                f"{wall[0]:.2f} / {median:.2f} / {wall[-1]:.2f}",
                f"{statistics.median(cpu):.2f}" if cpu else "-",
                f"<= {goal.limit:g}x",
                f"{met}/{len(wall)}",
            ]
        )
        records.append({"label": goal.label, "limit": goal.limit, "wall": wall, "cpu": cpu})
    headers = ["figure (turnstore / reference)", "min / median / max", "cpu median", "goal", "met"]
    return format_table(headers, rows), records


async def bench(
    rounds: int,
    sizes: Sequence[int],
    directory: Path,
    postgres: str | None,
    log: Callable[[str], None],
    quick: bool = False,
    writes: bool = True,
) -> dict[str, Any]:
    """``rounds`` SQLite rounds and as many PostgreSQL ones (when ``postgres``), alternating;
    without ``writes``, the read goals alone."""
    done: dict[str, list[Results]] = {"sqlite": [], "postgres": []}
    for index in range(rounds):
        log(f"round {index + 1}/{rounds}: SQLite")
        # Fresh files each round (the cases name their files by size alone).
        with tempfile.TemporaryDirectory(dir=directory) as fresh:
            done["sqlite"].append(await sqlite_round(Path(fresh), sizes, quick, writes))
        if postgres is not None:
            log(f"round {index + 1}/{rounds}: PostgreSQL")
            done["postgres"].append(await postgres_round(postgres, sizes, quick, writes))
    printed, records = table(
        [(sqlite_goals(sizes), done["sqlite"]), (postgres_goals(sizes), done["postgres"])]
    )
    return {"environment": environment(), "goals": records, "table": printed}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per backend")
    parser.add_argument("--sizes", default="4000,20000", help="history sizes, in items")
    parser.add_argument("--url", default=bench_postgres.DEFAULT_URL, help="PostgreSQL server")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite rounds only")
    parser.add_argument("--quick", action="store_true", help="fewer repeats per case")
    parser.add_argument("--reads", action="store_true", help="the read goals alone")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--dir", metavar="DIR", help="where the database files go (a temp dir)")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    postgres = None if args.no_postgres else args.url
    with tempfile.TemporaryDirectory(prefix="turnstore-goals-", dir=args.dir) as directory:
        report = run_async(
            lambda: bench(
                args.rounds,
                sizes,
                Path(directory),
                postgres,
                lambda message: print(message, file=sys.stderr, flush=True),
                args.quick,
                not args.reads,
            )
        )
    print(report["table"])
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

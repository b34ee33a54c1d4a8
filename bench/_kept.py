"""What the benches of a corpus built once and kept between runs share (bench_catalogue,
bench_queries): their command line (``--postgres URL``, ``--dir``, ``--json``), raw SQL on the
store (the corpus's bulk statements, ``ANALYZE``, row counts), and their report: the targets'
table, the JSON file, the exit status (1 if a target is missed)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from _common import Results, Target, environment, run, targets_table, write_json
from turnstore import Store
from turnstore.core.ops import Fetch, Op, Query


async def execute(store: Store, statements: Sequence[str]) -> None:
    """Run ``statements`` (raw SQL, in the store's dialect) in one write transaction."""

    def op() -> Op[None]:
        for statement in statements:
            yield Query(statement, raw=True)

    await store.backend.run(op, write=True)


async def analyze(store: Store) -> None:
    """Planner statistics, as a live database would have them after its first autovacuum."""
    await execute(store, ["ANALYZE"])


async def count(store: Store, table: str, where: str = "") -> int:
    """How many rows ``table`` holds (``where``: of those that hold it)."""
    statement = f"SELECT count(*) FROM {table}" + (f" WHERE {where}" if where else "")

    def op() -> Op[int]:
        row = yield Query(statement, fetch=Fetch.ONE, raw=True)
        return int(row[0])

    return await store.backend.run(op, write=False)


def report(results: Results, targets: Sequence[Target], json_path: str | None, **facts: Any) -> int:
    """Print the targets' verdicts, write the JSON file if asked (``facts`` beside the
    results); the exit status: 1 if a target is missed."""
    evaluated = [target.evaluate(results) for target in targets]
    print()
    print(targets_table(evaluated))
    if json_path:
        write_json(
            json_path,
            {
                "environment": environment(),
                **facts,
                "results": [row.as_dict() for row in results.rows],
                "targets": evaluated,
            },
        )
    return 0 if all(t["verdict"] != "MISS" for t in evaluated) else 1


def main(
    doc: str,
    size: tuple[str, int, str],
    repeats: int,
    bench: Callable[[argparse.Namespace], Coroutine[Any, Any, int]],
    argv: Sequence[str] | None,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Parse the command line (``size``: the corpus's option, its default and help;
    ``options`` adds a bench's own) and run ``bench``."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    option, default, help = size
    parser.add_argument(option, type=int, default=default, help=help)
    parser.add_argument("--repeats", type=int, default=repeats, help="timed calls per case")
    parser.add_argument("--postgres", metavar="URL", help="benchmark PostgreSQL instead")
    parser.add_argument("--dir", default="bench/results", help="where the SQLite file is kept")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    if options is not None:
        options(parser)
    args = parser.parse_args(argv)
    if not args.postgres:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    result: int = run(lambda: bench(args))
    return result

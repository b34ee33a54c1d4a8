"""turnstore on PostgreSQL against the Agents SDK's ``SQLAlchemySession``, on the same server.

    .venv/bin/python bench/bench_postgres.py            # the default run (about a minute)
    .venv/bin/python bench/bench_postgres.py --quick    # a smoke run
    .venv/bin/python bench/bench_postgres.py --url postgresql://user@host/db --json out.json

Both contenders use the same database (``--url``, default ``TURNSTORE_TEST_POSTGRES_URL`` or
the local test server): turnstore in a schema of its own per case, ``SQLAlchemySession``
(``postgresql+psycopg``, async) in tables of its own per case; all are dropped afterwards.

Cases: one SDK turn written (three ``add_items``), the full history read, the last 20 read,
a branch at the middle of a long session (turnstore: ``edit``; ``SQLAlchemySession`` has no
tree, so its figure is what an application does instead: copy the first half into a new
session), a phrase searched in one session (turnstore: ``Store.search``; ``SQLAlchemySession``:
``ILIKE`` over its JSON rows), and write throughput in runs (SDK turns) per second with 1, 4
and 16 concurrent writers, each on a session of its own, sharing one store or engine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from _common import (
    ITEMS_PER_TURN,
    Contender,
    Database,
    Results,
    close_all,
    environment,
    fill_store,
    flatten,
    format_table,
    history,
    make_turns,
    measure_side_by_side,
    medians_table,
    open_all,
    reader,
    turn_writer,
    write_json,
    write_turns,
)
from _common import run as run_async
from _write_floor import TEMPLATE, postgres_floor_writer
from turnstore import Store, StructuredSession

TURNSTORE = "turnstore"
SQLALCHEMY = "SQLAlchemySession"
CONTENDERS = (TURNSTORE, SQLALCHEMY)
# The write turn's floor: turnstore's rows for the turn inserted by executemany in one
# transaction, one pipeline (``_write_floor``).
FLOOR = "floor"
TAIL = 20
PHRASE = "refund invoice"  # two words that occur together in the generated texts

DEFAULT_URL = os.environ.get(
    "TURNSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


@dataclass(frozen=True)
class Config:
    """Sizes and repeat counts of one run."""

    history_sizes: tuple[int, ...] = (1_000, 4_000)  # items, for full reads
    # Items of history when one turn's write is timed (None: no write turn).
    write_size: int | None = 1_000
    tail_size: int = 20_000  # items, for the last-20 read
    branch_runs: int = 5_000  # runs (SDK turns) of the session branched at its middle
    writers: tuple[int, ...] = (1, 4, 16)  # concurrent writers for throughput
    throughput_turns: int = 40  # turns each writer writes
    write_repeats: int = 40
    read_repeats: int = 15
    tail_repeats: int = 200
    branch_repeats: int = 10
    search_repeats: int = 30
    warmup: int = 2


QUICK = Config(
    history_sizes=(1_000,),
    tail_size=4_000,
    branch_runs=1_000,
    throughput_turns=10,
    write_repeats=12,
    read_repeats=5,
    tail_repeats=40,
    branch_repeats=4,
    search_repeats=10,
    warmup=1,
)
# For tests of the benchmark code itself: every case, minimal sizes, one sample each.
TINY = Config(
    history_sizes=(40,),
    write_size=40,
    tail_size=40,
    branch_runs=8,
    writers=(1, 2),
    throughput_turns=2,
    write_repeats=1,
    read_repeats=1,
    tail_repeats=1,
    branch_repeats=1,
    search_repeats=1,
    warmup=0,
)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Contenders: a fresh schema (turnstore) or fresh tables (SQLAlchemySession) per database


@dataclass
class PgDatabase(Database):
    """A database of one contender, with the handles the search case queries directly."""

    store: Store | None = None
    url: str = ""
    schema: str = ""
    engine: Any = None
    messages_table: str = field(default="")


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def turnstore_contender(url: str, max_size: int) -> Contender:
    """turnstore's ``StructuredSession`` on one ``Store`` per database (a schema of its own)."""

    def create(label: str) -> Database:
        schema = f"bench_{label.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
        store = Store.open(url, schema=schema, max_size=max_size)

        async def fill(session_id: str, items: Sequence[Any]) -> None:
            await fill_store(store, session_id, items)

        async def on_close() -> None:
            await store.aclose()
            await asyncio.to_thread(_drop_schema, url, schema)

        return PgDatabase(
            lambda sid: StructuredSession(sid, store),
            fill=fill,
            on_close=on_close,
            store=store,
            url=url,
            schema=schema,
        )

    return Contender(TURNSTORE, create)


def _sqlalchemy_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"postgresql+psycopg://{rest}" if scheme in ("postgresql", "postgres") else url


def sqlalchemy_contender(url: str, max_size: int) -> Contender:
    """The SDK's ``SQLAlchemySession`` (async psycopg) on tables of its own per database."""
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    def create(label: str) -> Database:
        prefix = f"bench_{label.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
        tables = {"sessions_table": f"{prefix}_sessions", "messages_table": f"{prefix}_messages"}
        engine = create_async_engine(_sqlalchemy_url(url), pool_size=max_size, max_overflow=0)

        def open_session(session_id: str) -> Any:
            return SQLAlchemySession(session_id, engine=engine, create_tables=True, **tables)

        async def on_close() -> None:
            from sqlalchemy import text

            async with engine.begin() as conn:
                for table in (tables["messages_table"], tables["sessions_table"]):
                    await conn.execute(text(f'DROP TABLE IF EXISTS "{table}" CASCADE'))
            await engine.dispose()

        return PgDatabase(
            open_session, on_close=on_close, engine=engine, messages_table=tables["messages_table"]
        )

    return Contender(SQLALCHEMY, create)


# ---------------------------------------------------------------------------------------------
# Cases


async def history_cases(
    contenders: Sequence[Contender], config: Config, results: Results, log: Any
) -> None:
    """Writes of one turn, full reads and the last-20 read, each on a session of its size."""
    writes = () if config.write_size is None else (config.write_size,)
    for size in sorted({*config.history_sizes, *writes, config.tail_size}):
        log(f"  history of {size:,} items")
        dbs = await open_all(contenders, f"h{size}", history(size), PgDatabase)
        try:
            sessions = {name: db.session("bench") for name, db in dbs.items()}
            if size in config.history_sizes:
                timings = await measure_side_by_side(
                    {n: reader(s, limit=None, expect=size) for n, s in sessions.items()},
                    repeats=config.read_repeats,
                    warmup=config.warmup,
                )
                for name, timing in timings.items():
                    results.add(f"get_items() @{size}", name, timing)
            if size == config.tail_size:
                timings = await measure_side_by_side(
                    {n: reader(s, limit=TAIL, expect=TAIL) for n, s in sessions.items()},
                    repeats=config.tail_repeats,
                    warmup=config.warmup,
                )
                for name, timing in timings.items():
                    results.add(f"get_items({TAIL}) @{size}", name, timing)
            if size == config.write_size:
                count = config.warmup + config.write_repeats
                writers = {n: turn_writer(s, count=count) for n, s in sessions.items()}
                floor = await _write_floor(contenders, size, count)
                writers[FLOOR], close_floor = floor
                try:
                    timings = await measure_side_by_side(
                        writers, repeats=config.write_repeats, warmup=config.warmup
                    )
                finally:
                    await close_floor()
                for name, timing in timings.items():
                    results.add(f"write turn @{size}", name, timing, "3 add_items, 4 items")
        finally:
            await close_all(dbs)


async def _write_floor(contenders: Sequence[Contender], size: int, count: int) -> tuple[Any, Any]:
    """The floor of a write turn (``_write_floor``): a schema of its own with the same history
    and the rows turnstore stores for the timed turns; its action, and its closer."""
    (ours,) = [c for c in contenders if c.name == TURNSTORE]
    db = ours.create(f"floor{size}")
    assert isinstance(db, PgDatabase)
    try:
        await db.add_history("bench", history(size))
        # The very turns turnstore's writer writes (turn_writer's defaults), as the template.
        await write_turns(db.session(TEMPLATE), make_turns(count, seed=99, start=10**6))
        write, close = await postgres_floor_writer(db.url, db.schema, "bench")
    except BaseException:
        await db.close()
        raise

    async def close_all_of_it() -> None:
        await close()
        await db.close()

    return write, close_all_of_it


async def branch_and_search_cases(
    contenders: Sequence[Contender], config: Config, results: Results
) -> None:
    """On a session of ``branch_runs`` turns: branch at its middle, and search a phrase."""
    runs = config.branch_runs
    dbs = await open_all(contenders, f"b{runs}", flatten(make_turns(runs)), PgDatabase)
    try:
        ours = dbs[TURNSTORE].session("bench")
        middle = (await ours.runs())[runs // 2]
        theirs = dbs[SQLALCHEMY].session("bench")
        copies = iter(range(10**9))

        async def edit() -> None:
            await ours.edit(middle.id, "An edited question about the refund?")

        async def copy_prefix() -> None:
            # No tree: the application copies the history before the edited question into a
            # new session and appends the edited question there.
            items = await theirs.get_items()
            copy = dbs[SQLALCHEMY].session(f"copy-{next(copies)}")
            await copy.add_items(
                [*items[: (runs // 2) * ITEMS_PER_TURN], {"role": "user", "content": "Edited?"}]
            )

        timings = await measure_side_by_side(
            {TURNSTORE: edit, SQLALCHEMY: copy_prefix},
            repeats=config.branch_repeats,
            warmup=config.warmup,
        )
        for name, timing in timings.items():
            note = "edit()" if name == TURNSTORE else "copy the prefix to a new session"
            results.add(f"branch mid @{runs} runs", name, timing, note)

        store = dbs[TURNSTORE].store
        engine, table = dbs[SQLALCHEMY].engine, dbs[SQLALCHEMY].messages_table
        assert store is not None
        found: dict[str, int] = {}

        async def search() -> None:
            found[TURNSTORE] = len(await store.search(f'"{PHRASE}"', session_id="bench"))

        async def ilike() -> None:
            from sqlalchemy import text

            async with engine.connect() as conn:
                rows = await conn.execute(
                    text(
                        f'SELECT message_data FROM "{table}" WHERE session_id = :sid'
                        " AND message_data ILIKE :pattern ORDER BY id DESC LIMIT 20"
                    ),
                    {"sid": "bench", "pattern": f"%{PHRASE}%"},
                )
                found[SQLALCHEMY] = len(rows.all())

        timings = await measure_side_by_side(
            {TURNSTORE: search, SQLALCHEMY: ilike},
            repeats=config.search_repeats,
            warmup=config.warmup,
        )
        for name, timing in timings.items():
            note = "full-text, ranked" if name == TURNSTORE else "ILIKE over the JSON"
            results.add(f"search @{runs} runs", name, timing, f"{note}; {found[name]} hits")
    finally:
        await close_all(dbs)


async def _throughput(db: Database, writers: int, turns: int) -> float:
    """SDK turns per second written by ``writers`` concurrent writers, one session each."""
    sessions = [db.session(f"writer-{writers}-{w}") for w in range(writers)]
    work = [make_turns(turns, seed=w, start=writers * 10_000) for w in range(writers)]
    await asyncio.gather(*(write_turns(s, make_turns(1, seed=9)) for s in sessions))  # warm up
    started = time.perf_counter()
    await asyncio.gather(*(write_turns(s, w) for s, w in zip(sessions, work, strict=True)))
    return writers * turns / (time.perf_counter() - started)


async def throughput_case(
    contenders: Sequence[Contender], config: Config, log: Any
) -> list[dict[str, Any]]:
    """Runs per second with each number of concurrent writers; the contenders alternate."""
    rows = []
    dbs = await open_all(contenders, "tput", [], PgDatabase)
    try:
        for writers in config.writers:
            row: dict[str, Any] = {"writers": writers}
            for name, db in dbs.items():
                row[name] = await _throughput(db, writers, config.throughput_turns)
            log(f"  {writers} writers: " + ", ".join(f"{n} {row[n]:.0f}/s" for n in dbs))
            rows.append(row)
    finally:
        await close_all(dbs)
    return rows


# ---------------------------------------------------------------------------------------------
# Report


def ratios_table(results: Results) -> str:
    """Each case's medians and turnstore's time as a multiple of SQLAlchemySession's (and of
    the floor's, where there is one)."""
    cases: list[str] = []
    for row in results.rows:
        if row.case not in cases:
            cases.append(row.case)
    rows = []
    for case in cases:
        ours, theirs = (results.median_ms(case, name) for name in CONTENDERS)
        floor = results.median_ms(case, FLOOR)
        ratio = f"{ours / theirs:.2f}x" if ours is not None and theirs else "-"
        to_floor = f"{ours / floor:.2f}x" if ours is not None and floor else "-"
        rows.append(
            [
                case,
                f"{ours:.3f}" if ours else "-",
                f"{theirs:.3f}" if theirs else "-",
                ratio,
                f"{floor:.3f}" if floor else "-",
                to_floor,
            ]
        )
    headers = ["case (median ms)", TURNSTORE, SQLALCHEMY, "ratio", FLOOR, "vs floor"]
    return format_table(headers, rows)


def throughput_table(rows: Sequence[dict[str, Any]]) -> str:
    """Runs per second per number of writers, and turnstore's as a multiple of the SDK's."""
    return format_table(
        ["writers", f"{TURNSTORE} runs/s", f"{SQLALCHEMY} runs/s", "ratio"],
        [
            [
                str(row["writers"]),
                f"{row[TURNSTORE]:.0f}",
                f"{row[SQLALCHEMY]:.0f}",
                f"{row[TURNSTORE] / row[SQLALCHEMY]:.2f}x",
            ]
            for row in rows
        ],
    )


async def run_benchmark(config: Config, url: str, *, log: Any = _log) -> dict[str, Any]:
    """Run every case against ``url``; return the figures and the printed tables."""
    max_size = max(config.writers)
    contenders = [turnstore_contender(url, max_size), sqlalchemy_contender(url, max_size)]
    results = Results()
    log("histories")
    await history_cases(contenders, config, results, log)
    log(f"branch and search at {config.branch_runs:,} runs")
    await branch_and_search_cases(contenders, config, results)
    log("write throughput")
    throughput = await throughput_case(contenders, config, log)
    return {
        "environment": {**environment(), "postgres_url": _redacted(url)},
        "config": asdict(config),
        "results": [row.as_dict() for row in results.rows],
        "throughput": throughput,
        "ratios_table": ratios_table(results),
        "cpu_medians_table": medians_table(results, (*CONTENDERS, FLOOR), cpu=True),
        "throughput_table": throughput_table(throughput),
    }


def _redacted(url: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(url)
    return f"{params.get('host', 'local')}:{params.get('port', 5432)}/{params.get('dbname', '')}"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: smaller, fewer repeats")
    parser.add_argument("--url", default=DEFAULT_URL, help="the PostgreSQL server to use")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--turns", type=int, help="turns each writer writes in the throughput case")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else Config()
    if args.turns:
        config = replace(config, throughput_turns=args.turns)

    started = time.perf_counter()
    report = run_async(lambda: run_benchmark(config, args.url))
    report["seconds"] = round(time.perf_counter() - started, 1)
    print()
    print(report["ratios_table"])
    print()
    print(report["throughput_table"])
    env = report["environment"]
    print(
        f"\n{report['seconds']} s; {env['platform']}, {env['cpus']} CPUs, "
        f"openai-agents {env['openai-agents']}, PostgreSQL at {env['postgres_url']}"
    )
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Deleting a long conversation: turnstore against the SDK's sessions clearing the same items.

    .venv/bin/python bench/bench_deletes.py                  # 100,000 runs, 3 samples a case
    .venv/bin/python bench/bench_deletes.py --runs 20000 --repeats 5
    .venv/bin/python bench/bench_deletes.py --json bench/results/deletes.json
    .venv/bin/python bench/bench_deletes.py --postgres postgresql://postgres@127.0.0.1/test
    .venv/bin/python bench/bench_deletes.py --no-postgres

The session is a chain of ``--runs`` runs written by the test suite's set-based builder
(``tests/chains.py``; not timed): each run a question and its answer, every 100th a tool call
too (2.02 items a run, about 100 bytes each), with its tool call, model call and span rows,
and on SQLite the search index fed, on PostgreSQL the tables analysed, as normal writes and
autovacuum leave them. A sample is one awaited call,
on a session built afresh before it:

- ``clear_session @N runs``: ``Store.clear_session``, and the SDK's ``SQLiteSession`` (on
  SQLite) or ``SQLAlchemySession`` (on PostgreSQL) clearing the same items (the same JSON, in
  order; filled by SQL, as bench_session.py fills SQLiteSession);
- ``delete_branch of N-1 runs``: run 1 edited, then its first version deleted, the head on
  the edit (the SDK's sessions have no branches);
- ``delete_branch of 1 run @N``: a sibling of the newest run, deleted (no rebuild between).

Figures are wall and process-CPU medians (``_common.measure``); the ratio is turnstore's
median over the peer's. A call that fails is reported with its error: before schema version
12, SQLite failed every case from 999 runs on ("too many levels of trigger recursion").
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import Results, environment, measure, medians_table, settle, write_json
from _kept import execute
from turnstore import Store, TurnstoreError

# The suite's set-based builder of long sessions (imported from tests/, as a test helper).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from chains import SESSION_TABLES, Chain, build_chain

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
SID = "long"  # the peers' session: the items of turnstore's last long session
TURNSTORE = "turnstore"
SQLITE_SESSION = "SQLiteSession"
SQLALCHEMY = "SQLAlchemySession"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Bench:
    """One backend's database (a SQLite file, or a PostgreSQL schema) and its peer's."""

    def __init__(self, store: Store, runs: int, results: Results, repeats: int) -> None:
        self.store, self.runs, self.results, self.repeats = store, runs, results, repeats
        self.label = "SQLite" if store.backend.dialect == "sqlite" else "PostgreSQL"
        self.chain: Chain | None = None
        self.failures: dict[str, str] = {}
        self.built = 0

    @property
    def sid(self) -> str:
        """The session the last ``build`` wrote."""
        return f"long-{self.built}"

    async def build(self) -> None:
        """A fresh long session, of a new id (a delete that failed leaves the last one)."""
        self.built += 1
        self.chain = await build_chain(self.store, self.sid, self.runs)
        if self.store.backend.dialect == "sqlite":
            await self.store.search("question")  # feeds the index, as normal writes do
            settle(self.store.backend.label)
        else:
            # The planner's statistics, as autovacuum leaves them once the session is written
            # (a delete's plan joins to the session's rows: built by one bulk transaction just
            # now, the statistics would say the tables are nearly empty).
            await execute(self.store, [f"ANALYZE {', '.join(SESSION_TABLES)}, annotations"])

    async def case(
        self,
        case: str,
        contender: str,
        action: Callable[[], Awaitable[Any]],
        setup: Callable[[], Awaitable[Any]],
    ) -> None:
        """Time ``action`` after ``setup`` (untimed) ``repeats`` times; a failure is noted."""
        name = f"{self.label}: {case}"
        _log(f"  {name} ({contender})")
        try:
            timing = await measure(action, repeats=self.repeats, warmup=0, between=setup)
        except TurnstoreError as exc:
            self.failures[f"{name} ({contender})"] = f"{type(exc).__name__}: {exc}"
            return
        self.results.add(name, contender, timing)

    async def turnstore_cases(self) -> None:
        n = self.runs

        async def clear() -> None:
            await self.store.clear_session(self.sid)

        await self.case(f"clear_session @{n:,} runs", TURNSTORE, clear, self.build)

        async def edited() -> None:
            await self.build()
            assert self.chain is not None
            await self.store.fork(self.sid, self.chain.run_id(1), "question 1, edited")

        async def delete_deep() -> None:
            assert self.chain is not None
            await self.store.delete_branch(self.sid, self.chain.run_id(1), force=True)

        await self.case(f"delete_branch of {n - 1:,} runs", TURNSTORE, delete_deep, edited)
        await self.build()
        assert self.chain is not None
        await self.store.name_branch(self.sid, self.chain.first_run, None)  # no name to hand over
        sibling: list[int] = []

        async def side_branch() -> None:
            assert self.chain is not None
            run = await self.store.fork(self.sid, self.chain.last_run, "the last question, edited")
            sibling[:] = [run.id]

        async def delete_short() -> None:
            await self.store.delete_branch(self.sid, sibling[0], force=True)

        await self.case(f"delete_branch of 1 run @{n:,}", TURNSTORE, delete_short, side_branch)


async def sqlite_bench(directory: Path, runs: int, results: Results, repeats: int) -> Bench:
    """turnstore on a SQLite file, and SQLiteSession on a file of the same items."""
    from agents import SQLiteSession

    path = directory / "turnstore.db"
    peer_path = directory / "sqlite-session.db"
    async with Store.open(path) as store:
        bench = Bench(store, runs, results, repeats)
        await bench.turnstore_cases()
        SQLiteSession("schema", peer_path).close()  # the SDK's tables

        async def fill_peer() -> None:
            conn = sqlite3.connect(peer_path)
            try:
                conn.execute("ATTACH DATABASE ? AS ours", (str(path),))
                with conn:
                    conn.execute("INSERT INTO agent_sessions (session_id) VALUES (?)", (SID,))
                    conn.execute(
                        "INSERT INTO agent_messages (session_id, message_data) "
                        "SELECT ?, data FROM ours.items WHERE session_id = ? "
                        "ORDER BY run_id, position",
                        (SID, bench.sid),
                    )
            finally:
                conn.close()
            settle(peer_path)

        peer = SQLiteSession(SID, peer_path)
        try:
            case = f"clear_session @{runs:,} runs"
            await bench.case(case, SQLITE_SESSION, peer.clear_session, fill_peer)
        finally:
            peer.close()
    return bench


async def postgres_bench(url: str, runs: int, results: Results, repeats: int) -> Bench:
    """turnstore in a fresh PostgreSQL schema, and SQLAlchemySession on tables of its own."""
    import psycopg
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    schema = f"bench_deletes_{uuid.uuid4().hex[:6]}"
    prefix = f"{schema}_sdk"
    engine = create_async_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    peer = SQLAlchemySession(
        SID,
        engine=engine,
        create_tables=True,
        sessions_table=f"{prefix}_sessions",
        messages_table=f"{prefix}_messages",
    )
    try:
        async with Store.open(url, schema=schema) as store:
            bench = Bench(store, runs, results, repeats)
            await bench.turnstore_cases()
            await peer.get_items(limit=1)  # creates its tables

            async def fill_peer() -> None:
                with psycopg.connect(url) as conn:
                    conn.execute(f"INSERT INTO {prefix}_sessions (session_id) VALUES (%s)", [SID])
                    conn.execute(
                        f"""INSERT INTO {prefix}_messages (session_id, message_data)
                            SELECT %s, data FROM "{schema}".items
                            WHERE session_id = %s ORDER BY run_id, position""",
                        [SID, bench.sid],
                    )
                    conn.execute(f"ANALYZE {prefix}_messages")

            case = f"clear_session @{runs:,} runs"
            await bench.case(case, SQLALCHEMY, peer.clear_session, fill_peer)
    finally:
        await engine.dispose()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            for table in ("messages", "sessions"):
                conn.execute(f"DROP TABLE IF EXISTS {prefix}_{table} CASCADE")
    return bench


def _ratios(results: Results, peers: dict[str, str]) -> list[str]:
    """turnstore's clear_session over its peer's, wall and CPU, per backend."""
    lines = []
    for row in results.rows:
        peer = peers.get(row.case.split(":")[0])
        if row.contender != TURNSTORE or peer is None:
            continue
        theirs = results.median_ms(row.case, peer)
        cpu = results.median_ms(row.case, peer, cpu=True)
        ours_cpu = row.timing.cpu_median_ms
        if theirs and cpu and ours_cpu is not None:
            lines.append(
                f"{row.case}: turnstore / {peer} = {row.timing.median_ms / theirs:.2f}x wall, "
                f"{ours_cpu / cpu:.2f}x CPU"
            )
    return lines


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the long session")
    parser.add_argument("--repeats", type=int, default=3, help="samples of each case")
    parser.add_argument("--postgres", default=POSTGRES, help="the PostgreSQL server's URL")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--dir", help="where the SQLite files go (default: a temporary one)")
    args = parser.parse_args(argv)
    results = Results()
    benches: list[Bench] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        _log(f"SQLite, {args.runs:,} runs")
        benches.append(await sqlite_bench(Path(directory), args.runs, results, args.repeats))
    if not args.no_postgres:
        _log(f"PostgreSQL, {args.runs:,} runs")
        benches.append(await postgres_bench(args.postgres, args.runs, results, args.repeats))
    contenders = [TURNSTORE, SQLITE_SESSION, SQLALCHEMY]
    print(medians_table(results, contenders))
    print()
    print(medians_table(results, contenders, cpu=True))
    print()
    for line in _ratios(results, {"SQLite": SQLITE_SESSION, "PostgreSQL": SQLALCHEMY}):
        print(line)
    failures = {name: error for bench in benches for name, error in bench.failures.items()}
    for name, error in failures.items():
        print(f"{name}: failed: {error}")
    if args.json:
        write_json(
            args.json,
            {
                "environment": environment(),
                "runs": args.runs,
                "results": [row.as_dict() for row in results.rows],
                "failures": failures,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))

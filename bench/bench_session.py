"""turnstore's StructuredSession against the Agents SDK's SQLite sessions, on the same items.

    .venv/bin/python bench/bench_session.py            # the default run (about 1-2 minutes)
    .venv/bin/python bench/bench_session.py --quick    # a smoke run (well under 30 s)
    .venv/bin/python bench/bench_session.py --big      # the crowded file holds 1,000,000 items
    .venv/bin/python bench/bench_session.py --json bench/results/session.json
    .venv/bin/python bench/bench_session.py --requests --postgres postgresql://...  # per request

Every contender gets its own SQLite file in one temporary directory. See bench/README.md for
what each figure means and the targets it is held to.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from _common import (
    ITEMS_PER_TURN,
    Action,
    Contender,
    Database,
    Item,
    Results,
    Target,
    close_all,
    environment,
    fill_store,
    flatten,
    floor_reader,
    history,
    make_turn,
    make_turns,
    measure_side_by_side,
    medians_table,
    open_all,
    reader,
    settle,
    targets_table,
    turn_writer,
    write_json,
    write_turns,
)
from _common import run as run_async
from _write_floor import TEMPLATE, sqlite_floor_writer
from turnstore import Store, StructuredSession

TURNSTORE = "turnstore"
TURNSTORE_DURABLE = "turnstore durable"
SQLITE = "SQLiteSession"
ADVANCED = "AdvancedSQLiteSession"
# Reads: the JSON fetched + one msgspec decode (``_common.floor_reader``). Writes: turnstore's
# rows for the turn inserted by executemany in one transaction (``_write_floor``).
FLOOR = "floor"
CONTENDERS = (TURNSTORE, TURNSTORE_DURABLE, SQLITE, ADVANCED, FLOOR)
# Contenders that take turns in one timing loop. AdvancedSQLiteSession's calls are 10-1000x
# heavier and are timed on their own: side by side, they left the caches and the allocator cold
# for whichever light call came next, doubling turnstore's and SQLiteSession's figures.
GROUPS = ((TURNSTORE, TURNSTORE_DURABLE, SQLITE, FLOOR), (ADVANCED,))

TAIL = 20  # the limit of the "last N" reads
FLAT = 1.25  # "flat": the larger size costs at most this many times the smaller one


@dataclass(frozen=True)
class Config:
    """Sizes and repeat counts of one run."""

    history_sizes: tuple[int, ...] = (1_000, 4_000, 20_000)  # items of history
    write_sizes: tuple[int, ...] = (1_000, 20_000)  # where one turn's write is timed
    tail_size: int = 20_000  # where get_items(limit=20) is timed
    file_items: int = 100_000  # items in the crowded file (--big: 1,000,000)
    filler_items: int = 1_000  # items per other session of the crowded file
    branch_runs: tuple[int, ...] = (50, 5_000)
    edited_runs: int = 5_000
    edits: int = 100
    write_repeats: int = 40
    read_items_budget: int = 150_000  # full reads repeat about budget / size times
    tail_repeats: int = 200
    branch_repeats: int = 15
    warmup: int = 2

    def read_repeats(self, size: int) -> int:
        """Fewer repeats for bigger full reads: they are slow and steady."""
        return max(3, min(30, self.read_items_budget // max(size, 1)))


# A smoke run: the same cases at smaller sizes, so its ratios are indicative only.
QUICK = Config(
    history_sizes=(1_000, 4_000),
    write_sizes=(1_000, 4_000),
    tail_size=4_000,
    file_items=24_000,
    branch_runs=(50, 1_000),
    edited_runs=1_000,
    edits=20,
    write_repeats=10,
    read_items_budget=20_000,
    tail_repeats=40,
    branch_repeats=4,
    warmup=1,
)
BIG = replace(Config(), file_items=1_000_000)
# For tests of the benchmark code itself: every case, minimal sizes, one sample each.
TINY = Config(
    history_sizes=(40,),
    write_sizes=(40, 80),
    tail_size=40,
    file_items=200,
    filler_items=40,
    branch_runs=(6, 12),
    edited_runs=30,
    edits=3,
    write_repeats=1,
    read_items_budget=40,
    tail_repeats=1,
    branch_repeats=1,
    warmup=0,
)


Log = Callable[[str], None]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Contenders: each database is one SQLite file in ``directory``


def turnstore_contender(directory: Path, *, durable: bool = False) -> Contender:
    """turnstore's ``StructuredSession`` on one ``Store`` per file; bulk fill by ``add_runs``."""
    name = TURNSTORE_DURABLE if durable else TURNSTORE

    def create(label: str) -> Database:
        path = directory / f"{name.replace(' ', '-')}-{label}.db"
        store = Store.open(path, durable=durable)

        async def fill(session_id: str, items: Sequence[Item]) -> None:
            await fill_store(store, session_id, items)
            settle(path)

        return Database(
            lambda sid: StructuredSession(sid, store), fill=fill, on_close=store.aclose, path=path
        )

    return Contender(name, create)


def sqlite_session_contender(directory: Path) -> Contender:
    """The SDK's ``SQLiteSession`` on a file.

    Its bulk fill writes the very rows ``SQLiteSession.add_items`` writes (its documented
    ``agent_sessions`` / ``agent_messages`` tables, ``json.dumps`` of each item) on a side
    connection without per-commit fsync, so that a crowded file of many sessions builds fast.
    """
    from agents import SQLiteSession

    def create(label: str) -> Database:
        path = directory / f"sqlite-session-{label}.db"
        SQLiteSession("schema", path).close()  # creates the SDK's tables
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA synchronous = OFF")

        async def fill(session_id: str, items: Sequence[Item]) -> None:
            import json

            with conn:
                conn.execute(
                    "INSERT OR IGNORE INTO agent_sessions (session_id) VALUES (?)", (session_id,)
                )
                conn.executemany(
                    "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
                    [(session_id, json.dumps(item)) for item in items],
                )
            settle(path)

        async def on_close() -> None:
            conn.close()

        return Database(lambda sid: SQLiteSession(sid, path), fill=fill, on_close=on_close)

    return Contender(SQLITE, create)


def advanced_session_contender(directory: Path) -> Contender:
    """The SDK's ``AdvancedSQLiteSession`` (branching, usage) on a file; filled via add_items."""
    from agents.extensions.memory.advanced_sqlite_session import AdvancedSQLiteSession

    def create(label: str) -> Database:
        path = directory / f"advanced-session-{label}.db"
        return Database(
            lambda sid: AdvancedSQLiteSession(session_id=sid, db_path=path, create_tables=True)
        )

    return Contender(ADVANCED, create)


# ---------------------------------------------------------------------------------------------
# Cases: each builds one database per contender, then times them side by side


Key = tuple[str, str]  # (case, contender)


async def _measure_groups(
    results: Results,
    actions: dict[Key, Action],
    *,
    repeats: int,
    warmup: int,
    between: dict[Key, Action] | None = None,
    note: str = "",
) -> None:
    """Time ``actions`` group by group (``GROUPS``), side by side within a group."""
    for group in GROUPS:
        chosen = {key: action for key, action in actions.items() if key[1] in group}
        if chosen:
            timings = await measure_side_by_side(
                chosen, repeats=repeats, warmup=warmup, between=between
            )
            for (case, name), timing in timings.items():
                results.add(case, name, timing, note)


async def history_cases(
    contenders: Sequence[Contender], config: Config, results: Results, directory: Path
) -> None:
    """Sessions of each history size: full read, then one turn's write.

    Every (contender, size) has its own file, all open at once, so that the writes at every
    size take turns in one loop: the "flat" ratios compare figures taken side by side.
    ``turnstore durable`` is only timed writing (its reads are turnstore's).
    """
    sizes = sorted({*config.history_sizes, *config.write_sizes})
    dbs: dict[Key, Database] = {}
    closers: list[Callable[[], None]] = []
    try:
        for size in sizes:
            for contender in contenders:
                if contender.name == TURNSTORE_DURABLE and size not in config.write_sizes:
                    continue
                opened = await open_all([contender], f"history-{size}", history(size))
                dbs[(str(size), contender.name)] = opened[contender.name]
        sessions = {key: db.session("bench") for key, db in dbs.items()}
        readers = {key: s for key, s in sessions.items() if key[1] != TURNSTORE_DURABLE}
        for size in config.history_sizes:
            floor = dbs.get((str(size), TURNSTORE))
            floors = {}
            if floor is not None and floor.path is not None:
                read_floor = floor_reader(floor.path, "bench", expect=size)
                floors[(f"get_items() @{size}", FLOOR)] = read_floor
            await _measure_groups(
                results,
                {
                    **{
                        (f"get_items() @{size}", name): reader(s, limit=None, expect=size)
                        for (at, name), s in readers.items()
                        if at == str(size)
                    },
                    **floors,
                },
                repeats=config.read_repeats(size),
                warmup=config.warmup,
            )
        if not config.write_sizes:  # reads alone (bench_goals.py --reads)
            return
        count = config.warmup + config.write_repeats
        writers = {
            (f"write turn @{at}", name): turn_writer(s, count=count)
            for (at, name), s in sessions.items()
            if int(at) in config.write_sizes
        }
        if any(name == TURNSTORE for _, name in sessions):
            writers.update(await _write_floors(directory, config, count, dbs, closers))
        # The two-batch form at the smallest size, in the same loop (new turns of their own).
        low = str(min(config.write_sizes))
        writers.update(
            {
                (f"write 2-batch turn @{at}", name): turn_writer(
                    s, count=count, start=2 * 10**6, batches=2
                )
                for (at, name), s in sessions.items()
                if at == low
            }
        )
        await _measure_groups(
            results,
            writers,
            repeats=config.write_repeats,
            warmup=config.warmup,
            note="4 items in 3 add_items (2-batch: 2)",
        )
    finally:
        for close in closers:
            close()
        await close_all(dbs)


async def _write_floors(
    directory: Path,
    config: Config,
    count: int,
    dbs: dict[Key, Database],
    closers: list[Callable[[], None]],
) -> dict[Key, Action]:
    """The floor of a write turn at each write size: a turnstore file of its own with the same
    history, and the rows turnstore stores for the timed turns (``_write_floor``)."""
    actions: dict[Key, Action] = {}
    for size in config.write_sizes:
        db = turnstore_contender(directory).create(f"write-floor-{size}")
        dbs[(f"write-floor-{size}", FLOOR)] = db
        await db.add_history("bench", history(size))
        # The very turns turnstore's writer writes (turn_writer's defaults), as the template.
        await write_turns(db.session(TEMPLATE), make_turns(count, seed=99, start=10**6))
        assert db.path is not None
        settle(db.path)
        write, close = sqlite_floor_writer(db.path, "bench")
        closers.append(close)
        actions[(f"write turn @{size}", FLOOR)] = write
    return actions


def crowded_case(config: Config) -> str:
    """The case name of the crowded-file tail read."""
    return f"get_items({TAIL}) @{config.tail_size}, file of {config.file_items:,}"


async def _build_crowded(db: Database, config: Config) -> int:
    """Fill ``db``: the measured session of ``tail_size`` items among many others.

    The other sessions hold ``filler_items`` items each and are written interleaved with the
    measured one (ten rounds), as conversations growing side by side would be. Returns the
    number of sessions.
    """
    target = config.tail_size
    fillers = max(0, (config.file_items - target) // config.filler_items)
    rounds = 10
    per_round = config.filler_items // rounds
    whole_turns = -(-max(per_round, 1) // ITEMS_PER_TURN) * ITEMS_PER_TURN
    pool = history(whole_turns, seed=7)[:per_round]
    mine = history(target)
    step = -(-target // rounds)
    for round_ in range(rounds):
        await db.add_history("bench", mine[round_ * step : (round_ + 1) * step])
        for filler in range(fillers):
            await db.add_history(f"other-{filler:06d}", pool)
    return fillers + 1


async def tail_cases(
    contenders: Sequence[Contender],
    crowded: Sequence[str],
    config: Config,
    results: Results,
    log: Log,
) -> None:
    """get_items(limit=20) on a ``tail_size``-item session alone in its file, and (for the
    contenders named in ``crowded``) in a file of ``file_items`` items. Both kinds of file take
    turns in one loop, so "flat to the crowded file" compares figures taken side by side."""
    dbs: dict[Key, Database] = {}
    alone, among = f"get_items({TAIL}) @{config.tail_size}", crowded_case(config)
    try:
        dbs.update(
            ((alone, name), db)
            for name, db in (await open_all(contenders, "tail", history(config.tail_size))).items()
        )
        count = 0
        for contender in contenders:
            if contender.name in crowded:
                started = time.perf_counter()
                dbs[(among, contender.name)] = db = contender.create("crowded")
                count = await _build_crowded(db, config)
                log(
                    f"  {contender.name}: {count:,} sessions built in "
                    f"{time.perf_counter() - started:.1f} s"
                )
        await _measure_groups(
            results,
            {key: reader(db.session("bench"), limit=TAIL, expect=TAIL) for key, db in dbs.items()},
            repeats=config.tail_repeats,
            warmup=config.warmup,
        )
    finally:
        await close_all(dbs)


async def branch_cases(
    ours: Contender, advanced: Contender, config: Config, results: Results
) -> None:
    """Branch at the middle run of sessions of each ``branch_runs`` length.

    turnstore: ``edit(run, new question)`` (a sibling run holding the edited user message;
    the head moves to it). AdvancedSQLiteSession: ``create_branch_from_turn(turn)`` at the same
    point (a branch holding the turns before it, switched to), switched back to ``main``
    untimed before each call. turnstore's figure includes writing the new message; the SDK's
    does not. The sizes take turns in one loop, so the "flat" ratio compares figures taken
    side by side.
    """
    dbs: dict[Key, Database] = {}
    actions: dict[Key, Action] = {}
    between: dict[Key, Action] = {}
    try:
        for runs in config.branch_runs:
            case = f"branch mid @{runs} runs"
            opened = await open_all([ours, advanced], f"branch-{runs}", flatten(make_turns(runs)))
            dbs.update({(case, name): db for name, db in opened.items()})
            mine = opened[ours.name].session("bench")
            path = await mine.runs()
            sdk = opened[advanced.name].session("bench")
            actions[(case, ours.name)] = _editor(mine, path[len(path) // 2].id)
            # The same point: the SDK numbers turns from 1.
            actions[(case, advanced.name)] = _brancher(sdk, runs // 2 + 1)
            between[(case, advanced.name)] = _back_to_main(sdk)
        await _measure_groups(
            results,
            actions,
            repeats=config.branch_repeats,
            warmup=config.warmup,
            between=between,
        )
    finally:
        await close_all(dbs)


def _editor(session: Any, run_id: int) -> Action:
    async def edit() -> None:
        await session.edit(run_id, "An edited question about the refund?")

    return edit


def _brancher(session: Any, turn: int) -> Action:
    names = iter(range(10**9))

    async def branch() -> None:
        await session.create_branch_from_turn(turn, f"edit-{next(names)}")

    return branch


def _back_to_main(session: Any) -> Action:
    async def back() -> None:
        await session.switch_to_branch("main")

    return back


async def _run_back(session: Any, back: int) -> int:
    """The id of the run ``back`` runs up the active path (1: the head), by parent links."""
    info = await session.info()
    run_id: int = info.head_run_id
    for _ in range(back - 1):
        run = await session.store.run(run_id)
        run_id = run.parent_id
    return run_id


async def build_edited_session(session: Any, runs: int, edits: int, back: int = 5) -> None:
    """A session whose active path is ``runs`` turns long, edited ``edits`` times on the way.

    After every block of turns, the question ``back`` turns before the head is edited and the
    conversation goes on from the edit: the tree holds ``edits * (back - 1)`` runs off the
    path, and the path crosses ``edits`` fork points. Uses the turnstore tree API.
    """
    # Each block adds ``block`` turns and each edit drops ``back - 1`` from the path.
    block = max((runs + edits * (back - 1)) // max(edits, 1), back)
    made = 0
    index = 0
    for _ in range(edits):
        await session.add_items(flatten(make_turns(block, start=index)))
        made += block
        index += block
        edited = make_turn(index, question=f"Edited question number {index}?")
        await session.edit(await _run_back(session, back), edited[0][0]["content"])
        await session.add_items([item for batch in edited[1:] for item in batch])
        made -= back - 1
        index += 1
    if made < runs:
        await session.add_items(flatten(make_turns(runs - made, start=index)))


async def edited_tail_case(
    ours: Contender, sdk: Contender, config: Config, results: Results, log: Log
) -> None:
    """get_items(limit=20) at the end of a session of ``edited_runs`` runs edited ``edits``
    times (turnstore), against ``SQLiteSession`` on a flat session of the same length."""
    dbs = await open_all([sdk], "flat", history(config.edited_runs * ITEMS_PER_TURN))
    try:
        dbs[ours.name] = db = ours.create("edited")
        session = db.session("bench")
        started = time.perf_counter()
        await build_edited_session(session, config.edited_runs, config.edits)
        path = await session.runs()
        if len(path) != config.edited_runs:
            raise AssertionError(f"the edited path has {len(path)} runs, not {config.edited_runs}")
        log(f"  {ours.name}: edited session built in {time.perf_counter() - started:.1f} s")
        timings = await measure_side_by_side(
            {
                name: reader(db.session("bench"), limit=TAIL, expect=TAIL)
                for name, db in dbs.items()
            },
            repeats=config.tail_repeats,
            warmup=config.warmup,
        )
        for name, timing in timings.items():
            results.add(edited_case(config), name, timing, "flat" if name == sdk.name else "")
    finally:
        await close_all(dbs)


# A request's session: opened from the path or URL (so the process's shared store serves it),
# read, three writes of one SDK turn, then dropped unclosed or closed (``async with``); against
# the same work on one long-lived session. REQUEST_HISTORY items of history: a short
# conversation, whose read does not hide what opening costs. On the SQLite file, and on
# PostgreSQL with --postgres URL.
PER_REQUEST = "request turn, session per request"
CLOSED_PER_REQUEST = "request turn, session per request, closed"
LONG_LIVED = "request turn, long-lived session"
REQUEST_HISTORY = 40
ON_POSTGRES = " (PostgreSQL)"


async def request_case(target: str, config: Config, results: Results, *, suffix: str = "") -> None:
    """A session per request (open, read, 3 writes, drop or close) vs a long-lived session,
    on ``target``; ``suffix`` ends the case names (the backend's)."""
    sids = ("per-request", "closed-per-request", "long-lived")
    with Store.open(target) as store:
        for sid in sids:
            await fill_store(store, sid, history(REQUEST_HISTORY))
    if "://" not in target:
        settle(target)
    count = config.warmup + config.write_repeats
    dropped_turns = iter(make_turns(count, seed=7, start=10**6))
    closed_turns = iter(make_turns(count, seed=7, start=2 * 10**6))

    async def per_request() -> None:
        session = StructuredSession("per-request", target)
        await session.get_items()
        await write_turns(session, [next(dropped_turns)])

    async def closed_per_request() -> None:
        async with StructuredSession("closed-per-request", target) as session:
            await session.get_items()
            await write_turns(session, [next(closed_turns)])

    long_lived = StructuredSession("long-lived", target)
    long_lived_write = turn_writer(long_lived, count=count, seed=7)

    async def long_lived_turn() -> None:
        await long_lived.get_items()
        await long_lived_write()

    try:
        await _measure_groups(
            results,
            {
                (PER_REQUEST + suffix, TURNSTORE): per_request,
                (CLOSED_PER_REQUEST + suffix, TURNSTORE): closed_per_request,
                (LONG_LIVED + suffix, TURNSTORE): long_lived_turn,
            },
            repeats=config.write_repeats,
            warmup=config.warmup,
            note="get_items + 3 add_items",
        )
    finally:
        await long_lived.aclose()


def request_targets(suffixes: Sequence[str]) -> list[Target]:
    """A session per request costs about what a long-lived one does (issue 12), closed at
    its end about what one left unclosed does (issue 30), on each backend measured."""
    out = [
        Target(
            "session per request vs long-lived",
            (PER_REQUEST, TURNSTORE),
            1.1,
            (LONG_LIVED, TURNSTORE),
        )
    ]
    for suffix in suffixes:
        out.append(
            Target(
                f"closed per request vs unclosed{suffix}",
                (CLOSED_PER_REQUEST + suffix, TURNSTORE),
                1.5,
                (PER_REQUEST + suffix, TURNSTORE),
            )
        )
    return out


def edited_case(config: Config) -> str:
    """The case name of the tail read after edits."""
    return f"get_items({TAIL}) @{config.edited_runs} runs, {config.edits} edits"


# ---------------------------------------------------------------------------------------------
# Targets


def targets(config: Config) -> list[Target]:
    """The goals of DESIGN.md's performance table and issues 2 and 3, for this config."""
    out: list[Target] = []
    for size in config.write_sizes:
        out.append(
            Target(
                f"write turn @{size} vs SQLiteSession",
                (f"write turn @{size}", TURNSTORE),
                0.5,
                (f"write turn @{size}", SQLITE),
            )
        )
        # Issue 32: within 1.5x of the same rows inserted with no turnstore logic.
        out.append(
            Target(
                f"write turn @{size} vs the floor",
                (f"write turn @{size}", TURNSTORE),
                1.5,
                (f"write turn @{size}", FLOOR),
            )
        )
    low = min(config.write_sizes)
    two = f"write 2-batch turn @{low}"
    out.append(Target(f"{two} vs SQLiteSession", (two, TURNSTORE), 0.5, (two, SQLITE)))
    if len(config.write_sizes) > 1:
        low, high = min(config.write_sizes), max(config.write_sizes)
        out.append(
            Target(
                f"write turn flat {low} -> {high}",
                (f"write turn @{high}", TURNSTORE),
                FLAT,
                (f"write turn @{low}", TURNSTORE),
            )
        )
    for size in config.history_sizes:
        case = f"get_items() @{size}"
        # Issue 15: at most half of SQLiteSession's time, a third at 20,000 items (where the
        # SDK's per-item Python work weighs most), and within 1.3x of the floor.
        limit = 0.35 if size >= 20_000 else 0.5
        out.append(Target(f"{case} vs SQLiteSession", (case, TURNSTORE), limit, (case, SQLITE)))
        out.append(Target(f"{case} vs the floor", (case, TURNSTORE), 1.3, (case, FLOOR)))
    tail = f"get_items({TAIL}) @{config.tail_size}"
    out.append(Target(f"{tail} vs SQLiteSession", (tail, TURNSTORE), 1.0, (tail, SQLITE)))
    crowded = crowded_case(config)
    out.append(Target(f"{crowded} vs SQLiteSession", (crowded, TURNSTORE), 1.0, (crowded, SQLITE)))
    out.append(
        Target(
            f"{tail} flat to file of {config.file_items:,}",
            (crowded, TURNSTORE),
            FLAT,
            (tail, TURNSTORE),
        )
    )
    for runs in config.branch_runs:
        out.append(Target(f"branch mid @{runs} runs", (f"branch mid @{runs} runs", TURNSTORE), 1.0))
    if len(config.branch_runs) > 1:
        low, high = min(config.branch_runs), max(config.branch_runs)
        out.append(
            Target(
                f"branch flat {low} -> {high} runs",
                (f"branch mid @{high} runs", TURNSTORE),
                FLAT,
                (f"branch mid @{low} runs", TURNSTORE),
            )
        )
    edited = edited_case(config)
    out.append(
        Target(f"{edited} vs flat SQLiteSession", (edited, TURNSTORE), 1.0, (edited, SQLITE))
    )
    return out


# ---------------------------------------------------------------------------------------------
# Main


async def requests_cases(
    directory: Path, config: Config, results: Results, log: Log, postgres: str | None
) -> list[Target]:
    """The per-request cases on the file (and on ``postgres``, a server URL, in a schema of
    its own dropped afterwards); their targets."""
    log("a session per request against a long-lived one")
    await request_case(str(directory / "requests.db"), config, results)
    if postgres is None:
        return request_targets([""])
    schema = f"turnstore_bench_requests_{os.getpid()}"
    separator = "&" if "?" in postgres else "?"
    try:
        log("the same on PostgreSQL")
        await request_case(
            f"{postgres}{separator}schema={schema}", config, results, suffix=ON_POSTGRES
        )
    finally:
        import psycopg

        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return request_targets(["", ON_POSTGRES])


async def run_benchmark(
    config: Config,
    directory: Path,
    *,
    log: Log = _log,
    writes_only: bool = False,
    requests_only: bool = False,
    postgres: str | None = None,
) -> dict[str, Any]:
    """Run every case in ``directory`` (``writes_only``: the write turns alone;
    ``requests_only``: the per-request cases alone; ``postgres``: a server URL where the
    per-request cases run too); return the figures and the evaluated targets."""
    ours = turnstore_contender(directory)
    durable = turnstore_contender(directory, durable=True)
    sdk = sqlite_session_contender(directory)
    advanced = advanced_session_contender(directory)
    results = Results()

    if requests_only:
        chosen = await requests_cases(directory, config, results, log, postgres)
        return _report(config, results, chosen)
    if writes_only:
        config = replace(config, history_sizes=())
    sizes = sorted({*config.history_sizes, *config.write_sizes})
    log("histories of " + ", ".join(f"{size:,}" for size in sizes) + " items")
    # AdvancedSQLiteSession is no write target's reference, and the slowest to fill.
    await history_cases(
        [ours, durable, sdk] if writes_only else [ours, durable, sdk, advanced],
        config,
        results,
        directory,
    )
    chosen = targets(config)
    if writes_only:
        chosen = [target for target in chosen if target.label.startswith("write ")]
    else:
        log(f"last {TAIL} of {config.tail_size:,} items; crowded file of {config.file_items:,}")
        await tail_cases([ours, sdk, advanced], [ours.name, sdk.name], config, results, log)
        log("branching at " + ", ".join(f"{runs:,}" for runs in config.branch_runs) + " runs")
        await branch_cases(ours, advanced, config, results)
        log(f"tail after {config.edits} edits in {config.edited_runs:,} runs")
        await edited_tail_case(ours, sdk, config, results, log)
        chosen += await requests_cases(directory, config, results, log, postgres)
    return _report(config, results, chosen)


def _report(config: Config, results: Results, chosen: Sequence[Target]) -> dict[str, Any]:
    evaluated = [target.evaluate(results) for target in chosen]
    return {
        "environment": environment(),
        "config": asdict(config),
        "results": [row.as_dict() for row in results.rows],
        "targets": evaluated,
        "medians_table": medians_table(results, CONTENDERS),
        "cpu_medians_table": medians_table(results, CONTENDERS, cpu=True),
        "targets_table": targets_table(evaluated),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smoke run: smaller, fewer repeats")
    size.add_argument("--big", action="store_true", help="crowded file of 1,000,000 items")
    parser.add_argument(
        "--writes", action="store_true", help="only the write-turn cases (A/B of the write path)"
    )
    parser.add_argument(
        "--requests", action="store_true", help="only the session-per-request cases"
    )
    parser.add_argument(
        "--postgres", metavar="URL", help="also run the per-request cases on this server"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--dir", metavar="DIR", help="where the database files go (a temp dir)")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else BIG if args.big else Config()

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="turnstore-bench-", dir=args.dir) as directory:
        report = run_async(
            lambda: run_benchmark(
                config,
                Path(directory),
                writes_only=args.writes,
                requests_only=args.requests,
                postgres=args.postgres,
            )
        )
    report["seconds"] = round(time.perf_counter() - started, 1)
    print()
    print(report["medians_table"])
    print()
    print(report["cpu_medians_table"])
    print()
    print(report["targets_table"])
    print(
        f"\n{report['seconds']} s; {report['environment']['platform']}, "
        f"{report['environment']['cpus']} CPUs, SQLite {report['environment']['sqlite']}, "
        f"openai-agents {report['environment']['openai-agents']}"
    )
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

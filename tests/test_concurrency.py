"""Many writers in many processes, and writers killed mid-batch, on Postgres and a SQLite file.

8 processes x 8 coroutines each write SDK turns (three batches a turn: [user], [call, output],
[answer]), all into one shared session or each into its own. Afterwards: no item is lost or
duplicated, every batch is contiguous, each writer's batches are in its order, each session's
tree is a sound chain, and the head is the run of the last batch committed.

``TURNSTORE_STRESS_RUNS`` sets the turns per coroutine (default 10: 640 turns into one session
in the shared case, which keeps the suite under ten minutes; the acceptance run is 500).
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import workers
from builders import user
from support import POSTGRES_URL, require_postgres, sql
from turnstore import Store

PROCESSES = int(os.environ.get("TURNSTORE_STRESS_PROCESSES", "8"))
COROUTINES = int(os.environ.get("TURNSTORE_STRESS_COROUTINES", "8"))
RUNS = int(os.environ.get("TURNSTORE_STRESS_RUNS", "10"))

pytestmark = pytest.mark.slow

BACKENDS = [
    pytest.param("sqlite-file", id="sqlite-file"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """A fresh database that several processes can open: a SQLite file or a Postgres schema."""
    if request.param == "postgres":
        require_postgres()
        import psycopg

        schema = f"c_{uuid.uuid4().hex[:12]}"
        yield POSTGRES_URL, {"schema": schema}
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    else:
        yield str(tmp_path / "stress.db"), {}


def _writers() -> list[str]:
    return [f"p{p}c{c}" for p in range(PROCESSES) for c in range(COROUTINES)]


# A generous bound on the whole run (a hang fails the test; nothing is timed): 50 ms for
# each of the run's transactions, as on a busy 2-core machine.
DEADLINE = 120 + 0.05 * 3 * RUNS * PROCESSES * COROUTINES


async def _run_processes(processes: list[Any]) -> None:
    for process in processes:
        process.start()
    try:
        deadline = asyncio.get_running_loop().time() + DEADLINE
        for process in processes:
            remaining = max(0.0, deadline - asyncio.get_running_loop().time())
            await asyncio.to_thread(process.join, remaining)
        assert [process.exitcode for process in processes] == [0] * len(processes)
    finally:
        for process in processes:  # none outlives the test (its database is dropped next)
            if process.is_alive():
                process.kill()
                process.join()


def _check_batches(tags: list[str], writers: list[str]) -> None:
    """Every batch whole and contiguous, and each writer's batches in the order written."""
    expected = [workers.tag(w, r, i) for w in writers for r in range(RUNS) for i in range(4)]
    assert Counter(tags) == Counter(expected)  # nothing lost, nothing duplicated
    next_batch = dict.fromkeys(writers, 0)  # per writer: the next batch number (3 per turn)
    position = 0
    while position < len(tags):
        writer, rest = tags[position].rsplit("/", 1)
        run, index = (int(part) for part in rest.split(":"))
        batch = run * 3 + {0: 0, 1: 1, 3: 2}[index]
        assert batch == next_batch[writer], f"{tags[position]} out of order"
        size = 2 if index == 1 else 1
        assert tags[position : position + size] == [
            workers.tag(writer, run, i) for i in range(index, index + size)
        ], f"batch at {position} is not contiguous"
        next_batch[writer] += 1
        position += size


async def _check_tree(store: Store, session_id: str, turns: int) -> None:
    """One chain of runs (one per user message) whose columns match their rows."""
    roots = await sql(
        store,
        "SELECT count(*) FROM runs WHERE session_id = {sid} AND parent_id IS NULL",
        sid=session_id,
    )
    assert roots == [(1,)]
    fan_out = await sql(
        store,
        "SELECT count(*) FROM (SELECT parent_id FROM runs WHERE session_id = {sid}"
        " AND parent_id IS NOT NULL GROUP BY parent_id HAVING count(*) > 1) AS forks",
        sid=session_id,
    )
    assert fan_out == [(0,)]
    runs = await sql(store, "SELECT count(*) FROM runs WHERE session_id = {sid}", sid=session_id)
    assert runs == [(turns,)]
    bad_runs = await sql(
        store,
        "SELECT count(*) FROM runs r WHERE r.session_id = {sid} AND ("
        " r.item_count != (SELECT count(*) FROM items i"
        "     WHERE i.session_id = r.session_id AND i.run_id = r.id)"
        " OR r.item_count != 1 + (SELECT max(position) FROM items i"
        "     WHERE i.session_id = r.session_id AND i.run_id = r.id)"
        " OR (r.parent_id IS NOT NULL AND r.depth != 1 + (SELECT p.depth FROM runs p"
        "     WHERE p.session_id = r.session_id AND p.id = r.parent_id)))",
        sid=session_id,
    )
    assert bad_runs == [(0,)]
    calls = await sql(
        store,
        "SELECT count(*), count(call_item_id), count(output_item_id) FROM tool_calls"
        " WHERE session_id = {sid} AND status = 'completed'",
        sid=session_id,
    )
    assert calls == [(turns, turns, turns)]
    # The head is the run of the last batch committed: item ids grow in commit order within
    # a session, because they are taken under the session's lock.
    head = await sql(
        store,
        "SELECT s.head_run_id, (SELECT i.run_id FROM items i WHERE i.session_id = s.session_id"
        " ORDER BY i.id DESC LIMIT 1) FROM sessions s WHERE s.session_id = {sid}",
        sid=session_id,
    )
    assert head[0][0] is not None
    assert head[0][0] == head[0][1]


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "distinct"])
async def test_many_writers_in_many_processes(
    target: tuple[str, dict[str, Any]], shared: bool
) -> None:
    url, options = target
    Store.open(url, **options).close()  # the schema exists before the race
    if url.startswith("postgresql"):
        # 8 processes' pools must fit the server's 100 connections beside the rest of the run.
        options = {**options, "max_size": 4}
    ctx = workers.context()
    start = ctx.Barrier(PROCESSES)
    await _run_processes(
        [
            ctx.Process(
                target=workers.writer_process,
                args=(url, options, process, COROUTINES, RUNS, shared, start),
            )
            for process in range(PROCESSES)
        ]
    )
    store = Store.open(url, **options)
    try:
        if shared:
            items = await store.get_items("shared")
            _check_batches([workers.tag_of(item) for item in items], _writers())
            await _check_tree(store, "shared", PROCESSES * COROUTINES * RUNS)
            last = await sql(
                store,
                "SELECT data FROM items WHERE session_id = 'shared' ORDER BY id DESC LIMIT 1",
            )
            assert workers.tag_of(items[-1]) in last[0][0]  # the path ends at the last batch
        else:
            for writer in _writers():
                expected = [
                    item
                    for run in range(RUNS)
                    for batch in workers.turn(writer, run)
                    for item in batch
                ]
                assert await store.get_items(writer) == expected
                await _check_tree(store, writer, RUNS)
    finally:
        await store.aclose()


async def test_writer_killed_mid_batch_leaves_none_of_it(
    target: tuple[str, dict[str, Any]],
) -> None:
    url, options = target
    size, committed = 40, 3
    Store.open(url, **options).close()
    ctx = workers.context()
    paused = ctx.Event()
    process = ctx.Process(
        target=workers.killed_writer_process, args=(url, options, committed, size, paused)
    )
    process.start()
    try:
        # The writer is inside its transaction, half of the batch inserted, when it is killed.
        assert await asyncio.to_thread(paused.wait, 120), "the writer never reached the batch"
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        await asyncio.to_thread(process.join, 60)
        assert process.exitcode == -signal.SIGKILL
    finally:
        if process.is_alive():
            process.kill()

    store = Store.open(url, **options)
    try:
        whole = [item for n in range(committed) for item in workers.big_batch(n, size)]
        assert await store.get_items("victim") == whole  # the earlier batches, whole
        counts = await sql(
            store,
            "SELECT (SELECT count(*) FROM items WHERE session_id = 'victim'),"
            " (SELECT count(*) FROM runs WHERE session_id = 'victim')",
        )
        assert counts == [(committed * size, committed)]  # nothing of the killed batch
        # The session is not left locked: the next writer gets through (a hang would fail).
        await asyncio.wait_for(store.add_items("victim", [user("after")]), 60)
        assert (await store.get_items("victim"))[-1] == user("after")
    finally:
        await store.aclose()

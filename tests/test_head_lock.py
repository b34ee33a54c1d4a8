"""Writers of one session serialise on its lock: pops, compactions and appends racing on it.

Issue 26: pop_item and compact, having waited for the session's lock on PostgreSQL, read the
head with NULL run columns (its run deleted by the pop they waited for): a bare
AssertionError, and under ``python -O`` a NULL head with the session's runs orphaned. Here
many of them race on one session, over several stores of one process, from two processes,
and under ``-O``: whatever order they take, each does what it would have done alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import turnstore
import workers
from builders import assistant, call, output, user
from support import TARGET_BACKENDS, sql
from turnstore import NewRun, Store

SID = "s"
STORES = 4


# Backends that several stores (and processes) can open at once: not ``:memory:``.
pytestmark = pytest.mark.parametrize("backend_name", TARGET_BACKENDS, indirect=True)


@pytest.fixture
def target(db_target: tuple[str, dict[str, Any]], backend_name: str) -> tuple[str, dict[str, Any]]:
    """The test's database; on PostgreSQL small pools, so that the stores of the processes
    fit the server's connections beside the rest of the suite."""
    url, options = db_target
    return url, {**options, "max_size": 4} if backend_name == "postgres" else options


@pytest.fixture
async def stores(target: tuple[str, dict[str, Any]]) -> AsyncIterator[list[Store]]:
    """``STORES`` stores on the test's database."""
    url, options = target
    opened = [Store.open(url, **options) for _ in range(STORES)]
    yield opened
    for store in opened:
        await store.aclose()


def _turn(n: int) -> list[dict[str, Any]]:
    return [
        user(f"q{n}"),
        call(f"c{n}", "lookup"),
        output(f"c{n}", f"out {n}"),
        assistant(f"a{n}", item_id=f"m{n}"),
    ]


async def _conversation(store: Store, turns: int) -> list[Any]:
    """A chain of ``turns`` runs of four items (a tool call in each); its items."""
    runs = [NewRun(_turn(n), parent=n - 1 if n else None) for n in range(turns)]
    await store.add_runs(SID, runs, head=turns - 1)
    return [item for n in range(turns) for item in _turn(n)]


async def _one_item_runs(store: Store, count: int) -> list[Any]:
    """A chain of ``count`` runs of one user message each; its items."""
    items = [user(f"q{n}") for n in range(count)]
    runs = [NewRun([item], parent=n - 1 if n else None) for n, item in enumerate(items)]
    await store.add_runs(SID, runs, head=count - 1)
    return items


def _key(item: Any) -> str:
    return json.dumps(item, sort_keys=True)


async def _check_sound(store: Store, runs: int | None = None) -> None:
    """The session has a head and one tree of runs whose columns match their rows: a root,
    every run holding items numbered from 0, one level below its parent; ``runs`` of them,
    when given (none left behind)."""
    info = await store.session(SID)
    assert info is not None
    assert info.head_run_id is not None
    roots = "SELECT count(*) FROM runs WHERE session_id = {sid} AND parent_id IS NULL"
    assert await sql(store, roots, sid=SID) == [(1,)]
    if runs is not None:
        count = "SELECT count(*) FROM runs WHERE session_id = {sid}"
        assert await sql(store, count, sid=SID) == [(runs,)]
    bad_runs = await sql(
        store,
        "SELECT r.id FROM runs r WHERE r.session_id = {sid} AND ("
        " r.item_count < 1"
        " OR r.item_count != (SELECT count(*) FROM items i"
        "     WHERE i.session_id = r.session_id AND i.run_id = r.id)"
        " OR r.item_count != 1 + (SELECT max(position) FROM items i"
        "     WHERE i.session_id = r.session_id AND i.run_id = r.id)"
        " OR (r.parent_id IS NOT NULL AND r.depth != 1 + (SELECT p.depth FROM runs p"
        "     WHERE p.session_id = r.session_id AND p.id = r.parent_id)))",
        sid=SID,
    )
    assert bad_runs == []


async def _check_popped(store: Store, original: list[Any], popped: list[Any]) -> None:
    """Each pop removed one item, the newest at its turn: together the newest
    ``len(popped)``, and the rest is left as it was, with the tool calls of its items."""
    left = original[: len(original) - len(popped)]
    assert sorted(map(_key, popped)) == sorted(map(_key, original[len(left) :]))
    assert await store.get_items(SID) == left
    await _check_sound(store, runs=-(-len(left) // 4))
    calls = await sql(
        store,
        "SELECT count(*), count(output_item_id) FROM tool_calls WHERE session_id = {sid}",
        sid=SID,
    )
    types = Counter(item.get("type") for item in left)
    assert calls == [(types["function_call"], types["function_call_output"])]


async def test_concurrent_pops_each_remove_one_item(stores: list[Store]) -> None:
    original = await _conversation(stores[0], 25)
    popped = await workers.pop_all(stores, SID, 40)
    await _check_popped(stores[0], original, popped)


async def test_pops_racing_appends_each_do_their_own(stores: list[Store]) -> None:
    original = await _one_item_runs(stores[0], 30)
    added = [user(f"new {n}") for n in range(20)]
    race: list[Awaitable[Any]] = []  # a pop, an append, a pop, …
    for n, item in enumerate(added):
        race += [stores[n % STORES].pop_item(SID), stores[-n % STORES].add_items(SID, [item])]
    popped = (await asyncio.gather(*race))[::2]
    assert None not in popped  # the history never runs out: 30 items, 20 pops
    view = await stores[0].get_items(SID)
    assert len(view) == 30  # 20 added, 20 popped
    assert Counter(map(_key, view + popped)) == Counter(map(_key, original + added))
    kept = [item for item in view if item in original]
    assert kept == original[: len(kept)]  # pops take the newest: the oldest stay, in order
    # Every stored item is on the active path, one run each, in one chain.
    await _check_sound(stores[0], runs=30)
    forks = await sql(
        stores[0],
        "SELECT parent_id FROM runs WHERE session_id = {sid} AND parent_id IS NOT NULL"
        " GROUP BY parent_id HAVING count(*) > 1",
        sid=SID,
    )
    assert forks == []


def _summary(n: int) -> dict[str, Any]:
    return {"type": "compaction", "encrypted_content": f"summary {n}"}


async def _compact_newest_two(store: Store, n: int) -> bool:
    tail = await store.history_tail(SID, 2)
    assert tail is not None
    return await store.compact(SID, [_summary(n)], tail=tail)


async def test_compactions_racing_pops_each_do_their_own(stores: list[Store]) -> None:
    # One item a run: a compaction of the newest two never copies an item (none begins
    # inside a run), so every item is the original or a summary.
    original = await _one_item_runs(stores[0], 60)
    pops = [stores[n % STORES].pop_item(SID) for n in range(20)]
    compactions = [_compact_newest_two(stores[n % STORES], n) for n in range(8)]
    results = await asyncio.gather(*pops, *compactions)
    popped, compacted = results[:20], results[20:]
    assert None not in popped
    assert len(set(map(_key, popped))) == 20  # no item popped twice
    view = await stores[0].get_items(SID)
    # A pop takes one item from the view; a compaction replaces its newest two by one.
    assert len(view) == 60 - 20 - sum(compacted)
    assert not set(map(_key, view)) & set(map(_key, popped))
    kept = [item for item in view if item in original]
    assert kept == original[: len(kept)]
    # What follows the original items is at most the summary of a compaction that was done
    # (a later one replaces it with its own; a pop removes it).
    summaries = [_summary(n) for n, done in enumerate(compacted) if done]
    assert len(view) - len(kept) <= 1
    assert all(item in summaries for item in view[len(kept) :])
    await _check_sound(stores[0])


# ---------------------------------------------------------------------------------------------
# From processes of their own, and under python -O (where an assert would not run)


def _popper(target: tuple[str, dict[str, Any]], pops: int, optimised: bool) -> Any:
    """A process of its own that races ``pops`` pops over two stores (workers.popper_main)."""
    url, options = target
    paths = [str(Path(__file__).parent), str(Path(turnstore.__file__).parents[1])]
    return subprocess.Popen(
        [
            sys.executable,
            *(["-O"] if optimised else []),
            "-c",
            "import workers; workers.popper_main()",
            json.dumps([url, options, SID, pops, 2]),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
    )


@pytest.fixture
def processes() -> Iterator[list[Any]]:
    """The test's processes; none outlives it (its database is dropped next)."""
    started: list[Any] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def _race(children: Sequence[Any], optimised: bool) -> list[Any]:
    """Start the children's pops at once; what they popped, together."""
    for child in children:  # each has its stores open
        ready = child.stdout.readline().split()
        assert ready == ["ready", *(["optimised"] if optimised else [])], child.stderr.read()
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    popped: list[Any] = []
    for child in children:
        out, err = child.communicate(timeout=120)  # a hang fails; nothing is timed
        assert child.returncode == 0, err
        popped += json.loads(out)
    return popped


@pytest.mark.parametrize("optimised", [False, True], ids=["python", "python-O"])
def test_pops_from_two_processes_each_remove_one_item(
    target: tuple[str, dict[str, Any]], processes: list[Any], optimised: bool
) -> None:
    url, options = target

    async def conversation() -> list[Any]:
        async with Store.open(url, **options) as store:
            return await _conversation(store, 15)

    async def check(popped: list[Any]) -> None:
        async with Store.open(url, **options) as store:
            await _check_popped(store, original, popped)

    original = asyncio.run(conversation())
    processes += [_popper(target, 20, optimised) for _ in range(2)]
    asyncio.run(check(_race(processes, optimised)))

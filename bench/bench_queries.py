"""Query benchmarks: full-text search over 100,000 runs, and the session catalogue's pages.

    .venv/bin/python bench/bench_queries.py                   # SQLite, 100,000 runs
    .venv/bin/python bench/bench_queries.py --runs 20000      # smaller
    .venv/bin/python bench/bench_queries.py --postgres postgresql://postgres@127.0.0.1/test
    .venv/bin/python bench/bench_queries.py --json bench/results/queries.json

The store holds ``--runs`` sessions of one realistic SDK turn each (user message, tool call and
output, answer: ``_common.make_turn``), i.e. that many sessions and runs and four times as many
items, spread over 1,000 users. It is built by a bulk path (many sessions per transaction,
through the same ``graft`` operation ``Store.add_runs`` uses) and kept between runs (SQLite:
``--dir``, default ``bench/results``; delete the file to rebuild).

The corpus's words come from a vocabulary of about 70, so every one of them is in most items.
Rare words are planted to make searches of known selectivity: an exact phrase in 10 runs
(and its words apart in 10 more), a word in 10 runs and a word in 1% of the runs. Measured:

- ``search``: each planted query; a common word (most items match: the cost of ranking them
  all, no target); ``order="recent"`` (no ranking) for the 1% word and the common word; and
  the ``LIKE '%…%'`` scan a blob store needs, for comparison.
- ``sessions``: the newest 50 sessions (page 1), page 1,000 (after 49,950 sessions, reached by
  following the cursors), the newest 50 of one user, and with a metadata filter.

Targets (issue 4): search <= 2 ms; newest 50 <= 5 ms; page 1,000 within noise of page 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import _kept
from _common import Results, Target, make_turn, measure, medians_table
from turnstore import FIRST_PAGE, PageCursor, Store
from turnstore.core import append, catalogue
from turnstore.core.append import GraftRun
from turnstore.core.codec import prepare_items
from turnstore.core.ops import Fetch, Op, Query

PHRASE = "zeppelin maintenance schedule"
RARE = "quokka"
COMMON_PLANTED = "albatross"
CHUNK = 2_000  # sessions per transaction while building


def _planted(index: int, runs: int) -> str | None:
    """The text planted in run ``index``'s user message, if any."""
    step = max(1, runs // 10)
    if index % step == 0:
        return f"Please check the {PHRASE} again."
    if index % step == 1:
        return "The schedule for the zeppelin needs maintenance."  # the words, apart
    if index % step == 2:
        return f"Is a {RARE} a marsupial?"
    if index % 100 == 3:
        return f"An {COMMON_PLANTED} flew over the warehouse."
    return None


def _bulk(chunk: Sequence[tuple[str, list[GraftRun], catalogue.SessionPatch, Any]]) -> Op[None]:
    for session_id, runs, patch, when in chunk:
        yield from append.graft(session_id, runs, 0, when)
        yield from catalogue.update_session(session_id, patch, when)


async def build(store: Store, runs: int, log: Any) -> None:
    """``runs`` sessions of one turn each, a microsecond apart, newest last."""
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    began = time.perf_counter()
    for first in range(0, runs, CHUNK):
        chunk = []
        for index in range(first, min(runs, first + CHUNK)):
            turn = make_turn(index, seed=4, question=_planted(index, runs))
            items = [item for batch in turn for item in batch]
            when = store.backend.bind_time(start + timedelta(milliseconds=index))
            patch = catalogue.SessionPatch(
                user_id=f"user{index % 1000:04d}", metadata=f'{{"tier": {index % 3}}}'
            )
            chunk.append((f"session-{index:07d}", [GraftRun(prepare_items(items))], patch, when))
        await store.backend.run(lambda chunk=chunk: _bulk(chunk), write=True)  # type: ignore[misc]
        done = min(runs, first + CHUNK)
        rate = done / (time.perf_counter() - began)
        log(f"  built {done:,} / {runs:,} runs ({rate:,.0f} runs/s)")


def _like_scan(store: Store, pattern: str) -> Any:
    placeholder = ":p" if store.backend.dialect == "sqlite" else "%(p)s"
    statement = f"SELECT id FROM items WHERE text LIKE {placeholder} LIMIT 20"

    async def action() -> None:
        def op() -> Op[Any]:
            rows = yield Query(statement, {"p": f"%{pattern}%"}, Fetch.ALL, raw=True)
            return rows

        await store.backend.run(op, write=False)

    return action


async def bench(store: Store, runs: int, repeats: int, log: Any) -> tuple[Results, list[Any]]:
    results = Results()
    step = max(1, runs // 10)
    expected = {
        f'"{PHRASE}"': 10,
        "zeppelin schedule maintenance": 20,
        RARE: len(range(2, runs, step)),
        COMMON_PLANTED: 20,  # limit
    }
    log("search")
    for query, count in expected.items():
        hits = await store.search(query)
        if len(hits) != min(count, 20):
            raise AssertionError(f"search {query!r} found {len(hits)}, not {min(count, 20)}")

        async def search(query: str = query) -> None:
            await store.search(query)

        results.add(f"search {query}", "turnstore", await measure(search, repeats=repeats))
    results.add(
        "search common word (most items match)",
        "turnstore",
        await measure(lambda: store.search("refund"), repeats=max(3, repeats // 10)),
    )
    for query in (COMMON_PLANTED, "refund"):
        results.add(
            f"search {query}, order=recent",
            "turnstore",
            await measure(lambda q=query: store.search(q, order="recent"), repeats=repeats),
        )
    results.add(
        f"LIKE scan for {PHRASE!r} (reference)",
        "turnstore",
        await measure(_like_scan(store, PHRASE), repeats=max(3, repeats // 10)),
    )

    log("sessions: following cursors to page 1,000")
    first = await store.sessions(limit=50)
    assert first[0].session_id == f"session-{runs - 1:07d}", first[0]
    # The deepest page there is, up to the 1,000th (a small run has fewer): its cursor.
    deepest: PageCursor = FIRST_PAGE
    following, pages = first.next_cursor, 1
    while pages < 1000 and following is not None:
        deepest = following
        following = (await store.sessions(limit=50, after=deepest)).next_cursor
        pages += 1
    thousandth = await store.sessions(limit=50, after=deepest)
    if runs >= 50_000:
        assert thousandth[0].session_id == f"session-{runs - 1 - 999 * 50:07d}", thousandth[0]

    results.add(
        "sessions page 1",
        "turnstore",
        await measure(lambda: store.sessions(limit=50), repeats=repeats),
    )
    results.add(
        f"sessions page {pages:,}",
        "turnstore",
        await measure(lambda: store.sessions(limit=50, after=deepest), repeats=repeats),
    )
    results.add(
        "sessions page 1, one user",
        "turnstore",
        await measure(lambda: store.sessions(user_id="user0007", limit=50), repeats=repeats),
    )
    results.add(
        "sessions page 1, metadata tier=1",
        "turnstore",
        await measure(lambda: store.sessions(metadata={"tier": 1}, limit=50), repeats=repeats),
    )
    t = "turnstore"
    targets = [
        Target("search exact phrase (ms)", (f'search "{PHRASE}"', t), 2.0),
        Target("search words apart (ms)", ("search zeppelin schedule maintenance", t), 2.0),
        Target("search rare word (ms)", (f"search {RARE}", t), 2.0),
        Target("search word in 1% of runs (ms)", (f"search {COMMON_PLANTED}", t), 2.0),
        Target("search common word, recent (ms)", ("search refund, order=recent", t), 2.0),
        Target("newest 50 sessions (ms)", ("sessions page 1", t), 5.0),
        Target("page 1,000 / page 1", ("sessions page 1,000", t), 1.5, ("sessions page 1", t)),
    ]
    return results, targets


async def main_async(args: argparse.Namespace) -> int:
    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.postgres:
        schema = f"bench_queries_{args.runs}"
        store = Store.open(args.postgres, schema=schema)
        where = f"{args.postgres} schema {schema}"
    else:
        path = Path(args.dir) / f"queries-{args.runs}.db"
        store = Store.open(path)
        where = str(path)
    try:
        existing = await _kept.count(store, "runs")
        if existing != args.runs:
            if existing:
                raise SystemExit(f"{where} holds {existing} runs, not {args.runs}: delete it")
            log(f"building {args.runs:,} runs in {where}")
            await build(store, args.runs, log)
            await _kept.analyze(store)
        results, targets = await bench(store, args.runs, args.repeats, log)
    finally:
        await store.aclose()
    print(f"\nturnstore queries, {args.runs:,} sessions/runs, {where}\n")
    print(medians_table(results, ["turnstore"]))
    return _kept.report(results, targets, args.json, runs=args.runs)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the benchmark."""
    return _kept.main(
        __doc__ or "", ("--runs", 100_000, "sessions (one run each)"), 200, main_async, argv
    )


if __name__ == "__main__":
    sys.exit(main())

"""Query benchmarks: full-text search over a bulk-built corpus of runs (issue 31), and the
session catalogue's pages over sessions built through turnstore (issue 4).

    .venv/bin/python bench/bench_queries.py                    # SQLite: search at 100,000 runs
    .venv/bin/python bench/bench_queries.py --search-runs 1000000 --only search   # at 1M
    .venv/bin/python bench/bench_queries.py --postgres postgresql://postgres@127.0.0.1/test
    .venv/bin/python bench/bench_queries.py --json bench/results/queries.json

Search: ``_search_corpus.py`` writes ``--search-runs`` runs (two items each) straight into
turnstore's tables, with words of every frequency: in every run, in 10%, in 1%, in 10 runs,
a phrase in 10 runs and its words apart in 10 more, and two words in every run never side by
side. It is built once and kept outside the repository (``--cache``, default
``/tmp/turnstore-bench-cache``; PostgreSQL: a schema named after it); delete it to rebuild.
Each query is timed ``--search-repeats`` times (median): ranked, newest first, and counted.

Sessions: the store holds ``--runs`` sessions of one realistic SDK turn each
(``_common.make_turn``), spread over 1,000 users, built through the same ``graft`` operation
``Store.add_runs`` uses and kept between runs (SQLite: ``--dir``, default ``bench/results``).
Measured: the newest 50 sessions (page 1), page 1,000 (after 49,950 sessions, reached by
following the cursors), the newest 50 of one user, and with a metadata filter.

Targets: every search <= 20 ms; a rare word, a phrase and the newest matches <= 2 ms (issue
31); newest 50 sessions <= 5 ms; page 1,000 within noise of page 1 (issue 4).
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
import _search_corpus as corpus
from _common import Results, Target, make_turn, measure, medians_table
from turnstore import FIRST_PAGE, PageCursor, Store
from turnstore.core import append, catalogue
from turnstore.core.append import GraftRun
from turnstore.core.codec import prepare_items
from turnstore.core.ops import Op

CHUNK = 2_000  # sessions per transaction while building
SEARCH_MS, QUICK_MS = 20.0, 2.0


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
            turn = make_turn(index, seed=4)
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


async def bench_search(
    store: Store, runs: int, repeats: int, log: Any
) -> tuple[Results, list[Target]]:
    """Each corpus query ranked, the common ones newest first, and counted; their targets."""
    results = Results()
    log("search")
    targets: list[Target] = []
    quick = {corpus.RARE, f'"{corpus.PHRASE}"', "zeppelin schedule maintenance"}
    cases = [(query, "relevance") for query in corpus.expected(runs)]
    cases += [(corpus.EVERY, "recent"), (corpus.APART, "recent")]
    for query, order in cases:
        expected = corpus.expected(runs)[query]
        hits = await store.search(query, order=order)  # type: ignore[arg-type]
        if len(hits) != min(expected, 20):
            raise AssertionError(f"search {query!r} found {len(hits)}, not {min(expected, 20)}")
        case = f"search {query}" + (", newest first" if order == "recent" else "")

        async def search(query: str = query, order: Any = order) -> None:
            await store.search(query, order=order)

        results.add(case, "turnstore", await measure(search, repeats=repeats))
        limit = QUICK_MS if query in quick or order == "recent" else SEARCH_MS
        if not (order == "recent" and query == corpus.APART):
            targets.append(Target(f"{case} (ms)", (case, "turnstore"), limit))
    for query in (corpus.EVERY, corpus.HUNDREDTH, corpus.RARE):
        case = f"count {query}"

        async def count(query: str = query) -> None:
            await store.search_count(query)

        results.add(case, "turnstore", await measure(count, repeats=repeats))
        targets.append(Target(f"{case} (ms)", (case, "turnstore"), SEARCH_MS))
    return results, targets


async def bench_sessions(
    store: Store, runs: int, repeats: int, log: Any
) -> tuple[Results, list[Target]]:
    """The catalogue's pages; their targets."""
    results = Results()
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
        Target("newest 50 sessions (ms)", ("sessions page 1", t), 5.0),
        Target("page 1,000 / page 1", ("sessions page 1,000", t), 1.5, ("sessions page 1", t)),
    ]
    return results, targets


async def sessions_store(args: argparse.Namespace, log: Any) -> tuple[Store, str]:
    """The sessions corpus, built if it is not there yet."""
    if args.postgres:
        schema = f"bench_queries_{args.runs}"
        store, where = Store.open(args.postgres, schema=schema), f"{args.postgres} schema {schema}"
    else:
        path = Path(args.dir) / f"queries-{args.runs}.db"
        store, where = Store.open(path), str(path)
    existing = await _kept.count(store, "runs")
    if existing != args.runs:
        if existing:
            await store.aclose()
            raise SystemExit(f"{where} holds {existing} runs, not {args.runs}: delete it")
        log(f"building {args.runs:,} runs in {where}")
        await build(store, args.runs, log)
        await _kept.analyze(store)
    return store, where


async def main_async(args: argparse.Namespace) -> int:
    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    results, targets, where = Results(), list[Target](), list[str]()
    parts = ("search", "sessions") if args.only is None else (args.only,)
    for part in parts:
        if part == "search":
            store, place = await corpus.open_corpus(
                args.search_runs, postgres=args.postgres, cache=Path(args.cache), log=log
            )
            size, action, repeats = args.search_runs, bench_search, args.search_repeats
        else:
            store, place = await sessions_store(args, log)
            size, action, repeats = args.runs, bench_sessions, args.repeats
        try:
            found, aims = await action(store, size, repeats, log)
        finally:
            await store.aclose()
        results.rows.extend(found.rows)
        targets.extend(aims)
        where.append(f"{part}: {size:,} runs in {place}")
    print("\nturnstore queries; " + "; ".join(where) + "\n")
    print(medians_table(results, ["turnstore"]))
    return _kept.report(results, targets, args.json, runs=args.runs, search_runs=args.search_runs)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--search-runs", type=int, default=100_000, help="search corpus runs")
    parser.add_argument("--search-repeats", type=int, default=5, help="timed calls per search")
    parser.add_argument("--only", choices=("search", "sessions"), help="one part only")
    parser.add_argument(
        "--cache", default="/tmp/turnstore-bench-cache", help="where the search corpus is kept"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the benchmark."""
    return _kept.main(
        __doc__ or "",
        ("--runs", 100_000, "sessions (one run each)"),
        200,
        main_async,
        argv,
        options=_options,
    )


if __name__ == "__main__":
    sys.exit(main())

"""The search benchmark's corpus (issue 31): runs holding words of every frequency, written
straight into turnstore's tables by bulk insert (executemany on SQLite, COPY on PostgreSQL),
then indexed for search in one pass.

Each run is one user message and one answer (two items), 100 runs a session. The words:

- ``ledger``: in every run's question; ``refund`` and ``invoice``: in every answer, never
  side by side (two common words apart: the exact-phrase tier finds nothing);
- ``harbor``: in 10% of the runs, ``albatross`` in 1%;
- ``quokka``: in 10 runs; the phrase ``zeppelin maintenance schedule`` in 10 runs and its
  words apart in 10 more.

The rest of each text is drawn from a vocabulary of 48 plain words. A corpus is built once
and kept outside the repository (SQLite: ``search-corpus-v1-<runs>.db`` in the cache
directory; PostgreSQL: the schema ``bench_search_corpus_v1_<runs>``): delete it to rebuild.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import _kept
from turnstore import Store

VERSION = 1
RUNS_PER_SESSION = 100
EVERY, TENTH, HUNDREDTH, RARE = "ledger", "harbor", "albatross", "quokka"
PHRASE = "zeppelin maintenance schedule"
APART = "refund invoice"
_VOCAB = (
    "account", "address", "agent", "answer", "balance", "booking", "branch", "budget",
    "carrier", "catalog", "channel", "checkout", "city", "client", "contract", "coupon",
    "credit", "customer", "date", "delivery", "deposit", "discount", "email", "flight",
    "garden", "hotel", "journey", "kitchen", "label", "lantern", "market", "meeting", "number",
    "office", "package", "parcel", "payment", "pickup", "planet", "printer", "quarter",
    "receipt", "river", "station", "ticket", "travel", "weather", "window",
)  # fmt: skip
_START = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _words(n: int, salt: int, count: int) -> str:
    return " ".join(_VOCAB[(n * salt + j * 7) % len(_VOCAB)] for j in range(count))


def _planted(n: int, runs: int) -> str:
    step = max(1, runs // 10)
    words = []
    if n % 10 == 1:
        words.append(f"the {TENTH} is quiet")
    if n % 100 == 3:
        words.append(f"an {HUNDREDTH} flew over")
    if n % step == 2:
        words.append(f"is a {RARE} a marsupial")
    if n % step == 5:
        words.append(f"check the {PHRASE} again")
    if n % step == 6:
        words.append("the schedule of the zeppelin needs maintenance")
    return " ".join(words)


def texts(n: int, runs: int) -> tuple[str, str]:
    """Run ``n``'s question and answer."""
    question = f"Please look up {EVERY} entry {n} {_words(n, 13, 14)} {_planted(n, runs)}"
    answer = (
        f"The refund for order {n} was approved {_words(n, 29, 12)} and the invoice "
        f"went out {_words(n, 31, 12)}"
    )
    return question.strip(), answer


def expected(runs: int) -> dict[str, int]:
    """How many items each query matches."""
    step = max(1, runs // 10)
    planted = len(range(0, runs, step))
    return {
        EVERY: runs,
        TENTH: len(range(1, runs, 10)),
        HUNDREDTH: len(range(3, runs, 100)),
        RARE: planted,
        f'"{PHRASE}"': planted,
        "zeppelin schedule maintenance": 2 * planted,
        APART: runs,
    }


def _rows(runs: int) -> Iterator[tuple[tuple[Any, ...], list[tuple[Any, ...]]]]:
    """Each run's row and its items' rows (ids from 1, created a millisecond apart)."""
    for n in range(runs):
        sid = f"search-{n // RUNS_PER_SESSION:06d}"
        run_id = n + 1
        parent = None if n % RUNS_PER_SESSION == 0 else run_id - 1
        when = (_START + timedelta(milliseconds=n)).isoformat(timespec="microseconds")
        question, answer = texts(n, runs)
        run = (run_id, sid, parent, n % RUNS_PER_SESSION, question, answer, "agent", "model",
               "completed", 2, when, when)  # fmt: skip
        user = json.dumps({"role": "user", "content": question})
        reply = json.dumps(
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": answer}]}
        )  # fmt: skip
        items = [
            (2 * n + 1, sid, run_id, 0, "message", "user", question, user, when),
            (2 * n + 2, sid, run_id, 1, "message", "assistant", answer, reply, when),
        ]
        yield run, items


def _sessions(runs: int) -> Iterator[tuple[Any, ...]]:
    for first in range(0, runs, RUNS_PER_SESSION):
        when = (_START + timedelta(milliseconds=first)).isoformat(timespec="microseconds")
        last = min(runs, first + RUNS_PER_SESSION)
        yield (f"search-{first // RUNS_PER_SESSION:06d}", f"user{first % 1000:04d}", last, when)


_RUN_COLUMNS = (
    "id, session_id, parent_id, depth, user_message, assistant_message, agent_name, model, "
    "status, item_count, created_at, updated_at"
)
_ITEM_COLUMNS = "id, session_id, run_id, position, type, role, text, data, created_at"
_SESSION_COLUMNS = "session_id, user_id, head_run_id, created_at, updated_at"


def _batches(runs: int, size: int) -> Iterator[tuple[list[Any], list[Any]]]:
    batch_runs: list[Any] = []
    batch_items: list[Any] = []
    for run, items in _rows(runs):
        batch_runs.append(run)
        batch_items.extend(items)
        if len(batch_runs) == size:
            yield batch_runs, batch_items
            batch_runs, batch_items = [], []
    if batch_runs:
        yield batch_runs, batch_items


def _build_sqlite(path: Path, runs: int, log: Callable[[str], None]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        conn.executemany(
            f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
            ((sid, uid, head, when, when) for sid, uid, head, when in _sessions(runs)),
        )
        for batch_runs, batch_items in _batches(runs, 50_000):
            conn.executemany(f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('?' * 12)})",
                             batch_runs)  # fmt: skip
            conn.executemany(f"INSERT INTO items ({_ITEM_COLUMNS}) VALUES ({', '.join('?' * 9)})",
                             batch_items)  # fmt: skip
        log("  rows written; indexing for search")
        conn.execute("INSERT INTO items_fts (rowid, text) SELECT id, text FROM items")
        conn.execute("UPDATE items_fts_state SET indexed_through = (SELECT max(id) FROM items)")
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    finally:
        conn.close()


def _build_postgres(url: str, schema: str, runs: int, log: Callable[[str], None]) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s "
            "AND tablename = 'items' AND indexname NOT IN (SELECT conname FROM pg_constraint)",
            (schema,),
        ).fetchall()
        with conn.transaction():
            for name, _ in indexes:  # rebuilt after the rows: far faster than kept up
                conn.execute(f"DROP INDEX {name}")
            with conn.cursor().copy(f"COPY sessions ({_SESSION_COLUMNS}) FROM STDIN") as copy:
                for sid, uid, head, when in _sessions(runs):
                    copy.write_row((sid, uid, head, when, when))
            for batch_runs, batch_items in _batches(runs, 50_000):
                with conn.cursor().copy(f"COPY runs ({_RUN_COLUMNS}) FROM STDIN") as copy:
                    for row in batch_runs:
                        copy.write_row(row)
                with conn.cursor().copy(f"COPY items ({_ITEM_COLUMNS}) FROM STDIN") as copy:
                    for row in batch_items:
                        copy.write_row(row)
            log("  rows written; indexing for search")
            for _, definition in indexes:
                conn.execute(definition)
            for table in ("runs", "items"):
                conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT max(id) FROM {table}))"
                )
        conn.execute("VACUUM ANALYZE sessions, runs, items")


def name(runs: int) -> str:
    """The corpus's file stem or schema name."""
    return f"search_corpus_v{VERSION}_{runs}"


async def open_corpus(
    runs: int, *, postgres: str | None, cache: Path, log: Callable[[str], None]
) -> tuple[Store, str]:
    """The corpus of ``runs`` runs, built if it is not there yet, open; and where it is."""
    if postgres:
        schema = f"bench_{name(runs)}"
        store, where = Store.open(postgres, schema=schema), f"{postgres} schema {schema}"
    else:
        cache.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (set-up, once)
        path = cache / f"{name(runs).replace('_', '-')}.db"
        store, where = Store.open(path), str(path)
    existing = await _kept.count(store, "runs")
    if existing == runs:
        return store, where
    if existing:
        await store.aclose()
        raise SystemExit(f"{where} holds {existing} runs, not {runs}: delete it")
    log(f"building the search corpus of {runs:,} runs in {where}")
    began = time.perf_counter()
    await store.aclose()
    if postgres:
        _build_postgres(postgres, f"bench_{name(runs)}", runs, log)
        store = Store.open(postgres, schema=f"bench_{name(runs)}")
    else:
        _build_sqlite(path, runs, log)
        store = Store.open(path)
    log(f"  built in {time.perf_counter() - began:,.0f} s")
    return store, where

"""The sessions list across the whole store (issue 29): sorted and filtered over 100,000
sessions, on SQLite and PostgreSQL.

    .venv/bin/python bench/bench_catalogue.py                       # SQLite, 100,000 sessions
    .venv/bin/python bench/bench_catalogue.py --postgres postgresql://postgres@127.0.0.1/test
    .venv/bin/python bench/bench_catalogue.py --sessions 20000 --repeats 5 --json out.json

The corpus is written by bulk SQL (one INSERT ... SELECT per table, rows made by the database
from a counter): ``--sessions`` sessions over 1,000 users and 3 metadata tiers, three runs
each (agents and models in rotation, tokens varied, one run in 50 failed, ~150 words of
messages each) and one tool call per run (one in 40 failed). Kept between runs (SQLite:
``--dir``; PostgreSQL: a schema named after the size); delete it to rebuild.

Measured, each a page of 30 as the viewer asks (``Store.sessions``) or the count above it
(``Store.count_sessions``): newest first; by tokens, runs, tool calls and failures (each
session's totals, kept by the writes: an index range); filtered by a failed tool call, a run
status, a model and a user, a title; their counts; and the third page of some (a keyset
cursor). Target: every case well under a second (<= 500 ms median; the aim is 100 ms).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _kept
from _common import Results, Target, measure
from turnstore import Store
from turnstore.domain.toolcalls import failed_sql
from turnstore.postgres.migrations import TOTALS_BACKFILL as POSTGRES_TOTALS
from turnstore.sqlite.migrations import TOTALS_BACKFILL as SQLITE_TOTALS

TARGET_MS = 500.0
PAGE = 30
RUNS_PER_SESSION = 3
WORDS = "the order refund weather invoice booking flight hotel account payment delivery"

# Each dialect's spelling of the corpus's generated values (n: the row's counter).
_SQLITE = {
    "counter": """WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c
                  WHERE n < {last})""",
    "from": "c",
    "text": "printf('%s-%07d', '{prefix}', {n})",
    "time": "strftime('%Y-%m-%dT%H:%M:%S', 1735689600 + {n}, 'unixepoch') || '.000000+00:00'",
    "json": "json_object('tier', {n} % 3)",
}
_POSTGRES = {
    "counter": "WITH c(n) AS (SELECT generate_series(0, {last})::bigint)",
    "from": "c",
    "text": "'{prefix}-' || lpad(({n})::text, 7, '0')",
    "time": "timestamptz '2025-01-01 00:00:00+00' + make_interval(secs => {n})",
    "json": "jsonb_build_object('tier', {n} % 3)",
}


def _corpus_sql(dialect: str, sessions: int) -> list[str]:
    """The statements that write the corpus."""
    d = _SQLITE if dialect == "sqlite" else _POSTGRES
    sid = d["text"].format(prefix="s", n="n")
    run_sid = d["text"].format(prefix="s", n="n / 3")
    message = (
        f"'{WORDS} ' || repeat('{WORDS} ', 12)"
        if dialect != "sqlite"
        else (f"'{WORDS} ' || replace(printf('%.12c', 'x'), 'x', '{WORDS} ')")
    )
    return [
        f"""{d["counter"].format(last=sessions - 1)}
        INSERT INTO sessions (session_id, user_id, title, metadata, created_at, updated_at)
        SELECT {sid}, {d["text"].format(prefix="user", n="n % 1000")},
               'Question ' || n || ' about the ' || CASE n % 4 WHEN 0 THEN 'refund'
                   WHEN 1 THEN 'weather' WHEN 2 THEN 'invoice' ELSE 'booking' END,
               {d["json"].format(n="n")}, {d["time"].format(n="n")},
               {d["time"].format(n="n + 7")}
        FROM {d["from"]}""",
        f"""{d["counter"].format(last=sessions * RUNS_PER_SESSION - 1)}
        INSERT INTO runs (session_id, depth, user_message, assistant_message, agent_name,
                          model, status, requests, input_tokens, output_tokens, total_tokens,
                          item_count, created_at, updated_at)
        SELECT {run_sid}, n % 3, {message}, {message},
               'agent-' || (n % 5), 'model-' || (n % 4),
               CASE WHEN n % 50 = 7 THEN 'failed' ELSE 'completed' END, 1,
               (n * 7919) % 40000, (n * 104729) % 2000,
               (n * 7919) % 40000 + (n * 104729) % 2000, 4,
               {d["time"].format(n="n / 3")}, {d["time"].format(n="n / 3")}
        FROM {d["from"]}""",
        """INSERT INTO tool_calls (session_id, run_id, call_id, tool_name, kind, arguments,
                                    output, status, error, created_at)
        SELECT session_id, id, 'call-' || id, 'lookup', 'function', '{"q": 1}',
               'done', CASE WHEN id % 40 = 3 THEN 'failed' ELSE 'completed' END,
               CASE WHEN id % 40 = 3 THEN 'boom' END, created_at
        FROM runs""",
    ]


async def build(store: Store, sessions: int, log: Any) -> None:
    """Write the corpus, each session's totals (the writes keep them; bulk SQL does not) and
    the planner's statistics."""
    log(f"building {sessions:,} sessions, {sessions * RUNS_PER_SESSION:,} runs and tool calls")
    totals = SQLITE_TOTALS if store.dialect == "sqlite" else POSTGRES_TOTALS
    await _kept.execute(store, [*_corpus_sql(store.dialect, sessions), *totals])
    await _kept.analyze(store)
    log(f"  {await _kept.count(store, 'tool_calls', failed_sql()):,} failed tool calls")


# (case, what Store.sessions / count_sessions is called with; "page" N: the Nth page, reached
# by its keyset cursor, is what is timed).
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("newest first", "sessions", {}),
    ("by tokens", "sessions", {"order_by": "tokens"}),
    ("by runs", "sessions", {"order_by": "runs"}),
    ("by tool calls", "sessions", {"order_by": "tool_calls"}),
    ("by failures", "sessions", {"order_by": "failures"}),
    ("failed tool call, by tokens", "sessions", {"failed_tool_calls": True, "order_by": "tokens"}),
    ("a run failed, newest first", "sessions", {"run_status": "failed"}),
    ("model + user, by tokens", "sessions", {"model": "model-1", "user_id": "user-0000007",
                                             "order_by": "tokens"}),
    ("title, by updated", "sessions", {"title": "refund", "order_by": "updated_at"}),
    ("by tokens, page 3", "sessions", {"order_by": "tokens", "page": 3}),
    ("by failures, page 3", "sessions", {"order_by": "failures", "page": 3}),
    ("failed tool call, by runs, page 3", "sessions", {"failed_tool_calls": True,
                                                       "order_by": "runs", "page": 3}),
    ("count: all", "count_sessions", {}),
    ("count: failed tool call", "count_sessions", {"failed_tool_calls": True}),
    ("count: a run failed + model", "count_sessions", {"run_status": "failed", "model": "model-2"}),
]  # fmt: skip


async def bench(store: Store, repeats: int, log: Any) -> Results:
    """Each case timed ``repeats`` times after a warm-up call."""
    results = Results()
    for case, method, arguments in CASES:
        log(f"  {case}")
        call = getattr(store, method)
        kwargs = {key: value for key, value in arguments.items() if key != "page"}
        extra: dict[str, Any] = {"limit": PAGE} if method == "sessions" else {}
        for _ in range(arguments.get("page", 1) - 1):
            cursor = (await call(**kwargs, **extra)).next_cursor
            if cursor is None:  # fewer pages (a small corpus): the last one is timed
                break
            extra["after"] = cursor

        async def action(
            call: Any = call, kwargs: dict[str, Any] = kwargs, extra: dict[str, Any] = extra
        ) -> None:
            await call(**kwargs, **extra)

        results.add(case, "turnstore", await measure(action, repeats=repeats))
    return results


async def main_async(args: argparse.Namespace) -> int:
    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.postgres:
        store = Store.open(args.postgres, schema=f"bench_catalogue_{args.sessions}")
    else:
        store = Store.open(Path(args.dir) / f"catalogue-{args.sessions}.db")
    try:
        existing = await _kept.count(store, "sessions")
        if existing != args.sessions:
            if existing:
                raise SystemExit(f"{store.label} holds {existing} sessions: delete it")
            await build(store, args.sessions, log)
        results = await bench(store, args.repeats, log)
        where = store.label
    finally:
        await store.aclose()
    print(f"\nturnstore's sessions list, {args.sessions:,} sessions, {where}\n")
    print(f"{'case':34} {'min':>9} {'median':>9} {'max':>9}")
    for row in results.rows:
        t = row.timing
        print(f"{row.case:34} {t.min_ms:7.1f}ms {t.median_ms:7.1f}ms {t.max_ms:7.1f}ms")
    targets = [Target(f"{case} (ms)", (case, "turnstore"), TARGET_MS) for case, _, _ in CASES]
    return _kept.report(results, targets, args.json, sessions=args.sessions)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the benchmark."""
    size = ("--sessions", 100_000, "sessions (3 runs each)")
    return _kept.main(__doc__ or "", size, 7, main_async, argv)


if __name__ == "__main__":
    sys.exit(main())

"""Importing the SDK's session databases into turnstore: 100,000 items, target <= 10 s.

    .venv/bin/python bench/bench_import.py            # 100,000 items per case (a few minutes)
    .venv/bin/python bench/bench_import.py --items 20000
    .venv/bin/python bench/bench_import.py --json bench/results/import.json

The sources are written by the SDK's own ``SQLiteSession`` and ``AdvancedSQLiteSession``
(realistic turns from ``_common``: user message, tool call and output, answer, about 1.5 KB of
JSON per turn), and each is imported into a fresh turnstore SQLite file by the code
``turnstore import`` runs. Measured per case: the first import, the second import of the same
source (which adds nothing), and the import of the store's JSONL export into a fresh file.
Wall-clock seconds are the figure; CPU seconds (every thread of the process) are printed too,
since they do not depend on what else the machine is running.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import environment, history, write_json
from turnstore import Store
from turnstore.importers import ImportSummary, import_source, open_source

TARGET_S = 10.0
Sessions = dict[str, list[dict[str, Any]]]


async def _write_sdk(path: Path, sessions: Sessions, advanced: bool) -> None:
    from agents.extensions.memory.advanced_sqlite_session import AdvancedSQLiteSession
    from agents.memory import SQLiteSession

    for sid, items in sessions.items():
        session: Any = (
            AdvancedSQLiteSession(session_id=sid, db_path=path, create_tables=True)
            if advanced
            else SQLiteSession(sid, path)
        )
        try:
            for start in range(0, len(items), 10_000):
                await session.add_items(items[start : start + 10_000])
        finally:
            session.close()


async def _import(source: Path, target: Path) -> tuple[float, float, ImportSummary]:
    """Wall-clock and CPU seconds of one import, and its summary."""
    store = Store.open(target)
    src = open_source(str(source))
    try:
        start, cpu = time.perf_counter(), time.process_time()
        summary = await import_source(store, src)
        return time.perf_counter() - start, time.process_time() - cpu, summary
    finally:
        await src.aclose()
        await store.aclose()


async def _export(db: Path, sessions: list[str], out: Path) -> None:
    """Every branch of every session as JSONL, as ``turnstore export`` writes it."""
    async with Store.open(db) as store:
        with out.open("w", encoding="utf-8") as file:
            for sid in sessions:
                file.write(await store.export(sid, "jsonl", all_branches=True))


async def _case(
    rows: list[dict[str, Any]], name: str, work: Path, sessions: Sessions, advanced: bool
) -> None:
    slug = name.split(",")[0] + str(len(sessions))
    source, target = work / f"{slug}.sdk.db", work / f"{slug}.turnstore.db"
    await _write_sdk(source, sessions, advanced)
    items = sum(len(v) for v in sessions.values())

    def row(step: str, wall: float, cpu: float) -> None:
        rows.append({"case": name, "step": step, "items": items, "seconds": wall, "cpu": cpu})

    wall, cpu, summary = await _import(source, target)
    assert summary.items == items, summary
    row("first import", wall, cpu)
    wall, cpu, again = await _import(source, target)
    assert (again.items, again.unchanged_items) == (0, items), again
    row("second import (adds 0)", wall, cpu)
    jsonl = work / f"{slug}.jsonl"
    await _export(target, list(sessions), jsonl)
    wall, cpu, copied = await _import(jsonl, work / f"{slug}.copy.db")
    assert copied.items == items, copied
    row("import of its JSONL export", wall, cpu)


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000, help="items per case")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument(
        "--case",
        action="append",
        choices=["sqlite", "sessions", "advanced"],
        help="run only these cases (repeatable; default: all three)",
    )
    args = parser.parse_args(argv)
    cases = set(args.case or ["sqlite", "sessions", "advanced"])
    n = args.items - args.items % 400  # whole turns, in 100 equal sessions
    items = history(n)
    per = n // 100
    many = {f"s{i:03d}": items[i * per : (i + 1) * per] for i in range(100)}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "sqlite" in cases:
            await _case(rows, "SQLiteSession, 1 session", work, {"big": items}, False)
        if "sessions" in cases:
            await _case(rows, "SQLiteSession, 100 sessions", work, many, False)
        if "advanced" in cases:
            await _case(rows, "AdvancedSQLiteSession, 1 session", work, {"big": items}, True)
    print(f"{'case':34} {'step':28} {'items':>9} {'wall s':>7} {'cpu s':>7} {'items/s':>9}")
    for r in rows:
        print(
            f"{r['case']:34} {r['step']:28} {r['items']:>9,} {r['seconds']:>7.2f} "
            f"{r['cpu']:>7.2f} {r['items'] / r['seconds']:>9,.0f}"
        )
    worst = max(r["seconds"] for r in rows if r["step"] == "first import")
    scaled = worst * 100_000 / n
    verdict = "ok" if scaled <= TARGET_S else "MISSED"
    print(
        f"\nslowest first import: {worst:.2f} s for {n:,} items "
        f"({scaled:.2f} s per 100,000; target <= {TARGET_S:.0f} s): {verdict}"
    )
    if args.json:
        write_json(args.json, {"environment": environment(), "rows": rows})
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))

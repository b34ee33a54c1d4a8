"""Two processes append to one SQLite file: nothing is lost, every batch stays contiguous.

Small on purpose (two writers, a few dozen batches); the many-writer stress test is separate.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

from builders import assistant, call, output, user
from turnstore import Store

WRITERS, BATCHES = 2, 20


def batch(writer: int, number: int) -> list[dict[str, Any]]:
    """Three items tagged ``w{writer}-{number}:{i}``; every other batch starts a run."""
    tag = f"w{writer}-{number}"
    if number % 2 == 0:
        return [
            user(f"{tag}:0"),
            assistant(f"{tag}:1", f"{tag}:1"),
            assistant(f"{tag}:2", f"{tag}:2"),
        ]
    return [
        assistant(f"{tag}:0", f"{tag}:0"),
        call(f"{tag}:1", "tool"),
        output(f"{tag}:1", f"{tag}:2"),
    ]


def tag_of(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind is None:  # the user message
        return str(item["content"])
    return str(
        {"message": item.get("id"), "function_call": item.get("call_id")}.get(
            kind, item.get("output")
        )
    )


def writer_process(path: str, writer: int, start: Any) -> None:
    """Append BATCHES batches to this writer's own session and to the shared one."""

    async def main() -> None:
        store = Store.open(path)
        try:
            for number in range(BATCHES):
                await store.add_items(f"own-{writer}", batch(writer, number))
                await store.add_items("shared", batch(writer, number))
        finally:
            await store.aclose()

    start.wait()
    asyncio.run(main())


def check_contiguous(items: list[Any], writers: list[int]) -> None:
    tags = [tag_of(item) for item in items]
    assert len(tags) == len(writers) * BATCHES * 3
    next_batch = dict.fromkeys(writers, 0)
    for start in range(0, len(tags), 3):
        prefix = tags[start].rsplit(":", 1)[0]
        assert tags[start : start + 3] == [f"{prefix}:{i}" for i in range(3)]
        writer, number = prefix[1:].split("-")
        assert int(number) == next_batch[int(writer)]  # each writer's batches in order
        next_batch[int(writer)] += 1
    assert all(count == BATCHES for count in next_batch.values())


async def test_two_processes_append_to_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    Store.open(path).close()  # create the schema once, before the race
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(WRITERS)
    processes = [
        ctx.Process(target=writer_process, args=(path, writer, start)) for writer in range(WRITERS)
    ]
    for process in processes:
        process.start()
    for process in processes:
        await asyncio.to_thread(process.join, 120)
    assert [process.exitcode for process in processes] == [0] * WRITERS

    store = Store.open(path)
    try:
        for writer in range(WRITERS):
            expected = [item for n in range(BATCHES) for item in batch(writer, n)]
            assert await store.get_items(f"own-{writer}") == expected
        check_contiguous(await store.get_items("shared"), list(range(WRITERS)))
    finally:
        await store.aclose()

    # The shared session's tree stayed one straight path: every run has at most one child,
    # positions are dense, and each run's item_count matches its rows.
    with sqlite3.connect(path) as conn:
        paired = conn.execute(
            "SELECT count(*) FROM tool_calls WHERE session_id = 'shared'"
            " AND call_item_id IS NOT NULL AND output_item_id IS NOT NULL"
        ).fetchone()
        assert paired == (WRITERS * BATCHES // 2,)
        fan_out = conn.execute(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM runs"
            " WHERE session_id = 'shared' GROUP BY parent_id)"
        ).fetchone()
        assert fan_out == (1,)
        mismatched = conn.execute(
            "SELECT count(*) FROM runs r WHERE r.session_id = 'shared' AND (r.item_count !="
            " (SELECT count(*) FROM items i WHERE i.run_id = r.id)"
            " OR r.item_count != 1 + (SELECT max(position) FROM items i WHERE i.run_id = r.id))"
        ).fetchone()
        assert mismatched == (0,)
        total = conn.execute("SELECT count(*) FROM items WHERE session_id = 'shared'").fetchone()
        assert total == (WRITERS * BATCHES * 3,)

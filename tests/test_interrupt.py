"""Interruptions: Ctrl-C on a command, a read given up by its caller, a store closed after.

An interrupted command stops its statement on the server (PostgreSQL: psycopg cancels the
backend's query; SQLite: the connection is interrupted) and exits 130 with one line, no
traceback. ``close`` waits for a cancelled read to wind down, so that none is left running on
the server, nor pending on a stopped loop (where the garbage collector once closed it in
another context: ``ValueError: <Token ...> was created in a different Context``).

The CLI cases run against a SQLite file and a PostgreSQL schema (``target_backend``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support import POSTGRES_URL, drop_schema, sql
from turnstore import Store

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")

# Bounded waits: a hang fails the test, nothing is timed.
WAIT = 30.0


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def running(marker: str) -> bool:
    """Whether the server runs a statement of ours (one that names ``marker``)."""
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
            "AND pid <> pg_backend_pid() AND position(%s in query) > 0",
            [marker],
        ).fetchone()
    return row is not None and row[0] > 0


def thread_cpu_ticks(pid: int) -> int:
    """The CPU time (clock ticks) the threads of process ``pid`` but its main one have used:
    there SQLite's worker runs the statements."""
    ticks = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if task.name == str(pid):
            continue
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime + stime
    return ticks


def _created(target: str) -> str:
    Store.open(target).close()
    return target


# A statement that would run for hours on SQLite (a recursive CTE), and 30 s on PostgreSQL.
LONG = {
    "sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1e12) "
    "SELECT count(*) AS m{marker} FROM c",
    "postgresql": 'SELECT pg_sleep(30) AS "{marker}"',
}


def test_ctrl_c_stops_a_query_and_exits_quietly(cli_target: str, target_backend: str) -> None:
    # Before: on PostgreSQL a traceback (a context variable's token reset in another context)
    # and the statement left running on the server; on SQLite the query ignored Ctrl-C.
    db = _created(cli_target)
    postgres = target_backend == "postgres"
    marker = f"x{uuid.uuid4().hex[:12]}"
    statement = LONG["postgresql" if postgres else "sqlite"].format(marker=marker)
    child = subprocess.Popen(
        [sys.executable, "-m", "turnstore", "query", statement, "--db", db],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if postgres:
            wait_until(lambda: running(marker), "the statement ran on the server")
        else:  # its worker has spent a tenth of a second of CPU: in the statement
            wait_until(lambda: thread_cpu_ticks(child.pid) > 10, "the statement ran")
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=WAIT)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == ["error: interrupted"]
    if postgres:
        wait_until(lambda: not running(marker), "the statement stopped on the server", 10)


async def test_a_cancelled_sqlite_read_is_interrupted(tmp_path: Path) -> None:
    # Before: the statement ran on in the worker thread, and close() waited for it to end.
    store = Store.open(str(tmp_path / "t.db"))
    try:
        before = thread_cpu_ticks(os.getpid())
        # Minutes long (not hours: were it not interrupted, close would wait for it).
        statement = LONG["sqlite"].format(marker="").replace("1e12", "1e9")
        read = asyncio.ensure_future(sql(store, statement))
        await asyncio.to_thread(
            wait_until, lambda: thread_cpu_ticks(os.getpid()) > before + 10, "the read ran"
        )
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
        # The worker is free at once: a read after it is answered.
        assert await asyncio.wait_for(sql(store, "SELECT 1"), WAIT) == [(1,)]
    finally:
        await asyncio.wait_for(store.aclose(), WAIT)


async def test_close_after_a_read_cancelled_on_a_silent_server(
    proxy: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: close() stopped the loop with the read still pending on it: "Task was destroyed
    # but it is pending", a ValueError (a context variable's token) when the garbage
    # collector closed it, and the statement left running on the server.
    schema = f"t_{uuid.uuid4().hex[:12]}"
    marker = f"x{uuid.uuid4().hex[:12]}"
    store = Store.open(proxy.url(proxy.database, proxy.user), schema=schema, connect_timeout=3)
    try:
        read = asyncio.ensure_future(sql(store, LONG["postgresql"].format(marker=marker)))
        await asyncio.to_thread(wait_until, lambda: running(marker), "the statement ran")
        proxy.silence()  # the server answers nothing more on that connection
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
    finally:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            await asyncio.wait_for(store.aclose(), WAIT)
            gc.collect()  # what a task left pending on the stopped loop would raise now
        drop_schema(schema)
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text
    await asyncio.to_thread(
        wait_until, lambda: not running(marker), "the statement stopped on the server", 10
    )

"""Per-request sessions (issue 12): sessions opened from one target share one store.

An application that opens a ``StructuredSession`` per request and never closes it must not
leak threads, descriptors or connections, nor print anything at exit. The leak tests run in a
subprocess, to read its threads, ``/proc/self/fd`` and stderr from a clean start.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from builders import user
from support import session_target
from turnstore import ClosedError, Store, StructuredSession
from turnstore.store import shared as _shared

LEAK_SCRIPT = """
import asyncio, gc, json, os, sys, threading
from turnstore import StructuredSession

TARGET, COUNT, CLOSE = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "close"

def resources():
    gc.collect()
    return [threading.active_count(), len(os.listdir("/proc/self/fd"))]

async def request(n):
    # What a web handler does: a session per request, never closed or closed at its end
    # (every 50th writes).
    session = StructuredSession(f"user-{n % 20}", TARGET)
    await session.get_items()
    if n % 50 == 0:
        await session.add_items([{"role": "user", "content": f"hello {n}"}])
    if CLOSE:
        await session.aclose()

async def settled():
    # The checkpoint thread opens the WAL's files after the first commit pokes it, on its own
    # time: the baseline is taken once the counts hold still.
    last = resources()
    for _ in range(50):
        await asyncio.sleep(0.1)
        now = resources()
        if now == last:
            return now
        last = now
    return last

async def main():
    await request(0)
    before = await settled()
    for n in range(1, COUNT):
        await request(n)
    # A descriptor SQLite holds for a moment (a checkpoint's) may be open at any one look: a
    # leak is what is still there after a few seconds.
    after = resources()
    for _ in range(50):
        if after == before:
            break
        await asyncio.sleep(0.1)
        after = resources()
    print(json.dumps({"before": before, "after": after}))

asyncio.run(main())
"""


def run_leak_script(
    target: str, count: int, env: dict[str, str] | None = None, *, close: bool = False
) -> Any:
    proc = subprocess.run(
        [sys.executable, "-c", LEAK_SCRIPT, target, str(count), "close" if close else "drop"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no "Task was destroyed", no "Event loop is closed"
    return json.loads(proc.stdout)


def test_ten_thousand_unclosed_sqlite_sessions_leave_threads_and_descriptors_flat(
    tmp_path: Path,
) -> None:
    result = run_leak_script(str(tmp_path / "app.db"), 10_000)
    assert result["after"] == result["before"]


def test_five_hundred_unclosed_postgres_sessions_leave_no_trace() -> None:
    with session_target("postgres", Path()) as target:
        result = run_leak_script(target, 500)
    assert result["after"] == result["before"]


def test_sessions_closed_per_request_leave_threads_and_descriptors_flat(tmp_path: Path) -> None:
    result = run_leak_script(str(tmp_path / "app.db"), 2_000, close=True)
    assert result["after"] == result["before"]


def test_postgres_sessions_closed_per_request_leave_no_trace() -> None:
    with session_target("postgres", Path()) as target:
        result = run_leak_script(target, 300, close=True)
    assert result["after"] == result["before"]


# ---------------------------------------------------------------------------------------------
# Sharing and closing, in this process


def wait_until(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


async def test_sessions_of_one_file_share_one_store(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    first = StructuredSession("a", str(path))
    second = StructuredSession("b", path)  # a PathLike of the same file
    third = StructuredSession("c", f"sqlite:///{path}")
    assert first.store is second.store is third.store
    await first.add_items([user("q")])
    assert await StructuredSession("a", str(path)).get_items() == [user("q")]
    first.close()
    second.close()
    assert await third.get_items() == []  # still open: the store has a user left
    third.close()
    with pytest.raises(ClosedError):
        await third.store.get_items("a")


@pytest.mark.parametrize("backend", ["sqlite-file", "postgres"])
async def test_a_session_closed_per_request_leaves_the_store_to_the_next(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing the last session of a database keeps its store open for the next request
    (reopening it cost 10x a request), then the janitor closes it once idle."""
    with session_target(backend, tmp_path) as target:
        async with StructuredSession("s", target) as first:
            await first.add_items([user("q")])
            store = first.store
        with pytest.raises(ClosedError):
            await first.get_items()
        assert not _shared.closed(store)
        async with StructuredSession("s", target) as second:
            assert second.store is store
            assert await second.get_items() == [user("q")]
        monkeypatch.setattr(_shared, "IDLE_CLOSE", 0.05)
        StructuredSession("other", str(tmp_path / "poke.db")).close()  # the janitor looks again
        wait_until(lambda: _shared.closed(store))


async def test_a_file_deleted_after_its_sessions_closed_is_opened_anew(tmp_path: Path) -> None:
    """The idle store of a file that was deleted (or replaced) is not reused: the next
    session writes to the new file, not to the deleted one's inode."""
    path = tmp_path / "app.db"
    async with StructuredSession("s", path) as session:
        await session.add_items([user("old")])
        old = session.store
    for name in ("app.db", "app.db-wal", "app.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    async with StructuredSession("s", path) as session:
        assert session.store is not old
        assert await session.get_items() == []
        await session.add_items([user("new")])
    wait_until(lambda: _shared.closed(old))
    with Store.open(path) as store:
        assert await store.get_items("s") == [user("new")]


def test_memory_sessions_stay_separate() -> None:
    first, second = StructuredSession("s"), StructuredSession("s", ":memory:")
    assert first.store is not second.store
    first.close()
    second.close()


async def test_a_dropped_session_gives_its_store_back_after_idling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_shared, "IDLE_CLOSE", 0.05)
    session = StructuredSession("s", str(tmp_path / "app.db"))
    await session.add_items([user("q")])
    store = session.store
    del session
    gc.collect()
    wait_until(lambda: _shared.closed(store))
    # The next session opens a fresh store and finds the conversation.
    again = StructuredSession("s", str(tmp_path / "app.db"))
    assert again.store is not store
    assert await again.get_items() == [user("q")]
    again.close()


def test_a_dropped_memory_session_closes_its_store() -> None:
    session = StructuredSession("s")
    store = session.store
    del session
    gc.collect()
    wait_until(lambda: _shared.closed(store))


async def test_a_store_closed_by_hand_is_replaced(tmp_path: Path) -> None:
    session = StructuredSession("s", str(tmp_path / "app.db"))
    closed = session.store
    closed.close()
    other = StructuredSession("t", str(tmp_path / "app.db"))
    await other.add_items([user("q")])
    assert other.store is not closed
    other.close()
    session.close()


def test_a_session_dropped_on_the_thread_an_opening_waits_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store opens under the shared stores' lock and waits for a thread of its own (a
    PostgreSQL backend's event loop); a session dropped there (its finalizer runs inside any
    allocation) must not wait for that lock, or neither thread ever goes on."""
    dropped = [StructuredSession("old", str(tmp_path / "old.db"))]
    old_store = dropped[0].store
    opening = Store.open

    def open_while_dropping(target: Any, **options: Any) -> Store:
        thread = threading.Thread(target=dropped.clear)  # the last reference: its finalizer
        thread.start()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the dropped session's finalizer waits for the lock"
        return opening(target, **options)

    monkeypatch.setattr(_shared, "IDLE_CLOSE", 0.05)
    with monkeypatch.context() as patch:
        patch.setattr(Store, "open", open_while_dropping)
        new = StructuredSession("new", str(tmp_path / "new.db"))
    # The janitor ended the dropped session's lease and closed its idle store.
    wait_until(lambda: _shared.closed(old_store))
    new.close()


def test_sessions_opened_from_threads_share_one_store(tmp_path: Path) -> None:
    stores: list[Any] = []
    sessions: list[StructuredSession] = []
    lock = threading.Lock()

    def open_one() -> None:
        session = StructuredSession("s", str(tmp_path / "app.db"))
        with lock:
            sessions.append(session)
            stores.append(session.store)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(store) for store in stores}) == 1
    for session in sessions:
        session.close()


def test_stores_are_closed_at_exit_without_a_word(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio
        from turnstore import StructuredSession
        s = StructuredSession("s", {str(tmp_path / "x.db")!r})
        asyncio.run(s.add_items([{{"role": "user", "content": "q"}}]))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    # Closed cleanly: the WAL was folded into the database and removed.
    assert not (tmp_path / "x.db-wal").exists()


FORK_SCRIPT = """
import asyncio, gc, multiprocessing, sys
from turnstore import StructuredSession

TARGET = sys.argv[1]

def child():
    # The parent's session, used in the child: its store's worker is not in this process.
    asyncio.run(inherited.add_items([{"role": "user", "content": "from the child"}]))
    inherited.close()
    fresh = StructuredSession("s", TARGET)
    asyncio.run(fresh.add_items([{"role": "user", "content": "fresh in the child"}]))
    fresh.close()

inherited = StructuredSession("s", TARGET)
asyncio.run(inherited.add_items([{"role": "user", "content": "from the parent"}]))
process = multiprocessing.get_context("fork").Process(target=child)
process.start()
process.join(120)  # a hang, not slowness: a loaded 2-core machine took over 20 s
if process.is_alive():
    process.kill()
    sys.exit("the child hung")
assert process.exitcode == 0, process.exitcode
asyncio.run(inherited.add_items([{"role": "user", "content": "parent again"}]))
print([item["content"] for item in asyncio.run(inherited.get_items())])
"""


@pytest.mark.parametrize("backend", ["sqlite-file", "postgres"])
def test_a_session_inherited_by_a_forked_child_writes_there(backend: str, tmp_path: Path) -> None:
    """multiprocessing's fork start method: the child's copy of a session opens the child's
    own store instead of waiting forever on the parent's worker, and leaves the parent's
    store (and its connections) alone."""
    with session_target(backend, tmp_path) as target:
        proc = subprocess.run(
            [sys.executable, "-c", FORK_SCRIPT, target], capture_output=True, text=True, timeout=300
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.replace("'", '"')) == [
        "from the parent",
        "from the child",
        "fresh in the child",
        "parent again",
    ]


@pytest.mark.parametrize("backend", ["sqlite-file", "postgres"])
async def test_a_shared_store_closed_by_hand_leaves_the_other_sessions_working(
    backend: str, tmp_path: Path
) -> None:
    """Cleanup written for sessions that owned their store (``session.store.close()`` at the
    end of a request) must not break the other requests' sessions of the same database."""
    with session_target(backend, tmp_path) as target:
        done, other = StructuredSession("a", target), StructuredSession("b", target)
        await other.add_items([user("before")])
        done.store.close()
        await other.add_items([user("after")])
        assert await other.get_items() == [user("before"), user("after")]
        other.close()
        done.close()


STORE_FORK_SCRIPT = """
import asyncio, os, signal, sys
import agents  # the application's imports, preloaded with it: an import takes seconds under load
from turnstore import ClosedError, Store, StructuredSession

TARGET = sys.argv[1]

store = Store.open(TARGET)  # the application's own store, opened before its workers fork
asyncio.run(store.add_items("s", [{"role": "user", "content": "from the parent"}]))
pid = os.fork()
if pid == 0:
    signal.alarm(60)  # a hang kills the child: the parent then reports it
    outcome = []
    for attempt in (
        lambda: store.add_items("s", [{"role": "user", "content": "from the child"}]),
        lambda: store.get_items("s"),
        lambda: StructuredSession("s", store).get_items(),
    ):
        try:
            asyncio.run(attempt())
            outcome.append("ran")
        except ClosedError:
            outcome.append("closed")
    store.close()  # leaves the parent's worker and connections alone
    os.write(1, (" ".join(outcome) + "\\n").encode())
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"the child hung or died: {status}"
asyncio.run(store.add_items("s", [{"role": "user", "content": "parent again"}]))
print([item["content"] for item in asyncio.run(store.get_items("s"))])
store.close()
"""


@pytest.mark.parametrize("backend", ["sqlite-file", "sqlite-memory", "postgres"])
def test_a_store_inherited_by_a_forked_child_is_refused_there(backend: str, tmp_path: Path) -> None:
    """A ``Store`` opened before a fork (an app preloaded, then forked into workers) is the
    parent's: its worker thread or event loop is not in the child. Used there, every call
    waited forever for that thread, and ``close()`` on PostgreSQL did too. Now the child gets
    ``ClosedError``, its ``close()`` returns at once, and the parent's store carries on."""
    with contextlib.ExitStack() as stack:
        target = (
            ":memory:"
            if backend == "sqlite-memory"
            else stack.enter_context(session_target(backend, tmp_path))
        )
        proc = subprocess.run(
            [sys.executable, "-c", STORE_FORK_SCRIPT, target],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr
    child, parent = proc.stdout.splitlines()
    assert child == "closed closed closed"
    assert json.loads(parent.replace("'", '"')) == ["from the parent", "parent again"]

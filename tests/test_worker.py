"""SQLite's connection thread (``sqlite/worker.py``): calls run on one thread, in the order they
were handed over; ``submit`` keeps the Executor contract; the thread ends when asked, when the
worker is dropped, and never before what it was handed has run."""

from __future__ import annotations

import gc
import threading

import pytest

from turnstore.sqlite.worker import Worker


def test_posted_and_submitted_calls_run_in_order_on_one_thread() -> None:
    worker = Worker("test-worker")
    ran: list[tuple[int, str]] = []
    try:
        for n in range(5):
            worker.post(lambda n=n: ran.append((n, threading.current_thread().name)))
        last = worker.submit(lambda: ran.append((5, threading.current_thread().name)))
        last.result(timeout=5)
    finally:
        worker.shutdown()
    assert [n for n, _ in ran] == list(range(6))
    assert {name for _, name in ran} == {"test-worker"}


def test_submit_carries_the_result_or_the_exception() -> None:
    with Worker("test-worker") as worker:
        assert worker.submit(lambda a, b=0: a + b, 2, b=3).result(timeout=5) == 5
        failed = worker.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            failed.result(timeout=5)
        # The thread goes on after a call that raised.
        assert worker.submit(lambda: "still here").result(timeout=5) == "still here"


def test_shutdown_waits_for_what_was_handed_over_then_refuses_more() -> None:
    worker = Worker("test-worker")
    gate = threading.Event()
    done: list[int] = []
    worker.post(gate.wait)
    worker.post(done.append, 1)
    threading.Timer(0.05, gate.set).start()
    worker.shutdown(wait=True)
    assert done == [1]
    assert not worker._thread.is_alive()
    with pytest.raises(RuntimeError):
        worker.submit(print)
    worker.shutdown()  # idempotent


def test_a_dropped_worker_ends_its_thread() -> None:
    worker = Worker("test-worker")
    thread = worker._thread
    del worker
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()

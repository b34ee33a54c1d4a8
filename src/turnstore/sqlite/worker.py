"""The one thread that serves a SQLite store's connection: what is handed to it runs there, in
the order it was handed.

An operation hands itself over with ``post``, which returns nothing: the operation settles
its caller's asyncio future itself (``driver._settle``). ThreadPoolExecutor's bookkeeping for
each call (a concurrent Future, a work item, an idle semaphore, their conditions: ~25 Python
calls on the two threads) cost a third of a write's hop to the thread and back. ``submit``
keeps the ``Executor`` contract for the rest (opening, closing, ``run_in_executor``).
"""

from __future__ import annotations

import atexit
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

__all__ = ["Worker"]

P = ParamSpec("P")
T = TypeVar("T")

_Call = tuple[Callable[..., Any], tuple[Any, ...]]


class Worker(Executor):
    """A thread of its own, running what is handed to it one call at a time, in order."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._stopping = False
        # A daemon, stopped by ``shutdown``, by its collection (a store dropped unclosed) or
        # at the interpreter's exit, after what it was handed has run (as the executor's
        # threads were): the thread holds the queue, never the worker.
        self._thread = threading.Thread(target=_serve, args=(self._calls,), name=name, daemon=True)
        self._thread.start()
        weakref.finalize(self, self._calls.put, None).atexit = False
        _WORKERS.add(self)

    def post(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on the thread, after everything handed to it before; ``fn``
        reports its own outcome and must not raise (what it raises would end the thread)."""
        self._calls.put((fn, args))

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` on the thread; its outcome is the future's."""
        future: Future[T] = Future()
        with self._lock:
            if self._stopping:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._calls.put((_settle, (future, fn, args, kwargs)))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the thread once what it was handed has run; ``wait``: until then."""
        with self._lock:
            if not self._stopping:
                self._stopping = True
                self._calls.put(None)
        if wait and self._thread is not threading.current_thread():
            self._thread.join()


def _serve(calls: queue.SimpleQueue[_Call | None]) -> None:
    while (call := calls.get()) is not None:
        fn, args = call
        fn(*args)


def _settle(
    future: Future[T], fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:  # the caller's, as an executor's future carries it
        future.set_exception(exc)
    else:
        future.set_result(result)


_WORKERS: weakref.WeakSet[Worker] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    # At exit, a write handed over before still commits before the interpreter goes.
    for worker in list(_WORKERS):
        worker.shutdown(wait=True)

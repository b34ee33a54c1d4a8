"""A gate that keeps ``fork()`` out of SQLite calls in flight.

SQLite guards its internals with mutexes of its own. A process forked while another of its
threads is inside SQLite (the store's worker in a transaction, the checkpointer copying pages)
gives the child those mutexes locked forever, with no thread to unlock them: the child's first
``sqlite3.connect`` then hangs (a forked ``multiprocessing`` worker did, under load). So every
thread of turnstore's that calls SQLite passes through this gate, which many may pass at once,
and ``fork()`` waits, before it forks, until none is inside.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

__all__ = ["gated", "inside"]

P = ParamSpec("P")
T = TypeVar("T")

# The condition's own lock, taken directly where nothing waits (a C call; the condition's
# ``with`` is Python's).
_mutex = threading.Lock()
_cond = threading.Condition(_mutex)
_inside = 0
_forking = False  # a fork waits for the last thread inside to leave


def _enter() -> None:
    global _inside
    with _mutex:
        _inside += 1


def _leave() -> None:
    global _inside
    with _mutex:
        _inside -= 1
        # Only a waiting fork needs waking: notify_all is ~2 us of Python on every call.
        if not _inside and _forking:
            _cond.notify_all()


@contextmanager
def inside() -> Iterator[None]:
    """Run the block as a SQLite call that a fork must not cut in two."""
    _enter()
    try:
        yield
    finally:
        _leave()


def gated(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` inside the gate (as ``inside``, without a context manager's
    calls: it runs once per operation)."""
    _enter()
    try:
        return fn(*args, **kwargs)
    finally:
        _leave()


def _before_fork() -> None:
    # Held across the fork: no thread enters SQLite until the parent lets it (after_in_parent).
    global _forking
    _cond.acquire()
    _forking = True
    while _inside:
        _cond.wait()
    _forking = False


def _after_fork_in_parent() -> None:
    _cond.release()


def _after_fork_in_child() -> None:
    # The child has only the forking thread: nobody is inside, and the lock held over the
    # fork has no owner here.
    global _mutex, _cond, _inside, _forking
    _mutex = threading.Lock()
    _cond = threading.Condition(_mutex)
    _inside = 0
    _forking = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )

"""Keeping CPython's cyclic garbage collector out of big decodes.

Decoding a long history makes one or two containers per item (each item's dict, its content
list) that all stay alive: the collector, triggered by the count of new containers, runs many
young collections over them and, every other 20,000-item read, a full one over the whole heap
(the SDK's, pydantic's and the application's objects too), which took more than half of the
read. Nothing a decode makes can form a cycle, so collecting during it can find nothing.

``collector_paused`` switches the collector off while a big decode runs and back on after it.
The switch is process-wide (CPython has no other), so it is kept correct for every thread:

- Pauses nest and overlap across threads: the collector is switched off by the first and on
  again by the last (a count under a lock), so one thread's decode never re-enables the
  collector under another's.
- It is switched back on only if it was on when the first pause began: a program that runs
  with the collector off keeps it off.
- A process forked during a pause (by another thread) starts with no pause under way: its
  collector is as the program had it, and the pause's lock is new.
- Other threads keep running meanwhile; their cyclic garbage waits for the next collection,
  a few milliseconds later, and ``gc.collect()`` still works. Reference counting, which frees
  all acyclic garbage, is untouched.

What this does not do is make the decoded items free: while the application holds them they
are young containers that the collector will promote and, through CPython's rule (a full
collection once the long-lived containers have grown by a quarter), count toward a later
full collection, outside the read. The one residual risk is a program that itself switches
the collector off from another thread during a pause: it is switched back on when the pause
ends.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

__all__ = ["PAUSE_FROM", "collector_paused", "pause_for"]

PAUSE_FROM = 256
"""Decodes of fewer items run with the collector as it is: they make too few containers to
set it off more than once or twice, and a pause costs two lock round trips."""

_lock = threading.Lock()
_pauses = 0  # pauses under way, in every thread
_switched_off = False  # the first pause switched the collector off (it was on)


def _after_fork_in_child() -> None:
    # The pausing threads are not in the child: end their pauses, with a lock nobody holds.
    global _lock, _pauses, _switched_off
    _lock = threading.Lock()
    _pauses = 0
    if _switched_off:
        _switched_off = False
        gc.enable()


os.register_at_fork(after_in_child=_after_fork_in_child)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic garbage collector off (see the module's docstring)."""
    global _pauses, _switched_off
    with _lock:
        if _pauses == 0 and gc.isenabled():
            gc.disable()
            _switched_off = True
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _switched_off:
                _switched_off = False
                gc.enable()


def pause_for(count: int) -> AbstractContextManager[None]:
    """``collector_paused()`` for a decode of ``count`` items, if that many need it."""
    return collector_paused() if count >= PAUSE_FROM else nullcontext()

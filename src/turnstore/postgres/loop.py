"""The event loop thread that serves a backend's own pool.

A backend that owns its pool runs it on this loop, so that a store opens and closes
synchronously and serves any thread and any event loop (see driver.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "stop_loop"]

T = TypeVar("T")


class LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="turnstore-postgres", daemon=True
        )
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        """Stop the loop and join the thread (from any thread but the loop's own)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self.thread:
            self.thread.join()
            self.loop.close()


def stop_loop(loop_thread: LoopThread) -> None:
    # A backend that was never closed: at least do not leave its thread spinning.
    with contextlib.suppress(RuntimeError):  # interpreter shutdown
        loop_thread.stop()

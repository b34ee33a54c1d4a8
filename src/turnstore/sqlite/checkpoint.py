"""Checkpoints of a WAL database, from a thread and a connection of their own."""

from __future__ import annotations

import logging
import sqlite3
import threading

from .forkgate import gated, inside

__all__ = ["Checkpointer"]

log = logging.getLogger("turnstore")


class Checkpointer:
    """Checkpoints a WAL database from a thread and connection of its own.

    SQLite's automatic checkpoint runs inside the commit that crosses its threshold: one append
    in ~30 turns paid for copying ~1,000 pages into the database and an fsync (5-10 ms, and
    ~200 us per turn on average; bench/). Here a commit only pokes this thread, which copies
    them on the other core, at most once per ``INTERVAL`` seconds. A passive checkpoint never
    waits for readers or writers, and the writer's own automatic checkpoint stays on at a
    higher threshold (``FALLBACK_PAGES``) in case this one cannot keep up.
    """

    INTERVAL = 0.05
    FALLBACK_PAGES = 10_000

    def __init__(self, path: str) -> None:
        self._path = path
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="turnstore-checkpoint", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Ask for a checkpoint soon (cheap when one is already asked for)."""
        if not self._wake.is_set():
            self._wake.set()

    def _run(self) -> None:
        conn = gated(sqlite3.connect, self._path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._wake.wait()
                if self._stop.is_set():
                    return
                self._wake.clear()
                try:
                    with inside():
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as exc:  # nothing is lost: the next checkpoint retries
                    log.warning("checkpoint of %s failed: %s", self._path, exc)
                if self._stop.wait(self.INTERVAL):
                    return
        finally:
            gated(conn.close)

    def close(self) -> None:
        """Stop the thread (a checkpoint under way finishes first)."""
        self._stop.set()
        self._wake.set()
        self._thread.join()

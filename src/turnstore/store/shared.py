"""The stores that ``StructuredSession``s opened from one target share, in one process.

Applications (and the SDK's examples) open a session per request, and close it at its end
(``async with``, ``close()``) or never. Each session opened from a path or URL therefore
leases the process's one store for that target (one connection set, one worker) instead of
opening its own: opening costs a dict lookup. A store with no session left, however its
sessions ended (closed or dropped), is closed by a janitor thread once it has been idle for
``IDLE_CLOSE`` seconds, so that the next request finds it open, or at exit: closing a
session per request costs what dropping it does. ``:memory:`` is a database per session, as
with ``SQLiteSession``: never shared, closed as soon as its session is gone.

An idle SQLite store is not reused for a file that was deleted or replaced since it was
opened (a test's or a script's ``close()``, delete, reopen): the next session opens the file
anew, and the old store is closed.

A dropped session's finalizer takes no lock: it can run inside any allocation of any thread,
also the thread of a store that ``acquire`` is opening under the lock and waits for. It only
queues its lease (``Lease.release_later``) for the janitor, which ends it.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field

from ..domain import validate
from ..domain.targets import sqlite_path
from . import Store

__all__ = ["IDLE_CLOSE", "Lease", "acquire", "closed"]

log = logging.getLogger("turnstore")

IDLE_CLOSE = 10.0
"""Seconds a shared store with no session stays open for the next one."""


@dataclass(eq=False)
class _Entry:
    store: Store
    path: str | None  # a SQLite file's, else None
    identity: tuple[int, int] | None  # the file's (device, inode) when opened
    users: int = 0
    idle_since: float = field(default_factory=time.monotonic)


_GATHER = 0.05  # seconds the janitor waits, once woken by a lease, for more to end together
_lock = threading.Lock()
_entries: dict[str, _Entry] = {}
_to_close: list[Store] = []  # stores of gone sessions, for the janitor to close
# The janitor's inbox: leases of dropped sessions to end, or None to look again at the idle
# stores. SimpleQueue.put is safe in a finalizer (it takes no lock a thread could hold).
_inbox: queue.SimpleQueue[Lease | None] = queue.SimpleQueue()
_janitor: threading.Thread | None = None
_exit_registered = False


def _key(target: object) -> str | None:
    """What identifies the database ``target`` names; None for ``:memory:``."""
    text = os.fspath(target) if isinstance(target, os.PathLike) else target
    if not isinstance(text, str):
        return None  # not a target Store.open accepts: let it say why
    validate.open_target(text)  # before it is resolved as a path
    if "://" in text and not text.lower().startswith("sqlite://"):
        return text  # a server URL
    path = sqlite_path(text)
    if path == ":memory:" or not path:
        return None
    return "sqlite:" + os.path.realpath(path)  # sqlite_path expanded a leading ~


def _identity(path: str | None) -> tuple[int, int] | None:
    """Which file ``path`` names now: its (device, inode), None if there is none."""
    if path is None:
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


def closed(store: Store) -> bool:
    """Whether ``store`` is closed: someone may close a shared store by hand
    (``session.store.close()``), and its sessions then lease a new one."""
    return store.backend.closed


class Lease:
    """One session's use of a store; ``release`` ends it (idempotent, any thread)."""

    __slots__ = ("_key", "_pid", "_released", "store")

    def __init__(self, store: Store, key: str | None) -> None:
        self.store = store
        self._key = key
        self._released = False
        self._pid = os.getpid()

    @property
    def inherited(self) -> bool:
        """Whether this process is a fork of the one that took the lease: the store's worker
        thread (or event loop) is not here, so it can be neither used nor closed."""
        return self._pid != os.getpid()

    def release(self, *, close_now: bool = False) -> Store | None:
        """End the lease; returns an unshared store (``:memory:``) when the caller must close
        it (``close_now``), else leaves it to the janitor. A shared store with no lease left
        stays open for ``IDLE_CLOSE`` seconds either way: the janitor closes it then."""
        with _lock:
            return self._end(close_now)

    def release_later(self) -> None:
        """End the lease soon, on the janitor's thread: what a dropped session's finalizer
        does, since it must neither block nor take a lock."""
        _inbox.put(self)

    def _end(self, close_now: bool) -> Store | None:
        # Under _lock.
        if self._released:
            return None
        self._released = True
        if self.inherited:
            return None  # the parent's store: the parent closes it
        entry = _entries.get(self._key) if self._key is not None else None
        if entry is not None and entry.store is self.store:
            entry.users -= 1
            if entry.users == 0:
                entry.idle_since = time.monotonic()
                _inbox.put(None)  # the janitor's next wait ends when this store's idling does
            return None
        # An unshared store, or a shared one that was replaced (closed by hand, or its file).
        if close_now:
            return self.store
        _to_close.append(self.store)
        _inbox.put(None)
        return None


def acquire(target: str | os.PathLike[str]) -> Lease:
    """A lease on the process's store for ``target``, opening it if there is none."""
    key = _key(target)
    path = key.removeprefix("sqlite:") if key is not None and key.startswith("sqlite:") else None
    with _lock:
        _start_janitor()  # here, not in a finalizer: starting a thread takes locks
        if key is not None:
            entry = _entries.get(key)
            if entry is not None and entry.users == 0 and entry.identity != _identity(path):
                # Its file was deleted or replaced while no session used it.
                _to_close.append(entry.store)
                _inbox.put(None)
                entry = None
            if entry is None or closed(entry.store):
                # Opened under the lock: sessions of one target opening together wait for one
                # store rather than each opening their own.
                store = Store.open(target)
                entry = _entries[key] = _Entry(store, path, _identity(path))
                _register_exit()
            entry.users += 1
            return Lease(entry.store, key)
    return Lease(Store.open(target), None)


def _register_exit() -> None:
    # At the start of the interpreter's shutdown, with threading's own exit hooks (what
    # concurrent.futures uses; last in, first out): before SQLite's worker pool stops taking
    # work, and before any atexit hook (Postgres's stops its event loop, which must close its
    # pool first).
    global _exit_registered
    if not _exit_registered:
        register = getattr(threading, "_register_atexit", atexit.register)
        register(_close_all)
        _exit_registered = True


def _close(store: Store) -> None:
    try:
        store.close()
    except Exception as exc:  # nothing to report it to: the session is gone
        log.warning("closing an unused turnstore store failed: %s", exc)


def _close_all() -> None:
    with _lock:
        _end_queued()
        stores = [entry.store for entry in _entries.values()] + _to_close
        _entries.clear()
        _to_close.clear()
    for store in stores:
        _close(store)


def _start_janitor() -> None:
    global _janitor
    if _janitor is None:
        _janitor = threading.Thread(target=_tidy, name="turnstore-janitor", daemon=True)
        _janitor.start()


def _tidy() -> None:
    """The janitor: ends the leases of dropped sessions, closes the stores they leave unused
    (at once if unshared, else once idle for ``IDLE_CLOSE`` seconds)."""
    wait: float | None = None
    while True:
        try:
            lease = _inbox.get(timeout=wait)
        except queue.Empty:
            lease = None
        if lease is not None:
            # Let the leases of a burst of dropped sessions (a session per request) gather:
            # a put that wakes the janitor costs the dropping thread ~30 µs, one to a busy
            # janitor almost nothing.
            time.sleep(_GATHER)
        with _lock:
            if lease is not None:
                lease._end(close_now=False)
            _end_queued()
            now = time.monotonic()
            due: list[Store] = _to_close[:]
            _to_close.clear()
            wait = None
            for key, entry in list(_entries.items()):
                if entry.users > 0:
                    continue
                remaining = entry.idle_since + IDLE_CLOSE - now
                if remaining <= 0:
                    del _entries[key]
                    due.append(entry.store)
                else:
                    wait = remaining if wait is None else min(wait, remaining)
        for store in due:
            _close(store)


def _end_queued() -> None:
    # Under _lock: the leases the inbox holds.
    while True:
        try:
            lease = _inbox.get_nowait()
        except queue.Empty:
            return
        if lease is not None:
            lease._end(close_now=False)


def _after_fork() -> None:
    # The child has none of the parent's threads: its stores are unusable, not to be closed.
    global _lock, _inbox, _janitor
    _lock = threading.Lock()
    _inbox = queue.SimpleQueue()
    _entries.clear()
    _to_close.clear()
    _janitor = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)

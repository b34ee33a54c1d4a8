"""A fork waits for turnstore's threads to leave SQLite (sqlite/forkgate.py).

A child forked while another thread was inside SQLite inherited SQLite's mutexes locked and hung
at its first connect (``test_shared_stores``'s forked child, once in a few runs under load).
"""

from __future__ import annotations

import os
import threading

from turnstore.sqlite.forkgate import inside


def test_a_fork_waits_until_no_thread_is_inside_sqlite() -> None:
    entered, leave, forked = threading.Event(), threading.Event(), threading.Event()

    def sqlite_call() -> None:
        with inside():
            entered.set()
            leave.wait()

    def fork() -> None:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        forked.set()
        os.waitpid(pid, 0)

    worker = threading.Thread(target=sqlite_call, daemon=True)
    worker.start()
    try:
        assert entered.wait(60)
        forker = threading.Thread(target=fork, daemon=True)
        forker.start()
        # While the call is inside, the fork has not happened (nor ever does, if the gate holds).
        assert not forked.wait(0.5)
    finally:
        leave.set()
    forker.join(60)
    worker.join(60)
    assert forked.is_set()
    # After the fork, the gate lets calls in again, in the parent.
    with inside():
        pass

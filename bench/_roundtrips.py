"""Counting the network round trips psycopg makes (issue 32), from the benchmark, not the
library: a round trip is each point where the client needs the server's answer to go on.

In pipeline mode (turnstore's transactions, postgres/transaction.py) a statement is sent
without waiting; the client waits when it fetches a result (``fetchone``/``fetchall``: a
flush request) and when a pipeline ends or syncs with commands still unanswered. Outside a
pipeline every statement waits for its answer. Counted where the code asks, not on the
socket: an answer that happens to arrive while later statements are still being sent would
make a socket-level count depend on timing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class RoundTrips:
    """The round trips counted so far (``count``), and the statements sent (``statements``:
    every ``AsyncCursor.execute``, ``AsyncConnection.execute`` included)."""

    def __init__(self) -> None:
        self.count = 0
        self.statements = 0


@contextlib.contextmanager
def counting_round_trips() -> Iterator[RoundTrips]:
    """Count the round trips of every psycopg async connection while the block runs."""
    import psycopg
    from psycopg import _cursor_base, _pipeline_base, generators

    counted = RoundTrips()
    fetch = psycopg.AsyncCursor._fetch_pipeline
    sync, exit_ = _pipeline_base.BasePipeline._sync_gen, _pipeline_base.BasePipeline._exit_gen
    execute = generators.execute
    cursor_execute = psycopg.AsyncCursor.execute

    async def counting_fetch(self: Any) -> None:
        pipelined = self._conn._pipeline is not None and self._execmany_returning is not False
        # A statement's result, needed before going on; not one that came with an earlier
        # statement's answer (queries sent together: core.ops.Group).
        counted.count += pipelined and not self.pgresult
        await fetch(self)

    def pending(self: Any) -> bool:
        return bool(self.result_queue or self.command_queue)

    def counting_sync(self: Any) -> Any:
        counted.count += pending(self)
        return sync(self)

    def counting_exit(self: Any) -> Any:
        counted.count += pending(self)
        return exit_(self)

    async def counting_cursor_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        counted.statements += 1
        return await cursor_execute(self, *args, **kwargs)

    def counting_execute(pgconn: Any) -> Any:
        counted.count += 1  # a statement outside a pipeline
        return execute(pgconn)

    patches: list[tuple[Any, str, Any, Any]] = [
        (psycopg.AsyncCursor, "_fetch_pipeline", fetch, counting_fetch),
        (_pipeline_base.BasePipeline, "_sync_gen", sync, counting_sync),
        (_pipeline_base.BasePipeline, "_exit_gen", exit_, counting_exit),
        (generators, "execute", execute, counting_execute),
        (_cursor_base, "execute", execute, counting_execute),
        (psycopg.AsyncCursor, "execute", cursor_execute, counting_cursor_execute),
    ]
    for owner, name, _, patched in patches:
        setattr(owner, name, patched)
    try:
        yield counted
    finally:
        for owner, name, original, _ in patches:
            setattr(owner, name, original)

"""Issue 11: writes are applied exactly once, and a write that has started is never dropped.

Every write carries a key (``operation_id``, core/once.py): a repeat with the same key
changes nothing and returns the first result, on every backend. On PostgreSQL a proxy
(tests/faultproxy.py) cuts the connection before COMMIT, after COMMIT before its reply, and
mid-pipeline: each write ends stored once and its caller told the truth. Cancellation (a
task's ``cancel()``, ``asyncio.wait_for``, the SDK's ``run_streamed(...).cancel()``) while a
write waits for a lock reaches the caller only once the write is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from builders import assistant, user
from support import POSTGRES_URL, emptied_schema, sql
from turnstore import (
    InvalidOperationError,
    OutcomeUnknownError,
    StorageError,
    Store,
    StructuredSession,
    new_operation_id,
)
from turnstore.core import once, ops

TURNS = [user("q1"), assistant("a1"), user("q2"), assistant("a2")]


async def _two_runs(store: Store) -> list[int]:
    await store.add_items("s", TURNS)
    return [run.id for run in await store.runs("s")]


async def _keys(store: Store) -> int:
    return int((await sql(store, "SELECT count(*) FROM operations"))[0][0])


# ---------------------------------------------------------------------------------------------
# Keys: a repeated operation_id is recognised by the database, on every backend


async def test_a_repeated_key_applies_a_batch_once(store: Store) -> None:
    key = new_operation_id()
    await store.add_items("s", [user("q")], operation_id=key)
    await store.add_items("s", [user("q")], operation_id=key)
    assert await store.get_items("s") == [user("q")]
    await store.add_items("s", [assistant("a")])  # a new key: a new write
    assert await store.get_items("s") == [user("q"), assistant("a")]


async def test_a_repeated_key_changes_nothing_not_even_the_sessions_time(store: Store) -> None:
    # A write's first statements (the session's upsert and lock) run beside the check of its
    # key (core/once.py): a repeat rolls them back.
    key = new_operation_id()
    await store.add_items("s", [user("q")], operation_id=key)
    first = await store.session("s")
    await asyncio.sleep(0.01)  # a later time for the upsert to stamp
    await store.add_items("s", [user("q")], operation_id=key)
    assert await store.session("s") == first
    assert await _keys(store) == 1


async def test_a_repeated_pop_returns_the_first_item_and_pops_once(store: Store) -> None:
    await store.add_items("s", TURNS)
    key = new_operation_id()
    assert await store.pop_item("s", operation_id=key) == assistant("a2")
    assert await store.pop_item("s", operation_id=key) == assistant("a2")
    assert await store.get_items("s") == TURNS[:3]


async def test_repeated_tree_operations_return_their_first_result(store: Store) -> None:
    first, second = await _two_runs(store)
    key = new_operation_id()
    edited = await store.fork("s", second, "q2 again", operation_id=key)
    assert await store.fork("s", second, "q2 again", operation_id=key) == edited
    assert len(await store.siblings("s", second)) == 2
    key = new_operation_id()
    assert await store.move_head("s", edited.id, to_parent=True, operation_id=key) == first
    await store.add_items("s", [user("q3")])
    # The repeat does not move the head again (it is now on the q3 run).
    assert await store.move_head("s", edited.id, to_parent=True, operation_id=key) == first
    assert (await store.get_items("s"))[-1] == user("q3")
    key = new_operation_id()
    assert await store.delete_branch("s", second, force=True, operation_id=key) is not None
    assert await store.delete_branch("s", second, force=True, operation_id=key) is not None
    key = new_operation_id()
    await store.clear_session("s", operation_id=key)
    await store.add_items("s", [user("new")])
    await store.clear_session("s", operation_id=key)  # the repeat leaves the new history
    assert await store.get_items("s") == [user("new")]


@pytest.mark.parametrize("bad", ["", "x" * 32, "ABCDEF" * 6, "0" * 31, 42])
async def test_a_malformed_key_is_refused_and_changes_nothing(store: Store, bad: Any) -> None:
    with pytest.raises(InvalidOperationError, match="operation_id"):
        await store.add_items("s", [user("q")], operation_id=bad)
    assert await store.get_items("s") == []


async def test_keys_are_forgotten_after_a_day_and_a_stale_key_is_refused(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [10**12]
    monkeypatch.setattr(once, "_millis", lambda: clock[0])
    old = new_operation_id()
    await store.add_items("s", [user("q")], operation_id=old)
    clock[0] += once.KEEP_MS + 1
    await store.add_items("s", [assistant("a")])  # forgets the session's keys of yesterday
    assert await _keys(store) == 1
    with pytest.raises(InvalidOperationError, match="more than a day old"):
        await store.add_items("s", [user("q")], operation_id=old)
    assert await store.get_items("s") == [user("q"), assistant("a")]


async def test_a_cleared_session_keeps_only_the_key_of_its_clear(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One millisecond for every key, and random parts that fall: the clear's key is the
    # smallest, so a clear that forgot only older keys would keep the others.
    monkeypatch.setattr(once, "_millis", lambda: 10**12)
    suffixes = iter(["ff" * 10, "ee" * 10, "00" * 10])
    monkeypatch.setattr(once.secrets, "token_hex", lambda _n: next(suffixes))
    await store.add_items("s", [user("q")])
    await store.add_items("s", [assistant("a")])
    await store.clear_session("s")
    assert await _keys(store) == 1


# ---------------------------------------------------------------------------------------------
# PostgreSQL: the connection cut at every moment of a write, through a fault-injecting proxy


@pytest.fixture
async def pg_store(proxy: Any) -> AsyncIterator[Store]:
    """A store through the proxy with a pool of ONE connection and a long pool timeout.

    A write that then waited for the pool to settle its lost commit would hang for 60 s; the
    tests bound every write at 20 s instead.
    """
    with emptied_schema() as schema:
        store = Store.open(
            proxy.url(proxy.database, proxy.user),
            schema=schema,
            max_size=1,
            pool_timeout=60,
            connect_timeout=3,
            connect_kwargs={"prepare_threshold": None},
        )
        yield store
        await store.aclose()


FAULTS = ["before_commit", "after_commit", "mid_pipeline"]


def _bounded(write: Awaitable[Any]) -> Awaitable[Any]:
    return asyncio.wait_for(write, 20)  # a hang (waiting for the pool) fails the test


@pytest.mark.postgres
@pytest.mark.parametrize("fault", FAULTS)
async def test_a_cut_batch_is_stored_once(proxy: Any, pg_store: Store, fault: str) -> None:
    await pg_store.add_items("s", [user("q1")])
    proxy.arm(fault)
    await _bounded(pg_store.add_items("s", [assistant("a1"), user("q2"), assistant("a2")]))
    assert proxy.fired == 1
    assert await pg_store.get_items("s") == TURNS
    assert await sql(pg_store, "SELECT count(*) FROM items") == [(4,)]


@pytest.mark.postgres
@pytest.mark.parametrize("fault", ["before_commit", "after_commit"])
async def test_a_cut_pop_pops_once_and_returns_the_item(
    proxy: Any, pg_store: Store, fault: str
) -> None:
    await pg_store.add_items("s", TURNS)
    proxy.arm(fault)
    assert await _bounded(pg_store.pop_item("s")) == assistant("a2")
    assert proxy.fired == 1
    assert await pg_store.get_items("s") == TURNS[:3]


@pytest.mark.postgres
@pytest.mark.parametrize("fault", FAULTS)
async def test_a_cut_edit_makes_one_run_and_returns_it(
    proxy: Any, pg_store: Store, fault: str
) -> None:
    first, second = await _two_runs(pg_store)
    proxy.arm(fault)
    edited = await _bounded(pg_store.fork("s", second, "q2 again"))
    assert proxy.fired == 1
    assert [run.id for run in await pg_store.siblings("s", second)] == [second, edited.id]
    assert edited.parent_id == first
    assert edited.user_message == "q2 again"
    assert [run.id for run in await pg_store.runs("s")] == [first, edited.id]


@pytest.mark.postgres
@pytest.mark.parametrize("fault", FAULTS)
async def test_a_cut_pinned_edit_makes_one_run_holding_the_branch_s_name(
    proxy: Any, pg_store: Store, fault: str
) -> None:
    # The sibling and the branch's name are one write: settled together by its key.
    pinned = StructuredSession("s", pg_store, branch="main")
    await pinned.add_items(TURNS)  # the session's first write names its branch
    first, second = [run.id for run in await pg_store.runs("s")]
    proxy.arm(fault)
    edited = await _bounded(pinned.edit(second, "q2 again"))
    assert proxy.fired == 1
    assert [run.id for run in await pg_store.siblings("s", second)] == [second, edited.id]
    assert [run.id for run in await pg_store.runs("s", branch="main")] == [first, edited.id]
    assert [b.name for b in await pg_store.branches("s")] == [None, "main"]


@pytest.mark.postgres
@pytest.mark.parametrize("fault", FAULTS)
async def test_a_cut_write_after_branching_makes_one_run_holding_the_new_name(
    proxy: Any, pg_store: Store, fault: str
) -> None:
    # create_branch_from_turn's question and the branch's name are one write, settled together
    # by its key: one run, named, the object on it.
    pinned = StructuredSession("s", pg_store, branch="main")
    await pinned.add_items(TURNS)
    first, second = [run.id for run in await pg_store.runs("s")]
    await pinned.create_branch_from_turn(2, "alt")
    proxy.arm(fault)
    await _bounded(pinned.add_items([user("q2 again")]))
    assert proxy.fired == 1
    (_, again) = [run.id for run in await pg_store.siblings("s", second)]
    assert [run.id for run in await pg_store.runs("s", branch="alt")] == [first, again]
    assert [b.name for b in await pg_store.branches("s")] == ["main", "alt"]
    assert pinned.branch == "alt"


@pytest.mark.postgres
@pytest.mark.parametrize("fault", ["before_commit", "after_commit"])
async def test_a_cut_rewind_reports_the_new_head(proxy: Any, pg_store: Store, fault: str) -> None:
    first, second = await _two_runs(pg_store)
    proxy.arm(fault)
    assert await _bounded(pg_store.move_head("s", second, to_parent=True)) == first
    assert proxy.fired == 1
    assert await pg_store.get_items("s") == TURNS[:2]


@pytest.mark.postgres
@pytest.mark.parametrize("fault", ["before_commit", "after_commit"])
async def test_an_unreachable_server_is_an_unknown_outcome_and_the_key_retries_safely(
    proxy: Any, pg_store: Store, fault: str
) -> None:
    await pg_store.add_items("s", [user("q1")])
    proxy.arm(fault)
    proxy.refuse = True  # the server cannot be reached to settle the commit
    with pytest.raises(OutcomeUnknownError, match="operation_id=") as caught:
        await _bounded(pg_store.add_items("s", [assistant("a1")]))
    assert proxy.fired == 1
    key = caught.value.operation_id
    assert key is not None
    proxy.refuse = False
    await _bounded(pg_store.add_items("s", [assistant("a1")], operation_id=key))
    await _bounded(pg_store.add_items("s", [assistant("a1")], operation_id=key))
    assert await pg_store.get_items("s") == [user("q1"), assistant("a1")]


async def _lock_row(schema: str, session_id: str) -> Any:
    """A connection (straight to the server) holding the lock of ``session_id``'s row."""
    import psycopg

    holder = await psycopg.AsyncConnection.connect(POSTGRES_URL)
    await holder.execute(f'SET search_path TO "{schema}"')
    await holder.execute("SELECT 1 FROM sessions WHERE session_id = %s FOR UPDATE", [session_id])
    return holder


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(2000):  # a bounded wait for a state, not a timing
        if condition():
            return
        await asyncio.sleep(0.01)
    pytest.fail("the pool never reached the state the test waits for")


@pytest.mark.postgres
@pytest.mark.parametrize("fault", ["before_commit", "after_commit"])
async def test_a_cut_commit_is_settled_while_the_pool_has_no_connection_to_give(
    proxy: Any, fault: str
) -> None:
    """A write whose COMMIT was cut off is settled on a connection of its own: the pool's one
    connection, replaced, has gone to the next writer in line, which waits for a lock; through
    the pool, the settling would wait for it (here: for good)."""
    from psycopg_pool import AsyncConnectionPool

    from turnstore.postgres import PostgresBackend

    given_back = contextlib.ExitStack()
    schema = given_back.enter_context(emptied_schema())
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        proxy.url(proxy.database, proxy.user),
        min_size=1,
        max_size=1,
        timeout=60,
        kwargs={"autocommit": True, "prepare_threshold": None, "connect_timeout": 3},
        open=False,
    )
    await pool.open(wait=True)
    store = Store(PostgresBackend(pool=pool, schema=schema))
    holders = []
    try:
        await store.add_items("s", [user("q1")])
        await store.add_items("busy", [user("b1")])
        holders = [await _lock_row(schema, sid) for sid in ("s", "busy")]
        written = asyncio.ensure_future(store.add_items("s", [assistant("a1")]))
        await _until(lambda: pool.get_stats()["pool_available"] == 0)  # it has the connection
        waiting = asyncio.ensure_future(store.add_items("busy", [assistant("b2")]))
        await _until(lambda: pool.get_stats()["requests_waiting"] == 1)  # in line after it
        proxy.arm(fault)
        await holders[0].rollback()  # the write goes on, to its COMMIT, which is cut
        await _bounded(written)  # while the other write still holds the pool's connection
        assert proxy.fired == 1
        await holders[1].rollback()
        await _bounded(waiting)
        assert await store.get_items("s") == [user("q1"), assistant("a1")]  # once
        assert await store.get_items("busy") == [user("b1"), assistant("b2")]
    finally:
        for holder in holders:
            await holder.close()
        await store.aclose()
        await pool.close()
        given_back.close()


# ---------------------------------------------------------------------------------------------
# Cancellation: a write that has started is stored before the cancellation propagates


async def test_a_write_that_fails_as_its_caller_is_cancelled_raises_its_error() -> None:
    # The write ends in error after its caller's cancel() reached the shielded wait but
    # before the caller ran again: the caller gets the write's error, since a CancelledError
    # from a write says that it is stored (a session then forgets what it had to write).
    gate = asyncio.Event()

    async def failing() -> None:
        await gate.wait()
        raise StorageError("the write failed")

    write = asyncio.ensure_future(failing())
    caller = asyncio.ensure_future(ops.finish_write(write))
    await asyncio.sleep(0)  # the caller waits on the write
    gate.set()
    await asyncio.sleep(0)  # the write fails; the caller has not run since
    assert write.done()
    caller.cancel()
    with pytest.raises(StorageError, match="the write failed"):
        await caller


class _Hold:
    """Makes the store's next write wait, deterministically, until ``release``.

    SQLite file: another connection holds the write lock. SQLite :memory: (no other
    connection can see it): the store's worker thread is kept busy from the moment the write
    reaches the backend. PostgreSQL: another connection holds the session's row lock.
    ``entered`` is set when a write reaches the backend, so a cancellation is sent only while
    the write waits.
    """

    def __init__(self, store: Store, backend_name: str, target: str) -> None:
        self.store = store
        self.entered = asyncio.Event()
        self._release: Callable[[], Awaitable[None]]
        self._backend_name = backend_name
        self._target = target
        self._gate: threading.Event | None = None
        self.released = False
        run = store.backend.run

        async def spy(op: Any, *, write: bool) -> Any:
            if write and not self.entered.is_set():
                self.entered.set()
                if self._gate is not None:  # the worker thread: busy before the write
                    store.backend._executor.submit(self._gate.wait)  # type: ignore[attr-defined]
            return await run(op, write=write)

        store.backend.run = spy  # type: ignore[method-assign]

    async def hold(self, schema: str | None) -> None:
        if self._backend_name == "sqlite-file":
            conn = sqlite3.connect(self._target, isolation_level=None, check_same_thread=False)
            conn.execute("BEGIN IMMEDIATE")

            async def release_file() -> None:
                conn.rollback()
                conn.close()

            self._release = release_file
        elif self._backend_name == "sqlite-memory":
            self._gate = gate = threading.Event()

            async def release_gate() -> None:
                gate.set()

            self._release = release_gate
        else:
            import psycopg

            holder = await psycopg.AsyncConnection.connect(POSTGRES_URL)
            await holder.execute(f'SET search_path TO "{schema}"')
            await holder.execute("SELECT 1 FROM sessions WHERE session_id = 's' FOR UPDATE")

            async def release_row() -> None:
                await holder.rollback()
                await holder.close()

            self._release = release_row

    async def release(self) -> None:
        self.released = True
        await self._release()

    async def still_waiting(self, task: asyncio.Future[Any]) -> bool:
        """Whether ``task``, just cancelled, still waits for its held write (it must)."""
        # While the lock is held the write cannot end, so with the fix the task cannot either:
        # this wait always runs out. Without it the task ends within a few loop iterations.
        await asyncio.wait({task}, timeout=0.2)
        return not task.done()


Mutation = Callable[[Store, StructuredSession, list[int]], Awaitable[Any]]
Check = Callable[[Store, list[int]], Awaitable[None]]


async def _check_added(store: Store, runs: list[int]) -> None:
    assert await store.get_items("s") == [*TURNS, user("q3")]


async def _check_popped(store: Store, runs: list[int]) -> None:
    assert await store.get_items("s") == TURNS[:3]


async def _check_cleared(store: Store, runs: list[int]) -> None:
    assert await store.get_items("s") == []
    assert await store.session("s") is None


async def _check_edited(store: Store, runs: list[int]) -> None:
    assert len(await store.siblings("s", runs[1])) == 2
    assert (await store.get_items("s"))[-1] == user("q2 again")


async def _check_rewound(store: Store, runs: list[int]) -> None:
    assert await store.get_items("s") == TURNS[:2]
    assert len(await store.tree("s")) == 2


async def _check_deleted(store: Store, runs: list[int]) -> None:
    # The head's run and the ancestor only it reaches: the whole conversation.
    assert await store.tree("s") == []


# Each mutation, through StructuredSession or Store (the session's methods are the store's).
MUTATIONS: dict[str, tuple[Mutation, Check]] = {
    "session.add_items": (lambda st, se, r: se.add_items([user("q3")]), _check_added),
    "store.add_items": (lambda st, se, r: st.add_items("s", [user("q3")]), _check_added),
    "session.pop_item": (lambda st, se, r: se.pop_item(), _check_popped),
    "store.pop_item": (lambda st, se, r: st.pop_item("s"), _check_popped),
    "session.clear_session": (lambda st, se, r: se.clear_session(), _check_cleared),
    "session.edit": (lambda st, se, r: se.edit(r[1], "q2 again"), _check_edited),
    "session.rewind": (lambda st, se, r: se.rewind(r[1]), _check_rewound),
    "store.delete_branch": (
        lambda st, se, r: st.delete_branch("s", r[1], force=True),
        _check_deleted,
    ),
}


@pytest.fixture
async def held(
    open_store: Callable[[], Store], backend_name: str, db_target: tuple[str, dict[str, Any]]
) -> AsyncIterator[tuple[Store, StructuredSession, list[int], _Hold]]:
    """A store with two runs in session "s", whose next write will wait until released."""
    store = open_store()
    runs = await _two_runs(store)
    hold = _Hold(store, backend_name, db_target[0])
    await hold.hold(db_target[1].get("schema"))
    try:
        yield store, StructuredSession("s", store), runs, hold
    finally:
        if not hold.released:  # a failed test: let the write end, so the store can close
            await hold.release()


@pytest.fixture(params=list(MUTATIONS))
def mutation(request: pytest.FixtureRequest) -> tuple[Mutation, Check]:
    return MUTATIONS[request.param]


needs_311 = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="asyncio.timeout and TaskGroup are Python 3.11's"
)


async def _release_when_entered(hold: _Hold) -> None:
    """Release ``hold`` a while after its write waits: a 0.05 s timer set before, on this
    loop, has fired by then."""
    await asyncio.wait_for(hold.entered.wait(), 30)
    await asyncio.sleep(0.5)
    await hold.release()


async def test_a_write_cancelled_while_it_waits_is_stored_before_the_cancellation(
    held: tuple[Store, StructuredSession, list[int], _Hold], mutation: tuple[Mutation, Check]
) -> None:
    (store, session, runs, hold), (mutate, check) = held, mutation
    task = asyncio.ensure_future(mutate(store, session, runs))
    await asyncio.wait_for(hold.entered.wait(), 30)
    task.cancel()
    assert await hold.still_waiting(task)
    await hold.release()
    with pytest.raises(asyncio.CancelledError):
        await task
    await check(store, runs)


async def test_a_write_timed_out_by_wait_for_is_stored_before_the_timeout(
    held: tuple[Store, StructuredSession, list[int], _Hold], mutation: tuple[Mutation, Check]
) -> None:
    (store, session, runs, hold), (mutate, check) = held, mutation
    releaser = asyncio.ensure_future(_release_when_entered(hold))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(mutate(store, session, runs), 0.05)
    assert hold.released  # the timeout came out only once the write could, and did, end
    await releaser
    await check(store, runs)


@needs_311
async def test_a_write_timed_out_by_asyncio_timeout_raises_timeout_error_once_stored(
    held: tuple[Store, StructuredSession, list[int], _Hold], mutation: tuple[Mutation, Check]
) -> None:
    """``asyncio.timeout`` turns the cancellation it caused into ``TimeoutError`` only when
    it is a ``CancelledError`` itself (Python 3.11 compares the type with ``is``): the held
    cancellation a write raises once stored must be that, not a subclass, or the caller gets
    a ``CancelledError`` out of the ``async with`` and its task ends cancelled."""
    (store, session, runs, hold), (mutate, check) = held, mutation
    releaser = asyncio.ensure_future(_release_when_entered(hold))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await mutate(store, session, runs)
    assert hold.released
    await releaser
    await check(store, runs)


@needs_311
async def test_a_task_group_whose_sibling_fails_during_a_write_raises_only_that_error(
    held: tuple[Store, StructuredSession, list[int], _Hold], mutation: tuple[Mutation, Check]
) -> None:
    """A ``TaskGroup`` cancels its body when a child fails, and leaves that cancellation out
    of its ``ExceptionGroup`` only when it is a ``CancelledError`` itself (Python 3.11): a
    write in the body, stored before the cancellation reaches it, must not add one."""
    (store, session, runs, hold), (mutate, check) = held, mutation

    async def fails_once_the_write_waits() -> None:
        await _release_when_entered(hold)
        raise ValueError("sibling")

    async def in_a_group() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(fails_once_the_write_waits())
            await mutate(store, session, runs)

    # An ExceptionGroup (a builtin of Python 3.11); a cancellation in it would make it a
    # BaseExceptionGroup, not an Exception.
    with pytest.raises(Exception, match="unhandled errors in a TaskGroup") as raised:
        await in_a_group()
    assert [type(error) for error in raised.value.exceptions] == [ValueError]
    await check(store, runs)


async def test_a_streamed_run_cancelled_while_its_write_waits_keeps_the_input_once(
    held: tuple[Store, StructuredSession, list[int], _Hold],
) -> None:
    from agents import Agent, Runner
    from agents.testing import ModelStep, ScriptedModel, assistant_message

    store, session, _runs, hold = held
    model = ScriptedModel([ModelStep(output=[assistant_message("a3")])])
    agent = Agent(name="assistant", model=model)
    streamed = Runner.run_streamed(agent, "q3", session=session)
    # The turn's first write (its input) reaches the store and waits for the lock.
    await asyncio.wait_for(hold.entered.wait(), 30)
    streamed.cancel()
    task = streamed.run_loop_task
    assert task is not None
    assert await hold.still_waiting(task)
    await hold.release()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    items = await store.get_items("s")
    assert items[:4] == TURNS
    assert [item.get("content") for item in items[4:]].count("q3") == 1


async def _cancelled_at_its_first_operation(
    store: Store, backend_name: str, start: Callable[[], Awaitable[Any]]
) -> asyncio.Future[Any]:
    """``start()``'s task, cancelled once its first operation reaches the backend (where, on
    SQLite, it waits behind the worker kept busy), and awaited to its end."""
    entered, gate = asyncio.Event(), threading.Event()
    run = store.backend.run

    async def spy(op: Any, *, write: bool) -> Any:
        entered.set()
        return await run(op, write=write)

    store.backend.run = spy  # type: ignore[method-assign]
    if backend_name != "postgres":
        store.backend._executor.submit(gate.wait)  # type: ignore[attr-defined]
    try:
        task = asyncio.ensure_future(start())
        await asyncio.wait_for(entered.wait(), 30)
        task.cancel()
    finally:
        gate.set()
    try:
        await asyncio.wait({task}, timeout=30)
    finally:
        store.backend.run = run  # type: ignore[method-assign]
    assert task.done()
    return task


@pytest.mark.parametrize("end", ["clear_session", "delete_session"])
async def test_a_session_end_cancelled_before_its_write_starts_is_stored(
    open_store: Callable[[], Store], backend_name: str, end: str
) -> None:
    """``Store.clear_session`` and ``delete_session`` first look (a read, on SQLite) for the
    session's history in the SDK's tables, to adopt it before ending the session. A
    cancellation that arrived during that read came out as ``CancelledError`` with nothing
    deleted, which the promise reads as "stored": the conversation was still there.

    The read is made to wait, deterministically, behind the SQLite worker kept busy; on
    PostgreSQL there is no such read (the write itself is the first operation)."""
    store = open_store()
    await _two_runs(store)
    task = await _cancelled_at_its_first_operation(
        store, backend_name, lambda: getattr(store, end)("s")
    )
    with contextlib.suppress(asyncio.CancelledError):
        task.result()  # a CancelledError, or nothing: it was stored either way
    assert await store.session("s") is None
    assert await store.get_items("s") == []


SESSION_WRITES: dict[str, Callable[[StructuredSession], Awaitable[Any]]] = {
    "add_items": lambda session: session.add_items([user("q3")]),
    "pop_item": lambda session: session.pop_item(),
    "clear_session": lambda session: session.clear_session(),
}
SESSION_WRITTEN: dict[str, list[Any]] = {
    "add_items": [*TURNS, user("q3")],
    "pop_item": TURNS[:-1],
    "clear_session": [],
}


@pytest.mark.parametrize("write", list(SESSION_WRITES))
async def test_a_sessions_first_write_cancelled_during_its_adoption_is_stored(
    open_store: Callable[[], Store], backend_name: str, write: str
) -> None:
    """A session's first call first looks (a read, on SQLite) for its history in the SDK's
    tables, to adopt it. A cancellation that arrived during that read came out as
    ``CancelledError`` with the write never made, which the promise reads as "stored".

    The read waits, deterministically, behind the SQLite worker kept busy; on PostgreSQL the
    look needs no read, and the cancellation reaches the write itself."""
    store = open_store()
    await _two_runs(store)
    session = StructuredSession("s", store)
    task = await _cancelled_at_its_first_operation(
        store, backend_name, lambda: SESSION_WRITES[write](session)
    )
    with pytest.raises(asyncio.CancelledError):
        task.result()
    assert await store.get_items("s") == SESSION_WRITTEN[write]


# ---------------------------------------------------------------------------------------------
# The catalogue fields a session's first write carries: marked written once that write is stored


async def test_a_first_write_cancelled_while_it_waits_stores_its_catalogue_fields(
    held: tuple[Store, StructuredSession, list[int], _Hold],
) -> None:
    store, _session, _runs, hold = held
    session = StructuredSession("s", store, title="Kept", user_id="u1")
    task = asyncio.ensure_future(session.add_items([user("q3")]))
    await asyncio.wait_for(hold.entered.wait(), 30)
    task.cancel()
    await hold.release()
    with pytest.raises(asyncio.CancelledError):
        await task
    info = await store.session("s")
    assert info is not None
    assert (info.title, info.user_id) == ("Kept", "u1")


def test_a_first_write_given_up_as_its_loop_ends_sends_its_catalogue_fields_again(
    open_store: Callable[[], Store],
) -> None:
    """``asyncio.run`` ending with a session's write pending cancels every task, the write's
    own too: here before it started, so nothing is stored, and the session's next write
    carries the constructor's fields. Before, the fields were marked written anyway: the
    title and user were never stored."""
    store = open_store()
    session = StructuredSession("s", store, title="Kept", user_id="u1")

    async def ends_with_the_write_pending() -> asyncio.Future[None]:
        await session.get_items()  # adopted: the write task is made at the task's first step
        return asyncio.ensure_future(session.add_items([user("q1")]))

    assert asyncio.run(ends_with_the_write_pending()).cancelled()
    assert asyncio.run(store.get_items("s")) == []
    asyncio.run(session.add_items([user("q2")]))
    info = asyncio.run(store.session("s"))
    assert info is not None
    assert (info.title, info.user_id) == ("Kept", "u1")


async def test_set_info_cancelled_while_it_waits_is_not_undone_by_the_next_write(
    held: tuple[Store, StructuredSession, list[int], _Hold],
) -> None:
    """``set_info`` writes the constructor's fields not written yet with its own: stored,
    they are not sent again. Before, a cancellation (raised once it was stored) left them
    to send, and the next write put the constructor's title back over the new one."""
    store, _session, _runs, hold = held
    session = StructuredSession("s", store, title="Old")
    task = asyncio.ensure_future(session.set_info(title="New"))
    await asyncio.wait_for(hold.entered.wait(), 30)
    task.cancel()
    await hold.release()
    with pytest.raises(asyncio.CancelledError):
        await task
    await session.add_items([user("q3")])
    info = await store.session("s")
    assert info is not None
    assert info.title == "New"

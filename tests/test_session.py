"""Conformance tests of ``StructuredSession`` as the Agents SDK's ``Session`` (issue 2).

Every test runs on every backend (the ``store`` fixture) with sessions built on one shared
store, the way an application shares one database between conversations.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from agents.memory import SessionSettings

from builders import assistant, call, output, run_in_new_loop, user
from support import sql
from turnstore import (
    ClosedError,
    InvalidItemError,
    InvalidOperationError,
    Store,
    StructuredSession,
    TurnstoreError,
)


def tagged(tag: str, count: int) -> list[dict[str, Any]]:
    """``count`` distinct items: a user message, then assistant messages."""
    first = [user(f"{tag}:0")]
    return first + [assistant(f"{tag}:{i}", item_id=f"{tag}:{i}") for i in range(1, count)]


async def counts(store: Store, session_id: str) -> tuple[int, int, int]:
    """(runs, items, tool_calls) rows of a session, counted by plain SQL."""
    rows = await sql(
        store,
        "SELECT (SELECT count(*) FROM runs WHERE session_id = {sid}),"
        " (SELECT count(*) FROM items WHERE session_id = {sid}),"
        " (SELECT count(*) FROM tool_calls WHERE session_id = {sid})",
        sid=session_id,
    )
    return rows[0]


# ---------------------------------------------------------------------------------------------
# Ordering and limits


async def test_items_come_back_in_order_across_batches_and_runs(store: Store) -> None:
    session = StructuredSession("s", store)
    batches = [
        [user("q1")],
        [call("c1", "lookup", '{"q": 1}'), output("c1", "found")],
        [assistant("a1")],
        [user("q2"), assistant("a2", item_id="m2")],
        [user("q3")],
    ]
    for batch in batches:
        await session.add_items(batch)
    assert await session.get_items() == [item for batch in batches for item in batch]


async def test_empty_batch_writes_nothing(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([])
    assert await session.get_items() == []
    assert await counts(store, "s") == (0, 0, 0)


@pytest.mark.parametrize("limit", [1, 3, 4, 5, 7])
async def test_limit_returns_newest_items_oldest_first(store: Store, limit: int) -> None:
    session = StructuredSession("s", store)
    # Three runs of different sizes, so that the limit cuts inside and between runs.
    items = [*tagged("r1", 3), *tagged("r2", 1), *tagged("r3", 3)]
    await session.add_items(items[:3])
    await session.add_items(items[3:4])
    await session.add_items(items[4:])
    assert await session.get_items(limit) == items[-limit:]
    assert await session.get_items(limit=limit) == items[-limit:]


async def test_limit_zero_and_beyond_count(store: Store) -> None:
    session = StructuredSession("s", store)
    items = tagged("r", 4)
    await session.add_items(items)
    assert await session.get_items(0) == []
    assert await session.get_items(limit=0) == []
    assert await session.get_items(100) == items
    assert await session.get_items(4) == items


@pytest.mark.parametrize(
    "settings",
    [{"limit": 2}, SessionSettings(limit=2)],
    ids=["dict", "SessionSettings"],
)
async def test_session_settings_limit_applies_when_no_limit_is_given(
    store: Store, settings: Any
) -> None:
    session = StructuredSession("s", store, session_settings=settings)
    items = tagged("r", 5)
    await session.add_items(items)
    assert await session.get_items() == items[-2:]
    assert await session.get_items(None) == items[-2:]
    # An explicit limit beats the setting, in both directions, and 0 means nothing.
    assert await session.get_items(4) == items[-4:]
    assert await session.get_items(limit=1) == items[-1:]
    assert await session.get_items(0) == []


async def test_session_settings_without_limit_returns_everything(store: Store) -> None:
    session = StructuredSession("s", store, session_settings=SessionSettings())
    items = tagged("r", 5)
    await session.add_items(items)
    assert await session.get_items() == items


async def test_negative_limit_returns_everything_as_the_sdk_does(store: Store) -> None:
    # SQLiteSession binds the limit to SQLite's LIMIT, where a negative one means none.
    items = tagged("r", 3)
    await StructuredSession("s", store).add_items(items)
    assert await StructuredSession("s", store).get_items(-1) == items
    assert await StructuredSession("s", store).get_items(limit=-5) == items
    bounded = StructuredSession("s", store, session_settings=SessionSettings(limit=-1))
    assert await bounded.get_items() == items
    assert await StructuredSession("s", store, session_settings={"limit": -1}).get_items() == items
    assert await bounded.get_items(0) == []


@pytest.mark.parametrize("limit", ["3", 1.5, True])
async def test_bad_limit_is_refused(store: Store, limit: Any) -> None:
    session = StructuredSession("s", store)
    await session.add_items(tagged("r", 2))
    with pytest.raises(InvalidOperationError, match="limit"):
        await session.get_items(limit)


# ---------------------------------------------------------------------------------------------
# Isolation, unknown sessions


async def test_sessions_on_one_database_are_isolated(store: Store) -> None:
    a, b = StructuredSession("a", store), StructuredSession("b", store)
    a_items, b_items = tagged("a", 3), tagged("b", 2)
    await a.add_items(a_items[:2])
    await b.add_items(b_items)
    await a.add_items(a_items[2:])
    assert await a.get_items() == a_items
    assert await b.get_items() == b_items
    assert await a.get_items(1) == a_items[-1:]

    assert await b.pop_item() == b_items[-1]
    assert await a.get_items() == a_items
    await a.clear_session()
    assert await a.get_items() == []
    assert await b.get_items() == b_items[:-1]


async def test_two_session_objects_share_one_conversation(store: Store) -> None:
    first, second = StructuredSession("s", store), StructuredSession("s", store)
    await first.add_items([user("hi")])
    await second.add_items([assistant("hello")])
    assert await first.get_items() == [user("hi"), assistant("hello")]


async def test_unknown_session_reads_as_empty_and_is_not_created(store: Store) -> None:
    session = StructuredSession("never-written", store)
    assert await session.get_items() == []
    assert await session.get_items(5) == []
    assert await session.pop_item() is None
    assert await session.runs() == []
    assert await session.branches() == []
    assert await store.session("never-written") is None
    await session.clear_session()
    assert await sql(store, "SELECT count(*) FROM sessions") == [(0,)]


# ---------------------------------------------------------------------------------------------
# Odd content

ODD_TEXTS = [
    pytest.param("héllo wörld — ünïcödé ✓ 中文 العربية", id="unicode"),
    pytest.param("emoji 👩‍👩‍👧‍👦 🏳️‍🌈 🤖", id="emoji"),
    pytest.param("nul \x00 inside \x00", id="nul"),
    pytest.param("lone \ud800 surrogate \udfff", id="surrogate"),
    pytest.param("'; DROP TABLE items; --", id="sql-drop"),
    pytest.param("Robert'); DELETE FROM runs WHERE ('1'='1", id="sql-quote"),
    pytest.param('" OR 1=1 -- \\ %s %(x)s :sid ? $1', id="placeholders"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("text", ODD_TEXTS)
async def test_odd_content_round_trips(
    open_store: Callable[[], Store], backend_name: str, text: str
) -> None:
    store = open_store()
    session_id = "odd"
    session = StructuredSession(session_id, store)
    items = [
        user(text),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        call("c1", "tool", arguments=text),
        output("c1", text),
        assistant(text),
        {"type": "brand_new", text: text, "nested": {text: [text, 1]}},
    ]
    await session.add_items(items[:1])
    await session.add_items(items[1:])
    assert await session.get_items() == items
    assert await session.get_items(2) == items[-2:]
    if backend_name != "sqlite-memory":  # another connection sees what was committed
        other = StructuredSession(session_id, open_store())
        assert await other.get_items() == items
    assert await sql(store, "SELECT count(*) FROM items") == [(len(items),)]


async def test_odd_session_ids_are_plain_keys(store: Store) -> None:
    ids = ["'; DROP TABLE sessions; --", "ünï 🤖", "%", "_", "a'b"]
    for session_id in ids:
        await StructuredSession(session_id, store).add_items([user(session_id)])
    for session_id in ids:
        assert await StructuredSession(session_id, store).get_items() == [user(session_id)]
    assert await StructuredSession("x", store).get_items() == []


async def test_int_session_id_is_its_text_as_in_sqlite_session(store: Store) -> None:
    # SQLiteSession(42) stores "42" in its TEXT column: the same conversation as "42".
    session = StructuredSession(42, store)
    assert session.session_id == "42"
    await session.add_items([user("q")])
    assert await StructuredSession("42", store).get_items() == [user("q")]


@pytest.mark.parametrize("session_id", ["nul\x00id", "lone \ud800", None, b"bytes", True, 1.5])
async def test_unstorable_session_id_is_refused(store: Store, session_id: Any) -> None:
    # A wrong argument, not a bad open option (turnstore.domain.validate's rule).
    with pytest.raises(InvalidOperationError, match="session_id"):
        StructuredSession(session_id, store)
    with pytest.raises(InvalidOperationError, match="session_id"):
        await store.add_items(session_id, [user("x")])
    assert await sql(store, "SELECT count(*) FROM sessions") == [(0,)]


# ---------------------------------------------------------------------------------------------
# pop and clear


async def test_pop_item_returns_and_removes_the_newest(store: Store) -> None:
    session = StructuredSession("s", store)
    items = [user("q1"), assistant("a1"), user("q2"), assistant("a2", item_id="m2")]
    await session.add_items(items[:2])
    await session.add_items(items[2:])
    assert await session.pop_item() == items[3]
    assert await session.get_items() == items[:3]
    assert await session.pop_item() == items[2]  # the run of q2 is now empty: removed
    assert await session.get_items() == items[:2]
    assert await sql(store, "SELECT user_message FROM runs") == [("q1",)]
    await session.add_items([assistant("a1 again", item_id="m3")])  # joins the run of q1
    assert await session.get_items() == [*items[:2], assistant("a1 again", item_id="m3")]
    assert await sql(store, "SELECT user_message, item_count FROM runs") == [("q1", 3)]


async def test_pop_item_until_empty(store: Store) -> None:
    session = StructuredSession("s", store)
    items = [user("q1"), call("c1", "t"), output("c1", "o"), assistant("a1"), user("q2")]
    await session.add_items(items)
    popped = [await session.pop_item() for _ in items]
    assert popped == list(reversed(items))
    assert await session.pop_item() is None
    assert await session.get_items() == []
    # A run left empty is removed, with its tool calls.
    assert await counts(store, "s") == (0, 0, 0)
    await session.add_items([user("again")])
    assert await session.get_items() == [user("again")]


async def test_pop_of_a_tool_output_reopens_its_call(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("q"), call("c1", "t", '{"a": 1}'), output("c1", "done")])
    assert await session.pop_item() == output("c1", "done")
    rows = await sql(store, "SELECT call_id, tool_name, output, status FROM tool_calls")
    assert rows == [("c1", "t", None, "pending")]
    assert await session.pop_item() == call("c1", "t", '{"a": 1}')
    assert await sql(store, "SELECT count(*) FROM tool_calls") == [(0,)]


async def test_pop_item_keeps_run_columns_current(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("q"), assistant("first"), assistant("second", item_id="m2")])
    await session.pop_item()
    assert await sql(store, "SELECT user_message, assistant_message, item_count FROM runs") == [
        ("q", "first", 2)
    ]


async def test_clear_session_removes_every_row(store: Store) -> None:
    session, other = StructuredSession("s", store), StructuredSession("other", store)
    await session.add_items([user("q"), call("c1", "t"), output("c1", "o"), assistant("a")])
    await session.add_items([user("q2"), call("c2", "t")])
    await other.add_items([user("keep"), call("k1", "t"), output("k1", "o")])
    assert await counts(store, "s") == (2, 6, 2)

    await session.clear_session()
    assert await session.get_items() == []
    assert await counts(store, "s") == (0, 0, 0)
    assert await store.session("s") is None
    assert await counts(store, "other") == (1, 3, 1)
    assert await other.get_items() == [user("keep"), call("k1", "t"), output("k1", "o")]

    await session.clear_session()  # idempotent
    await session.add_items([user("fresh")])
    assert await session.get_items() == [user("fresh")]


# ---------------------------------------------------------------------------------------------
# Bad input


class NotJSON:
    pass


BAD_BATCHES = [
    pytest.param([user("ok"), "not a mapping"], "item 1", id="str-item"),
    pytest.param([user("ok"), 42], "item 1", id="int-item"),
    pytest.param([user("ok"), ["a", "list"]], "item 1", id="list-item"),
    pytest.param([user("ok"), None], "item 1", id="none-item"),
    pytest.param([user("ok"), {"role": "user", "content": {1, 2}}], "item 1", id="set"),
    pytest.param([user("ok"), {"role": "user", "content": NotJSON()}], "item 1", id="object"),
    pytest.param([user("ok"), {"role": "user", "content": b"bytes"}], "item 1", id="bytes"),
    pytest.param([user("ok"), {"role": "user", 1j: "x"}], "item 1", id="complex-key"),
    pytest.param(user("a mapping, not a list"), "list", id="mapping-batch"),
    pytest.param("a string", "list", id="str-batch"),
    pytest.param(b"bytes", "list", id="bytes-batch"),
    pytest.param(42, "list", id="int-batch"),
    pytest.param(None, "list", id="none-batch"),
]


@pytest.mark.parametrize(("batch", "mentions"), BAD_BATCHES)
async def test_bad_batch_is_refused_whole(store: Store, batch: Any, mentions: str) -> None:
    session = StructuredSession("s", store)
    history = [user("before"), call("c0", "t"), output("c0", "o"), assistant("a")]
    await session.add_items(history)
    before = await counts(store, "s")
    with pytest.raises(InvalidItemError, match=mentions) as caught:
        await session.add_items(batch)
    assert isinstance(caught.value, TypeError)  # as json.dumps would raise
    assert await session.get_items() == history
    assert await counts(store, "s") == before
    assert await sql(store, "SELECT user_message FROM runs") == [("before",)]


async def test_circular_item_is_refused(store: Store) -> None:
    session = StructuredSession("s", store)
    loop: dict[str, Any] = {"role": "user"}
    loop["content"] = loop
    with pytest.raises(InvalidItemError, match="item 0"):
        await session.add_items([loop])
    assert await counts(store, "s") == (0, 0, 0)


async def test_generator_batch_is_refused(store: Store) -> None:
    session = StructuredSession("s", store)
    with pytest.raises(InvalidItemError):
        await session.add_items(item for item in [user("x")])  # type: ignore[arg-type]
    assert await session.get_items() == []


# ---------------------------------------------------------------------------------------------
# Concurrency

THREADS, BATCHES, BATCH_SIZE = 4, 8, 3


def check_batches_contiguous(items: list[Any], writers: int) -> None:
    """Every batch of ``tagged(f"{writer}-{batch}", BATCH_SIZE)`` is whole and in order."""
    texts = [item["content"] if item["role"] == "user" else item["id"] for item in items]
    assert len(texts) == writers * BATCHES * BATCH_SIZE
    seen: dict[str, int] = {}
    for start in range(0, len(texts), BATCH_SIZE):
        chunk = texts[start : start + BATCH_SIZE]
        tag = chunk[0].rsplit(":", 1)[0]
        assert chunk == [f"{tag}:{i}" for i in range(BATCH_SIZE)], chunk
        writer, batch = tag.split("-")
        # Each writer's batches arrive in the order it wrote them.
        assert int(batch) == seen.get(writer, -1) + 1
        seen[writer] = int(batch)
    assert len(seen) == writers


def write_from_threads(make_session: Callable[[int], StructuredSession]) -> None:
    """THREADS threads, each with its own event loop, each writing BATCHES batches."""
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    async def write(writer: int) -> None:
        session = make_session(writer)
        for batch in range(BATCHES):
            await session.add_items(tagged(f"w{writer}-{batch}", BATCH_SIZE))

    def target(writer: int) -> None:
        try:
            start.wait()
            asyncio.run(write(writer))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


async def test_threads_share_one_session_object(store: Store) -> None:
    session = StructuredSession("s", store)
    await asyncio.to_thread(write_from_threads, lambda _: session)
    check_batches_contiguous(await session.get_items(), THREADS)
    assert await counts(store, "s") == (THREADS * BATCHES, THREADS * BATCHES * BATCH_SIZE, 0)


async def test_threads_with_own_session_objects_on_one_session(store: Store) -> None:
    await asyncio.to_thread(write_from_threads, lambda _: StructuredSession("s", store))
    check_batches_contiguous(await StructuredSession("s", store).get_items(), THREADS)


async def test_threads_on_separate_sessions(store: Store) -> None:
    await asyncio.to_thread(write_from_threads, lambda n: StructuredSession(f"s{n}", store))
    for writer in range(THREADS):
        items = await StructuredSession(f"s{writer}", store).get_items()
        assert items == [
            item for batch in range(BATCHES) for item in tagged(f"w{writer}-{batch}", BATCH_SIZE)
        ]


async def test_one_session_object_on_several_event_loops(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("from the test's loop")])
    await asyncio.to_thread(run_in_new_loop, lambda: session.add_items([assistant("loop 2")]))
    await asyncio.to_thread(run_in_new_loop, lambda: session.add_items([user("loop 3")]))
    expected = [user("from the test's loop"), assistant("loop 2"), user("loop 3")]
    assert await asyncio.to_thread(run_in_new_loop, session.get_items) == expected
    assert await session.get_items() == expected


# ---------------------------------------------------------------------------------------------
# Closing


async def _use(session: StructuredSession, method: str) -> Any:
    if method == "add_items":
        return await session.add_items([user("x")])
    return await getattr(session, method)()


SESSION_METHODS = ["get_items", "add_items", "pop_item", "clear_session", "runs"]


@pytest.mark.parametrize("method", SESSION_METHODS)
async def test_closed_session_refuses_use(store: Store, method: str) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("q")])
    session.close()
    session.close()  # idempotent
    with pytest.raises(ClosedError):
        await _use(session, method)
    # Closing one session leaves the shared store, and other sessions on it, usable.
    assert await StructuredSession("s", store).get_items() == [user("q")]


@pytest.mark.parametrize("method", SESSION_METHODS)
async def test_session_on_a_closed_store_refuses_use(
    open_store: Callable[[], Store], method: str
) -> None:
    store = open_store()
    session = StructuredSession("s", store)
    await session.add_items([user("q")])
    await store.aclose()
    with pytest.raises(ClosedError):
        await _use(session, method)


async def test_session_owning_its_database_closes_it(tmp_path: Any) -> None:
    session = StructuredSession("s", str(tmp_path / "own.db"))
    await session.add_items([user("q")])
    session.close()
    with pytest.raises(ClosedError):
        await session.get_items()
    # The store it opened stays for the next session of the file (tests/test_shared_stores.py
    # sees it closed once idle).
    reopened = StructuredSession("s", str(tmp_path / "own.db"))
    assert reopened._store is session._store
    assert await reopened.get_items() == [user("q")]
    await reopened.aclose()
    with pytest.raises(ClosedError):
        await reopened.add_items([user("late")])


async def test_default_database_is_memory() -> None:
    session = StructuredSession("s")
    await session.add_items([user("q")])
    assert await session.get_items() == [user("q")]
    session.close()


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "turnstore-checkpoint"]


async def test_sqlite_wal_is_checkpointed_off_the_writers_thread(tmp_path: Any) -> None:
    # The writer's own automatic checkpoint only starts at 10,000 pages: that the database
    # file grows after a few hundred writes shows the checkpoint thread copied the pages.
    path = tmp_path / "ckpt.db"
    before = len(_checkpoint_threads())
    store = Store.open(path)
    assert len(_checkpoint_threads()) == before + 1
    size = path.stat().st_size
    for n in range(200):
        await store.add_items("s", [user(f"question {n}"), assistant(f"answer {n}")])
    for _ in range(100):
        if path.stat().st_size > size:
            break
        await asyncio.sleep(0.05)
    assert path.stat().st_size > size
    await store.aclose()
    assert len(_checkpoint_threads()) == before  # closing the store stops it
    with Store.open(path) as reopened:
        assert len(await reopened.get_items("s")) == 400


async def test_sqlite_memory_store_has_no_checkpoint_thread() -> None:
    before = len(_checkpoint_threads())
    with Store.open(":memory:") as store:
        await store.add_items("s", [user("q")])
        assert len(_checkpoint_threads()) == before


# ---------------------------------------------------------------------------------------------
# Corrupt rows (needs write access to the file: SQLite only)


@pytest.mark.parametrize("corrupt", ["{broken", "[1, 2]", '"a string"', "null"])
async def test_corrupt_row_is_skipped_and_logged(
    tmp_path: Any, caplog: pytest.LogCaptureFixture, corrupt: str
) -> None:
    path = str(tmp_path / "corrupt.db")
    store = Store.open(path)
    try:
        session = StructuredSession("s", store)
        items = [user("q1"), assistant("a1"), user("q2"), assistant("a2", item_id="m2")]
        await session.add_items(items)
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE items SET data = ? WHERE session_id = 's' AND text = 'a1'", (corrupt,)
            )
        with caplog.at_level(logging.WARNING, logger="turnstore"):
            assert await session.get_items() == [items[0], items[2], items[3]]
        assert "corrupt" in caplog.text
        assert "'s'" in caplog.text
        # A tail read around the corrupt row still returns the good rows.
        assert await session.get_items(2) == items[2:]
        assert await session.get_items(3) == [items[2], items[3]]
    finally:
        store.close()


async def test_pop_skips_a_corrupt_newest_row(tmp_path: Any) -> None:
    path = str(tmp_path / "corrupt.db")
    store = Store.open(path)
    try:
        session = StructuredSession("s", store)
        await session.add_items([user("q1"), assistant("a1"), assistant("a2", item_id="m2")])
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE items SET data = '{broken' WHERE text = 'a2'")
        assert await session.pop_item() == assistant("a1")
        assert await session.get_items() == [user("q1")]
    finally:
        store.close()


# ---------------------------------------------------------------------------------------------
# Structured columns


async def test_run_columns_hold_user_and_assistant_text(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("What's the weather?")])
    await session.add_items([call("c1", "weather", '{"city": "Oslo"}'), output("c1", "rain")])
    await session.add_items([assistant("Rain in Oslo.")])
    await session.add_items(
        [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And"}]},
            assistant("draft", item_id="m2"),
            assistant("Sun tomorrow.", item_id="m3"),
        ]
    )
    rows = await sql(
        store,
        "SELECT user_message, assistant_message, item_count, depth FROM runs"
        " WHERE session_id = {sid} ORDER BY id",
        sid="s",
    )
    assert rows == [
        ("What's the weather?", "Rain in Oslo.", 4, 0),
        ("And", "Sun tomorrow.", 3, 1),
    ]
    runs = await session.runs()
    assert [(r.user_message, r.assistant_message) for r in runs] == [
        ("What's the weather?", "Rain in Oslo."),
        ("And", "Sun tomorrow."),
    ]
    assert runs[1].parent_id == runs[0].id
    info = await store.session("s")
    assert info is not None
    assert info.head_run_id == runs[1].id
    assert info.title == "What's the weather?"


async def test_items_before_any_user_message_form_a_run_without_one(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([assistant("Welcome!")])
    await session.add_items([user("hi"), assistant("hello", item_id="m2")])
    rows = await sql(store, "SELECT user_message, assistant_message FROM runs ORDER BY id")
    assert rows == [(None, "Welcome!"), ("hi", "hello")]


async def test_item_columns(store: Store) -> None:
    session = StructuredSession("s", store)
    unknown = {"type": "brand_new_thing", "payload": {"k": [1, 2.5, None, True]}, "z": 1}
    await session.add_items(
        [
            user("q"),
            call("c1", "lookup", '{"q": "x"}'),
            output("c1", "the answer"),
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "hm"}],
            },
            assistant("done"),
            unknown,
        ]
    )
    rows = await sql(
        store,
        "SELECT position, type, role, call_id, name, text FROM items"
        " WHERE session_id = {sid} ORDER BY position",
        sid="s",
    )
    assert rows == [
        (0, "message", "user", None, None, "q"),
        (1, "function_call", None, "c1", "lookup", '{"q": "x"}'),
        (2, "function_call_output", None, "c1", None, "the answer"),
        (3, "reasoning", None, None, None, "hm"),
        (4, "message", "assistant", None, None, "done"),
        (5, "brand_new_thing", None, None, None, None),
    ]
    assert (await session.get_items())[-1] == unknown
    assert list((await session.get_items(1))[0]) == ["type", "payload", "z"]


@pytest.mark.parametrize(
    "outputs_first",
    # Both orders, so that pairing by position (last call in, first out) cannot pass.
    [pytest.param("c2", id="reverse-order"), pytest.param("c1", id="call-order")],
)
async def test_tool_call_pairs_with_its_output_in_one_batch(
    store: Store, outputs_first: str
) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("q")])
    answers = {"c1": output("c1", "3"), "c2": output("c2", "12")}
    later = "c1" if outputs_first == "c2" else "c2"
    await session.add_items(
        [
            call("c1", "add", '{"a": 1, "b": 2}'),
            call("c2", "mul", '{"a": 3, "b": 4}'),
            answers[outputs_first],
            answers[later],
        ]
    )
    rows = await sql(
        store,
        "SELECT t.call_id, t.tool_name, t.kind, t.arguments, t.output, t.status,"
        " c.position, o.position, r.user_message"
        " FROM tool_calls t JOIN runs r ON r.session_id = t.session_id AND r.id = t.run_id"
        " JOIN items c ON c.session_id = t.session_id AND c.id = t.call_item_id"
        " JOIN items o ON o.session_id = t.session_id AND o.id = t.output_item_id"
        " ORDER BY t.call_id",
    )
    position = {outputs_first: 3, later: 4}
    assert rows == [
        ("c1", "add", "function", '{"a": 1, "b": 2}', "3", "completed", 1, position["c1"], "q"),
        ("c2", "mul", "function", '{"a": 3, "b": 4}', "12", "completed", 2, position["c2"], "q"),
    ]
    completed = await sql(store, "SELECT count(*) FROM tool_calls WHERE completed_at IS NULL")
    assert completed == [(0,)]


async def test_tool_output_in_a_later_batch_completes_its_call(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("delete it"), call("c1", "delete", '{"id": 7}')])
    assert await sql(store, "SELECT call_id, output, status, output_item_id FROM tool_calls") == [
        ("c1", None, "pending", None)
    ]
    await session.add_items([output("c1", "deleted"), assistant("Done.")])
    rows = await sql(
        store,
        "SELECT t.call_id, t.tool_name, t.arguments, t.output, t.status, o.type"
        " FROM tool_calls t"
        " JOIN items o ON o.session_id = t.session_id AND o.id = t.output_item_id",
    )
    assert rows == [("c1", "delete", '{"id": 7}', "deleted", "completed", "function_call_output")]
    assert await sql(store, "SELECT count(*) FROM tool_calls") == [(1,)]
    assert await sql(store, "SELECT assistant_message FROM runs") == [("Done.",)]


async def test_an_output_completes_the_newest_open_call_of_its_call_id(store: Store) -> None:
    # Call ids repeat across runs (some models number them per response): an output answers
    # the latest call that has none, not an older one left unanswered.
    session = StructuredSession("s", store)
    await session.add_items([user("q1"), call("c1", "lookup", '{"n": 1}')])
    await session.add_items([user("q2"), call("c1", "lookup", '{"n": 2}')])
    await session.add_items([output("c1", "second")])
    rows = await sql(
        store,
        "SELECT r.user_message, t.arguments, t.output, t.status FROM tool_calls t"
        " JOIN runs r ON r.session_id = t.session_id AND r.id = t.run_id ORDER BY t.id",
    )
    assert rows == [
        ("q1", '{"n": 1}', None, "pending"),
        ("q2", '{"n": 2}', "second", "completed"),
    ]


async def test_an_output_never_completes_another_sessions_call(store: Store) -> None:
    # The same call_id open in two sessions, the other session's call the newer one.
    mine, theirs = StructuredSession("mine", store), StructuredSession("theirs", store)
    await mine.add_items([user("q"), call("c1", "mine")])
    await theirs.add_items([user("q"), call("c1", "theirs")])
    await mine.add_items([output("c1", "my answer")])
    # A session with no such call gets an output-only row, and completes nobody's call.
    await StructuredSession("third", store).add_items([output("c1", "stray")])
    rows = await sql(
        store,
        "SELECT session_id, tool_name, output, status FROM tool_calls ORDER BY session_id",
    )
    assert rows == [
        ("mine", "mine", "my answer", "completed"),
        ("theirs", "theirs", None, "pending"),
        ("third", None, "stray", "completed"),
    ]


async def test_output_without_a_known_call_still_gets_a_row(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("q"), output("ghost", "orphan output")])
    assert await sql(store, "SELECT call_id, tool_name, output, call_item_id FROM tool_calls") == [
        ("ghost", None, "orphan output", None)
    ]


async def test_hosted_tool_is_one_row(store: Store) -> None:
    session = StructuredSession("s", store)
    search = {
        "id": "ws_1",
        "action": {"type": "search", "query": "turnstore"},
        "status": "completed",
        "type": "web_search_call",
    }
    await session.add_items([user("search"), search, assistant("found")])
    rows = await sql(
        store,
        "SELECT call_id, tool_name, kind, status, call_item_id = output_item_id FROM tool_calls",
    )
    assert rows == [("ws_1", "web_search", "web_search", "completed", 1)]
    assert await session.get_items() == [user("search"), search, assistant("found")]


@pytest.mark.parametrize(
    ("status", "error", "recorded"),
    [
        ("completed", None, "completed"),
        (None, None, "completed"),  # no status: it ran
        ("in_progress", None, "in_progress"),
        ("completed", "timeout", "failed"),  # an error wins over the item's status
        (None, "timeout", "failed"),
        ("incomplete", "timeout", "incomplete"),
        ("failed", "timeout", "failed"),
    ],
)
async def test_hosted_call_status(
    store: Store, status: str | None, error: str | None, recorded: str
) -> None:
    mcp = {"type": "mcp_call", "id": "mcp_1", "name": "ask", "arguments": "{}"}
    mcp |= {"server_label": "wiki", "output": "X is Y."}
    if status is not None:
        mcp["status"] = status
    if error is not None:
        mcp["error"] = error
    await StructuredSession("s", store).add_items([user("q"), mcp])
    rows = await sql(store, "SELECT kind, status, error FROM tool_calls")
    assert rows == [("mcp", recorded, error)]


@pytest.mark.parametrize(
    ("call_status", "output_item", "recorded"),
    [
        ("incomplete", None, "incomplete"),  # the model never finished writing the call
        ("failed", None, "failed"),
        ("completed", None, "pending"),  # written, not yet run
        (None, {"status": "completed", "output": "fine"}, "completed"),
        # The SDK's words for a tool that raised, under a "completed" status: failed.
        (
            None,
            {
                "status": "completed",
                "output": "An error occurred while running the tool. Please try again.",
            },
            "failed",
        ),
    ],
)
async def test_function_call_status(
    store: Store, call_status: str | None, output_item: dict[str, str] | None, recorded: str
) -> None:
    item = call("c1", "add")
    if call_status is not None:
        item["status"] = call_status
    batch = [user("q"), item]
    if output_item is not None:
        batch.append({"type": "function_call_output", "call_id": "c1", **output_item})
    await StructuredSession("s", store).add_items(batch)
    assert await sql(store, "SELECT status FROM tool_calls") == [(recorded,)]


async def test_failed_tool_output_records_status(store: Store) -> None:
    session = StructuredSession("s", store)
    failed = {
        "type": "custom_tool_call_output",
        "call_id": "ct1",
        "output": "boom",
        "status": "failed",
    }
    await session.add_items(
        [user("q"), {"type": "custom_tool_call", "call_id": "ct1", "name": "x", "input": "i"}]
    )
    await session.add_items([failed])
    assert await sql(store, "SELECT tool_name, status, error, output FROM tool_calls") == [
        ("x", "failed", "boom", "boom")
    ]


def fake_wrapper(
    requests: int, input_tokens: int, output_tokens: int, cached: int, reasoning: int
) -> Any:
    """An object shaped like the SDK's RunContextWrapper, carrying cumulative usage."""
    return SimpleNamespace(
        usage=SimpleNamespace(
            requests=requests,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
            input_tokens_details=SimpleNamespace(cached_tokens=cached),
            output_tokens_details=SimpleNamespace(reasoning_tokens=reasoning),
        )
    )


USAGE_SQL = (
    "SELECT user_message, requests, input_tokens, output_tokens, total_tokens, cached_tokens,"
    " reasoning_tokens FROM runs ORDER BY id"
)


async def test_usage_from_wrapper_lands_on_the_run(store: Store) -> None:
    session = StructuredSession("s", store)
    # One wrapper per Runner call, its usage cumulative over the call's writes.
    first = fake_wrapper(0, 0, 0, 0, 0)
    await session.get_items(wrapper=first)
    await session.add_items([user("q1")], wrapper=first)
    first.usage = fake_wrapper(1, 100, 10, 40, 3).usage
    await session.add_items([call("c1", "t"), output("c1", "o")], wrapper=first)
    # The latest figure of a call is its total, not a sum of its writes.
    first.usage = fake_wrapper(2, 250, 30, 90, 7).usage
    await session.add_items([assistant("a1")], wrapper=first)
    second = fake_wrapper(0, 0, 0, 0, 0)
    await session.add_items([user("q2")], wrapper=second)
    second.usage = fake_wrapper(1, 60, 5, 0, 0).usage
    await session.add_items([assistant("a2", item_id="m2")], wrapper=second)
    await session.add_items([assistant("no wrapper", item_id="m3")])
    assert await sql(store, USAGE_SQL) == [
        ("q1", 2, 250, 30, 280, 90, 7),
        ("q2", 1, 60, 5, 65, 0, 0),
    ]
    runs = await session.runs()
    assert runs[0].usage.total_tokens == 280
    assert runs[0].usage.cached_tokens == 90
    assert runs[1].usage.requests == 1


async def test_wrapper_without_usage_and_empty_batches(store: Store) -> None:
    session = StructuredSession("s", store)
    # An empty batch carrying usage, on a session with no run yet, has nothing to land on.
    await session.add_items([], wrapper=fake_wrapper(1, 5, 5, 0, 0))
    assert await counts(store, "s") == (0, 0, 0)
    await session.add_items([user("q")], wrapper=SimpleNamespace())
    await session.add_items([], wrapper=fake_wrapper(1, 5, 6, 0, 0))
    assert await sql(store, USAGE_SQL) == [("q", 1, 5, 6, 11, 0, 0)]
    assert await session.get_items(wrapper=None) == [user("q")]
    assert await session.pop_item(wrapper=object()) == user("q")
    await session.clear_session(wrapper=object())


async def test_errors_are_turnstore_errors(store: Store) -> None:
    session = StructuredSession("s", store)
    with pytest.raises(TurnstoreError):
        await session.add_items([{1, 2}])  # type: ignore[list-item]
    with pytest.raises(TurnstoreError):
        await session.get_items("5")  # type: ignore[arg-type]

"""Integrity under unlucky histories and hostile values (issue 11), on every backend.

Ids of runs, items and tool calls are never handed out twice (so a stale ``expected_head``,
a permalink or a delete can never hit a newer row); ``delete_branch`` never removes the
active path unless the head is in the deleted subtree; keys that collide in JSON are
refused; a search waits for another connection's write; and every value SQLite stores,
PostgreSQL stores too.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import sqlite3
import string
import threading
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import (
    assistant,
    call,
    converse,
    history,
    output,
    path,
    run_items,
    snapshot,
    span_record,
    user,
)
from support import POSTGRES_URL, drop_schema, require_postgres, sql, writes_before_totals
from turnstore import (
    ConflictError,
    InvalidItemError,
    InvalidOperationError,
    RunNotFoundError,
    StorageError,
    Store,
    StructuredSession,
    TurnstoreError,
)
from turnstore.core.ops import Fetch, Query
from turnstore.core.tables import DETAIL_COLUMNS
from turnstore.sqlite import migrations as sqlite_migrations

ID_TABLES = ("runs", "items", "tool_calls")


async def head(store: Store, session_id: str = "s") -> int | None:
    info = await store.session(session_id)
    return info.head_run_id if info is not None else None


# ---------------------------------------------------------------------------------------------
# Ids are never reused


async def ids(store: Store) -> dict[str, set[int]]:
    """The ids stored in each table that hands them out."""
    return {
        table: {row[0] for row in await sql(store, f"SELECT id FROM {table}")}
        for table in ID_TABLES
    }


async def _pop_run(store: Store) -> None:
    for _ in run_items("q2"):  # the newest run, item by item: the run goes with its last
        await store.pop_item("s")


async def _delete_branch(store: Store) -> None:
    await store.delete_branch("s", (await store.runs("s"))[-1].id, force=True)


DELETES: dict[str, Callable[[Store], Awaitable[None]]] = {
    "pop": _pop_run,
    "delete_branch": _delete_branch,
    "clear_session": lambda store: store.clear_session("s"),
    "delete_session": lambda store: store.delete_session("s"),
}


@pytest.mark.parametrize("delete", list(DELETES))
async def test_ids_are_never_reused_after_a_delete(store: Store, delete: str) -> None:
    session = StructuredSession("s", store)
    await converse(session, "q1", "q2")
    issued = await ids(store)
    await DELETES[delete](store)
    left = await ids(store)
    assert all(left[table] < issued[table] for table in ID_TABLES)  # the newest rows went

    await converse(session, "q3")
    new = {table: (await ids(store))[table] - left[table] for table in ID_TABLES}
    for table in ID_TABLES:
        assert new[table], table
        assert min(new[table]) > max(issued[table]), (table, new[table], issued[table])


async def test_a_stale_head_is_refused_after_pop_then_append(store: Store) -> None:
    # ABA: the head a writer saw was popped, and another writer appended a new run.
    session = StructuredSession("s", store)
    r1, seen = await converse(session, "q1", "q2")
    await _pop_run(store)
    assert await head(store) == r1
    await converse(session, "their q2")
    new = await head(store)
    assert new != seen
    before = await snapshot(store)

    with pytest.raises(ConflictError):
        await session.delete_branch(new, force=True, expected_head=seen)
    with pytest.raises(ConflictError):
        await session.checkout(r1, expected_head=seen)
    with pytest.raises(RunNotFoundError):
        await session.delete_branch(seen, force=True)
    with pytest.raises(RunNotFoundError):  # a permalink to the popped run leads nowhere
        await store.run(seen)

    assert await snapshot(store) == before
    assert await path(session) == ["q1", "their q2"]


async def _raw(store: Store, statement: str, fetch: Fetch = Fetch.NONE, write: bool = False) -> Any:
    def op() -> Any:
        return (yield Query(statement, fetch=fetch, raw=True))

    return await store.backend.run(op, write=write)


async def test_sqlite_migration_to_never_reused_ids_keeps_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the version before the rebuild, with data: ids, indexes, triggers, the search
    index and the views all survive, and freed ids are not handed out again."""
    target = str(tmp_path / "old.db")
    rebuild = next(
        number
        for number, step in enumerate(sqlite_migrations.MIGRATIONS)
        if any("AUTOINCREMENT" in statement for statement in step)
    )
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_migrations, "MIGRATIONS", sqlite_migrations.MIGRATIONS[:rebuild])
        old = Store.open(target)
    # Write keys (core/once.py) came with a later step: this test writes without them, and
    # without the sessions' totals, a later step still.
    monkeypatch.setattr("turnstore.store.base.once", lambda sid, key, op, *args, **kwargs: op)
    # Today's writes name the token details' columns (a later step too): the old database
    # has them while it is written, and loses them again before the upgrade.
    details = [(t, c) for t in ("runs", "model_responses") for c in DETAIL_COLUMNS]
    for table, column in details:
        await sql(old, f"ALTER TABLE {table} ADD COLUMN {column} TEXT", write=True)
    uncounted = ExitStack()
    uncounted.enter_context(writes_before_totals("sqlite"))
    session = StructuredSession("s", old)
    r1, r2, r3 = await converse(session, "alpha", "bravo", "charlie")
    await session.edit(r2, "bravo edited")
    await session.pop_item()  # the edit's run: its id is free again on the old schema
    # Index the backlog as a search of that version did (today's search also reads the tool
    # errors' index, which that version lacks).
    await sql(
        old,
        "INSERT INTO items_fts (rowid, text) SELECT id, text FROM items WHERE id > "
        "(SELECT indexed_through FROM items_fts_state) AND text IS NOT NULL",
        write=True,
    )
    await sql(
        old,
        "UPDATE items_fts_state SET indexed_through = (SELECT coalesce(max(id), 0) FROM items)",
        write=True,
    )
    assert await sql(old, "SELECT count(*) FROM items_fts WHERE items_fts MATCH 'alpha'") != [(0,)]
    await converse(session, "delta")  # a backlog the search index has not seen yet
    # A compaction: a run with kind, prior_run_id, and runs marked compacted_by it.
    assert await old.compact("s", [user("delta"), assistant("summary", item_id="m-sum")])
    await converse(session, "after compaction")
    rows_before = await snapshot(old)
    model_view = await session.get_items()
    for table, column in details:
        await sql(old, f"ALTER TABLE {table} DROP COLUMN {column}", write=True)
    columns = {
        table: ", ".join(row[1] for row in await sql(old, f"PRAGMA table_info({table})"))
        for table in ID_TABLES
    }
    every_column = {
        table: await sql(old, f"SELECT {columns[table]} FROM {table} ORDER BY id")
        for table in ID_TABLES
    }
    await old.aclose()
    uncounted.close()

    store = Store.open(target)
    try:
        assert await snapshot(store) == rows_before
        for table, rows in every_column.items():  # the columns of then (later steps add more)
            found = await sql(store, f"SELECT {columns[table]} FROM {table} ORDER BY id")
            assert found == rows, table
        assert await StructuredSession("s", store).get_items() == model_view
        fresh = Store.open(":memory:")
        try:
            schema = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
            assert await sql(store, schema) == await sql(fresh, schema)
        finally:
            await fresh.aclose()
        # The search index still follows items by id, the backlog included.
        for word, expected in (("alpha", [r1]), ("charlie", [r3])):
            assert [r.run_id for r in await store.search(word) if r.role == "user"] == expected
        delta = [r for r in await store.search("delta") if r.role == "user"]
        assert len(delta) == 2  # the run and the compaction run's copy, both in the backlog
        # Views and foreign keys work on the rebuilt tables.
        assert await sql(store, "SELECT count(*) FROM run_overview") == [(6,)]
        assert await sql(store, "SELECT count(*) FROM tool_call_overview") == [(5,)]
        assert await sql(store, "PRAGMA foreign_keys") == [(1,)]
        assert await sql(store, "PRAGMA foreign_key_check") == []
        await store.delete_branch("s", r3, force=True)  # cascades to items and tool calls
        assert await sql(store, "SELECT count(*) FROM items WHERE run_id = {r}", r=r3) == [(0,)]
        # Ids: the highest ever stored is not handed out again.
        issued = await ids(store)
        await store.pop_item("s")
        await converse(session := StructuredSession("s", store), "echo")
        new = await sql(store, "SELECT max(id) FROM items")
        assert new[0][0] > max(issued["items"])
        assert await path(session) == ["alpha", "delta", None, "after compaction", "echo"]
    finally:
        await store.aclose()


# ---------------------------------------------------------------------------------------------
# Deleting branches with the head checked out anywhere


async def test_delete_below_a_head_checked_out_mid_branch_keeps_the_path(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, _, r4 = await converse(session, "q1", "q2", "q3", "q4")
    await session.checkout(r2)  # the head is above the branch deleted below

    assert await store.delete_branch("s", r4, force=True) == r2
    # Run 3 only led to run 4, so it goes; the path to the head stays whole.
    assert await head(store) == r2
    assert await session.get_items() == history("q1", "q2")
    assert await sql(store, "SELECT id FROM runs ORDER BY id") == [(r1,), (r2,)]


async def test_delete_the_branch_whose_head_is_checked_out_inside_it(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    edited = await session.edit(r2, "q2 edited")
    await session.checkout(r2)  # mid-branch: run 3 is below the head

    assert (
        await store.delete_branch("s", r2, force=True) == r1
    )  # the head is inside: it goes, with run 3
    assert await session.get_items() == history("q1")
    assert await sql(store, "SELECT id FROM runs ORDER BY id") == [(r1,), (edited.id,)]
    with pytest.raises(RunNotFoundError):
        await session.checkout(r3)


async def test_delete_a_branch_while_the_head_is_mid_way_along_another(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    await session.rewind(r2)  # the next message starts a sibling of run 2
    other, _ = await converse(session, "other q2", "other q3")
    await session.checkout(other)  # mid-way along the other branch
    kept = await session.get_items()

    assert await store.delete_branch("s", r3, force=True) == other
    assert await head(store) == other
    assert await session.get_items() == kept == history("q1", "other q2")
    assert await sql(store, "SELECT count(*) FROM runs WHERE id IN ({a}, {b})", a=r2, b=r3) == [
        (0,)
    ]
    assert len(await sql(store, "SELECT id FROM runs")) == 3
    assert [run.id for run in await session.runs()] == [r1, other]


async def test_delete_below_a_head_at_the_root(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, _ = await converse(session, "q1", "q2")
    await session.checkout(r1)
    await session.delete_branch((await store.tree("s"))[-1][0].id, force=True)
    assert await session.get_items() == history("q1")
    assert await sql(store, "SELECT id FROM runs") == [(r1,)]


# ---------------------------------------------------------------------------------------------
# Stored values: keys that collide in JSON


COLLIDING = [
    {"1": "a", 1: "b"},
    {"role": "user", "content": [{"true": 1, True: 2}]},
    {"role": "user", "content": "x", "extra": {"null": 1, None: 2}},
    {"type": "function_call", "call_id": "c", "arguments": ({"1.5": 0, 1.5: 1},)},
]


@pytest.mark.parametrize("item", COLLIDING, ids=range(len(COLLIDING)))
async def test_colliding_keys_are_refused_and_nothing_is_stored(store: Store, item: Any) -> None:
    session = StructuredSession("s", store)
    await converse(session, "q1")
    before = await snapshot(store)
    with pytest.raises(InvalidItemError, match="both"):
        await session.add_items([user("fine"), item])
    with pytest.raises(InvalidOperationError, match="both"):
        await store.update_session("s", metadata={"tags": item})
    with pytest.raises(InvalidOperationError, match="both"):
        StructuredSession("t", store, metadata={"nested": item})
    assert await snapshot(store) == before


# Keys of every kind json.dumps accepts, some of them equal to others once written as text.
json_keys = st.sampled_from(["1", "1.5", "true", "false", "null", "a"]) | st.sampled_from(
    [1, 1.5, True, False, None]
)
values = st.recursive(
    st.integers() | st.text(max_size=3) | st.none(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(json_keys, children, max_size=4)
    ),
    max_leaves=10,
)


_examples = itertools.count()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(item=st.dictionaries(json_keys, values, max_size=4))
def test_an_item_is_stored_only_when_every_value_survives(
    shared_loop_store: tuple[asyncio.AbstractEventLoop, Store], item: dict[Any, Any]
) -> None:
    """An item is refused exactly when its JSON would lose a value (keys equal as text)."""
    loop, store = shared_loop_store
    session_id = f"keys-{next(_examples)}"

    def loses(value: Any) -> bool:
        if isinstance(value, dict):
            names = [json.loads(json.dumps({key: 0})).popitem()[0] for key in value]
            return len(set(names)) < len(names) or any(loses(v) for v in value.values())
        return isinstance(value, list) and any(loses(v) for v in value)

    async def write() -> list[Any]:
        await store.add_items(session_id, [item])
        return await store.get_items(session_id)

    if loses(item):
        with pytest.raises(InvalidItemError):
            loop.run_until_complete(write())
        assert loop.run_until_complete(store.session(session_id)) is None
    else:
        assert loop.run_until_complete(write()) == [json.loads(json.dumps(item))]


# ---------------------------------------------------------------------------------------------
# A database changed by hand: a turnstore error that changes nothing, never an assert (which
# python -O skips)


async def test_a_head_naming_a_missing_run_is_a_storage_error(store: Store) -> None:
    await store.add_items("s", [user("q"), assistant("a")])
    await sql(store, "UPDATE sessions SET head_run_id = 9999 WHERE session_id = 's'", write=True)
    before = await snapshot(store)
    writes: list[Callable[[], Awaitable[Any]]] = [
        lambda: store.pop_item("s"),
        lambda: store.add_items("s", [user("more")]),
        lambda: store.compact("s", [{"type": "compaction", "encrypted_content": "x"}]),
    ]
    for write in writes:
        with pytest.raises(StorageError, match="names run 9999, which does not exist"):
            await write()
    assert await snapshot(store) == before


async def test_popping_a_head_run_without_items_is_a_storage_error(store: Store) -> None:
    await store.add_items("s", [user("q"), assistant("a")])
    await sql(store, "DELETE FROM items WHERE session_id = 's'", write=True)
    before = await snapshot(store)
    with pytest.raises(StorageError, match="holds no items"):
        await store.pop_item("s")
    assert await snapshot(store) == before


# ---------------------------------------------------------------------------------------------
# A search waits for another connection's write


async def test_a_search_waits_for_another_connections_write(tmp_path: Path) -> None:
    target = tmp_path / "busy.db"
    async with Store.open(target) as store:
        await store.add_items("s", [user("a needle in the haystack")])  # unindexed backlog
        blocker = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        try:
            blocker.execute("BEGIN IMMEDIATE")  # another process's write, in progress
            blocker.execute("UPDATE sessions SET title = 'renamed'")
            release = threading.Timer(0.3, blocker.execute, ["COMMIT"])
            release.start()
            try:
                results = await store.search("needle")
            finally:
                release.join()
        finally:
            blocker.close()
        assert [result.item_id for result in results] == [
            row[0] for row in await sql(store, "SELECT id FROM items")
        ]
        assert (await store.session("s")).title == "renamed"  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# Every value SQLite stores, PostgreSQL stores


# Random, so that PostgreSQL cannot compress it below its index entry limit (~2.7 kB).
LONG = "".join(random.Random(11).choices(string.ascii_letters + string.digits, k=10_000))


async def test_long_values_from_items_are_stored_and_found(store: Store) -> None:
    name, call_id = "tool_" + LONG, "call_" + LONG
    session = StructuredSession("s", store)
    await session.add_items([user("go")])
    await session.add_items([call(call_id, name, '{"q": 1}')])
    await session.add_items([output(call_id, "done"), assistant("ok")])  # pairs by call_id
    hosted = {"type": "mcp_call", "id": "mcp_" + LONG, "name": name, "server_label": LONG}
    await session.add_items([user("again"), hosted, {"type": LONG, "role": LONG}])

    assert (await session.get_items())[-2:] == [hosted, {"type": LONG, "role": LONG}]
    (completed, mcp) = sorted(await store.tool_calls(tool_name=name), key=lambda c: c.id)
    assert (completed.call_id, completed.status, completed.output) == (call_id, "completed", "done")
    assert mcp.call_id == "mcp_" + LONG
    assert await session.pop_item() == {"type": LONG, "role": LONG}
    for _ in range(5):
        await session.pop_item()
    assert await session.get_items() == [user("go")]
    assert await sql(store, "SELECT count(*) FROM tool_calls") == [(0,)]


async def test_long_values_of_every_indexed_text_column_are_stored_and_found(
    store: Store,
) -> None:
    """Each text column a PostgreSQL B-tree indexes, at 10 kB (or at its documented limit) of
    4-byte characters, random so that nothing compresses them: the write succeeds and reads
    back exactly. A span kind over ~2.7 kB failed its whole batch of spans on PostgreSQL."""
    emoji = [chr(code) for code in range(0x1F600, 0x1F650)]
    long = "".join(random.Random(12).choices(emoji, k=2500))  # 10 kB
    key = long[:256]  # 1,024 bytes: session_id and user_id are limited (MAX_KEY_BYTES)
    session = StructuredSession(key, store, user_id=key, title=long)
    await session.add_items([user("go"), call(long, long), output(long, "ok")])
    [run] = await store.runs(key)
    branch = await store.name_branch(key, run.id, long[:200])  # the longest branch name
    batch = [
        span_record(store, run.id, n, kind=long if n == 7 else "custom", name=long)
        for n in range(17)
    ]
    await store._record_spans(key, batch)

    spans = await store.spans(session_id=key)
    assert len(spans) == 17
    assert (spans[7].kind, spans[7].name) == (long, long)
    assert [span.span_id for span in await store.slowest_spans(kind=long)] == ["span_7"]
    assert [(s.session_id, s.user_id) for s in await store.sessions(user_id=key)] == [(key, key)]
    assert branch.name == long[:200]
    [tool_call] = await store.tool_calls(tool_name=long)
    assert (tool_call.call_id, tool_call.tool_name, tool_call.output) == (long, long, "ok")


KEY_LIMIT = 1024  # bytes of UTF-8: documented in README and docs/reliability.md


@pytest.mark.parametrize("field", ["session_id", "user_id"])
async def test_keys_over_the_documented_length_are_refused_everywhere(
    store: Store, field: str
) -> None:
    fits = "é" * (KEY_LIMIT // 2)
    too_long = fits + "x"
    if field == "session_id":
        await store.add_items(fits, [user("hi")])
        assert await store.get_items(fits) == [user("hi")]
        with pytest.raises(TurnstoreError, match="at most 1024 bytes"):
            await store.add_items(too_long, [user("hi")])
        with pytest.raises(TurnstoreError, match="at most 1024 bytes"):
            StructuredSession(too_long, store)
    else:
        await store.add_items("s", [user("hi")], info=_patch(user_id=fits))
        assert (await store.session("s")).user_id == fits  # type: ignore[union-attr]
        with pytest.raises(TurnstoreError, match="at most 1024 bytes"):
            await store.update_session("s", user_id=too_long)
        assert (await store.session("s")).user_id == fits  # type: ignore[union-attr]
        with pytest.raises(TurnstoreError, match="at most 1024 bytes"):
            StructuredSession("t", store, user_id=too_long)
    assert await store.session("t") is None


def _patch(**fields: Any) -> Any:
    from turnstore.store import session_patch

    return session_patch(**fields)


@pytest.mark.postgres
async def test_postgres_lookups_by_call_id_tool_name_and_span_kind_use_the_prefix_indexes() -> None:
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        async with Store.open(POSTGRES_URL, schema=schema) as store:
            await _check_plans(store)
    finally:
        drop_schema(schema)


async def _check_plans(store: Store) -> None:
    from turnstore.core import statements as S
    from turnstore.postgres import SQL

    session = StructuredSession("s", store)
    for n in range(3):
        await session.add_items(
            [user(f"q{n}"), call(f"c{n}", f"tool{n % 3}"), output(f"c{n}", "ok")]
        )
    # Enough calls in the session, with statistics, for the planner to want an index.
    await store.backend.run(_many_calls, write=True)
    call_id = {"sid": "s", "call_id": "c1", "item": 1}
    lookups = {
        S.OPEN_TOOL_CALLS: ({"sid": "s", "call_ids": '["c1", "c2"]'}, "tool_calls_session_call"),
        S.DROP_CALL_OF_ITEM: (call_id, "tool_calls_session_call"),
        S.REOPEN_CALL_OF_OUTPUT: (call_id, "tool_calls_session_call"),
        S.SET_TOOL_TIMING: (
            {**call_id, "started_at": None, "completed_at": None, "duration_ms": None},
            "tool_calls_session_call",
        ),
        S.TOOL_CALLS_BY_TOOL: (
            {
                "tool_name": "tool1",
                **dict.fromkeys(("sid", "run_id", "since", "until", "status"), None),
                "limit": 10,
            },
            "tool_calls_tool",
        ),
        S.SLOWEST_SPANS_BY_ALL: ({"kind": "function", "limit": 10}, "spans_kind_duration"),
    }
    for name, (params, index) in lookups.items():

        def explain(statement: str = SQL[name], params: Any = params) -> Any:
            yield Query("SET LOCAL enable_seqscan = off", raw=True)
            return (yield Query(f"EXPLAIN {statement}", params, Fetch.ALL, raw=True))

        plan = "\n".join(row[0] for row in await store.backend.run(explain, write=False))
        # The index, searched by the prefix (not only by session_id).
        assert index in plan, (name, plan)
        assert any("Index Cond" in line and '"left"(' in line for line in plan.splitlines()), (
            name,
            plan,
        )


def _many_calls() -> Any:
    yield Query(
        """INSERT INTO tool_calls (session_id, run_id, call_id, tool_name, created_at)
        SELECT 's', (SELECT max(id) FROM runs), 'many' || n, 'many' || n % 50, now()
        FROM generate_series(1, 5000) n""",
        raw=True,
    )
    yield Query("ANALYZE tool_calls", raw=True)

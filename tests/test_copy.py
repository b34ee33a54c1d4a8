"""``turnstore.copy`` and ``turnstore copy``: any database to any other, losslessly (issue 16).

The round trip copies a rich database (the real Runner with hooks, branches, compaction,
catalogue fields, hostile strings) SQLite -> PostgreSQL -> SQLite and compares every table,
every column, ids compared through the order each session gave them. Then: resuming after a
copy that failed part way, a second copy writing nothing, filters, refusals.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import (
    assistant,
    call,
    grow_an_older_branch_later,
    newer_rows_in_earlier_runs,
    orders,
    output,
    user,
)
from chains import SESSION_TABLES, build_chain
from richdb import assert_rich, build_rich, dump
from strategies import items as roundtrip_items
from support import (
    Interrupted,
    cli,
    database_target,
    drop_schema,
    failing_after,
    postgres_target,
    sql,
    target_exists,
)
from turnstore import (
    CopySummary,
    InvalidOperationError,
    ReadOnlyError,
    SessionNotFoundError,
    Store,
    TurnstoreError,
    Usage,
    copy,
)
from turnstore.core import statements as S
from turnstore.core import transfer as transfer_core
from turnstore.core.ops import Query
from turnstore.importers import copy as transfer_module
from turnstore.importers import import_source, open_source


@pytest.fixture
def targets(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Fresh databases by name: two SQLite files and a PostgreSQL schema."""
    with ExitStack() as stack:
        yield {
            "sqlite": str(tmp_path / "source.db"),
            "back": str(tmp_path / "back.db"),
            "postgres": stack.enter_context(database_target("postgres", tmp_path)),
        }


async def test_round_trip_sqlite_postgres_sqlite_keeps_every_table(
    targets: dict[str, str],
) -> None:
    async with Store.open(targets["sqlite"]) as source:
        await build_rich(source)
        before = await dump(source)
    assert_rich(before)
    first = await copy(targets["sqlite"], targets["postgres"])
    second = await copy(targets["postgres"], targets["back"])
    for summary in (first, second):
        assert summary.sessions == summary.copied == 7
        assert not summary.conflicts
        assert not summary.failed
    async with Store.open(targets["postgres"]) as middle:
        assert await dump(middle) == before
        # What the store returns, too: every item verbatim (key order included).
        async with Store.open(targets["sqlite"]) as source:
            for info in (await source.sessions(limit=100)).sessions:
                sid = info.session_id
                assert await middle.tree(sid) != [] or await source.tree(sid) == []
                assert [items for _, items in await middle.tree(sid)] == [
                    items for _, items in await source.tree(sid)
                ]
                assert await middle.get_items(sid) == await source.get_items(sid)
    async with Store.open(targets["back"]) as back:
        assert await dump(back) == before
        async with Store.open(targets["sqlite"]) as source:
            rows = "SELECT data FROM items ORDER BY session_id, id"
            assert await sql(back, rows) == await sql(source, rows)  # byte for byte
            assert await sql(back, "SELECT metadata FROM sessions WHERE session_id = 'runner'") == [
                ('{"a": [2], "z": 1}',)  # jsonb on PostgreSQL orders keys (documented)
            ]
        found = await back.search("compacted")
        assert [hit.session_id for hit in found] == ["compacted"]


# ---------------------------------------------------------------------------------------------
# Resuming, idempotency, conflicts: into each kind of target (the module's target_backend)


async def _small_source(path: str, sessions: int = 4, turns: int = 6) -> None:
    """Sessions of ``turns`` runs each (two items a run, a tool call in every other run)."""
    async with Store.open(path) as store:
        for s in range(sessions):
            sid = f"s{s}"
            for n in range(turns):
                tools = [call(f"c{n}", "tool"), output(f"c{n}", f"out {n}")] if n % 2 else []
                await store.add_items(sid, [user(f"{sid} q{n}"), *tools, assistant(f"a{n}")])
            await store.update_session(sid, user_id="ann" if s % 2 else "bob", metadata={"n": s})


@pytest.mark.parametrize("writes", [0, 1, 3, 7])
async def test_an_interrupted_copy_resumes_where_it_stopped(
    new_target: Any, tmp_path: Path, writes: int
) -> None:
    source = str(tmp_path / "source.db")
    await _small_source(source)
    target = new_target()
    async with Store.open(target) as dst:
        with pytest.raises(Interrupted):
            await copy(source, failing_after(dst, writes), chunk_items=6)
    async with Store.open(target) as dst:
        partial = await dump(dst)
    assert len(partial["sessions"]) == (writes + 2) // 3  # 3 chunks a session
    summary = await copy(source, target, chunk_items=6)
    assert summary.copied + summary.resumed == 4 - writes // 3
    assert summary.resumed == (1 if writes % 3 else 0)
    assert not summary.conflicts
    assert not summary.failed
    async with Store.open(source) as src, Store.open(target) as dst:
        assert await dump(dst) == await dump(src)
        # Each chunk was written once: the resumed session has each item once.
        assert summary.items == 72 - 6 * writes


async def test_a_second_copy_writes_nothing(new_target: Any, tmp_path: Path) -> None:
    source = str(tmp_path / "source.db")
    await _small_source(source)
    target = new_target()
    first = await copy(source, target)
    assert (first.copied, first.runs, first.items) == (4, 24, 72)
    again = await copy(source, target)
    assert (again.unchanged, again.copied, again.runs, again.items) == (4, 0, 0, 0)
    async with Store.open(source) as src, Store.open(target) as dst:
        assert await dump(dst) == await dump(src)


async def test_new_runs_in_the_source_are_copied_on_top(new_target: Any, tmp_path: Path) -> None:
    source = str(tmp_path / "source.db")
    await _small_source(source, sessions=1)
    target = new_target()
    await copy(source, target)
    async with Store.open(source) as src:
        await src.add_items("s0", [user("one more"), assistant("sure")])
    summary = await copy(source, target)
    assert (summary.resumed, summary.runs, summary.items) == (1, 1, 2)
    async with Store.open(source) as src, Store.open(target) as dst:
        assert await dump(dst) == await dump(src)


async def test_a_source_written_during_the_copy_is_copied_consistently(
    new_target: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source's head run gains an item (and the session a new run) after the copy listed
    the session's runs, before it read the last ones: each run is copied as it is when its
    items are read, never with fewer items than it holds; the next copy completes the rest."""
    source = str(tmp_path / "source.db")
    await _small_source(source, sessions=1)
    target = new_target()
    real = transfer_module.write_rows
    async with Store.open(source) as src:

        async def written_meanwhile(*args: Any, **kwargs: Any) -> Any:
            if not written:
                written.append(True)
                await src.add_items("s0", [assistant("and one more thing")])  # the head run
                await src.add_items("s0", [user("a new run"), assistant("yes")])
            return await real(*args, **kwargs)

        written: list[bool] = []
        monkeypatch.setattr(transfer_module, "write_rows", written_meanwhile)
        await copy(source, target, chunk_items=3)
        monkeypatch.setattr(transfer_module, "write_rows", real)
        async with Store.open(target) as dst:
            for run in await dst.runs("s0"):
                assert len(await dst.run_items(run.id)) == run.item_count
        summary = await copy(source, target, chunk_items=3)
        assert (summary.conflicts, summary.resumed) == ([], 1)
        async with Store.open(target) as dst:
            assert await dump(dst) == await dump(src)


async def test_a_session_that_differs_in_the_target_is_reported_not_merged(
    new_target: Any, tmp_path: Path
) -> None:
    source = str(tmp_path / "source.db")
    await _small_source(source, sessions=2)
    target = new_target()
    await copy(source, target)
    async with Store.open(target) as dst:
        await dst.add_items("s1", [assistant("written in the target")])
        changed = await dump(dst)
    summary = await copy(source, target)
    assert (summary.conflicts, summary.unchanged) == (["s1"], 1)
    async with Store.open(target) as dst:
        assert await dump(dst) == changed  # left alone
    summary = await copy(source, target, replace=True)
    assert (summary.replaced, summary.unchanged, summary.conflicts) == (1, 1, [])
    async with Store.open(source) as src, Store.open(target) as dst:
        assert await dump(dst) == await dump(src)


async def test_filters_select_sessions(tmp_path: Path) -> None:
    source, target = str(tmp_path / "source.db"), str(tmp_path / "target.db")
    await _small_source(source)
    summary = await copy(source, target, user_id="ann")
    async with Store.open(target) as dst:
        assert sorted(s.session_id for s in (await dst.sessions()).sessions) == ["s1", "s3"]
    summary = await copy(source, target, session_ids=["s0", "s1"])
    assert (summary.sessions, summary.copied, summary.unchanged) == (2, 1, 1)
    future = datetime.now(timezone.utc) + timedelta(days=1)
    summary = await copy(source, target, created_after=future)
    assert summary.sessions == 0
    with pytest.raises(SessionNotFoundError, match="nope"):
        await copy(source, target, session_ids=["s0", "nope"])


async def test_refusals(tmp_path: Path) -> None:
    source = str(tmp_path / "source.db")
    await _small_source(source, sessions=1)
    missing = tmp_path / "missing.db"
    with pytest.raises(Exception, match="missing"):
        await copy(str(missing), str(tmp_path / "t.db"))
    assert not missing.exists()
    assert not (tmp_path / "t.db").exists()
    with pytest.raises(InvalidOperationError, match="one database"):
        await copy(source, source)
    (tmp_path / "link.db").symlink_to(source)
    for same in (f"{tmp_path}/./source.db", str(tmp_path / "link.db")):
        with pytest.raises(InvalidOperationError, match="one database"):
            await copy(source, same)
    with pytest.raises(InvalidOperationError, match="session_ids"):
        await copy(source, str(tmp_path / "t.db"), session_ids="s0")  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="chunk_items"):
        await copy(source, str(tmp_path / "t.db"), chunk_items=0)
    async with Store.open(":memory:") as one, Store.open(":memory:") as other:
        await one.add_items("m", [user("in memory")])
        assert (await copy(one, other)).copied == 1  # two databases, though both ':memory:'


@pytest.mark.postgres
async def test_one_postgres_database_named_two_ways_is_refused(tmp_path: Path) -> None:
    """Two URLs naming one server differently (localhost and 127.0.0.1; here a host list that
    names it twice) and the same schema are one database. Copied onto itself, a session
    written meanwhile would differ, and ``replace=True`` would delete it in the "target" and
    then read it back from the "source" (the same rows), empty."""
    with (
        database_target("postgres", tmp_path) as db,
        database_target("postgres", tmp_path) as other,
    ):
        await _small_source(db, sessions=1)
        parts = urlsplit(db)
        server = parts.netloc.rpartition("@")[2]
        same = urlunsplit(parts._replace(netloc=f"{parts.netloc},{server}"))
        with pytest.raises(InvalidOperationError, match="one database"):
            await copy(db, same, replace=True)
        assert (await copy(same, other)).copied == 1  # another schema: another database


async def test_a_target_that_cannot_be_written_stops_the_copy(
    new_target: Any, tmp_path: Path
) -> None:
    """A read-only target refuses the first session's write, and would refuse every other
    alike: the copy stops with ``ReadOnlyError`` instead of reporting each session failed."""
    source = str(tmp_path / "source.db")
    await _small_source(source, sessions=2)
    target = new_target()
    async with Store.open(target):
        pass  # created, empty
    async with Store.open(target, read_only=True) as read_only:
        with pytest.raises(ReadOnlyError):
            await copy(source, read_only)
    async with Store.open(target) as dst:
        assert (await dst.sessions()).sessions == []


async def _analysed_while_small(target: str) -> None:
    """``target`` created with a few sessions of a few runs and analysed then, as autovacuum
    would have; autovacuum off for its tables, so the statistics stay those until a copy
    takes them again."""
    async with Store.open(target) as store:
        for s in range(3):
            for n in range(4):
                await store.add_items(f"small{s}", [user(f"q{n}"), assistant(f"a{n}")])
        for table in SESSION_TABLES:
            await sql(store, f"ALTER TABLE {table} SET (autovacuum_enabled = off)", write=True)
        await sql(store, f"ANALYZE {', '.join(SESSION_TABLES)}", write=True)


def _indexes(plan: dict[str, Any]) -> set[str]:
    """The indexes a plan (EXPLAIN's JSON) reads."""
    found = {plan["Index Name"]} if "Index Name" in plan else set()
    return found.union(*(_indexes(child) for child in plan.get("Plans", [])))


async def _bulk_load(load: str, source: str, target: str, directory: Path) -> int:
    """Every session of the SQLite file ``source`` written into ``target`` by ``turnstore
    copy`` or by ``turnstore import`` of their JSON export; how many runs were written."""
    if load == "copy":
        return (await copy(source, target)).runs
    async with Store.open(source, read_only=True) as src:
        path = directory / "long.json"
        path.write_text(await src.export("long", "json", all_branches=True), "utf-8")
    exported = open_source(str(path), "json")
    try:
        async with Store.open(target) as dst:
            return (await import_source(dst, exported)).runs
    finally:
        await exported.aclose()


@pytest.mark.postgres
@pytest.mark.parametrize("load", ["copy", "import"])
async def test_a_bulk_load_into_postgres_analyses_the_tables_it_outgrew(
    tmp_path: Path, load: str
) -> None:
    """PostgreSQL only: its planner estimates from statistics that a bulk load leaves stale,
    which SQLite has none of (it runs no ANALYZE) and whose plans of a session's runs hold
    without them. With the statistics of a schema that held a few small sessions, the planner
    estimates a new long session at one row and walks its runs' parents through
    runs_session_totals, a scan of the session at every step (a delete_branch of 100,000 runs
    took 13 minutes); the copy or import that wrote the session takes them again."""
    source = str(tmp_path / "source.db")
    async with Store.open(source) as src:
        chain = await build_chain(src, "long", 2000)
    with database_target("postgres", tmp_path) as target:
        await _analysed_while_small(target)
        assert await _bulk_load(load, source, target, tmp_path) == chain.runs
        async with Store.open(target, read_only=True) as dst:
            from turnstore.postgres.sql import SQL

            [(known, counted)] = await sql(
                dst,
                """SELECT (SELECT {sid} = ANY (most_common_vals::text::text[]) FROM pg_stats
                           WHERE schemaname = current_schema() AND tablename = 'runs'
                             AND attname = 'session_id'),
                          (SELECT reltuples FROM pg_class WHERE oid = to_regclass('runs'))""",
                sid="long",
            )
            assert known
            assert counted >= chain.runs
            [(leaf, parent)] = await sql(
                dst, "SELECT max(id), max(id) - 1 FROM runs WHERE session_id = {sid}", sid="long"
            )
            children = (
                "SELECT count(*) FROM runs c WHERE c.session_id = {sid} AND c.parent_id = {id}"
            )
            for statement, params in [
                (children, {"id": parent}),
                (SQL[S.PATH_RUNS_AT], {"leaf": leaf}),
            ]:
                [(plan,)] = await sql(
                    dst, "EXPLAIN (FORMAT JSON) " + statement, sid="long", **params
                )
                used = _indexes(plan[0]["Plan"])
                assert "runs_session_totals" not in used
                assert used & {"runs_session_parent", "runs_pkey", "runs_id"}


@pytest.mark.postgres
async def test_a_copy_whose_analysis_fails_is_kept_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The rows are written when the analysis comes: its failure warns (what to run) and the
    copy returns its summary."""
    source = str(tmp_path / "source.db")
    await _small_source(source, sessions=2, turns=40)

    def failing(runs: int) -> Any:
        yield Query("ANALYZE no_such_table", raw=True)
        return True

    monkeypatch.setattr(transfer_core, "refresh_statistics", failing)
    with database_target("postgres", tmp_path) as target:
        summary = await copy(source, target)
        assert summary.copied == 2
        async with Store.open(target) as dst:
            assert len((await dst.sessions()).sessions) == 2
    [warning] = [r for r in caplog.records if "ANALYZE" in r.getMessage()]
    assert warning.levelname == "WARNING"
    assert "rows are written" in warning.getMessage()


def test_the_summary_is_a_dataclass_scripts_can_read() -> None:
    assert CopySummary().conflicts == []


async def test_ids_are_renumbered_not_kept(tmp_path: Path) -> None:
    """A target that already holds other sessions gets new ids; the links follow them."""
    source, target = str(tmp_path / "s.db"), str(tmp_path / "t.db")
    await _small_source(source, sessions=1)
    async with Store.open(target) as dst:
        for n in range(3):
            await dst.add_items("other", [user(f"x{n}"), assistant("y")])
    await copy(source, target)
    async with Store.open(source) as src, Store.open(target) as dst:
        copied = await dst.runs("s0")
        assert [r.id for r in copied] != [r.id for r in await src.runs("s0")]
        assert [r.parent_id for r in copied[1:]] == [r.id for r in copied[:-1]]
        info = await dst.session("s0")
        assert info is not None
        assert info.head_run_id == copied[-1].id
        assert await dst.get_items("s0") == await src.get_items("s0")


# ---------------------------------------------------------------------------------------------
# The command


def test_cli_copies_then_copies_nothing(new_target: Any, tmp_path: Path) -> None:
    source = str(tmp_path / "source.db")
    asyncio.run(_small_source(source, sessions=2))
    target = new_target()
    first = json.loads(cli("copy", source, target, "--json").stdout)
    assert (first["copied"], first["runs"], first["items"]) == (2, 12, 36)
    again = cli("copy", source, target).stdout
    assert "0 new, 0 resumed, 0 replaced, 2 already there; 0 runs and 0 items written" in again


def test_cli_reports_a_conflict_and_replaces_on_request(new_target: Any, tmp_path: Path) -> None:
    source = str(tmp_path / "source.db")
    asyncio.run(_small_source(source, sessions=2))
    target = new_target()
    cli("copy", source, target)

    async def diverge() -> None:
        async with Store.open(target) as dst:
            await dst.add_items("s0", [user("only in the target")])

    asyncio.run(diverge())
    result = cli("copy", source, target, code=1)
    assert "differ in the target" in result.output
    assert "'s0'" in result.output
    assert "--replace" in result.output
    replaced = json.loads(cli("copy", source, target, "--replace", "--json").stdout)
    assert (replaced["replaced"], replaced["unchanged"]) == (1, 1)


def test_cli_refuses_bad_input(new_target: Any, tmp_path: Path) -> None:
    import asyncio
    import sqlite3

    source = str(tmp_path / "source.db")
    asyncio.run(_small_source(source, sessions=1))
    target = new_target()
    missing = str(tmp_path / "missing.db")
    assert "no database at" in cli("copy", missing, target, code=1).output
    assert not Path(missing).exists()
    assert "one database" in cli("copy", source, source, code=1).output
    assert "no session 'nope'" in cli("copy", source, target, "--session", "nope", code=1).output
    assert "ISO 8601" in cli("copy", source, target, "--since", "yesterday", code=1).output
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (x)")
    assert "another kind" in cli("copy", str(other), target, code=1).output
    assert "another kind" in cli("copy", source, str(other), code=1).output
    assert not target_exists(target)  # nothing was written anywhere


# ---------------------------------------------------------------------------------------------
# Property: whatever a session holds, its copy holds the same


_texts = st.text(max_size=12)  # items hold anything: NUL, lone surrogates
# What a fork's input and the catalogue fields accept (validate.text).
_clean_texts = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)
_turn_items = st.one_of(
    _texts.map(user),
    _texts.map(lambda t: assistant(t)),
    st.tuples(_texts, _texts).map(lambda p: call(p[0], p[1])),
    st.tuples(_texts, _texts).map(lambda p: output(p[0], p[1])),
    roundtrip_items,
)
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(_turn_items, min_size=1, max_size=4)),
        st.tuples(st.just("fork"), st.integers(0, 20), _clean_texts),
        st.tuples(st.just("move"), st.integers(0, 20)),
        st.tuples(st.just("info"), _clean_texts),
    ),
    min_size=1,
    max_size=8,
)
_examples = itertools.count()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_steps)
def test_a_copy_holds_what_the_source_holds(
    shared_loop_store: tuple[asyncio.AbstractEventLoop, Store], steps: list[Any]
) -> None:
    loop, source = shared_loop_store
    sid = f"p{next(_examples)}"

    async def check() -> None:
        for step in steps:
            runs = await source.tree(sid) if step[0] in ("fork", "move") else []
            questions = [run for run, _ in runs if run.user_message is not None]
            if step[0] == "add":
                await source.add_items(sid, step[1], Usage(1, len(step[1]), 1, 1))
            elif step[0] == "fork" and questions:
                await source.fork(sid, questions[step[1] % len(questions)].id, step[2])
            elif step[0] == "move" and runs:
                await source.move_head(sid, runs[step[1] % len(runs)][0].id, to_parent=False)
            elif step[0] == "info":
                await source.update_session(sid, title=step[1], metadata={step[1]: [step[1]]})
        async with Store.open(":memory:") as target:
            summary = await copy(source, target, chunk_items=3)
            assert not summary.conflicts
            assert not summary.failed
            assert await dump(target) == await dump(source)
            assert await target.get_items(sid) == await source.get_items(sid)

    loop.run_until_complete(check())


def test_import_of_a_turnstore_database_points_to_copy(tmp_path: Path) -> None:
    source = str(tmp_path / "source.db")
    asyncio.run(_small_source(source, sessions=1))
    result = cli("import", source, "--db", str(tmp_path / "t.db"), code=1)
    assert f"turnstore copy {source} TARGET" in " ".join(result.output.split())


# ---------------------------------------------------------------------------------------------
# PostgreSQL: the connection cut under a copy (tests/faultproxy.py)


@pytest.fixture
async def proxied_target(
    proxy: Any,
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[Store, str]]:
    """A PostgreSQL target reached through the proxy (retrying a failed transaction as many
    times as the test's ``retries`` parameter says, else the default), and the URL of the
    same schema, direct."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    store = Store.open(
        proxy.url(proxy.database, proxy.user),
        schema=schema,
        max_size=1,
        connect_timeout=3,
        connect_kwargs={"prepare_threshold": None},
        **getattr(request, "param", {}),
    )
    yield store, postgres_target(schema)
    await store.aclose()
    drop_schema(schema)


@pytest.mark.postgres
@pytest.mark.parametrize("fault", ["before_commit", "after_commit", "mid_pipeline"])
async def test_a_connection_cut_under_a_copy_writes_each_row_once(
    proxy: Any,
    proxied_target: tuple[Store, str],
    tmp_path: Path,
    fault: str,
) -> None:
    source = str(tmp_path / "source.db")
    await _small_source(source, sessions=2)
    target, _ = proxied_target
    proxy.arm(fault)
    summary = await asyncio.wait_for(copy(source, target, chunk_items=6), 60)
    assert proxy.fired == 1
    assert (summary.copied, summary.items) == (2, 36)
    async with Store.open(source) as src:
        assert await dump(target) == await dump(src)


@pytest.mark.postgres
@pytest.mark.parametrize("proxied_target", [{"retries": 0}], indirect=True)
async def test_a_copy_the_server_drops_resumes_when_run_again(
    proxy: Any,
    proxied_target: tuple[Store, str],
    tmp_path: Path,
) -> None:
    source = str(tmp_path / "source.db")
    await _small_source(source, sessions=2)
    target, direct = proxied_target
    async with Store.open(source) as src:
        await copy(src, target, session_ids=["s0"], chunk_items=6)
        proxy.arm("mid_pipeline")  # and the store does not retry: the copy fails
        with pytest.raises(TurnstoreError):
            await asyncio.wait_for(copy(src, target, chunk_items=6), 60)
        assert proxy.fired == 1
        summary = await copy(src, direct, chunk_items=6)
        assert (summary.unchanged, summary.copied + summary.resumed) == (1, 1)
        assert await dump(target) == await dump(src)


@pytest.mark.postgres
async def test_a_session_the_target_cannot_hold_is_reported_and_the_rest_copied(
    tmp_path: Path, targets: dict[str, str]
) -> None:
    """SQLite holds a NUL in text (written by hand here); PostgreSQL's text cannot."""
    source = str(tmp_path / "source.db")
    await _small_source(source, sessions=3)
    async with Store.open(source) as src:
        await sql(
            src,
            "UPDATE runs SET assistant_message = 'a' || char(0) || 'b' WHERE session_id = 's1'",
            write=True,
        )
    summary = await copy(source, targets["postgres"])
    assert summary.copied == 2
    assert list(summary.failed) == ["s1"]
    assert "NUL" in summary.failed["s1"] or "0x00" in summary.failed["s1"]
    result = await asyncio.to_thread(cli, "copy", source, targets["postgres"], code=1)
    assert "session 's1' was not copied" in result.output
    assert "2 already there" in result.output


# ---------------------------------------------------------------------------------------------
# Exports: what `import` reads back (every table: tests/test_export_roundtrip.py)


async def _runs(path: str) -> list[tuple[Any, ...]]:
    async with Store.open(path) as store:
        return await sql(
            store,
            "SELECT session_id, depth, user_message, assistant_message, status, requests, "
            "input_tokens, output_tokens, total_tokens, cached_tokens, reasoning_tokens, "
            "item_count FROM runs ORDER BY session_id, id",
        )


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_an_export_of_every_session_imports_with_usage_and_the_tree(
    tmp_path: Path, fmt: str
) -> None:
    source = str(tmp_path / "source.db")

    async def build() -> None:
        await _small_source(source, sessions=3)
        async with Store.open(source) as src:
            runs = await src.runs("s1")
            await src.fork("s1", runs[2].id, "a branch")
            await src.add_items("s1", [assistant("on the branch")], Usage(2, 30, 40, 70, 5, 6))

    asyncio.run(build())
    exported = tmp_path / f"all.{fmt}"
    cli("export", "-f", fmt, "-o", str(exported), "--db", source)
    if fmt == "json":
        assert [d["session"]["session_id"] for d in json.loads(exported.read_text())] == [
            "s0",
            "s1",
            "s2",
        ]
    target = str(tmp_path / "target.db")
    summary = json.loads(cli("import", str(exported), "--db", target, "--json").stdout)
    assert (summary["new_sessions"], summary["skipped"]) == (3, 0)
    assert asyncio.run(_runs(target)) == asyncio.run(_runs(source))

    async def catalogue(path: str) -> list[tuple[Any, ...]]:
        async with Store.open(path) as store:
            return [
                (s.session_id, s.user_id, s.metadata, s.title)
                for s in (await store.sessions()).sessions
            ]

    if fmt == "json":  # the JSON document carries the catalogue fields
        assert asyncio.run(catalogue(target)) == asyncio.run(catalogue(source))


@pytest.mark.parametrize("chunk_items", [1, 2, 2000])
async def test_items_keep_their_order_when_an_older_branch_grows_later(
    store: Store, chunk_items: int
) -> None:
    """An item added to an older branch's open run after newer runs (head moved back, the
    run continued) is newer than their items: chunks never cut between them, so the target
    numbers every item in the source's order, whatever the chunk size."""
    await grow_an_older_branch_later(store)
    async with Store.open(":memory:") as target:
        summary = await copy(store, target, chunk_items=chunk_items)
        assert summary.copied == 1
        assert await dump(target) == await dump(store)


_PAIRS = [
    pytest.param(
        source,
        target,
        id=f"{source}-{target}",
        marks=pytest.mark.postgres if "postgres" in (source, target) else (),
    )
    for source, target in itertools.product(["sqlite-file", "postgres"], repeat=2)
]


@pytest.mark.parametrize(("source_backend", "copy_backend"), _PAIRS)
async def test_a_copy_keeps_the_order_of_every_table(
    tmp_path: Path, source_backend: str, copy_backend: str
) -> None:
    """A run a chunk (the smallest): a tool call whose output lands in a later run (issue 26:
    c0, c1 arrived as c1, c0), or a model call, span or tool call of an older run written after
    a newer run's, keeps its place in its table's id order (what every query sorts by)."""
    with ExitStack() as stack:
        source = stack.enter_context(database_target(source_backend, tmp_path))
        target = stack.enter_context(database_target(copy_backend, tmp_path))
        async with Store.open(source) as src:
            await newer_rows_in_earlier_runs(src)
            before, listed = await dump(src), await orders(src)
        assert listed == [["c0", "c1", "k1", "k0"], ["newer run", "older run"]]
        summary = await copy(source, target, chunk_items=1)
        assert (summary.copied, summary.failed) == (4, {})
        async with Store.open(target) as dst:
            assert await orders(dst) == listed
            assert await dump(dst) == before


@pytest.mark.parametrize("steps", range(16))
async def test_a_chunked_write_cancelled_at_any_step_has_ended_when_the_cancellation_does(
    steps: int,
) -> None:
    """Copy and import write a chunk while they read the next (``store.chunks.overlapped``):
    cancelled at any step of the event loop, the chunk in flight has landed (its write held
    by ``finish_write``) when the ``CancelledError`` comes out, and nothing is written after.
    Before, a cancellation in the step that lets a write start left that write to run on
    behind its caller's back."""
    from turnstore.core.ops import finish_write
    from turnstore.store.chunks import overlapped

    started: list[int] = []
    written: list[int] = []

    async def read(chunk: int) -> int:
        await asyncio.sleep(0)
        return chunk

    async def store(chunk: int) -> None:
        started.append(chunk)
        await asyncio.sleep(0)
        written.append(chunk)

    async def write(chunk: int) -> None:
        await finish_write(store(chunk))

    task = asyncio.ensure_future(overlapped(range(4), read, write))
    for _ in range(steps):
        await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    at_the_end = (list(started), list(written))
    assert started == written
    for _ in range(8):
        await asyncio.sleep(0)
    assert (started, written) == at_the_end

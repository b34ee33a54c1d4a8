"""Read-only stores and foreign files: ``Store.open(..., read_only=True)`` never writes, and
``Store.open`` leaves a database it does not own exactly as it found it.

Read-only is a conformance test (every backend); the file-level checks are SQLite's. The
suite runs as root, whom file permissions do not stop: the read-only directory and file
checks therefore run in a child process that drops to the user ``nobody`` first (skipped
where that user does not exist; as a non-root user, plain permissions already apply). On
PostgreSQL the same checks read through a role that may only read the schema (``unwritable``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builders import assistant, user
from support import (
    file_hashes,
    old_database,
    reader_ids,
    run_as_reader,
    sql,
    target_state,
    unwritable,
)
from turnstore import (
    ConfigurationError,
    ConnectionFailedError,
    InvalidOperationError,
    ReadOnlyError,
    SchemaError,
    Store,
)
from turnstore.importers import import_source, open_source
from turnstore.sqlite import sqlite_file_kind
from turnstore.sqlite.errors import driver_error

ITEMS = [user("where is the zebra"), assistant("behind the giraffe")]


def _open_read_only(target: str, options: dict[str, Any]) -> Store:
    return Store.open(target, **options, read_only=True)


# ---------------------------------------------------------------------------------------------
# Read-only stores, on every backend


async def test_read_only_store_reads_and_refuses_every_write(
    db_target: tuple[str, dict[str, Any]], backend_name: str
) -> None:
    target, options = db_target
    if backend_name == "sqlite-memory":
        with pytest.raises(ConfigurationError, match="needs a database file"):
            _open_read_only(target, options)
        return
    writer = Store.open(target, **options)
    try:
        await writer.add_items("s", ITEMS)
        [run] = await writer.runs("s")
    finally:
        await writer.aclose()
    store = _open_read_only(target, options)
    try:
        assert store.read_only
        assert await store.get_items("s") == ITEMS
        assert [hit.item_id for hit in await store.search("zebra")]
        assert (await store.sessions()).sessions[0].session_id == "s"
        assert await store.export("s")
        writes: list[Callable[[], Any]] = [
            lambda: store.add_items("s", [user("more")]),
            lambda: store.add_items("new", [user("more")]),
            lambda: store.pop_item("s"),
            lambda: store.clear_session("s"),
            lambda: store.fork("s", run.id, "again"),
            lambda: store.move_head("s", run.id, to_parent=True),
            lambda: store.delete_branch("s", run.id),
            lambda: store.update_session("s", title="t"),
            lambda: store.delete_session("s"),
        ]
        for write in writes:
            with pytest.raises(ReadOnlyError, match="read-only"):
                await write()
        assert await store.get_items("s") == ITEMS
        assert (await store.session("new")) is None
    finally:
        await store.aclose()


async def test_read_sql_reads_a_read_only_store_and_nothing_else(
    db_target: tuple[str, dict[str, Any]], backend_name: str
) -> None:
    """``Store.read_sql`` (``turnstore query``'s statement): rows by column name on a read-only
    store; a writable store refuses it, and a writing statement is refused by the database."""
    target, options = db_target
    writer = Store.open(target, **options)
    try:
        await writer.add_items("s", ITEMS)
        with pytest.raises(InvalidOperationError, match="read_only=True"):
            await writer.read_sql("SELECT 1")
        if backend_name == "sqlite-memory":
            return  # a read-only store needs a file
    finally:
        await writer.aclose()
    store = _open_read_only(target, options)
    try:
        columns, rows = await store.read_sql(
            "SELECT session_id, count(*) AS runs FROM runs GROUP BY session_id"
        )
        assert (columns, [tuple(row) for row in rows]) == (["session_id", "runs"], [("s", 1)])
        with pytest.raises(InvalidOperationError, match="statement must be a string"):
            await store.read_sql(b"SELECT 1")  # type: ignore[arg-type]
        with pytest.raises(ReadOnlyError):
            await store.read_sql("DELETE FROM runs")
        assert await store.get_items("s") == ITEMS
    finally:
        await store.aclose()


def test_read_only_open_never_creates_a_schema(
    db_target: tuple[str, dict[str, Any]], backend_name: str
) -> None:
    target, options = db_target
    if backend_name == "sqlite-memory":
        return  # refused above: there is no file
    if backend_name == "sqlite-file":
        Path(target).touch()
    with pytest.raises(SchemaError, match=r"not a turnstore database|no turnstore schema"):
        _open_read_only(target, options)
    if backend_name == "sqlite-file":
        assert Path(target).stat().st_size == 0


def test_read_only_open_refuses_an_older_schema_and_never_migrates(
    monkeypatch: pytest.MonkeyPatch, db_target: tuple[str, dict[str, Any]], backend_name: str
) -> None:
    target, options = db_target
    if backend_name == "sqlite-memory":
        return
    old_database(monkeypatch, backend_name, target, options)
    before = file_hashes(Path(target)) if backend_name == "sqlite-file" else None
    with pytest.raises(SchemaError, match=r"too old to read without migrating.*turnstore migrate"):
        _open_read_only(target, options)
    if before is not None:  # (a reader may leave an empty -wal and a -shm)
        assert file_hashes(Path(target))["turnstore.db"] == before["turnstore.db"]
    # Still at the old version: a normal open migrates it.
    store = Store.open(target, **options)
    store.close()
    _open_read_only(target, options).close()


async def test_an_import_into_a_read_only_store_fails(
    db_target: tuple[str, dict[str, Any]], backend_name: str, tmp_path: Path
) -> None:
    """The import stops with ReadOnlyError, not one refused session after another."""
    if backend_name == "sqlite-memory":
        pytest.skip("no read-only open without a file")
    target, options = db_target
    exported = tmp_path / "t.jsonl"
    async with Store.open(target, **options) as writer:
        await writer.add_items("t", ITEMS)
        exported.write_text(await writer.export("t"), encoding="utf-8")
        await writer.delete_session("t")
    store = _open_read_only(target, options)
    try:
        with pytest.raises(ReadOnlyError):
            await import_source(store, open_source(str(exported)))
        assert await store.session("t") is None
    finally:
        await store.aclose()


async def test_read_only_search_finds_unindexed_items_without_feeding_the_index(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    writer = Store.open(path)
    await writer.add_items("s", ITEMS)  # fewer than INDEX_BATCH: left for the next search
    await writer.add_items("t", [user("zebra crossing"), assistant("stripes")])
    await writer.aclose()
    with sqlite3.connect(path) as conn:
        [(through,)] = conn.execute("SELECT indexed_through FROM items_fts_state")
    assert through == 0
    before = file_hashes(path)
    store = Store.open(path, read_only=True)
    try:
        hits = await store.search("zebra")
        assert sorted(hit.session_id for hit in hits) == ["s", "t"]
        assert next(hit.session_id for hit in await store.search('"zebra crossing"')) == "t"
        recent = await store.search("zebra", order="recent", limit=1)
        assert [hit.session_id for hit in recent] == ["t"]
    finally:
        await store.aclose()
    assert file_hashes(path)["c.db"] == before["c.db"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT indexed_through FROM items_fts_state").fetchall() == [(0,)]
    # A writable store feeds the index and finds the same items.
    writer = Store.open(path)
    try:
        assert sorted(hit.session_id for hit in await writer.search("zebra")) == ["s", "t"]
    finally:
        await writer.aclose()


@pytest.mark.parametrize("order", ["relevance", "recent"])
async def test_read_only_search_merges_the_index_and_the_backlog_in_order(
    tmp_path: Path, order: str
) -> None:
    from turnstore.core.search_index import INDEX_BATCH

    path = tmp_path / "c.db"
    async with Store.open(path) as writer:
        # One batch fed to the index on write, then a backlog the index has not seen.
        filler = [assistant(f"zebra {'stripes ' * (n % 7)}{n}") for n in range(INDEX_BATCH)]
        await writer.add_items("s", [user("zebra zebra zebra"), *filler])
        await writer.add_items("t", [assistant(f"zebra {'dots ' * n}") for n in range(9)])
        [(through,)] = await sql(writer, "SELECT indexed_through FROM items_fts_state")
        newest = [row[0] for row in await sql(writer, "SELECT id FROM items ORDER BY id DESC")]
    assert 0 < through < newest[0]
    async with Store.open(path, read_only=True) as reader:
        hits = await reader.search("zebra", order=order, limit=12)  # type: ignore[arg-type]
    assert len(hits) == 12
    assert {hit.session_id for hit in hits} == {"s", "t"}  # from both
    if order == "recent":
        assert [hit.item_id for hit in hits] == newest[:12]
    else:
        assert [hit.rank for hit in hits] == sorted((hit.rank for hit in hits), reverse=True)
        ids = [hit.item_id for hit in hits]
        ties = [(a, b) for a, b in itertools.pairwise(hits) if a.rank == b.rank]
        assert all(a.item_id < b.item_id for a, b in ties)  # a tie: the older first
        assert len(set(ids)) == 12


# ---------------------------------------------------------------------------------------------
# Read-only files and directories (SQLite), checked as an unprivileged user

_READER = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from turnstore import Store

    async def warm():
        store = Store.open(":memory:")
        await store.add_items("w", [{"role": "user", "content": "warm"}])
        await store.search("warm")
        await store.aclose()

    # Everything is imported first: the interpreter's own files (under /root) are out of the
    # unprivileged user's reach.
    asyncio.run(warm())
    if os.getuid() == 0:
        os.setgid(int(sys.argv[3])); os.setuid(int(sys.argv[2]))

    async def main():
        store = Store.open(sys.argv[1], read_only=True)
        try:
            items = await store.get_items("s")
            hits = await store.search("zebra")
            try:
                await store.add_items("s", [{"role": "user", "content": "x"}])
                refused = False
            except Exception as exc:
                refused = type(exc).__name__
        finally:
            await store.aclose()
        print(json.dumps({"items": len(items), "hits": len(hits), "refused": refused}))

    asyncio.run(main())
    """
)


def _read_as_reader(target: str | Path) -> dict[str, Any]:
    result = run_as_reader(target, _READER)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _written(path: str | Path) -> None:
    async def write() -> None:
        store = Store.open(path)
        try:
            await store.add_items("s", ITEMS)
        finally:
            await store.aclose()

    asyncio.run(write())


def test_a_read_only_store_where_nothing_can_be_written(
    target_backend: str, request: pytest.FixtureRequest
) -> None:
    # Nothing here can be written: the proof that the reader does not (``unwritable``).
    with unwritable(target_backend, _written, request) as target:
        assert _read_as_reader(target) == {"items": 2, "hits": 1, "refused": "ReadOnlyError"}


def test_read_only_directory_and_file_with_a_shm(shared_dir: Path) -> None:
    path = shared_dir / "c.db"
    _written(path)  # closed: no -wal or -shm left
    _read_as_reader(
        path
    )  # a -shm left by a reader, as after a read-only open of a writable directory
    path.chmod(0o444)
    shared_dir.chmod(0o555)
    before = sorted(os.listdir(shared_dir)), file_hashes(path)
    assert _read_as_reader(path) == {"items": 2, "hits": 1, "refused": "ReadOnlyError"}
    assert (sorted(os.listdir(shared_dir)), file_hashes(path)) == before


def test_read_only_file_in_a_writable_directory(shared_dir: Path) -> None:
    path = shared_dir / "c.db"
    _written(path)
    path.chmod(0o444)
    shared_dir.chmod(0o777)  # SQLite may create the -shm and -wal a WAL reader needs
    digest = file_hashes(path)["c.db"]
    assert _read_as_reader(path) == {"items": 2, "hits": 1, "refused": "ReadOnlyError"}
    assert file_hashes(path)["c.db"] == digest
    assert not Path(f"{path}-wal").stat().st_size


def test_unreadable_write_ahead_log_is_refused_not_ignored(shared_dir: Path) -> None:
    path = shared_dir / "c.db"
    _written(path)
    # A -wal holding commits, without its -shm, in a directory the reader cannot write:
    # opening immutable would silently read the database without those commits.
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("UPDATE sessions SET title = 'uncheckpointed'")
    wal = Path(f"{path}-wal").read_bytes()
    copy = shared_dir / "copy"
    copy.mkdir()
    shutil.copy(path, copy / "c.db")
    (copy / "c.db-wal").write_bytes(wal)
    conn.close()
    for name in os.listdir(copy):
        (copy / name).chmod(0o444)
    copy.chmod(0o555)
    link = shared_dir / "link.db"  # SQLite keeps the -wal beside the file a link names
    link.symlink_to(copy / "c.db")
    for opened in (copy / "c.db", link):
        result = run_as_reader(opened, _READER)
        assert result.returncode == 1, result.stdout
        assert "ConnectionFailedError: cannot open" in result.stderr
    copy.chmod(0o755)


# The CLI's read commands, as an unprivileged user on a read-only directory. Each runs once on
# a writable copy first, as root: that imports what it needs (the interpreter's own files are
# out of reach after dropping privileges).
_CLI_READER = textwrap.dedent(
    """
    import json, os, sys
    from typer.testing import CliRunner
    from turnstore.cli import app

    runner = CliRunner()
    commands = json.loads(sys.argv[3])

    def run_all(db):
        results = (runner.invoke(app, [*args, "--db", db]) for args in commands)
        return [[r.exit_code, r.stdout, r.stderr] for r in results]

    run_all(sys.argv[1])
    if os.getuid() == 0:
        os.setgid(int(sys.argv[5])); os.setuid(int(sys.argv[4]))
    print(json.dumps(run_all(sys.argv[2])))
    """
)

CLI_READS = [
    ["show", "s"],
    ["runs", "s"],
    ["sessions"],
    ["tools"],
    ["search", "zebra"],
    ["usage"],
    ["export", "s"],
    ["export", "s", "-f", "markdown"],
    ["sessions", "--json"],
    ["query", "SELECT count(*) AS runs FROM runs"],
]


def _cli_as_reader(warm: Path, target: str | Path, commands: list[list[str]]) -> list[list[Any]]:
    """Each command's [exit code, stdout, stderr] on ``target``, run as ``nobody`` for a file
    when this process is root (see ``support.reader_ids``), after a first run of each on the
    writable ``warm``."""
    result = subprocess.run(
        [sys.executable, "-c", _CLI_READER, str(warm), str(target), json.dumps(commands),
         *reader_ids(target)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    outcomes: list[list[Any]] = json.loads(result.stdout)
    return outcomes


def test_cli_read_commands_on_a_database_they_cannot_write(
    target_backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every read command works where nothing can be written (a read-only directory, a role
    that may only read), and leaves the database as it was."""
    warm = tmp_path / "warm.db"
    _written(warm)
    with unwritable(target_backend, _written, request) as target:
        outcomes = _cli_as_reader(warm, target, CLI_READS)
    for args, (code, out, err) in zip(CLI_READS, outcomes, strict=True):
        assert code == 0, (args, out, err)
        assert out.strip(), args
    assert "zebra" in outcomes[CLI_READS.index(["search", "zebra"])][1]


@pytest.mark.parametrize("shm", [False, True], ids=["no-shm", "with-shm"])
def test_an_import_into_a_file_it_cannot_write_fails(
    shared_dir: Path, tmp_path: Path, shm: bool
) -> None:
    """Every session refused because the file cannot be written is a failed import (it was
    reported as "N sessions refused by the store", status 0, when a -shm existed)."""
    warm = tmp_path / "warm.db"
    path = shared_dir / "c.db"
    exported = shared_dir / "t.jsonl"

    async def export() -> None:
        async with Store.open(tmp_path / "other.db") as other:
            await other.add_items("t", ITEMS)
            exported.write_text(await other.export("t"), encoding="utf-8")

    asyncio.run(export())
    _written(path)
    path.chmod(0o444)
    if shm:  # a -shm and -wal left by a reader, as a writable directory lets it
        shared_dir.chmod(0o777)
        _read_as_reader(path)
    shared_dir.chmod(0o555)
    before = file_hashes(path)
    [[code, out, err]] = _cli_as_reader(warm, path, [["import", str(exported)]])
    assert code == 1, out
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: {path} cannot be written here"), line
    assert line.endswith("nothing was written"), line
    assert file_hashes(path) == before


def test_cli_read_commands_refuse_an_older_schema_and_never_migrate(
    monkeypatch: pytest.MonkeyPatch, cli_target: str, target_backend: str
) -> None:
    from typer.testing import CliRunner

    from turnstore.cli import app

    old_database(monkeypatch, target_backend, cli_target, {})
    before = target_state(cli_target)
    # SQLite's file names no credentials: the command to run is given whole.
    migrate = {
        "sqlite-file": f"turnstore migrate --db {cli_target}",
        "postgres": "run `turnstore migrate` with write access",
    }[target_backend]
    runner = CliRunner()
    for args in CLI_READS:
        result = runner.invoke(app, [*args, "--db", cli_target])
        assert result.exit_code == 1, (args, result.output)
        [line] = result.stderr.strip().splitlines()
        assert "too old to read without migrating" in line
        assert migrate in line
    assert target_state(cli_target) == before
    assert runner.invoke(app, ["migrate", "--db", cli_target]).exit_code == 0
    assert target_state(cli_target) != before
    assert runner.invoke(app, ["sessions", "--db", cli_target]).exit_code == 0


# ---------------------------------------------------------------------------------------------
def test_a_file_sqlite_cannot_open_names_the_likely_cause(tmp_path: Path) -> None:
    """On a read-only mount SQLite opens the file but not the -shm a WAL database needs, and
    says only "unable to open database file" (a StorageError, raised from the first read): the
    error says what to try. Mounting needs privileges, so SQLite's own error is made here."""
    with pytest.raises(sqlite3.OperationalError) as caught:
        sqlite3.connect(f"{(tmp_path / 'missing' / 'x.db').as_uri()}?mode=ro", uri=True)
    error = driver_error(caught.value, "x.db")
    assert isinstance(error, ConnectionFailedError)
    assert "cannot open x.db" in str(error)
    assert "read_only=True" in str(error)


_OPEN_EVERY_WAY = textwrap.dedent(
    """
    import asyncio, sys
    from turnstore import ConnectionFailedError, Store

    async def main():
        for read_only in (None, True, False):  # None: inspect
            try:
                if read_only is None:
                    print("inspected:", Store.inspect(sys.argv[1]).kind)
                    continue
                await Store.open(sys.argv[1], read_only=read_only).aclose()
            except ConnectionFailedError as exc:
                print("refused:", exc)
            else:
                print("opened")

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("kind", ["fifo", "symlink loop"])
def test_a_path_that_is_no_file_is_refused(tmp_path: Path, kind: str) -> None:
    """Before: a FIFO hung every open (reading its header waits for a writer), and a link
    loop raised RuntimeError from Path.resolve() when opened to write."""
    path = tmp_path / "x.db"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink(tmp_path / "y.db", path)
        os.symlink(path, tmp_path / "y.db")
    result = subprocess.run(
        [sys.executable, "-c", _OPEN_EVERY_WAY, str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # inspect: a loop is a missing file (nothing is there to read)
    assert lines[0] == ("inspected: missing" if kind == "symlink loop" else lines[0])
    assert lines[0].startswith(("inspected: missing", "refused:")), lines
    assert all(line.startswith("refused:") for line in lines[1:]), lines


# Foreign files


def test_file_kinds() -> None:
    assert sqlite_file_kind([]) == "empty"
    assert sqlite_file_kind(["sqlite_sequence"]) == "empty"
    assert sqlite_file_kind(["turnstore_schema", "sessions", "agent_messages"]) == "turnstore"
    assert sqlite_file_kind(["agent_sessions", "agent_messages"]) == "sdk-sessions"
    assert (
        sqlite_file_kind(["agent_sessions", "agent_messages", "message_structure", "turn_usage"])
        == "sdk-sessions"
    )
    assert sqlite_file_kind(["agent_sessions"]) == "foreign"
    assert sqlite_file_kind(["agent_messages", "invoices"]) == "foreign"
    assert sqlite_file_kind(["invoices"]) == "foreign"


@pytest.mark.parametrize("journal", ["delete", "wal"])
@pytest.mark.parametrize("read_only", [False, True], ids=["open", "read-only"])
def test_foreign_database_is_refused_byte_identical(
    tmp_path: Path, journal: str, read_only: bool
) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
    conn.close()
    before = sorted(os.listdir(tmp_path)), file_hashes(path)
    with pytest.raises(SchemaError, match=r"another application \(tables invoices\)"):
        Store.open(path, read_only=read_only)
    assert (sorted(os.listdir(tmp_path)), file_hashes(path)) == before
    assert os.listdir(tmp_path) == ["other.db"]


@pytest.mark.parametrize("read_only", [False, True], ids=["open", "read-only"])
def test_a_database_of_views_only_is_foreign(tmp_path: Path, read_only: bool) -> None:
    # No table, but another application's schema all the same: not an empty file to adopt.
    path = tmp_path / "report.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE VIEW totals AS SELECT 12.5 AS total")
    conn.close()
    before = file_hashes(path)
    with pytest.raises(SchemaError, match=r"another application \(tables totals\)"):
        Store.open(path, read_only=read_only)
    assert file_hashes(path) == before
    assert os.listdir(tmp_path) == ["report.db"]


@pytest.mark.parametrize("read_only", [False, True], ids=["open", "read-only"])
def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes\n" * 200)
    with pytest.raises(SchemaError, match="not a SQLite database"):
        Store.open(path, read_only=read_only)
    assert path.read_text() == "these are my notes\n" * 200
    assert os.listdir(tmp_path) == ["notes.db"]


def test_an_empty_file_becomes_a_new_database_unless_read_only(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    path.touch()
    with pytest.raises(SchemaError, match="is empty, not a turnstore database"):
        Store.open(path, read_only=True)
    assert path.stat().st_size == 0
    assert os.listdir(tmp_path) == ["new.db"]
    _written(path)
    assert stat.S_ISREG(path.stat().st_mode)
    assert path.stat().st_size > 0


async def test_a_file_of_sdk_session_tables_is_opened_as_before(tmp_path: Path) -> None:
    from agents.memory import SQLiteSession

    path = tmp_path / "sdk.db"
    sdk = SQLiteSession("conv", str(path))
    await sdk.add_items([user("hi")])  # type: ignore[list-item]
    sdk.close()
    store = Store.open(path)
    try:
        await store.add_items("s", ITEMS)
    finally:
        await store.aclose()
    with sqlite3.connect(path) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    assert {"agent_sessions", "agent_messages", "turnstore_schema", "runs"} <= tables

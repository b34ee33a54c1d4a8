"""The command line for scripts and operators: output as data (``--ndjson``, ``--csv``,
``--tsv``), errors as JSON, tables that do not wrap in a pipe, option values checked,
``query`` (read-only SQL), ``prune`` (retention), a ``demo`` that replaces only its own
session, and the one line a command says when an extra it needs is missing.

Every command runs against a SQLite file and a PostgreSQL schema (``target_backend``).
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from builders import assistant, user
from chains import SESSION_TABLES, build_chain
from support import database_target, target_sql
from turnstore import Store
from turnstore.agents.demo import run_demo
from turnstore.cli import app
from turnstore.domain import extras
from turnstore.store.base import StoreBase

pytestmark = pytest.mark.e2e

runner = CliRunner()
LONG_AGO = "'2020-01-01 00:00:00.000000+00:00'"
QUERIES_DOC = Path(__file__).resolve().parent.parent / "docs" / "queries.md"


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("TURNSTORE_DB", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)  # as in a pipe: no width is known


def cli(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.output
    return result


def json_error(result: Any) -> dict[str, str]:
    """The one JSON object a failing command prints on stderr after --json."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    error: dict[str, str] = json.loads(lines[0])["error"]
    return error


@pytest.fixture(scope="module")
def demo_db(target_backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo conversation, with a user; tests only read it."""
    with database_target(target_backend, tmp_path_factory.mktemp("demo")) as db:
        asyncio.run(run_demo(db))

        async def set_user() -> None:
            async with Store.open(db) as store:
                await store.update_session("demo", user_id="ada")

        asyncio.run(set_user())
        yield db


def _csv_rows(text: str, delimiter: str = ",") -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text), delimiter=delimiter))


def _cell(value: Any) -> str:
    """What a CSV cell holds for a JSON value."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _flat(record: dict[str, Any], prefix: str = "") -> dict[str, str]:
    row: dict[str, str] = {}
    for key, value in record.items():
        if key == "usage" and isinstance(value, dict):
            row.update(_flat(value, f"{prefix}{key}."))
        else:
            row[f"{prefix}{key}"] = _cell(value)
    return row


@pytest.mark.parametrize(
    "args",
    [
        ["tools"],
        ["tools", "--calls"],
        ["search", "Paris"],
        ["usage", "--by", "session"],
        ["query", "SELECT id, user_message, total_tokens FROM runs ORDER BY id"],
        ["runs", "demo"],
        ["runs", "demo", "--all"],
        ["branches", "demo"],
    ],
)
def test_every_data_output_holds_what_json_holds(demo_db: str, args: list[str]) -> None:
    as_json = json.loads(cli(*args, "--db", demo_db, "--json").stdout)
    assert as_json, args  # the demo has rows for each
    ndjson = [
        json.loads(line) for line in cli(*args, "--db", demo_db, "--ndjson").stdout.splitlines()
    ]
    assert ndjson == as_json
    expected = [_flat(record) for record in as_json]
    assert _csv_rows(cli(*args, "--db", demo_db, "--csv").stdout) == expected
    assert _csv_rows(cli(*args, "--db", demo_db, "--tsv").stdout, "\t") == expected


def test_sessions_print_a_row_a_session_and_the_next_cursor_apart(demo_db: str) -> None:
    as_json = json.loads(cli("sessions", "--db", demo_db, "--json").stdout)
    rows = as_json["sessions"]
    assert rows
    ndjson = cli("sessions", "--db", demo_db, "--ndjson")
    assert [json.loads(line) for line in ndjson.stdout.splitlines()] == rows
    csv_rows = _csv_rows(cli("sessions", "--db", demo_db, "--csv").stdout)
    assert [row["session_id"] for row in csv_rows] == [row["session_id"] for row in rows]
    assert [row["runs"] for row in csv_rows] == [str(row["runs"]) for row in rows]
    paged = cli("sessions", "--limit", "1", "--db", demo_db, "--tsv")
    assert len(paged.stdout.splitlines()) == 2  # the header and one session
    if as_json["next_cursor"] is not None or len(rows) > 1:
        assert "More: --after " in paged.stderr


def test_since_and_until_take_a_duration_back_from_now(demo_db: str) -> None:
    everything = json.loads(cli("tools", "--calls", "--db", demo_db, "--json").stdout)
    assert json.loads(
        cli("tools", "--calls", "--since", "7d", "--db", demo_db, "--json").stdout
    ) == (everything)
    assert (
        json.loads(cli("tools", "--calls", "--until", "1d", "--db", demo_db, "--json").stdout) == []
    )
    for value in ("7x", "0d", "-1d", "٩d"):
        result = cli("tools", "--since", value, "--db", demo_db, code=1)
        assert "--since takes" in result.stderr


def test_one_output_at_a_time(demo_db: str) -> None:
    result = cli("tools", "--csv", "--tsv", "--db", demo_db, code=2)
    assert "--csv and --tsv cannot be combined" in result.stderr
    assert result.stdout == ""
    assert json_error(cli("usage", "--json", "--ndjson", "--db", demo_db, code=2))["type"] == (
        "UsageError"
    )


def test_a_table_in_a_pipe_does_not_wrap(demo_db: str) -> None:
    wide = "x" * 150
    out = cli("query", f"SELECT '{wide}' AS wide, 'end' AS last", "--db", demo_db).stdout
    (line,) = [line for line in out.splitlines() if wide in line]
    assert line.rstrip().endswith("│")
    assert "end" in line


def test_errors_after_json_are_json(demo_db: str) -> None:
    error = json_error(cli("show", "nosuch", "--db", demo_db, "--json", code=1))
    assert error == {"type": "SessionNotFoundError", "message": "no session 'nosuch'"}
    error = json_error(cli("usage", "--by", "bogus", "--db", demo_db, "--json", code=2))
    assert "bogus" in error["message"]
    error = json_error(cli("tools", "--bogus", "--db", demo_db, "--ndjson", code=2))
    assert "--bogus" in error["message"]
    # Without --json, the same errors are one line for people.
    result = cli("show", "nosuch", "--db", demo_db, code=1)
    assert result.stderr.strip() == "error: no session 'nosuch'"


def test_tools_checks_its_option_values(demo_db: str) -> None:
    result = cli("tools", "--calls", "--status", "bogus", "--db", demo_db, code=2)
    assert "--status takes one of" in result.stderr
    assert "'bogus'" in result.stderr
    assert result.stdout == ""
    for args in (["--status", "failed"], ["--limit", "3"]):
        result = cli("tools", *args, "--db", demo_db, code=2)
        assert "add --calls" in result.stderr
    result = cli("tools", "--since", "yesterday", "--db", demo_db, code=1)
    assert "--since takes an ISO 8601 date" in result.stderr
    assert cli("tools", "--calls", "--status", "failed", "--db", demo_db, "--json").stdout


def test_tools_since_and_until(demo_db: str) -> None:
    every = json.loads(cli("tools", "--calls", "--db", demo_db, "--json").stdout)
    assert len(every) == 4
    first = min(call["created_at"] for call in every)
    last = max(call["created_at"] for call in every)
    later = json.loads(cli("tools", "--calls", "--since", last, "--db", demo_db, "--json").stdout)
    assert [c["id"] for c in later] == [c["id"] for c in every if c["created_at"] >= last]
    before = json.loads(cli("tools", "--calls", "--until", last, "--db", demo_db, "--json").stdout)
    assert [c["id"] for c in before] == [c["id"] for c in every if c["created_at"] < last]
    stats = json.loads(cli("tools", "--until", first, "--db", demo_db, "--json").stdout)
    assert stats == []
    assert "No tool calls." in cli("tools", "--until", first, "--db", demo_db).stdout


def test_search_by_user(demo_db: str) -> None:
    hits = json.loads(cli("search", "Paris", "--user", "ada", "--db", demo_db, "--json").stdout)
    assert hits
    assert {hit["session_id"] for hit in hits} == {"demo"}
    none = json.loads(cli("search", "Paris", "--user", "bob", "--db", demo_db, "--json").stdout)
    assert none == []


def test_query_reads(demo_db: str) -> None:
    rows = json.loads(
        cli(
            "query",
            "SELECT session_id, count(*) AS n FROM runs GROUP BY session_id",
            "--db",
            demo_db,
            "--json",
        ).stdout
    )
    assert rows == [{"session_id": "demo", "n": 3}]
    table = cli("query", "SELECT 1 AS a, 2 AS a, '50%' AS p", "--db", demo_db).stdout
    assert "a_2" in table
    assert "50%" in table
    assert "1 row." in table


# Values a statement may return that JSON has no literal for; each as the expected JSON value.
_ODD_VALUES = {
    "sqlite-file": (
        "SELECT 1e999 AS inf, -1e999 AS ninf, 0.5 AS half",
        {"inf": "Infinity", "ninf": "-Infinity", "half": 0.5},
    ),
    "postgres": (
        "SELECT 'NaN'::float8 AS nan, '-Infinity'::float8 AS ninf, 'Infinity'::numeric AS dinf,"
        " 'NaN'::numeric AS dnan, interval '1 day 2 hours' AS span, '10.1.2.3'::inet AS ip,"
        " '10.0.0.0/8'::cidr AS net, int4range(1, 5) AS r, ARRAY['1.2.3.4'::inet] AS ips,"
        " jsonb_build_object('k', 1) AS j, 2.5::numeric AS half",
        {
            "nan": "NaN",
            "ninf": "-Infinity",
            "dinf": "Infinity",
            "dnan": "NaN",
            "span": "1 day, 2:00:00",
            "ip": "10.1.2.3",
            "net": "10.0.0.0/8",
            "r": "[1, 5)",
            "ips": ["1.2.3.4"],
            "j": {"k": 1},
            "half": 2.5,
        },
    ),
}


def _strict(constant: str) -> Any:
    raise AssertionError(f"{constant} is not JSON")


@pytest.mark.parametrize("flag", ["--json", "--ndjson", "--csv", ""])
def test_query_prints_values_json_has_no_literal_for(
    demo_db: str, target_backend: str, flag: str
) -> None:
    # Before: --json printed NaN and Infinity (which JSON parsers refuse), and an interval or
    # an inet value ended --json, --ndjson and --csv with a TypeError traceback.
    statement, expected = _ODD_VALUES[target_backend]
    out = cli("query", statement, "--db", demo_db, *([flag] if flag else [])).stdout
    if flag == "--json":
        assert json.loads(out, parse_constant=_strict) == [expected]
    elif flag == "--ndjson":
        assert json.loads(out, parse_constant=_strict) == expected
    elif flag == "--csv":
        row = _csv_rows(out)[0]
        assert row["ninf"] == "-Infinity"
        assert set(row) == set(expected)


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM runs",
        "UPDATE sessions SET title = 'x'",
        "INSERT INTO sessions (session_id) VALUES ('new')",
        "DROP TABLE items",
        "SELECT 1; DELETE FROM runs",
        "CREATE TABLE t (x int)",
    ],
)
def test_query_refuses_every_write(cli_target: str, statement: str) -> None:
    asyncio.run(_two_sessions(cli_target))
    before = target_sql(cli_target, "SELECT count(*) FROM runs")
    result = cli("query", statement, "--db", cli_target, code=1)
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert target_sql(cli_target, "SELECT count(*) FROM runs") == before
    titles = target_sql(cli_target, "SELECT title FROM sessions ORDER BY session_id")
    assert "x" not in [row[0] for row in titles]


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM runs RETURNING id",
        "WITH t AS (SELECT 0 AS n) DELETE FROM runs WHERE id > (SELECT n FROM t) RETURNING id",
        "UPDATE sessions SET title = 'x' RETURNING session_id",
    ],
)
def test_query_refuses_a_write_as_read_only(cli_target: str, statement: str) -> None:
    """A statement that writes is refused as what it is: a write asked of a read-only
    store (``ReadOnlyError``), not as a failing database (nor, on PostgreSQL, a replica)."""
    asyncio.run(_two_sessions(cli_target))
    error = json_error(cli("query", statement, "--db", cli_target, "--json", code=1))
    assert error["type"] == "ReadOnlyError", error
    assert "replica" not in error["message"]
    assert target_sql(cli_target, "SELECT count(*) FROM runs") == [(2,)]


@pytest.mark.postgres
def test_query_keeps_nothing_a_read_only_transaction_allows(tmp_path: Path) -> None:
    """PostgreSQL lets a READ ONLY transaction create a large object (and queue a NOTIFY):
    the statement's transaction is rolled back, never committed, so none of it is kept."""
    with database_target("postgres", tmp_path) as db:
        asyncio.run(_two_sessions(db))
        oid = 424_242_424
        made = json.loads(
            cli("query", f"SELECT lo_create({oid}) AS oid", "--db", db, "--json").stdout
        )
        assert made == [{"oid": oid}]
        kept = "SELECT count(*) FROM pg_largeobject_metadata WHERE oid = {oid}::oid"
        assert target_sql(db, kept, oid=oid) == [(0,)]


@pytest.mark.postgres
def test_query_on_postgresql_runs_in_a_read_only_transaction(tmp_path: Path) -> None:
    """The statement runs in a READ ONLY transaction: even what a writer could do without
    touching turnstore's tables (a temporary table) is refused."""
    with database_target("postgres", tmp_path) as db:
        asyncio.run(_two_sessions(db))
        setting = "SELECT current_setting('transaction_read_only') AS read_only"
        assert json.loads(cli("query", setting, "--db", db, "--json").stdout) == [
            {"read_only": "on"}
        ]
        temporary = cli("query", "CREATE TEMP TABLE t (x int)", "--db", db, "--json", code=1)
        assert json_error(temporary)["type"] == "ReadOnlyError"


@pytest.mark.postgres
def test_a_dropped_connection_is_one_json_error(tmp_path: Path) -> None:
    """A statement that ends its own connection (as a server restart would, for every retry):
    after --json, stderr holds the one JSON error, not psycopg's warnings ahead of it (which
    logging's last resort prints where nothing configured logging: a real process, not
    pytest's runner)."""
    with database_target("postgres", tmp_path) as db:
        asyncio.run(_two_sessions(db))
        statement = "SELECT pg_terminate_backend(pg_backend_pid())"
        src = str(Path(__file__).resolve().parents[1] / "src")
        proc = subprocess.run(
            [sys.executable, "-m", "turnstore", "query", statement, "--db", db, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": src},
            check=False,
        )
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert json.loads(line)["error"]["type"] == "ConnectionFailedError"


def test_query_cannot_attach_a_file(tmp_path: Path) -> None:
    """SQLite's ATTACH would open, and create, another file for writing."""
    db = str(tmp_path / "t.db")
    asyncio.run(_two_sessions(db))
    other = tmp_path / "other.db"
    cli("query", f"ATTACH '{other}' AS other", "--db", db, code=1)
    assert not other.exists()


def test_query_refuses_an_empty_statement(demo_db: str) -> None:
    assert "empty" in cli("query", "  ", "--db", demo_db, code=1).stderr


COUNT_RUNS = "-- how many runs\nSELECT count(*) AS n FROM runs"


@pytest.mark.parametrize(
    "args",
    [
        [COUNT_RUNS],  # before: "No such option: -- how many runs..."
        ["--json", COUNT_RUNS],
        ["--", COUNT_RUNS],  # the usual way to say "an argument, not an option"
        ["--runs\nSELECT count(*) AS n FROM runs"],
        ["-- n=3\nSELECT count(*) AS n FROM runs WHERE 1 = 1"],  # a comment holding an =
    ],
)
def test_query_takes_sql_that_starts_with_a_comment(demo_db: str, args: list[str]) -> None:
    out = cli("query", "--db", demo_db, "--json", *[a for a in args if a != "--json"]).stdout
    assert json.loads(out) == [{"n": 3}]


def test_query_runs_the_docs_blocks_that_start_with_a_comment(
    demo_db: str, target_backend: str
) -> None:
    dialect = "PostgreSQL" if target_backend == "postgres" else "SQLite"
    blocks = re.findall(r"```sql\n(-- [^\n]*\n.*?)```", QUERIES_DOC.read_text(), re.S)
    ours = [b for b in blocks if b.startswith(f"-- {dialect}\n") and b.count(";") == 1]
    assert ours  # the per-day usage, the search, …
    for block in ours:
        cli("query", block, "--db", demo_db, "--json")


def test_query_reads_its_statement_from_a_file_or_stdin(demo_db: str, tmp_path: Path) -> None:
    # A file an editor saved with a byte-order mark.
    path = tmp_path / "count.sql"
    path.write_bytes(b"\xef\xbb\xbf" + COUNT_RUNS.encode())
    for args in (["-f", str(path)], ["--file", str(path)]):
        assert json.loads(cli("query", *args, "--db", demo_db, "--json").stdout) == [{"n": 3}]
    for args in (["-"], ["--file", "-"]):
        result = runner.invoke(app, ["query", *args, "--db", demo_db, "--json"], input=COUNT_RUNS)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == [{"n": 3}]


def test_query_refuses_a_statement_it_cannot_read(demo_db: str, tmp_path: Path) -> None:
    assert "give the statement" in cli("query", "--db", demo_db, code=2).stderr
    both = cli("query", "SELECT 1", "-f", str(tmp_path / "x.sql"), "--db", demo_db, code=2)
    assert "both SQL and --file" in both.stderr
    missing = cli("query", "-f", str(tmp_path / "none.sql"), "--db", demo_db, code=1)
    assert missing.stderr.strip() == f"error: No such file or directory: {tmp_path / 'none.sql'}"
    (tmp_path / "latin1.sql").write_bytes("SELECT 'café'".encode("latin-1"))
    error = cli("query", "-f", str(tmp_path / "latin1.sql"), "--db", demo_db, "--json", code=1)
    assert json_error(error) == {
        "type": "InvalidOperationError",
        "message": f"{tmp_path / 'latin1.sql'} is not UTF-8 text",
    }
    empty = runner.invoke(app, ["query", "-", "--db", demo_db], input="  \n")
    assert empty.exit_code == 1
    assert "empty" in empty.stderr


def test_an_argument_with_a_space_after_its_dash_is_not_an_option(demo_db: str) -> None:
    # Any command: a search for "-Paris x" (no option's name holds a space), while an option's
    # value that looks so stays the option's.
    assert cli("search", "-Paris weather", "--db", demo_db, "--json").stdout.strip() == "[]"
    error = cli("query", "SELECT 1", "--db", "-- not a file", code=1).stderr
    assert "-- not a file" in error


async def _two_sessions(target: str) -> None:
    async with Store.open(target) as store:
        for sid in ("idle", "busy"):
            run = await store.add_items(sid, [user("q"), assistant("a")])
            assert run is not None
            await store.annotate(run, "thumbs", value=0)  # goes with its session, or stays


def _age(target: str, session_id: str) -> None:
    statement = f"UPDATE sessions SET updated_at = {LONG_AGO} WHERE session_id = '{session_id}'"
    target_sql(target, statement, write=True)


def _sessions(target: str) -> list[str]:
    return [row[0] for row in target_sql(target, "SELECT session_id FROM sessions ORDER BY 1")]


def test_prune_dry_run_then_prune(cli_target: str) -> None:
    asyncio.run(_two_sessions(cli_target))
    asyncio.run(_more_idle(cli_target))
    for sid in ("idle", "idle-2", "idle-3"):
        _age(cli_target, sid)
    listed = json.loads(
        cli(
            "prune", "--idle-for", "90d", "--dry-run", "--batch", "1", "--db", cli_target, "--json"
        ).stdout
    )
    assert sorted(info["session_id"] for info in listed) == ["idle", "idle-2", "idle-3"]
    assert _sessions(cli_target) == ["busy", "idle", "idle-2", "idle-3"]  # nothing deleted
    text = cli("prune", "--idle-for", "90d", "--batch", "2", "--yes", "--db", cli_target).stdout
    assert "Deleted 3 sessions" in text
    assert _sessions(cli_target) == ["busy"]
    for table in ("runs", "items", "annotations"):
        left = target_sql(cli_target, f"SELECT DISTINCT session_id FROM {table}")
        assert [row[0] for row in left] == ["busy"]
    assert (
        "Deleted 0 sessions" in cli("prune", "--idle-for", "90d", "-y", "--db", cli_target).stdout
    )


def test_prune_deletes_a_conversation_of_any_length(cli_target: str) -> None:
    """An idle session of 1,000 runs goes whole (prune failed on it on SQLite, which stopped
    the cascade from run to run at 1,000 levels); the busy one stays (issue 26)."""

    async def write() -> None:
        async with Store.open(cli_target) as store:
            await build_chain(store, "long", 1_000, when=datetime(2020, 1, 1, tzinfo=timezone.utc))
            await store.add_items("busy", [user("q"), assistant("a")])

    asyncio.run(write())
    text = cli("prune", "--idle-for", "90d", "--yes", "--db", cli_target).stdout
    assert "Deleted 1 session " in text
    assert _sessions(cli_target) == ["busy"]
    for table in SESSION_TABLES:
        left = target_sql(cli_target, f"SELECT count(*) FROM {table} WHERE session_id = 'long'")
        assert left == [(0,)], table


def test_prune_keeps_a_session_written_just_before_its_delete(
    cli_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that lands after prune read the session (its page, or again before deleting)
    keeps it: the delete itself says "only if still idle", in one statement."""
    asyncio.run(_two_sessions(cli_target))
    _age(cli_target, "idle")
    real = StoreBase._write

    async def written_first(self: Any, sid: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ends_session"):  # the delete: another process writes just before it
            async with Store.open(cli_target) as other:
                await other.add_items(sid, [user("back again")])
        return await real(self, sid, *args, **kwargs)

    monkeypatch.setattr(StoreBase, "_write", written_first)
    out = cli("prune", "--idle-for", "90d", "--yes", "--db", cli_target, "--json").stdout
    assert json.loads(out) == []
    assert _sessions(cli_target) == ["busy", "idle"]
    statement = "SELECT user_message FROM runs WHERE session_id = 'idle' ORDER BY id"
    rows = target_sql(cli_target, statement)
    assert [row[0] for row in rows] == ["q", "back again"]


def test_prune_in_a_script_deletes_only_with_yes(cli_target: str) -> None:
    # Before: prune deleted without a word of warning, wherever it ran.
    asyncio.run(_two_sessions(cli_target))
    _age(cli_target, "idle")
    for args in ([], ["--json"]):
        result = cli("prune", "--idle-for", "90d", *args, "--db", cli_target, code=2)
        assert "pass --yes" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert result.stdout == ""
    assert _sessions(cli_target) == ["busy", "idle"]
    assert (
        "Would delete 1 session "
        in cli("prune", "--idle-for", "90d", "--dry-run", "--db", cli_target).stdout
    )
    assert _sessions(cli_target) == ["busy", "idle"]


def _read_terminal(fd: int, until: bytes | None) -> bytes:
    """What the child writes to its terminal, until ``until`` shows (None: until it closes
    it); a bounded wait."""
    data = b""
    deadline = time.monotonic() + 60
    while until is None or until not in data:
        left = deadline - time.monotonic()
        assert left > 0, data
        if not select.select([fd], [], [], left)[0]:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child has closed its terminal
            break
        if not chunk:
            break
        data += chunk
    return data


def _prune_on_a_terminal(db: str, answer: bytes) -> tuple[int, str]:
    """``prune`` run on a terminal (a pty) that answers its question with ``answer``."""
    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "turnstore", "prune", "--idle-for", "90d", "--db", db],
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    try:
        shown = _read_terminal(master, b"[y/N]")
        os.write(master, answer + b"\n")
        shown += _read_terminal(master, None)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(master)
    return child.returncode, shown.decode()


def test_prune_on_a_terminal_asks_first(cli_target: str) -> None:
    asyncio.run(_two_sessions(cli_target))
    asyncio.run(_more_idle(cli_target))
    for sid in ("idle", "idle-2", "idle-3"):
        _age(cli_target, sid)
    code, shown = _prune_on_a_terminal(cli_target, b"n")
    assert code == 1, shown
    assert "3 sessions (3 runs) idle for 90d or more will be deleted:" in shown
    assert all(sid in shown for sid in ("idle", "idle-2", "idle-3"))
    assert "nothing deleted" in shown
    assert "Traceback" not in shown
    assert _sessions(cli_target) == ["busy", "idle", "idle-2", "idle-3"]
    code, shown = _prune_on_a_terminal(cli_target, b"y")
    assert code == 0, shown
    assert "Deleted 3 sessions idle for 90d or more." in shown
    assert _sessions(cli_target) == ["busy"]


async def _more_idle(target: str) -> None:
    async with Store.open(target) as store:
        for sid in ("idle-2", "idle-3"):
            await store.add_items(sid, [user("q")])


@pytest.mark.parametrize(
    "value", ["90", "0d", "-1d", "90x", "d", "1.5d", "", "\u0669\u0660d", "999999999w", "3000000d"]
)
def test_prune_refuses_a_bad_duration(cli_target: str, value: str) -> None:
    """Digits are ASCII ones; a duration reaching back before year 1 is refused, not a
    traceback (the cutoff would overflow)."""
    asyncio.run(_two_sessions(cli_target))
    result = cli("prune", "--idle-for", value, "--db", cli_target, code=1)
    assert "--idle-for takes a duration" in result.stderr
    assert _sessions(cli_target) == ["busy", "idle"]


def test_demo_replaces_only_its_own_session(cli_target: str) -> None:
    async def mine() -> None:
        async with Store.open(cli_target) as store:
            await store.add_items("demo", [user("my own conversation")])

    asyncio.run(mine())
    result = cli("demo", "--db", cli_target, code=1)
    assert "was not written by the demo" in result.stderr
    assert "--force" in result.stderr
    rows = target_sql(cli_target, "SELECT user_message FROM runs WHERE session_id = 'demo'")
    assert [row[0] for row in rows] == ["my own conversation"]  # untouched
    cli("demo", "--force", "--db", cli_target)
    cli("demo", "--db", cli_target)  # its own session now: replaced without --force
    runs = json.loads(cli("runs", "demo", "--db", cli_target, "--json").stdout)
    assert len(runs) == 3


def test_version_and_short_help() -> None:
    from importlib.metadata import version

    assert cli("--version").stdout.strip() == f"turnstore {version('turnstore')}"
    assert "Usage" in cli("-h").stdout
    assert "--idle-for" in cli("prune", "-h").stdout


def test_help_names_the_extras_it_needs() -> None:
    assert "pip install 'turnstore[web]'" in cli("serve", "--help").stdout
    assert "pip install 'turnstore[agents]'" in cli("demo", "--help").stdout


@pytest.mark.parametrize(("args", "extra"), [(["demo"], "agents"), (["serve"], "web")])
def test_a_missing_extra_is_one_line(
    monkeypatch: pytest.MonkeyPatch, cli_target: str, args: list[str], extra: str
) -> None:
    asyncio.run(_two_sessions(cli_target))
    module = extras.EXTRAS[extra][0]
    real = extras.importlib.util.find_spec
    monkeypatch.setattr(
        extras.importlib.util, "find_spec", lambda name: None if name == module else real(name)
    )
    result = cli(*args, "--db", cli_target, code=1)
    assert result.stderr.strip() == (
        f"error: turnstore {args[0]} needs the {extra} extra ({module} is missing): "
        f"pip install 'turnstore[{extra}]'"
    )


def test_the_console_script_without_the_cli_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from turnstore import console

    real = extras.importlib.util.find_spec
    monkeypatch.setattr(
        extras.importlib.util, "find_spec", lambda name: None if name == "typer" else real(name)
    )
    with pytest.raises(SystemExit) as exited:
        console.main()
    assert exited.value.code == (
        "error: the turnstore command needs the cli extra (typer is missing): "
        "pip install 'turnstore[cli]'"
    )


async def test_store_search_by_user(store: Store) -> None:
    """``Store.search(user_id=...)``, which ``search --user`` calls, on every backend."""
    for sid, owner in (("a", "ada"), ("b", "bob"), ("c", None)):
        await store.add_items(sid, [user("where is the zebra")])
        if owner is not None:
            await store.update_session(sid, user_id=owner)
    assert {hit.session_id for hit in await store.search("zebra", user_id="ada")} == {"a"}
    assert {hit.session_id for hit in await store.search("zebra")} == {"a", "b", "c"}
    assert await store.search("zebra", user_id="nobody") == []


def test_search_checks_its_roles(demo_db: str) -> None:
    result = cli("search", "Paris", "--role", "bogus", "--db", demo_db, code=2)
    assert "bogus" in result.output
    hits = json.loads(cli("search", "Paris", "--role", "user", "--db", demo_db, "--json").stdout)
    assert hits
    assert {hit["role"] for hit in hits} == {"user"}


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args", [("sessions", "--json"), ("tools",), ("search", "Paris", "--csv"), ("migrate",)]
)
def test_output_that_cannot_be_written_is_one_error_line(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    # Before: stdout on a full disk ended these commands with an OSError traceback.
    db = str(tmp_path / "t.db")
    asyncio.run(run_demo(db))
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "turnstore", *args, "--db", db],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    message = json.loads(lines[0])["error"]["message"] if "--json" in args else lines[0]
    assert "No space left on device" in message


@pytest.mark.parametrize("args", [("runs", "demo", "--json"), ("sessions", "--json"), ("export",)])
def test_a_pipe_closed_by_its_reader_ends_the_command_quietly(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    # As `| head` does. Before, some commands printed "[Errno 32] Broken pipe" as their error
    # and others nothing.
    db = str(tmp_path / "t.db")
    asyncio.run(run_demo(db))
    child = subprocess.Popen(
        [sys.executable, "-m", "turnstore", *args, "--db", db],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    child.stdout.close()
    _, err = child.communicate(timeout=60)
    assert child.returncode == 1
    assert err == ""


def test_a_narrow_table_keeps_every_id_whole(
    cli_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 80 columns the text columns give up their width; ids and numbers are never cut."""
    long_id = "session-" + "0123456789" * 5 + "-end"

    async def write() -> None:
        async with Store.open(cli_target) as store:
            await store.add_items(long_id, [user("a question " * 20)])

    asyncio.run(write())
    monkeypatch.setenv("COLUMNS", "80")
    for args in (["sessions"], ["search", "question"], ["runs", long_id]):
        text = cli(*args, "--db", cli_target).stdout
        assert all(len(line) <= 80 for line in text.splitlines()), args
        if args[0] != "runs":
            assert long_id in text, args
    runs = cli("runs", long_id, "--db", cli_target, "--json")
    [run_id] = [run["id"] for run in json.loads(runs.stdout)]
    assert f" {run_id} " in cli("runs", long_id, "--db", cli_target).stdout


@pytest.mark.parametrize(
    "command",
    [["annotations"], ["usage"], ["sessions"], ["search", "weather"], ["dataset", "-o", "-"]],
)
def test_a_bad_time_option_is_one_line_in_every_command(demo_db: str, command: list[str]) -> None:
    # Parsed before or inside the command's coroutine, it is the same one line, no traceback.
    result = cli(*command, "--since", "yesterday", "--db", demo_db, code=1)
    assert result.stderr.strip().splitlines() == [
        "error: --since takes an ISO 8601 date or time (2025-01-31, 2025-01-31T12:00) or a "
        "duration back from now (7d, 12h, 30m), not 'yesterday'"
    ]


def test_only_a_spread_record_s_mappings_become_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # One flattening for every command's CSV: a nested record's fields are columns; a mapping
    # (a session's metadata) stays one JSON cell, but where a command spreads it (usage
    # --details: the token details, a column per field).
    from turnstore import Usage
    from turnstore.cli.output import Format, print_records

    record = {"key": "a", "usage": Usage(input_tokens_details={"cached_tokens": 3})}
    print_records(Format.csv, [{**record, "metadata": {"k": "v"}}])
    kept = _csv_rows(capsys.readouterr().out)[0]
    assert (kept["usage.input_tokens_details"], kept["metadata"]) == (
        '{"cached_tokens": 3}',
        '{"k": "v"}',
    )
    print_records(Format.csv, [record], spread=True)
    spread = _csv_rows(capsys.readouterr().out)[0]
    assert spread["usage.input_tokens_details.cached_tokens"] == "3"
    assert "usage.input_tokens_details" not in spread

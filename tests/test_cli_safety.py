"""The command line under hostile input: stored text that tries to drive the terminal, import
files built to crash it, non-UTF-8 arguments, and an --output that is the database itself.

Each failure is one line on stderr with exit status 1 or 2, never a traceback; an import
skips and counts what it cannot read and imports the rest.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agents.extensions.memory.advanced_sqlite_session import AdvancedSQLiteSession
from agents.memory import SQLiteSession
from typer.testing import CliRunner

from builders import assistant, call, output, user
from support import cli, target_sql
from turnstore import Store
from turnstore.cli import app, safe_text

runner = CliRunner()

# What a model or a tool could put in stored text: clear the screen, set the window title,
# plant a hyperlink (OSC 8), a C1 CSI, DEL, a bidirectional override.
HOSTILE = "\x1b[2J\x1b]0;pwned\x07\x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\\x9b31m\x7f\u202eevil"
RAW = ("\x1b", "\x07", "\x9b", "\x7f", "\u202e")


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TURNSTORE_DB", raising=False)
    monkeypatch.setenv("COLUMNS", "400")


def one_error_line(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return str(lines[0])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_safe_text_escapes_controls_and_keeps_the_rest() -> None:
    assert safe_text("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert safe_text("\x9b\x7f\u202e\u2066\x00\r") == "\\x9b\\x7f\\u202e\\u2066\\x00\\x0d"
    assert safe_text("tab\tnew\nline é 😀 \u200d") == "tab\tnew\nline é 😀 \u200d"


async def _write_small(db: str | Path) -> None:
    async with Store.open(db) as store:
        await store.add_items("s", [user("hello"), assistant("hi")])


@pytest.fixture
def small_target(cli_target: str) -> str:
    """A database of the module's backend holding one short session."""
    asyncio.run(_write_small(cli_target))
    return cli_target


# ---------------------------------------------------------------------------------------------
# export -o onto the database: SQLite only, whose database is files an --output could name


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    db = tmp_path / "conv.db"
    asyncio.run(_write_small(db))
    return db


def test_export_onto_the_database_is_refused(
    small_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    os.link(small_db, tmp_path / "hardlink.db")
    (tmp_path / "symlink.db").symlink_to(small_db)
    before = digest(small_db)
    outputs = [
        str(small_db),
        "conv.db",
        "./sub/../conv.db",
        "hardlink.db",  # the same inode under another name
        "symlink.db",
        "conv.db-wal",  # not there yet: writing it would plant a log beside the database
        "sub/../conv.db-shm",
    ]
    for target in outputs:
        for fmt in ("jsonl", "markdown"):
            line = one_error_line(
                cli("export", "s", "-f", fmt, "-o", target, "--db", "conv.db", code=1)
            )
            assert "writing it would destroy the database" in line, target
    assert digest(small_db) == before
    assert not (tmp_path / "conv.db-wal").exists()
    # The database named through another path is the same file too.
    line = one_error_line(cli("export", "-o", "conv.db", "--db", "sub/../hardlink.db", code=1))
    assert "is the database" in line
    assert digest(small_db) == before
    cli("export", "s", "-o", "out.jsonl", "--db", "./sub/../conv.db")
    assert json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])["session_id"] == "s"


def test_export_onto_an_existing_write_ahead_log_is_refused(small_db: Path) -> None:
    conn = sqlite3.connect(small_db)  # an open reader keeps the -wal and -shm in place
    conn.execute("SELECT count(*) FROM runs").fetchone()
    try:
        wal = Path(f"{small_db}-wal")
        assert wal.exists()
        before = digest(wal)
        for suffix in ("-wal", "-shm"):
            line = one_error_line(
                cli("export", "-o", f"{small_db}{suffix}", "--db", str(small_db), code=1)
            )
            assert f"the database's {suffix[1:]} file" in line
        assert digest(wal) == before
    finally:
        conn.close()


def test_export_onto_the_log_of_a_symlinked_database_is_refused(
    small_db: Path, tmp_path: Path
) -> None:
    # SQLite keeps the -wal and -shm beside the file a symlink names, not beside the link.
    elsewhere = tmp_path / "links"
    elsewhere.mkdir()
    link = elsewhere / "link.db"
    link.symlink_to(small_db)
    conn = sqlite3.connect(link)  # a writer whose commits are still only in the -wal
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("UPDATE sessions SET title = 'only in the log'")
    conn.commit()
    try:
        wal = Path(f"{small_db}-wal")
        before = digest(wal)
        for suffix in ("-wal", "-shm"):
            line = one_error_line(
                cli("export", "-o", f"{small_db}{suffix}", "--db", str(link), code=1)
            )
            assert f"the database's {suffix[1:]} file" in line
        assert digest(wal) == before
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------
# Hostile import files


def test_import_skips_text_that_is_not_utf8(tmp_path: Path, cli_target: str) -> None:
    source = tmp_path / "sdk.db"
    sdk = SQLiteSession("good", source)
    asyncio.run(sdk.add_items([user("fine")]))  # type: ignore[list-item]
    sdk.close()
    with sqlite3.connect(source) as conn:
        rows = [
            ("good", "CAST(X'7b22726f6c65223a22ff227d' AS TEXT)"),  # TEXT, not UTF-8
            ("good", "X'7b22726f6c65223a22ff227d'"),  # a BLOB, not UTF-8
            ("CAST(X'ff' AS TEXT)", json.dumps(json.dumps(user("lost")))),  # its session id
        ]
        for sid, data in rows:
            sid_sql = sid if sid.startswith("CAST") else f"'{sid}'"
            data_sql = data if data.startswith(("CAST", "X'")) else f"'{json.loads(data)}'"
            conn.execute(
                f"INSERT INTO agent_messages (session_id, message_data) VALUES ({sid_sql}, "
                f"{data_sql})"
            )
        conn.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('other', ?)",
            (json.dumps(user("also fine")),),
        )
    db = cli_target
    summary = json.loads(cli("import", str(source), "--db", str(db), "--json").stdout)
    assert (summary["sessions"], summary["items"], summary["skipped"]) == (2, 2, 3)
    text = cli("import", str(source), "--db", str(db)).stdout
    assert "3 unreadable rows skipped" in text


def test_import_skips_usage_that_is_not_a_count(tmp_path: Path, cli_target: str) -> None:
    source = tmp_path / "advanced.db"
    bad_usage = {
        "text": ("abc", 1, 1, 2, None),
        "2**63": (1, str(2**63), 1, 1, None),
        "2**31 requests": (2**31, 1, 1, 2, None),  # PostgreSQL counts requests in an INTEGER
        "1e30": (1, 1e30, 1, 1, None),
        "huge text": (1, 1, 1, "9" * 30, None),
        "fraction": (1, 1.5, 1, 1, None),
        "bad detail": (1, 1, 1, 2, '{"cached_tokens": "x"}'),
    }
    good = (2, 10, 5, 15, '{"cached_tokens": 3}')

    async def write() -> None:
        for sid in [*bad_usage, "good"]:
            session = AdvancedSQLiteSession(session_id=sid, db_path=source, create_tables=True)
            try:
                await session.add_items([user(f"question {sid}"), assistant("answer")])  # type: ignore[list-item]
            finally:
                session.close()

    asyncio.run(write())
    with sqlite3.connect(source) as conn:
        for sid, counts in [*bad_usage.items(), ("good", good)]:
            conn.execute(
                """INSERT INTO turn_usage (session_id, branch_id, user_turn_number, requests,
                       input_tokens, output_tokens, total_tokens, input_tokens_details)
                   VALUES (?, 'main', 1, ?, ?, ?, ?, ?)""",
                (sid, *counts),
            )
    db = cli_target
    summary = json.loads(cli("import", str(source), "--db", str(db), "--json").stdout)
    sessions = len(bad_usage) + 1
    assert (summary["sessions"], summary["skipped"]) == (sessions, len(bad_usage))
    assert summary["items"] == 2 * sessions  # every session's items, with or without usage

    async def usage() -> dict[str | None, int]:
        store = Store.open(db, read_only=True)
        try:
            return {row.key: row.usage.total_tokens for row in await store.usage()}
        finally:
            await store.aclose()

    totals = asyncio.run(usage())
    assert totals["good"] == 15
    assert all(totals[sid] == 0 for sid in bad_usage)


def test_import_skips_jsonl_lines_that_are_not_records(tmp_path: Path, cli_target: str) -> None:
    lines = [
        {"session_id": "ok", "run_id": 1, "item": user("fine")},
        {"session_id": "ok", "run_id": [1], "item": user("a list for a run id")},
        {"session_id": "ok", "run_id": {"a": 1}, "item": user("an object")},
        {"session_id": "ok", "run_id": 2, "parent_id": [1], "item": user("a list parent")},
        {"session_id": "orphan", "run_id": 3, "parent_id": 99, "item": user("no parent")},
        {"session_id": "nul\x00id", "run_id": 1, "item": user("an id no store keeps")},
        {"run_id": 1, "item": user("no session")},
    ]
    source = tmp_path / "hostile.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in lines) + "\n{not json\n")
    db = cli_target
    summary = json.loads(cli("import", str(source), "--db", str(db), "--json").stdout)
    assert (summary["sessions"], summary["items"]) == (1, 1)
    assert (summary["skipped"], summary["skipped_sessions"]) == (7, 1)
    text = cli("import", str(source), "--db", str(db)).stdout
    assert "7 unreadable rows skipped; 1 sessions refused by the store" in text


def test_import_skips_usage_too_large_for_the_database(tmp_path: Path, cli_target: str) -> None:
    document = {
        "format": "turnstore-export",
        "session": {"session_id": "big", "head_run_id": 2},
        "runs": [
            {"id": 1, "parent_id": None, "usage": {"input_tokens": 10**30}, "items": [user("a")]},
            {"id": 2, "parent_id": 1, "usage": {"total_tokens": 7}, "items": [user("b")]},
        ],
    }
    source = tmp_path / "big.json"
    source.write_text(json.dumps(document))
    db = cli_target
    summary = json.loads(
        cli("import", str(source), "--from", "json", "--db", str(db), "--json").stdout
    )
    assert (summary["sessions"], summary["runs"], summary["skipped"]) == (1, 2, 1)
    usage = json.loads(cli("usage", "--db", str(db), "--json").stdout)
    assert usage[0]["usage"]["total_tokens"] == 7


# ---------------------------------------------------------------------------------------------
# Arguments that are not UTF-8


def test_an_argument_that_is_not_utf8_is_one_line(small_target: str) -> None:
    # As Python decodes such an argument (surrogateescape), and as a real process gets it.
    hostile = (
        ["sessions", "--user", "\udcff"],
        ["search", "\udcffx"],
        ["usage", "--user", "\udcff"],
    )
    for args in hostile:
        result = runner.invoke(app, [*args, "--db", small_target])
        assert result.exit_code in (1, 2), result.output
        assert "Traceback" not in result.output
        one_error_line(result)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnstore.cli",
            "sessions",
            b"--user",
            b"\xff",
            "--db",
            small_target,
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode in (1, 2)
    assert result.stderr.count(b"\n") == 1
    assert result.stderr.startswith(b"error: ")
    assert b"not valid UTF-8" in result.stderr


def test_stored_lone_surrogates_export_and_import_back(
    tmp_path: Path, new_target: Callable[[], str]
) -> None:
    db = new_target()
    text = "half a pair: \ud800 and \udfff"

    async def write() -> None:
        store = Store.open(db)
        try:
            await store.add_items("s", [user(text), assistant("fine")])
        finally:
            await store.aclose()

    asyncio.run(write())
    out = tmp_path / "s.jsonl"
    cli("export", "s", "-o", str(out), "--db", str(db))
    assert json.loads(out.read_text(encoding="utf-8").splitlines()[0])["item"]["content"] == text
    assert "\ufffd" in cli("export", "s", "-f", "markdown", "--db", str(db)).stdout
    document = json.loads(cli("export", "s", "-f", "json", "--db", str(db)).stdout)
    assert document["runs"][0]["items"][0]["content"] == text
    copy = new_target()
    cli("import", str(out), "--db", str(copy))

    async def read() -> list[Any]:
        store = Store.open(copy, read_only=True)
        try:
            return await store.get_items("s")
        finally:
            await store.aclose()

    assert asyncio.run(read())[0]["content"] == text


# ---------------------------------------------------------------------------------------------
# Terminal injection


@pytest.fixture
def hostile_db(cli_target: str) -> str:
    """A session whose every stored text field carries HOSTILE."""
    db = cli_target
    sid = "sess" + HOSTILE

    async def write() -> None:
        store = Store.open(db)
        try:
            await store.add_items(
                sid,
                [
                    user("question " + HOSTILE),
                    call("c1", "tool" + HOSTILE, json.dumps({"q": HOSTILE})),
                    output("c1", "output zebra " + HOSTILE),
                    assistant("answer zebra " + HOSTILE),
                ],
            )
            await store.update_session(sid, title="title" + HOSTILE, user_id="user" + HOSTILE)
        finally:
            await store.aclose()

    asyncio.run(write())
    target_sql(
        db,
        "UPDATE runs SET agent_name = {agent}, model = {model}, requests = 1, total_tokens = 5",
        write=True,
        agent="agent" + HOSTILE,
        model="model" + HOSTILE,
    )
    target_sql(db, "UPDATE tool_calls SET error = {error}", write=True, error="error" + HOSTILE)
    return db


def _commands(sid: str) -> list[list[str]]:
    return [
        ["show", sid],
        ["show", sid, "--full"],
        ["runs", sid],
        ["runs", sid, "--all"],
        ["sessions"],
        ["tools"],
        ["tools", "--calls"],
        ["search", "zebra"],
        *(["usage", "--by", by] for by in ("session", "user", "model", "agent", "day")),
    ]


def test_stored_text_cannot_drive_the_terminal(hostile_db: str) -> None:
    sid = "sess" + HOSTILE
    for args in _commands(sid):
        out = cli(*args, "--db", str(hostile_db)).stdout
        assert not any(raw in out for raw in RAW), (args, out)
        if args[-1] != "day":  # the one listing that shows no stored text
            assert "\\x1b" in out, (args, out)  # shown, as its escape
    # Errors that quote stored or given text are made safe the same way.
    result = cli("show", "no" + HOSTILE, "--db", str(hostile_db), code=1)
    assert not any(raw in result.stderr for raw in RAW)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    return [text for part in value for text in _strings(part)] if isinstance(value, list) else []


def test_json_output_stays_exact(hostile_db: str) -> None:
    sid = "sess" + HOSTILE
    for args in _commands(sid):
        out = cli(*args, "--db", str(hostile_db), "--json").stdout
        assert not any(raw in out for raw in RAW), args  # escaped as JSON escapes them
        texts = _strings(json.loads(out))
        assert args[-1] == "day" or any(HOSTILE in text for text in texts), args
    shown = json.loads(cli("show", sid, "--db", str(hostile_db), "--json").stdout)
    assert shown["session"]["title"] == "title" + HOSTILE
    assert shown["runs"][0]["user_message"] == "question " + HOSTILE
    # An export to a file (or a pipe) is the data, byte for byte.
    exported = cli("export", sid, "--db", str(hostile_db)).stdout
    assert HOSTILE in json.loads(exported.splitlines()[0])["item"]["content"]

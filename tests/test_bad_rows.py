"""Rows that are somehow bad are isolated on the way out (issue 26): a session's metadata that
is not a JSON object, a tool call's or model call's time or duration that is no time or number
(written by SQL by hand, or stored unchecked by a version before issue 26). No listing,
export, copy, CLI command or viewer page fails over one; each shows it as docs/reliability.md
("Rows that are somehow bad") says. Every backend: each stores the bad values its columns can
hold (SQLite's text anything; PostgreSQL's jsonb any JSON value, its doubles NaN).
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from builders import assistant, call, output, span_record, user
from support import cli, sql
from turnstore import ResponseRecord, Store, Telemetry, ToolTiming, Usage, copy
from turnstore.web import create_app

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
DEEP = "[" * 5000 + "]" * 5000

# Metadata that is not a JSON object turnstore writes, by what each backend's column holds.
BAD_METADATA = {
    "sqlite": [
        "not json",
        "",
        "[1,2]",
        '"text"',
        "null",
        DEEP,
        '{"k": NaN}',
        '{"k": "\\u0000"}',
        '{"k": "\\ud800"}',
        '{"k": 1e999}',
    ],
    "postgresql": ["[1,2]", '"text"', "null", DEEP, '{"k": 1' + "0" * 5000 + "}"],
}


async def converse_with_timings(store: Store, session_id: str) -> None:
    """A run with a tool call and a model call, timed as ``session.hooks`` times them."""
    response = ResponseRecord("agent", "model", "resp", None, Usage(1, 2, 3, 5), NOW, NOW, 1.5)
    telemetry = Telemetry([response], [ToolTiming("c1", NOW, NOW, 2.5)])
    await store.add_items(session_id, [user("q"), call("c1", "lookup"), output("c1", "ok")])
    await store.add_items(session_id, [assistant("a")], telemetry=telemetry)


async def set_metadata(store: Store, session_id: str, text: str) -> str:
    """Store ``text`` as the session's metadata, as SQL by hand would; the text read back."""
    await sql(
        store,
        "UPDATE sessions SET metadata = {text} WHERE session_id = {sid}",
        write=True,
        text=text,
        sid=session_id,
    )
    rows = await sql(
        store,
        "SELECT CAST(metadata AS TEXT) FROM sessions WHERE session_id = {sid}",
        sid=session_id,
    )
    stored: str = rows[0][0]
    return stored


async def spoil_timings(store: Store, session_id: str) -> None:
    """The timings of the session's tool and model calls as values that are no time or number:
    text on SQLite (its columns take any), NaN and infinity on PostgreSQL."""
    sqlite = store.backend.dialect == "sqlite"
    for table, columns in (
        ("tool_calls", ("started_at", "completed_at", "duration_ms")),
        ("model_responses", ("started_at", "completed_at", "latency_ms")),
    ):
        spoilt = [name for name in columns if sqlite or name.endswith("_ms")]
        values = ", ".join(f"{name} = {{{name}}}" for name in spoilt)
        await sql(
            store,
            f"UPDATE {table} SET {values} WHERE session_id = {{sid}}",
            write=True,
            sid=session_id,
            **{name: "yesterday" if sqlite else "NaN" for name in spoilt},
        )


async def bad_rows(store: Store) -> None:
    """Session "good"; "meta", whose metadata is not JSON (a JSON list where the column holds
    only JSON); "timed", whose timings are spoilt."""
    await converse_with_timings(store, "good")
    await store.update_session("good", metadata={"k": 1})
    await store.add_items("meta", [user("hi")])
    await set_metadata(store, "meta", "not json" if store.backend.dialect == "sqlite" else "[1]")
    await converse_with_timings(store, "timed")
    await spoil_timings(store, "timed")


# ---------------------------------------------------------------------------------------------
# The API, every backend


async def test_a_session_whose_metadata_is_unreadable_is_listed_with_its_text_aside(
    store: Store,
) -> None:
    await store.add_items("good", [user("hi")])
    await store.update_session("good", metadata={"k": 1})
    await store.add_items("bad", [user("hi")])
    for text in BAD_METADATA[store.backend.dialect]:
        stored = await set_metadata(store, "bad", text)
        page = await store.sessions()
        assert [(i.session_id, i.metadata, i.unreadable_metadata) for i in page] == [
            ("bad", {}, stored),
            ("good", {"k": 1}, None),
        ], text
        assert await store.session("bad") == page[0]
        assert [i.session_id async for i in store.iter_sessions(page_size=1)] == ["bad", "good"]
        assert [i.session_id for i in await store.sessions(metadata={"k": 1})] == ["good"]
        exported = json.loads(await store.export("bad", "json"))["session"]
        assert (exported["metadata"], exported["unreadable_metadata"]) == ({}, stored)
    info = await store.update_session("bad", metadata={"k": 2})  # the way to mend it
    assert (info.metadata, info.unreadable_metadata) == ({"k": 2}, None)
    # Metadata within the rule reads as it is, however written: escapes, many containers
    # (but not deep), a float and an int past 64 bits.
    for good in ({"k": "é\x01"}, {"k": [[]] * 300}, {"k": 0.25, "n": -(2**70)}, {}):
        for text in (json.dumps(good), json.dumps(good, ensure_ascii=False)):
            await set_metadata(store, "bad", text)
            stored = await store.session("bad")
            assert (stored.metadata, stored.unreadable_metadata) == (good, None)  # type: ignore[union-attr]


async def test_unreadable_timings_of_tool_and_model_calls_read_as_unknown(store: Store) -> None:
    await converse_with_timings(store, "s")
    await spoil_timings(store, "s")
    sqlite = store.backend.dialect == "sqlite"

    [tool_call] = await store.tool_calls(session_id="s")
    assert tool_call.duration_ms is None
    assert (tool_call.started_at is None, tool_call.completed_at is None) == (sqlite, sqlite)
    [model_call] = await store.model_responses(session_id="s")
    assert model_call.latency_ms is None
    assert (model_call.started_at is None, model_call.completed_at is None) == (sqlite, sqlite)
    assert model_call.usage == Usage(1, 2, 3, 5)  # the rest of the row is read
    [stats] = await store.tool_stats()
    assert (stats.tool_name, stats.calls, stats.max_ms) == ("lookup", 1, None)
    assert [c.id for c in await store.slowest_tool_calls()] in ([], [tool_call.id])
    view = await store.path_view("s")  # the viewer's window of a branch
    assert view.tool_calls[view.runs[0].id] == [tool_call]
    [run] = json.loads(await store.export("s", "json"))["runs"]
    assert run["tool_calls"][0]["duration_ms"] is None
    assert run["model_responses"][0]["latency_ms"] is None
    assert "lookup" in await store.export("s", "markdown")
    assert len((await store.export("s", "jsonl")).splitlines()) == 4


async def test_copy_reports_a_session_it_cannot_carry_exactly_and_copies_the_rest(
    store: Store, tmp_path: Path
) -> None:
    await bad_rows(store)
    async with Store.open(str(tmp_path / "copy.db")) as target:
        summary = await copy(store, target)
        failed = {"meta"} | ({"timed"} if store.backend.dialect == "sqlite" else set())
        assert set(summary.failed) == failed
        assert "metadata is not a JSON object" in summary.failed["meta"]
        if "timed" in failed:  # text that is no time: NaN is copied as it is
            assert "that is not a time ('yesterday')" in summary.failed["timed"]
        copied = {info.session_id for info in await target.sessions()}
        assert copied == {"good", "timed"} - failed
        assert await target.get_items("good") == await store.get_items("good")


# ---------------------------------------------------------------------------------------------
# The CLI and the viewer, on each target backend


def _write_bad_rows(target: str) -> str:
    async def go() -> str:
        async with Store.open(target) as store:
            await bad_rows(store)
            return store.backend.dialect

    return asyncio.run(go())


def test_cli_lists_exports_and_copies_around_bad_rows(
    cli_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    dialect = _write_bad_rows(cli_target)
    listed = cli("--db", cli_target, "sessions").stdout
    assert all(name in listed for name in ("good", "meta", "timed"))
    sessions = json.loads(cli("--db", cli_target, "sessions", "--json").stdout)["sessions"]
    assert {s["session_id"]: s["unreadable_metadata"] for s in sessions} == {
        "good": None,
        "meta": "not json" if dialect == "sqlite" else "[1]",
        "timed": None,
    }
    for fmt in ("jsonl", "json", "markdown"):
        assert "timed" in cli("--db", cli_target, "export", "-f", fmt).stdout
    result = cli("copy", cli_target, str(tmp_path / "copy.db"), code=1)
    assert "session 'meta' was not copied: its metadata is not a JSON object" in result.stderr
    copied = json.loads(cli("--db", str(tmp_path / "copy.db"), "sessions", "--json").stdout)
    assert "good" in {s["session_id"] for s in copied["sessions"]}


def test_viewer_lists_and_shows_sessions_with_bad_rows(cli_target: str) -> None:
    _write_bad_rows(cli_target)
    with TestClient(create_app(cli_target), base_url="http://127.0.0.1") as viewer:
        listing = viewer.get("/sessions")
        assert listing.status_code == 200
        assert all(f"/sessions/{name}" in listing.text for name in ("good", "meta", "timed"))
        meta = viewer.get("/sessions/meta")
        assert meta.status_code == 200
        assert "not a JSON object, as stored" in meta.text
        assert viewer.get("/sessions/timed").status_code == 200


async def test_a_span_row_written_by_hand_is_read_around_not_fatal(store: Store) -> None:
    """Spans whose data is nested past the parser's depth, or whose times and duration are no
    time and no number (SQL by hand, or a SpanRecord stored unchecked), list with those
    fields unknown: spans(), slowest_spans() and error_spans() keep working."""
    await store.add_items("s", [user("q"), assistant("a")])
    [run] = await store.runs("s")
    deep = "[" * 5000 + "]" * 5000
    await store._record_spans(
        "s",
        [
            span_record(store, run.id, 0),
            span_record(store, run.id, 1, data=deep, error="boom"),
            span_record(store, run.id, 2, duration_ms=float("nan")),
        ],
    )
    if store.backend.dialect == "sqlite":  # its columns take text: a time that is no time
        await sql(store, "UPDATE spans SET started_at = 'yesterday' WHERE span_id = 'span_2'")
    spans = {span.span_id: span for span in await store.spans(session_id="s")}
    assert set(spans) == {"span_0", "span_1", "span_2"}
    assert spans["span_0"].data == {"n": 0}
    assert spans["span_1"].data == {}
    assert spans["span_2"].duration_ms is None
    if store.backend.dialect == "sqlite":
        assert spans["span_2"].started_at is None
    slowest = await store.slowest_spans(session_id="s")
    assert {span.span_id for span in slowest} <= {"span_0", "span_1", "span_2"}
    assert [span.span_id for span in await store.error_spans(session_id="s")] == ["span_1"]

"""An export of every session, imported into an empty store, is the database it came from
(issue 16): every table, every column, compared through the order of ids (tests/richdb.py),
on every backend, for JSONL and JSON. Then: what a hostile export's new fields do.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from builders import grow_an_older_branch_later, newer_rows_in_earlier_runs, orders
from richdb import assert_rich, build_rich, dump
from support import Interrupted, cli, failing_after
from turnstore import InvalidOperationError, Store
from turnstore.formats.rows import ExactSession, ExportedRun, exact_session
from turnstore.importers import import_source, merge_session
from turnstore.importers.exports import ExportSource


@pytest.fixture(scope="module")
def rich_export(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The rich database (a SQLite file), its tables and its exports in both formats."""
    directory = tmp_path_factory.mktemp("rich")
    source = str(directory / "source.db")

    async def build() -> dict[str, list[dict[str, Any]]]:
        async with Store.open(source) as store:
            await build_rich(store)
            return await dump(store)

    tables = asyncio.run(build())
    assert_rich(tables)
    files = {}
    for fmt in ("jsonl", "json"):
        files[fmt] = directory / f"all.{fmt}"
        cli("export", "-f", fmt, "-o", str(files[fmt]), "--db", source)
    return {"source": source, "tables": tables, "files": files}


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_an_export_imports_as_the_database_it_came_from(
    rich_export: dict[str, Any], new_target: Any, fmt: str
) -> None:
    target = new_target()
    summary = json.loads(
        cli("import", str(rich_export["files"][fmt]), "--db", target, "--json").stdout
    )
    assert (summary["new_sessions"], summary["skipped"], summary["skipped_sessions"]) == (7, 0, 0)

    async def check() -> None:
        async with Store.open(target) as imported:
            assert await dump(imported) == rich_export["tables"]
            async with Store.open(rich_export["source"]) as source:
                for info in (await source.sessions(limit=100)).sessions:
                    sid = info.session_id
                    assert await imported.get_items(sid) == await source.get_items(sid)

    asyncio.run(check())
    # A second import adds nothing (the stored sessions are merged, as before).
    again = json.loads(
        cli("import", str(rich_export["files"][fmt]), "--db", target, "--json").stdout
    )
    assert (again["new_sessions"], again["runs"], again["items"]) == (0, 0, 0)


# ---------------------------------------------------------------------------------------------
# Hostile exports: the new fields checked as the database stores them


def _document(rich_export: dict[str, Any], session_id: str) -> dict[str, Any]:
    documents = json.loads(rich_export["files"]["json"].read_text())
    document: dict[str, Any] = next(
        d for d in documents if d["session"]["session_id"] == session_id
    )
    return document


def _exact(document: dict[str, Any]) -> ExactSession:
    places = {run["id"]: index for index, run in enumerate(document["runs"])}
    runs = [
        ExportedRun(run["id"], places.get(run["parent_id"]), run, run["items"])
        for run in document["runs"]
    ]
    return exact_session(document["session"]["session_id"], document["session"], runs)


def _runner_run(document: dict[str, Any]) -> dict[str, Any]:
    """The runner session's run with a timed tool call and model calls."""
    run: dict[str, Any] = next(r for r in document["runs"] if r["tool_calls"])
    return run


HOSTILE_FIELDS = [
    (
        "a tool call's duration as text",
        lambda r: r["tool_calls"][0].update(duration_ms="5"),
        "duration_ms must be a finite number",
    ),
    (
        "a negative token count",
        lambda r: r["usage"].update(input_tokens=-1),
        "input_tokens must be an int",
    ),
    (
        "requests beyond INTEGER",
        lambda r: r["model_responses"][0].update(requests=2**40),
        "requests must be an int from 0",
    ),
    (
        "a token count beyond 64 bits",
        lambda r: r["usage"].update(total_tokens=2**63),
        "total_tokens must be an int",
    ),
    (
        "a bool for a number",
        lambda r: r["model_responses"][0].update(latency_ms=True),
        "latency_ms must be a finite number",
    ),
    ("a lone surrogate in the agent", lambda r: r.update(agent_name="a\ud800b"), "lone surrogate"),
    ("NUL in a tool's error", lambda r: r["tool_calls"][0].update(error="x\x00y"), "NUL"),
    (
        "a time that is no time",
        lambda r: r["tool_calls"][0].update(started_at="yesterday"),
        "started_at must be an ISO 8601 time",
    ),
    (
        "a required time missing",
        lambda r: r.update(created_at=None),
        "created_at must be an ISO 8601 time",
    ),
    (
        "a time UTC cannot hold",
        lambda r: r["tool_calls"][0].update(started_at=EARLIEST_EAST),
        "started_at must be an ISO 8601 time",
    ),
    ("an unknown run status", lambda r: r.update(status="exploded"), "not a run status"),
    ("item times that do not match the items", lambda r: r["item_times"].pop(), "item_times holds"),
    ("spans that are not a list", lambda r: r.update(spans={"a": 1}), "spans must be a list"),
    ("a span that is not an object", lambda r: r.update(spans=[1]), "must be an object"),
    (
        "a user message inside a run",
        lambda r: (
            r["items"].append({"role": "user", "content": "?"})
            or r["item_times"].append(r["item_times"][0])
        ),
        "starts a run of its own",
    ),
    ("an empty branch name", lambda r: r.update(branch_name=" "), "branch name"),
    ("a tool call's id as text", lambda r: r["tool_calls"][0].update(id="1"), "id must be an int"),
    (
        "a negative model call id",
        lambda r: r["model_responses"][0].update(id=-1),
        "id must be an int",
    ),
]


@pytest.mark.parametrize(
    ("change", "message"),
    [pytest.param(change, message, id=name) for name, change, message in HOSTILE_FIELDS],
)
def test_a_hostile_value_is_refused_by_name(
    rich_export: dict[str, Any], change: Any, message: str
) -> None:
    document = _document(rich_export, "runner")
    _exact(document)  # as exported: accepted
    change(_runner_run(document))
    with pytest.raises(InvalidOperationError, match=message):
        _exact(document)


def test_a_session_with_a_hostile_value_is_imported_from_its_items(
    rich_export: dict[str, Any], tmp_path: Path
) -> None:
    """The rest of the file is written exactly; that session as a version 1 export would be
    (its tree, items, usage and catalogue), and counted as skipped."""
    documents = json.loads(rich_export["files"]["json"].read_text())
    runner = next(d for d in documents if d["session"]["session_id"] == "runner")
    _runner_run(runner)["tool_calls"][0]["duration_ms"] = "slow"
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(documents))
    target = str(tmp_path / "t.db")
    summary = json.loads(cli("import", str(hostile), "--db", target, "--json").stdout)
    assert (summary["new_sessions"], summary["skipped"]) == (7, 1)

    async def check() -> None:
        async with Store.open(target) as store, Store.open(rich_export["source"]) as source:
            tables, before = await dump(store), rich_export["tables"]
            for table in tables:
                rest = [row for row in tables[table] if row.get("session_id") != "runner"]
                assert rest == [r for r in before[table] if r.get("session_id") != "runner"]
            assert await store.get_items("runner") == await source.get_items("runner")
            assert [call.duration_ms for call in await store.tool_calls(session_id="runner")] == [
                None,
                None,
            ]

    asyncio.run(check())


EARLIEST_EAST = "0001-01-01T00:00:00+14:00"  # before year 1 in UTC


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_times_utc_cannot_hold_are_skipped_not_a_traceback(
    rich_export: dict[str, Any], tmp_path: Path, fmt: str
) -> None:
    # Before: OverflowError tracebacks when such a time was bound as UTC, from a JSONL line's
    # created_at, a run's created_at in JSON, or a version 2 field.
    text = re.sub(
        r'"(created_at|started_at)": "[^"]+"',
        f'"\\1": "{EARLIEST_EAST}"',
        rich_export["files"][fmt].read_text(),
    )
    hostile = tmp_path / f"hostile.{fmt}"
    hostile.write_text(text)
    # Each session is imported from its items, or the line skipped: counted, not a traceback.
    result = cli("import", str(hostile), "--db", str(tmp_path / "t.db"), "--json")
    assert json.loads(result.stdout)["skipped"] > 0


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_link_to_a_run_the_export_lacks_is_left_out_and_counted(
    rich_export: dict[str, Any], tmp_path: Path, fmt: str
) -> None:
    text = rich_export["files"][fmt].read_text()
    # The compacted runs name their compaction run: make them name a run that is not there.
    compacted = [row for row in rich_export["tables"]["runs"] if row["compacted_by"] is not None]
    assert len(compacted) == 3
    if fmt == "jsonl":
        lines = [json.loads(line) for line in text.splitlines()]
        for line in lines:
            if line.get("run", {}).get("compacted_by") is not None:
                line["run"]["compacted_by"] = 99999
        pointed = "".join(json.dumps(line) + "\n" for line in lines)
    else:
        documents = json.loads(text)
        for document in documents:
            for run in document["runs"]:
                if run["compacted_by"] is not None:
                    run["compacted_by"] = 99999
        pointed = json.dumps(documents)
    path = tmp_path / f"pointed.{fmt}"
    path.write_text(pointed)
    target = str(tmp_path / "t.db")
    summary = json.loads(cli("import", str(path), "--db", target, "--json").stdout)
    assert (summary["new_sessions"], summary["skipped"]) == (7, 3)

    async def check() -> None:
        async with Store.open(target) as store:
            runs = (await dump(store))["runs"]
        assert [run["compacted_by"] for run in runs if run["status"] == "compacted"] == [None] * 3
        assert [{**r, "compacted_by": None} for r in runs] == [
            {**r, "compacted_by": None} for r in rich_export["tables"]["runs"]
        ]

    asyncio.run(check())


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_version_1_export_still_imports(
    rich_export: dict[str, Any], tmp_path: Path, fmt: str
) -> None:
    """Without the new fields (an export written before them), items, tree and usage (a
    compaction is not in them: its session reads as its runs were written; nor, in JSONL, the
    head, which is the last run)."""
    text = rich_export["files"][fmt].read_text()
    if fmt == "jsonl":
        lines = [json.loads(line) for line in text.splitlines()]
        old = [{k: v for k, v in line.items() if k not in ("run", "session")} for line in lines]
        text = "".join(json.dumps(line) + "\n" for line in old if "item" in line)
    else:
        documents = json.loads(text)
        for document in documents:
            document["version"] = 1
            for run in document["runs"]:
                for key in ("item_times", "model_responses", "spans", "branch_name"):
                    del run[key]
        text = json.dumps(documents)
    path = tmp_path / f"old.{fmt}"
    path.write_text(text)
    target = str(tmp_path / "t.db")
    summary = json.loads(cli("import", str(path), "--db", target, "--json").stdout)
    assert (summary["new_sessions"], summary["skipped"]) == (6 if fmt == "jsonl" else 7, 0)

    async def check() -> None:
        async with Store.open(target) as store, Store.open(rich_export["source"]) as source:
            for info in (await source.sessions(limit=100)).sessions:
                if info.head_run_id is not None and info.session_id != "compacted":
                    sid = info.session_id
                    assert [items for _, items in await store.tree(sid)] == [
                        items for _, items in await source.tree(sid)
                    ]
                    # Tokens, not cost: a version 1 export carries no model calls, whose
                    # models the cost names (unpriced) where the source has them.
                    assert (await store.usage(session_id=sid, cost=False)) == (
                        await source.usage(session_id=sid, cost=False)
                    )

    asyncio.run(check())


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_version_2_export_imports_without_annotations(
    rich_export: dict[str, Any], tmp_path: Path, fmt: str
) -> None:
    """An export written before annotations (version 2: no run's ``annotations``) imports as
    the database it came from, but for the annotations it does not hold."""
    text = rich_export["files"][fmt].read_text()
    if fmt == "jsonl":
        lines = [json.loads(line) for line in text.splitlines()]
        for line in lines:
            if "run" in line:
                del line["run"]["annotations"]
        text = "".join(json.dumps(line) + "\n" for line in lines)
    else:
        documents = json.loads(text)
        for document in documents:
            document["version"] = 2
            for run in document["runs"]:
                del run["annotations"]
        text = json.dumps(documents)
    path = tmp_path / f"v2.{fmt}"
    path.write_text(text)
    target = str(tmp_path / "t.db")
    summary = json.loads(cli("import", str(path), "--db", target, "--json").stdout)
    assert (summary["new_sessions"], summary["skipped"]) == (7, 0)

    async def check() -> None:
        async with Store.open(target) as store:
            assert await dump(store) == {**rich_export["tables"], "annotations": []}

    asyncio.run(check())


@pytest.mark.parametrize("writes", [1, 2])
async def test_an_import_that_stopped_part_way_resumes_exactly(
    rich_export: dict[str, Any], tmp_path: Path, writes: int
) -> None:
    """A new session is written a few runs a transaction; run again, the import continues from
    the runs the store holds (as copy resumes), and the whole file then reads as the source."""
    source = ExportSource(str(rich_export["files"]["jsonl"]), "jsonl")
    tree = await source.load("tree")
    target = str(tmp_path / "t.db")
    async with Store.open(target) as store:
        with pytest.raises(Interrupted):
            await merge_session(failing_after(store, writes), tree, chunk_items=2)
    async with Store.open(target) as store:
        held = len(await store.tree("tree"))  # every run written (no head yet)
        assert 0 < held < 6
        resumed = await merge_session(store, tree, chunk_items=2)
        assert (resumed.existed, resumed.runs, resumed.present) == (True, 6 - held, 2 * held)
        summary = await import_source(store, source)
        others = len(rich_export["tables"]["runs"]) - 6
        assert (summary.new_sessions, summary.runs, summary.skipped) == (6, others, 0)
        assert await dump(store) == rich_export["tables"]


@pytest.mark.parametrize("chunk_items", [1, 2, 2000])
async def test_an_import_keeps_item_order_when_an_older_branch_grew_later(
    store: Store, tmp_path: Path, chunk_items: int
) -> None:
    """As copy does (test_copy's test of the same name): an item added to an older branch's
    open run after newer runs is newer than their items, so the import never cuts a session
    between them and numbers every item in the source's order, whatever the chunk size. An
    export holds no ids: the items' times say the order."""
    await grow_an_older_branch_later(store)
    path = tmp_path / "p.jsonl"
    path.write_text(await store.export("p", "jsonl", all_branches=True), encoding="utf-8")
    session = await ExportSource(str(path), "jsonl").load("p")
    async with Store.open(":memory:") as target:
        await merge_session(target, session, chunk_items=chunk_items)
        assert await dump(target) == await dump(store)


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
@pytest.mark.parametrize("chunk_items", [1, 2000])
async def test_an_import_keeps_the_order_of_every_table(
    store: Store, tmp_path: Path, fmt: str, chunk_items: int
) -> None:
    """As copy does (test_copy's test of the same name): a tool call, model call or span of an
    older run written after a newer run's keeps its place in its table's id order, whatever
    the chunks; the export carries each one's id in the source, which says that order."""
    await newer_rows_in_earlier_runs(store)
    async with Store.open(":memory:") as target:
        for sid in ("calls", "owner", "responses", "spans"):
            path = tmp_path / f"{sid}.{fmt}"
            path.write_text(await store.export(sid, fmt, all_branches=True), encoding="utf-8")
            session = await ExportSource(str(path), fmt).load(sid)
            assert session.exact is not None
            await merge_session(target, session, chunk_items=chunk_items)
        assert await orders(target) == await orders(store)
        assert await dump(target) == await dump(store)


async def test_an_export_without_ids_of_model_calls_and_spans_still_imports_exactly(
    rich_export: dict[str, Any],
) -> None:
    """Exports written before model calls and spans carried their ids: they keep the export's
    order, run by run (the order of a session whose runs wrote them in run order)."""
    document = _document(rich_export, "runner")
    for run in document["runs"]:
        for row in run["model_responses"] + run["spans"]:
            del row["id"]
    exact = _exact(document)
    assert [row.agent_name for row in exact.chunk.responses] == [
        row["agent_name"] for run in document["runs"] for row in run["model_responses"]
    ]

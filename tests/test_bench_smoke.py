"""The benchmark code itself works: its items are what the SDK writes, its cases run end to
end at a tiny size, and its bookkeeping (targets, tables, JSON) is right. No timing is
asserted here; timings belong to ``bench/``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import _common  # noqa: E402
import _search_corpus  # noqa: E402
import _write_floor  # noqa: E402
import bench_session  # noqa: E402
from turnstore import Store, StructuredSession  # noqa: E402


@pytest.mark.e2e
async def test_sdk_turn_is_what_the_runner_writes() -> None:
    """One Runner turn with a function tool stores exactly the three batches of sdk_turn."""
    from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    turn = _common.make_turn(3, seed=1)
    question = turn[0][0]["content"]
    call, output = turn[1]
    answer = turn[2][0]["content"][0]["text"]

    @function_tool(name_override=call["name"])
    def tool(query: str, limit: int, verbose: bool) -> str:
        """A tool with the generated call's parameters."""
        return str(output["output"])

    batches: list[list[Any]] = []

    class Recording(SQLiteSession):
        async def add_items(self, items: list[Any]) -> None:
            batches.append(json.loads(json.dumps(items)))
            await super().add_items(items)

    model = ScriptedModel(
        [
            [function_call(call["name"], call["arguments"], call_id=call["call_id"])],
            [assistant_message(answer, item_id=turn[2][0]["id"])],
        ]
    )
    session = Recording("shape")
    try:
        await Runner.run(
            Agent(name="a", model=model, tools=[tool]),
            question,
            session=session,
            run_config=RunConfig(tracing_disabled=True),
        )
    finally:
        session.close()
    assert batches == turn
    # Key order too: the SDK fingerprints items with sort_keys, but people diff them as written.
    assert [[list(item) for item in batch] for batch in batches] == [
        [list(item) for item in batch] for batch in turn
    ]


def test_histories_are_whole_deterministic_turns() -> None:
    items = _common.history(40)
    assert len(items) == 40
    assert items == _common.history(40)
    assert items is not _common.history(40)  # a new list each time
    assert [item.get("role") for item in items[:4]] == ["user", None, None, "assistant"]
    assert _common.history(40, seed=1) != items
    with pytest.raises(ValueError, match="multiple of 4"):
        _common.history(41)


def test_split_runs_cuts_before_user_messages() -> None:
    items = _common.history(12)
    runs = _common.split_runs(items)
    assert [len(run) for run in runs] == [4, 4, 4]
    assert _common.split_runs([*items[1:4], *items[4:8]]) == [items[1:4], items[4:8]]


async def test_fill_store_builds_what_add_items_builds(tmp_path: Path) -> None:
    items = _common.history(48)
    bulk, plain = Store.open(tmp_path / "bulk.db"), Store.open(tmp_path / "plain.db")
    try:
        await _common.fill_store(bulk, "s", items[:20], chunk=8)
        await _common.fill_store(bulk, "s", items[20:], chunk=8)
        for turn in range(0, 48, 4):
            await plain.add_items("s", items[turn : turn + 1])
            await plain.add_items("s", items[turn + 1 : turn + 4])
        assert await bulk.get_items("s") == items == await plain.get_items("s")
        bulk_runs, plain_runs = await bulk.runs("s"), await plain.runs("s")
        assert len(bulk_runs) == len(plain_runs) == 12
        assert [r.user_message for r in bulk_runs] == [r.user_message for r in plain_runs]
    finally:
        bulk.close()
        plain.close()


async def test_the_write_floor_stores_what_turnstore_stores(tmp_path: Path) -> None:
    """The floor inserts turnstore's own rows: turnstore reads them back as the turns, each run
    hung below the last, the session's head moved."""
    path = tmp_path / "floor.db"
    turns = _common.make_turns(3, seed=99, start=10**6)
    with Store.open(path) as store:
        await _common.fill_store(store, "bench", _common.history(8))
        await _common.write_turns(StructuredSession(_write_floor.TEMPLATE, store), turns)
    write, close = _write_floor.sqlite_floor_writer(path, "bench")
    try:
        for _ in turns:
            await write()
    finally:
        close()
    with Store.open(path) as store:
        assert await store.get_items("bench") == _common.history(8) + _common.flatten(turns)
        runs = await store.runs("bench")
        assert [run.user_message for run in runs[2:]] == [turn[0][0]["content"] for turn in turns]
        for run in runs:
            assert len(await store.tool_calls(session_id="bench", run_id=run.id)) == 1


async def test_edited_session_has_the_asked_shape(tmp_path: Path) -> None:
    with Store.open(tmp_path / "edited.db") as store:
        session = StructuredSession("s", store)
        await bench_session.build_edited_session(session, runs=30, edits=3, back=5)
        assert len(await session.runs()) == 30
        assert len(await session.get_items()) == 30 * 4
        assert len(await session.branches()) == 3 + 1
        tail = await session.get_items(20)
        assert tail == (await session.get_items())[-20:]


async def test_measure_side_by_side_takes_turns() -> None:
    calls: list[str] = []

    def action(name: str) -> _common.Action:
        async def run() -> None:
            calls.append(name)

        return run

    async def reset() -> None:
        calls.append("reset")

    timings = await _common.measure_side_by_side(
        {"a": action("a"), "b": action("b")}, repeats=3, warmup=1, between={"b": reset}
    )
    assert calls == ["a", "reset", "b", "reset", "b", "a", "a", "reset", "b", "reset", "b", "a"]
    assert all(len(t.samples_ns) == 3 == len(t.cpu_samples_ns) for t in timings.values())


def test_targets_compare_medians() -> None:
    results = _common.Results()
    results.add("case", "ours", _common.Timing([1_000_000, 3_000_000, 2_000_000]))
    results.add("case", "theirs", _common.Timing([4_000_000]))
    ratio = _common.Target("ratio", ("case", "ours"), 0.5, ("case", "theirs")).evaluate(results)
    assert (ratio["value"], ratio["verdict"]) == (0.5, "PASS")
    absolute = _common.Target("abs", ("case", "ours"), 1.0).evaluate(results)
    assert (absolute["value"], absolute["unit"], absolute["verdict"]) == (2.0, "ms", "MISS")
    missing = _common.Target("none", ("other", "ours"), 1.0, ("case", "theirs"))
    assert missing.evaluate(results)["verdict"] == "n/a"
    table = _common.targets_table([ratio, absolute])
    assert "PASS" in table
    assert "MISS" in table


def test_every_case_runs_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--quick`` (shrunk to the tiny config) runs every case and writes its JSON report."""
    config = bench_session.TINY
    monkeypatch.setattr(bench_session, "QUICK", config)
    out = tmp_path / "results" / "quick.json"
    assert bench_session.main(["--quick", "--dir", str(tmp_path), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["config"]["edits"] == config.edits
    measured = {(row["case"], row["contender"]) for row in report["results"]}
    for target in report["targets"]:
        assert target["verdict"] in ("PASS", "MISS"), target
        assert tuple(target["ours"]) in measured
    cases = {case for case, _ in measured}
    assert f"write turn @{config.write_sizes[-1]}" in cases
    assert bench_session.crowded_case(config) in cases
    assert bench_session.edited_case(config) in cases
    assert {bench_session.PER_REQUEST, bench_session.CLOSED_PER_REQUEST} <= cases
    assert {name for _, name in measured} == set(bench_session.CONTENDERS)
    for row in report["results"]:
        assert len(row["samples_ns"]) == len(row["cpu_samples_ns"]) >= 1


@pytest.mark.parametrize("module", sorted(path.stem for path in BENCH.glob("bench_*.py")))
def test_every_benchmark_imports(module: str) -> None:
    """A benchmark that reaches into turnstore's internals breaks when they move; it must
    break here, not when someone next measures."""
    __import__(module)


def test_the_query_benchmark_runs_at_a_small_size(tmp_path: Path) -> None:
    import bench_queries

    out = tmp_path / "queries.json"
    bench_queries.main(
        ["--runs", "2000", "--repeats", "1", "--dir", str(tmp_path), "--json", str(out),
         "--search-runs", "2000", "--search-repeats", "1", "--cache", str(tmp_path)]
    )  # fmt: skip
    figures = json.loads(out.read_text())
    measured = {row["case"] for row in figures["results"]}
    assert {f"search {query}" for query in _search_corpus.expected(2000)} <= measured
    assert {"count quokka", "sessions page 1"} <= measured


def test_the_catalogue_benchmark_runs_at_a_small_size(tmp_path: Path) -> None:
    import bench_catalogue

    out = tmp_path / "catalogue.json"
    args = ["--sessions", "300", "--repeats", "1", "--dir", str(tmp_path), "--json", str(out)]
    bench_catalogue.main(args)
    figures = json.loads(out.read_text())
    measured = {row["case"] for row in figures["results"]}
    assert measured == {case for case, _, _ in bench_catalogue.CASES}


@pytest.mark.e2e
async def test_the_delete_benchmark_runs_at_a_small_size(tmp_path: Path) -> None:
    import bench_deletes

    out = tmp_path / "deletes.json"
    args = ["--runs", "1200", "--repeats", "1", "--no-postgres", "--dir", str(tmp_path)]
    assert await bench_deletes.main([*args, "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["failures"] == {}  # SQLite failed each case from 999 runs on, before
    assert {(row["case"], row["contender"]) for row in figures["results"]} == {
        ("SQLite: clear_session @1,200 runs", "turnstore"),
        ("SQLite: clear_session @1,200 runs", "SQLiteSession"),
        ("SQLite: delete_branch of 1,199 runs", "turnstore"),
        ("SQLite: delete_branch of 1 run @1,200", "turnstore"),
    }


async def test_the_dataset_benchmark_runs_at_a_small_size(tmp_path: Path) -> None:
    import bench_dataset

    out = tmp_path / "dataset.json"
    args = ["--sessions", "3", "--runs", "4", "--repeats", "1", "--no-postgres"]
    assert await bench_dataset.main([*args, "--dir", str(tmp_path), "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert {(row["case"], row["contender"]) for row in figures["results"]} == {
        ("SQLite: 12 runs", "Store.dataset"),
        ("SQLite: 12 runs", "plain SQL"),
    }
    assert [line.split(":")[0] for line in figures["summary"]] == ["SQLite", "SQLite"]


async def test_the_diff_benchmark_runs_at_a_small_size(tmp_path: Path) -> None:
    import bench_diff

    out = tmp_path / "diff.json"
    args = ["--runs", "30", "--repeats", "1", "--no-postgres", "--dir", str(tmp_path)]
    assert await bench_diff.main([*args, "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert {(row["case"], row["contender"]) for row in figures["results"]} == {
        ("SQLite: two branches of 30 runs", "diff"),
        ("SQLite: two branches of 30 runs", "read both"),
    }


@pytest.mark.e2e
def test_the_tracing_benchmark_runs_at_a_small_size(tmp_path: Path) -> None:
    import asyncio

    from agents.tracing import set_tracing_disabled

    import bench_tracing

    try:
        per_turn = asyncio.run(bench_tracing.bench(1, 2, tmp_path, lambda message: None))
    finally:
        set_tracing_disabled(True)  # as the suite runs (conftest)
    for clock in ("wall", "cpu"):
        counts = {mode: len(figures) for mode, figures in per_turn[clock].items()}
        assert counts == dict.fromkeys(bench_tracing.MODES, 1)
    table, _ = bench_tracing.report(per_turn)
    assert "cpu   on / off      ratio:" in table


async def test_the_goals_benchmark_runs_at_a_small_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench_goals

    monkeypatch.setattr(bench_session, "QUICK", bench_session.TINY)
    report = await bench_goals.bench(2, [40, 80], tmp_path, None, lambda _: None, quick=True)
    labels = [goal["label"] for goal in report["goals"]]
    assert labels == [goal.label for goal in bench_goals.sqlite_goals([40, 80])]
    assert all(len(goal["wall"]) == 2 for goal in report["goals"])
    assert "SQLite write turn vs the floor @80" in report["table"]


@pytest.mark.e2e
async def test_the_cost_benchmark_runs_at_a_small_size(tmp_path: Path) -> None:
    import bench_cost

    out = tmp_path / "cost.json"
    args = ["--runs", "200", "--repeats", "1", "--no-postgres", "--dir", str(tmp_path)]
    assert await bench_cost.main([*args, "--json", str(out)]) == 0
    cases = {row["case"] for row in json.loads(out.read_text())["results"]}
    assert cases == {f"SQLite: usage by {group}" for group in bench_cost.GROUPS}

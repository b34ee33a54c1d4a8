"""The Postgres benchmark's code works end to end at a tiny size (no timing is asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support import POSTGRES_URL, require_module, require_postgres

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _common
import _roundtrips
import _write_floor
import bench_postgres
from turnstore import Store, StructuredSession

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]


async def test_every_case_runs_for_both_contenders() -> None:
    require_postgres()
    require_module("agents.extensions.memory.sqlalchemy_session")
    config = bench_postgres.TINY
    report = await bench_postgres.run_benchmark(config, POSTGRES_URL, log=lambda _: None)
    cases = {(row["case"], row["contender"]) for row in report["results"]}
    expected = {
        f"get_items() @{config.history_sizes[0]}",
        f"get_items(20) @{config.tail_size}",
        f"write turn @{config.write_size}",
        f"branch mid @{config.branch_runs} runs",
        f"search @{config.branch_runs} runs",
    }
    floor = (f"write turn @{config.write_size}", bench_postgres.FLOOR)
    assert cases == {(case, name) for case in expected for name in bench_postgres.CONTENDERS} | {
        floor
    }
    assert [row["writers"] for row in report["throughput"]] == list(config.writers)
    for row in report["throughput"]:
        assert all(row[name] > 0 for name in bench_postgres.CONTENDERS)
    assert "ratio" in report["ratios_table"]
    assert "vs floor" in report["ratios_table"]
    assert "runs/s" in report["throughput_table"]


async def test_the_write_floor_stores_turnstores_rows_in_one_round_trip() -> None:
    require_postgres()
    contender = bench_postgres.turnstore_contender(POSTGRES_URL, 2)
    db = contender.create("floor-test")
    assert isinstance(db, bench_postgres.PgDatabase)
    turns = _common.make_turns(2, seed=99, start=10**6)
    try:
        await db.add_history("bench", _common.history(8))
        await _common.write_turns(db.session(_write_floor.TEMPLATE), turns)
        write, close = await _write_floor.postgres_floor_writer(db.url, db.schema, "bench")
        try:
            with _roundtrips.counting_round_trips() as counted:
                for _ in turns:
                    await write()
        finally:
            await close()
        assert counted.count == len(turns)  # one pipeline each: one round trip
        store = db.store
        assert isinstance(store, Store)
        items = await StructuredSession("bench", store).get_items()
        assert items == _common.history(8) + _common.flatten(turns)
    finally:
        await db.close()


def test_sqlalchemy_url_uses_the_async_psycopg_driver() -> None:
    to_sqlalchemy = bench_postgres._sqlalchemy_url
    assert to_sqlalchemy("postgresql://u@h:5/d") == "postgresql+psycopg://u@h:5/d"
    assert to_sqlalchemy("postgres://u@h/d") == "postgresql+psycopg://u@h/d"


async def test_the_goals_benchmark_runs_on_postgres(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_postgres()
    require_module("agents.extensions.memory.sqlalchemy_session")
    import bench_goals
    import bench_session

    monkeypatch.setattr(bench_session, "QUICK", bench_session.TINY)
    monkeypatch.setattr(bench_postgres, "QUICK", bench_postgres.TINY)
    report = await bench_goals.bench(1, [40], tmp_path, POSTGRES_URL, lambda _: None, quick=True)
    labels = [goal["label"] for goal in report["goals"]]
    expected = bench_goals.sqlite_goals([40]) + bench_goals.postgres_goals([40])
    assert labels == [goal.label for goal in expected]
    # One round per backend: each ratio is of its own backend's round, never of the other's
    # (both name their contenders "turnstore" and "floor").
    assert all(len(goal["wall"]) == 1 for goal in report["goals"])

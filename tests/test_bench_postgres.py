"""The Postgres benchmark's code works end to end at a tiny size (no timing is asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support import POSTGRES_URL, require_module, require_postgres

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_postgres

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
    assert cases == {(case, name) for case in expected for name in bench_postgres.CONTENDERS}
    assert [row["writers"] for row in report["throughput"]] == list(config.writers)
    for row in report["throughput"]:
        assert all(row[name] > 0 for name in bench_postgres.CONTENDERS)
    assert "ratio" in report["ratios_table"]
    assert "runs/s" in report["throughput_table"]


def test_sqlalchemy_url_uses_the_async_psycopg_driver() -> None:
    to_sqlalchemy = bench_postgres._sqlalchemy_url
    assert to_sqlalchemy("postgresql://u@h:5/d") == "postgresql+psycopg://u@h:5/d"
    assert to_sqlalchemy("postgres://u@h/d") == "postgresql+psycopg://u@h/d"

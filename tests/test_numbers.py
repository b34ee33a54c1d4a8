"""Real numbers (issue 16): durations kept to the microsecond by the API and shown by one rule
(turnstore.domain.units) in the CLI and the viewer alike; one word, "failed", for failed calls."""

from __future__ import annotations

import asyncio

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from builders import assistant, call, output, user
from support import sql, target_sql
from turnstore import Store
from turnstore.cli import app
from turnstore.domain.units import duration_text, elapsed_ms
from turnstore.web import create_app

RAW_MS = 5.400206000103935  # what a perf_counter difference looks like


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        (None, ""),
        (-1.0, ""),
        (float("nan"), ""),
        (0.0, "0 ms"),
        (0.004, "< 0.01 ms"),
        (0.93, "0.93 ms"),
        (1.0, "1 ms"),
        (1.43, "1.4 ms"),
        (2.0, "2 ms"),
        (RAW_MS, "5.4 ms"),
        (27.4, "27 ms"),
        (99.7, "100 ms"),
        (850.2, "850 ms"),
        (2_400.0, "2.4 s"),
        (185_000.0, "3 min 05 s"),
        (3_720_000.0, "1 h 02 min"),
    ],
)
def test_one_rule_shows_every_duration(ms: float | None, shown: str) -> None:
    assert duration_text(ms) == shown


def test_a_measured_duration_is_kept_to_the_microsecond() -> None:
    assert elapsed_ms(10.0, 10.0 + RAW_MS / 1000) == 5.4
    assert elapsed_ms(0.0, 0.0000123456) == 0.012


async def _timed_call(store: Store) -> None:
    await store.add_items(
        "s", [user("q"), call("c1", "lookup"), output("c1", "ok"), assistant("a")]
    )
    await sql(store, f"UPDATE tool_calls SET duration_ms = {RAW_MS}", write=True)


async def test_the_api_returns_durations_to_the_microsecond(store: Store) -> None:
    await _timed_call(store)
    [found] = await store.tool_calls()
    assert found.duration_ms == 5.4
    [stats] = await store.tool_stats()
    assert (stats.mean_ms, stats.p50_ms, stats.max_ms) == (5.4, 5.4, 5.4)


def test_the_cli_and_the_viewer_show_the_same_duration(cli_target: str) -> None:
    async def build() -> None:
        store = Store.open(cli_target)
        try:
            await _timed_call(store)
            await store.add_items("s", [user("q2"), call("c2", "lookup"), output("c2", "x")])
        finally:
            await store.aclose()

    asyncio.run(build())
    target_sql(
        cli_target, "UPDATE tool_calls SET status = 'failed' WHERE call_id = 'c2'", write=True
    )
    result = CliRunner().invoke(app, ["tools", "--db", cli_target], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "5.4 ms" in result.stdout
    header = result.stdout.splitlines()[1:4]
    assert any("failed" in line for line in header), result.stdout
    assert "errors" not in result.stdout
    assert "error rate" not in result.stdout
    store = Store.open(cli_target)
    try:
        page = TestClient(create_app(store), base_url="http://127.0.0.1").get("/tools").text
    finally:
        store.close()
    assert "5.4 ms" in page
    assert "Failed" in page
    assert "Failure rate" in page
    assert "Error rate" not in page

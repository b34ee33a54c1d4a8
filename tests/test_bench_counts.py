"""bench/bench_counts.py works: it counts a write turn's statements and the Python calls of
both threads, and on PostgreSQL the statements and network round trips (no timing is
asserted; the counts belong to ``bench/``). The statement and round-trip counts are held at
most at what they were when counted first (issue 32): they may shrink, not grow."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from support import POSTGRES_URL, require_postgres

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import bench_counts  # noqa: E402


def test_the_count_benchmark_counts_both_threads(tmp_path: Path) -> None:
    rows = dict(asyncio.run(bench_counts.measure(tmp_path, [100], turns=1)))
    # Three add_items calls, each a transaction of its own (BEGIN ... COMMIT) and more: 21
    # statements sent (the input's claim stores its new run's id: no UPDATE of the key), and
    # SQLite's trace reports the tool call's INSERT once more where it enters the tool-errors
    # index trigger (whose WHEN then skips a call without an error).
    assert 6 < rows["write turn @100: statements"] <= 22
    # The worker thread's calls are counted too: the operation's generators run there.
    assert rows["write turn @100: Python calls"] > 100
    # The two-batch form: two transactions (and the trigger's trace, as above).
    assert 4 < rows["write 2-batch turn @100: statements"] <= 17
    assert rows["get_items() @120: Python calls"] > 50
    assert rows["get_items() @120: statements"] <= 3
    assert rows["get_items(20) @120: statements"] <= 3


@pytest.mark.postgres
def test_the_count_benchmark_counts_postgres_round_trips(tmp_path: Path) -> None:
    require_postgres()
    rows = dict(asyncio.run(bench_counts.measure(tmp_path, [100], turns=1, postgres=POSTGRES_URL)))
    # A write turn is three transactions, each at least one round trip (its commit). The
    # tool-call rows find their items by place, so no item insert waits for its id, and a
    # write's claim travels with its lock and head, and with its new run's id, had ahead
    # (one statement more than the 33 first counted, 12 round trips then): two per write.
    assert 3 <= rows["postgres write turn @100: round trips"] <= 6
    assert rows["postgres write turn @100: statements"] <= 34
    assert 2 <= rows["postgres write 2-batch turn @100: round trips"] <= 4
    for read in ("get_items()", "get_items(20)"):
        # Its one query is its last (ops.last): it travels with the ROLLBACK.
        assert rows[f"postgres {read}: round trips"] == 1
        assert rows[f"postgres {read}: statements"] <= 4

"""bench/bench_counts.py works: it counts a write turn's statements and the Python calls of
both threads (no timing is asserted; the counts belong to ``bench/``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import bench_counts  # noqa: E402


def test_the_count_benchmark_counts_both_threads(tmp_path: Path) -> None:
    rows = dict(asyncio.run(bench_counts.measure(tmp_path, [100], turns=1)))
    # Three add_items calls, each a transaction of its own (BEGIN ... COMMIT) and more.
    assert rows["write turn @100: statements"] > 6
    # The worker thread's calls are counted too: the operation's generators run there.
    assert rows["write turn @100: Python calls"] > 100
    # The two-batch form: two transactions.
    assert rows["write 2-batch turn @100: statements"] > 4
    assert rows["get_items() @120: Python calls"] > 50

"""Every SQL example in docs/queries.md runs, on every backend, and finds rows.

The examples name the session ``'user_123'``; here that is the conversation ``build`` writes
with the real ``Runner`` (alice's, with hooks, a failing tool and a handoff), with one edit so
that the tree has a fork.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_queries import build
from turnstore import Store
from turnstore.backends.base import Fetch, Op, Query

pytestmark = pytest.mark.e2e

DOC = Path(__file__).resolve().parent.parent / "docs" / "queries.md"
BLOCKS = re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_doc_has_examples() -> None:
    assert len(BLOCKS) >= 15


@pytest.mark.parametrize("number", range(len(BLOCKS)))
async def test_sql_example_runs(store: Store, backend_name: str, number: int) -> None:
    block = BLOCKS[number]
    first = block.splitlines()[0].strip()
    if first.startswith("-- SQLite") and not backend_name.startswith("sqlite"):
        pytest.skip("a SQLite example")
    if first.startswith("-- PostgreSQL") and backend_name != "postgres":
        pytest.skip("a PostgreSQL example")
    built = await build(store)
    await built["alice"].edit(built["runs1"][1].id, "Which refund rules apply?")
    # The docs' search examples read the index as Store.search leaves it: up to date.
    await store.search("refund")
    statement = block.replace("'user_123'", "'s1'").strip().rstrip(";")

    def op() -> Op[list[tuple[object, ...]]]:
        rows = yield Query(statement, fetch=Fetch.ALL, raw=True)  # as typed: no placeholders
        return list(rows)

    rows = await store.backend.run(op, write=False)
    assert rows, f"example {number} found nothing:\n{block}"

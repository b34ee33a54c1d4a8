"""The opt-in Citus run (tests/citus.py) does what it says: each store's tables are distributed
as docs/scaling.md says, every per-session operation plans as one task, and a write whose
COMMIT reply is lost is settled by its key, not by asking the coordinator.

Skipped unless ``TURNSTORE_TEST_CITUS_URL`` names a Citus coordinator (CI has none: Citus is
in no package registry; build it from its public source, per its README, to run this).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

import citus
from builders import assistant, call, output, user
from querydata import build
from sqlscope import CROSS_SESSION, DISTRIBUTED
from support import POSTGRES_URL, drop_schema, require_module
from turnstore import Store

psycopg = require_module("psycopg")

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        not citus.CITUS_URL,
        reason="TURNSTORE_TEST_CITUS_URL names no Citus coordinator (build Citus per its README)",
    ),
]


@pytest.fixture
async def citus_store() -> AsyncIterator[tuple[Store, str]]:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    store = Store.open(POSTGRES_URL, schema=schema)
    try:
        yield store, schema
    finally:
        await store.aclose()
        drop_schema(schema)


async def test_a_new_schema_is_distributed_as_the_page_says(
    citus_store: tuple[Store, str],
) -> None:
    _, schema = citus_store
    with psycopg.connect(POSTGRES_URL) as conn:
        rows = conn.execute(
            "SELECT c.relname::text, p.partmethod::text, p.colocationid,"
            " column_to_column_name(p.logicalrelid, p.partkey)"
            " FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
            [schema],
        ).fetchall()
    tables = {name: (method, colocation, column) for name, method, colocation, column in rows}
    assert tables.pop("turnstore_schema")[0] == "n"  # a reference table
    assert set(tables) == set(DISTRIBUTED)
    assert {(method, column) for method, _, column in tables.values()} == {("h", "session_id")}
    assert len({colocation for _, colocation, _ in tables.values()}) == 1  # co-located


async def test_every_per_session_operation_is_one_task(citus_store: tuple[Store, str]) -> None:
    store, _ = citus_store
    built = await build(store)
    runs = built["runs1"]
    alice = built["alice"]
    await alice.edit(runs[1].id, "Which refund rules apply?")
    await store.add_items("t", [user("q"), call("c1", "tool"), output("c1", "out")])
    await store.add_items("t", [assistant("a"), user("again")])
    await store.pop_item("t")
    await store.tool_calls(run_id=runs[0].id)
    await store.tool_stats(run_id=runs[0].id)
    await store.model_responses(run_id=runs[0].id)
    await store.tool_calls(session_id="s1", run_id=runs[0].id)
    assert citus.misrouted(CROSS_SESSION.__contains__) == {}
    # The statements the issue found fanning out or refused were planned here.
    assert {"lock_head", "tool_calls_by_run", "tool_stats_by_run", "path_items"} <= set(citus.PLANS)

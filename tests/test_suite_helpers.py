"""The suite's own guards: a test that lacks what it needs skips locally and fails in CI; a
reused PostgreSQL schema is as good as a new one, and a changed one is never reused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import conftest
from builders import assistant, user
from conftest import POSTGRES_URL, require_module, require_postgres, sql
from schemapool import SchemaPool
from turnstore import Store

MISSING = "turnstore_no_such_module"


def test_require_module_returns_an_installed_module() -> None:
    assert require_module("psycopg").__name__ == "psycopg"


def test_a_missing_module_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        require_module(MISSING)


def test_a_missing_module_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING}.*CI=true"):
        require_module(MISSING)


@pytest.fixture(scope="module")
def pool() -> Iterator[SchemaPool]:
    """One pool for the module (it migrates a schema once, to know a fresh one)."""
    require_postgres()
    if conftest.SCHEMAS is None:
        # On Citus a schema's reference table keeps a shard on the coordinator, whose
        # constraint is named by its shard id: no two schemas fingerprint alike there.
        pytest.skip("the opt-in Citus run reuses no schema (conftest.SCHEMAS)")
    pool = SchemaPool(POSTGRES_URL)
    yield pool
    pool.drain()


@pytest.mark.postgres
async def test_a_reused_schema_is_empty_and_numbers_from_one(pool: SchemaPool) -> None:
    schema = pool.take()
    store = Store.open(POSTGRES_URL, schema=schema)
    await store.add_items("s", [user("hi"), assistant("hello")])
    store.close()
    pool.give_back(schema)
    assert pool.take() == schema
    store = Store.open(POSTGRES_URL, schema=schema)
    try:
        assert await sql(store, "SELECT count(*) FROM items") == [(0,)]
        assert await sql(store, "SELECT count(*) FROM sessions") == [(0,)]
        await store.add_items("t", [user("again")])
        assert await sql(store, "SELECT id, session_id FROM items") == [(1, "t")]
    finally:
        store.close()
        pool.give_back(schema)


@pytest.mark.postgres
@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE items ADD COLUMN extra text",
        "CREATE INDEX items_extra ON items (role)",
        "DROP VIEW run_overview",
        "CREATE VIEW mine AS SELECT 1 AS one",
        "ALTER TABLE runs ALTER COLUMN user_message SET DEFAULT 'x'",
        "DELETE FROM turnstore_schema WHERE version = (SELECT max(version) FROM turnstore_schema)",
    ],
)
async def test_a_schema_a_test_changed_is_dropped_not_reused(pool: SchemaPool, change: str) -> None:
    schema = pool.take()
    store = Store.open(POSTGRES_URL, schema=schema)
    await sql(store, change, write=True)
    store.close()
    pool.give_back(schema)
    assert not conftest.target_exists(conftest.postgres_target(schema))

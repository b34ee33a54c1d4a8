"""The suite's own guards: a test that lacks what it needs skips locally and fails in CI; a
reused PostgreSQL schema is as good as a new one, and a changed one is never reused; each test
module reads alone (what tests share lives in helper modules and conftest.py's fixtures)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import support
from builders import assistant, user
from schemapool import SchemaPool
from support import POSTGRES_URL, require_module, require_postgres, sql
from turnstore import Store

MISSING = "turnstore_no_such_module"


def test_require_module_returns_an_installed_module() -> None:
    assert require_module("psycopg").__name__ == "psycopg"


def test_a_missing_module_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        require_module(MISSING)


def test_a_missing_module_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING}.*CI=true"):
        require_module(MISSING)


@pytest.fixture(scope="module")
def pool() -> Iterator[SchemaPool]:
    """One pool for the module (it migrates a schema once, to know a fresh one)."""
    require_postgres()
    if support.SCHEMAS is None:
        # On Citus a schema's reference table keeps a shard on the coordinator, whose
        # constraint is named by its shard id: no two schemas fingerprint alike there.
        pytest.skip("the opt-in Citus run reuses no schema (support.SCHEMAS)")
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
        "GRANT SELECT ON items TO PUBLIC",
        "CREATE FUNCTION mine() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    ],
)
async def test_a_schema_a_test_changed_is_dropped_not_reused(pool: SchemaPool, change: str) -> None:
    # Given back once unchanged first: then it is the stamp that sees the change.
    schema = pool.take()
    Store.open(POSTGRES_URL, schema=schema).close()
    pool.give_back(schema)
    assert pool.take() == schema
    store = Store.open(POSTGRES_URL, schema=schema)
    await sql(store, change, write=True)
    store.close()
    pool.give_back(schema)
    assert not support.target_exists(support.postgres_target(schema))


TESTS = Path(__file__).resolve().parent


def _imported(tree: ast.Module) -> set[str]:
    """The top-level names of the modules a module imports, wherever the import stands."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _sharing_test_modules(directory: Path) -> dict[str, list[str]]:
    """Each module of ``directory`` that imports a test module or conftest, and what it imports."""
    found = {}
    for path in sorted(directory.glob("*.py")):
        wrong = sorted(
            name
            for name in _imported(ast.parse(path.read_text(), str(path)))
            if name == "conftest" or name.startswith("test_")
        )
        if wrong:
            found[path.name] = wrong
    return found


def test_no_module_imports_a_test_module_or_conftest() -> None:
    """A helper or fixture two modules share lives in support.py, builders.py (or another
    helper module) or conftest.py's fixtures, never in a test module: each reads alone."""
    assert _sharing_test_modules(TESTS) == {}


def test_the_check_finds_a_test_module_imported(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("from test_b import helper\n")
    (tmp_path / "test_c.py").write_text("def f():\n    import conftest\n")
    (tmp_path / "helper.py").write_text("import test_d.sub\nfrom support import sql\n")
    assert _sharing_test_modules(tmp_path) == {
        "helper.py": ["test_d"],
        "test_a.py": ["test_b"],
        "test_c.py": ["conftest"],
    }

"""``--schema``: every command that names a database names its PostgreSQL schema with it, as a
URL's ``?schema=NAME`` or ``?options=-csearch_path%3DNAME`` does (docs/cli.md)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from support import POSTGRES_URL, drop_schema, require_module, require_postgres, target_sql

typer_testing = require_module("typer.testing")
from turnstore import Store  # noqa: E402
from turnstore.cli import app  # noqa: E402

runner = typer_testing.CliRunner()


def cli(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.exit_code, result.output)
    return str(result.output)


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(name)


def tables(schema: str) -> list[str]:
    rows = target_sql(
        f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema={schema}",
        "SELECT tablename::text FROM pg_tables WHERE schemaname = {schema} ORDER BY 1",
        schema=schema,
    )
    return [row[0] for row in rows]


@pytest.mark.postgres
def test_migrate_creates_the_tables_in_the_schema_named(schema: str) -> None:
    report = json.loads(cli("migrate", "--db", POSTGRES_URL, "--schema", schema, "--json"))
    assert report["from_version"] is None
    assert "sessions" in tables(schema)
    # The same schema, named before the command, and read by a read-only command.
    listing = json.loads(cli("--schema", schema, "sessions", "--db", POSTGRES_URL, "--json"))
    assert listing["sessions"] == []


@pytest.mark.postgres
def test_a_urls_search_path_option_names_the_schema(schema: str) -> None:
    options = quote(f"-csearch_path={schema}", safe="")
    url = f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}options={options}"
    cli("migrate", "--db", url)
    assert "sessions" in tables(schema)
    # Named again alike by --schema: one name.
    cli("migrate", "--db", url, "--schema", schema)


@pytest.mark.postgres
def test_a_schema_the_url_contradicts_is_a_usage_error(schema: str) -> None:
    url = f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema=other"
    out = cli("migrate", "--db", url, "--schema", schema, code=2)
    assert "--schema" in out
    assert "'other'" in out
    out = cli("migrate", "--db", POSTGRES_URL, "--schema", "pg_catalog", code=2)
    assert "PostgreSQL's own" in out


def test_a_schema_for_sqlite_is_a_usage_error(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    out = cli("migrate", "--db", db, "--schema", "agents", code=2)
    assert "SQLite" in out
    assert not Path(db).exists()


@pytest.fixture
def fallback() -> Iterator[str]:
    """A second schema, where a command that wrongly ignored what it was told would write
    (instead of public, which the tests leave alone)."""
    require_postgres()
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(name)


def in_schema(name: str) -> str:
    return f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema={name}"


def untouched(name: str) -> bool:
    """Whether schema ``name`` holds nothing (asked without creating anything)."""
    return Store.inspect(in_schema(name)).kind == "missing"


@pytest.mark.postgres
def test_an_empty_schema_is_refused_not_dropped(schema: str, fallback: str, tmp_path: Path) -> None:
    # `--schema "$TENANT"` with TENANT unset: before, the command's --schema "" was dropped
    # and the command ran on the URL's schema (or the global --schema's), where prune deletes.
    for args in (
        ("migrate", "--db", in_schema(fallback), "--schema", ""),
        ("--schema", "", "migrate", "--db", in_schema(fallback)),
        ("--schema", fallback, "migrate", "--db", POSTGRES_URL, "--schema", ""),
    ):
        assert "--schema" in cli(*args, code=2)
    assert untouched(fallback)
    assert "SQLite" in cli("migrate", "--db", str(tmp_path / "t.db"), "--schema", "", code=2)
    assert not (tmp_path / "t.db").exists()


def test_an_empty_db_is_refused_not_taken_for_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--db "$DB"` with DB unset: before, it fell back to $TURNSTORE_DB (or ./turnstore.db),
    # another database than the one the operator named.
    other = tmp_path / "other.db"
    monkeypatch.setenv("TURNSTORE_DB", str(other))
    for args in (("migrate", "--db", ""), ("--db", "", "migrate")):
        assert "--db" in cli(*args, code=2)
    assert not other.exists()


@pytest.mark.postgres
def test_copy_refuses_a_schema_or_db_it_would_not_use(
    schema: str, fallback: str, tmp_path: Path
) -> None:
    # Before, `turnstore --schema S copy SOURCE URL` ignored --schema and copied into the
    # URL's schema.
    source = str(tmp_path / "source.db")
    cli("migrate", "--db", source)
    out = cli("--schema", schema, "copy", source, in_schema(fallback), code=2)
    assert "?schema=" in out
    assert untouched(fallback)
    assert untouched(schema)
    out = cli("--db", str(tmp_path / "t.db"), "copy", source, str(tmp_path / "t2.db"), code=2)
    assert "SOURCE" in out
    assert not (tmp_path / "t2.db").exists()

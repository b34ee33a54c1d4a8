"""docs/scaling.md's steps run as written, top to bottom: ``turnstore migrate --schema``, then
the SQL that distributes the tables, then the retention job.

On plain PostgreSQL, Citus's two functions are stand-ins (in the test's schema) that check
what they are given: the table exists, has the distribution column, and is co-located with a
table distributed before it. On a Citus coordinator (``TURNSTORE_TEST_CITUS_URL``,
tests/citus.py) they are Citus's own. Either way, every table turnstore made must be named.
"""

from __future__ import annotations

import re
import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import citus
from support import POSTGRES_URL, drop_schema, require_module, require_postgres

psycopg = require_module("psycopg")
typer_testing = require_module("typer.testing")
from turnstore.cli import app  # noqa: E402

pytestmark = pytest.mark.postgres

DOC = (Path(__file__).resolve().parent.parent / "docs" / "scaling.md").read_text("utf-8")
CITUS_SECTION = DOC[DOC.index("## Many servers: Citus") : DOC.index("## Retention by time")]

# What the stand-ins record; on Citus, pg_dist_partition says the same.
STAND_INS = """
CREATE TEMP TABLE distributed (name regclass);
CREATE FUNCTION create_distributed_table(
    t regclass, col text, colocate_with text DEFAULT 'default') RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t AND attname = col) THEN
        RAISE EXCEPTION '% has no column %', t, col;
    END IF;
    IF colocate_with <> 'default'
       AND NOT EXISTS (SELECT 1 FROM distributed WHERE name = colocate_with::regclass) THEN
        RAISE EXCEPTION '% is co-located with %, not distributed yet', t, colocate_with;
    END IF;
    INSERT INTO distributed VALUES (t);
END $$;
CREATE FUNCTION create_reference_table(t regclass) RETURNS void
LANGUAGE sql AS $$ INSERT INTO distributed VALUES (t) $$;
"""


def statements(block: str) -> list[str]:
    """A psql block's statements, comments dropped."""
    text = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in text.split(";") if s.strip()]


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(name)


def test_the_citus_steps_run_top_to_bottom(schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The doc's steps distribute the tables here, not the Citus run's own hook.
    monkeypatch.setattr(citus, "AUTO_DISTRIBUTE", False)
    (command,) = re.findall(r"^\$ (turnstore migrate .*)$", CITUS_SECTION, re.M)
    args = shlex.split(command)[1:]
    args[args.index("--db") + 1] = POSTGRES_URL
    args[args.index("--schema") + 1] = schema
    result = typer_testing.CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output

    (distribute,) = re.findall(r"```sql\n(.*?)```", CITUS_SECTION, re.S)
    (retention,) = re.findall(r"```sql\n(.*?)```", DOC[DOC.index("## Retention by time") :], re.S)
    steps = statements(distribute)
    assert steps[0] == "SET search_path TO turnstore"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        on_citus = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone()
        conn.execute(f'SET search_path TO "{schema}"')
        if not on_citus:
            conn.execute(STAND_INS)
        for step in [f'SET search_path TO "{schema}"', *steps[1:], *statements(retention)]:
            conn.execute(step)
        named = (
            "SELECT logicalrelid::text FROM pg_dist_partition"
            if on_citus
            else "SELECT name::text FROM distributed"
        )
        distributed = {row[0] for row in conn.execute(named)}
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", [schema]
            )
        }
    assert "sessions" in tables
    assert tables <= distributed, "a table the page does not distribute"


def test_the_cluster_steps_make_every_node_ready() -> None:
    """Before distributing anything, the page builds the cluster: the citus extension created
    on every node (workers too), the coordinator's own address set, and every worker added,
    all in the one database turnstore uses (nodes are registered per database)."""
    (block,) = re.findall(r"```console\n([^`]*?citus_add_node.*?)```", CITUS_SECTION, re.S)
    on: dict[str, list[str]] = {}  # host -> the statements run on it
    databases = set()
    for line in block.splitlines():
        args = shlex.split(line, comments=True)[1:]  # after the prompt
        assert args[0] == "psql", line
        on.setdefault(args[args.index("-h") + 1], []).append(args[args.index("-c") + 1])
        databases.add(args[args.index("-d") + 1])
    added = set(re.findall(r"citus_add_node\('([^']+)'", block))
    (coordinator,) = re.findall(r"citus_set_coordinator_host\('([^']+)'", block)
    assert len(databases) == 1
    assert added
    assert coordinator not in added
    assert set(on) == added | {coordinator}
    assert all("CREATE EXTENSION citus" in statements for statements in on.values())
    assert all(len(on[worker]) == 1 for worker in added)  # nodes are added on the coordinator

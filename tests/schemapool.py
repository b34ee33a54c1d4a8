"""Reuse of the PostgreSQL schemas conformance tests ran in, emptied, instead of a new one each.

Creating turnstore's schema is ~50 statements of DDL, 150-250 ms on the test server, and
dropping it another 30; ~700 tests each did both. A schema a test leaves as turnstore made it
(the same tables, columns, indexes, views, functions, triggers and privileges as a freshly
migrated one: ``fingerprint``) is emptied (its rows deleted, its identity sequences restarted)
and handed to the next test that asks for a fresh database; anything else is dropped as
before. A reused schema is observably a fresh one but for the version found at opening
(``found_version``): tests of creating a schema use names of their own. A schema given back
before is checked by its stamp (which catalogue rows changed), the fingerprint only when that
moved.
"""

from __future__ import annotations

import uuid
from typing import Any

# The catalogue of everything in a schema a test could have changed, as one text (without the
# schema's own name, which definitions repeat).
_FINGERPRINT = """
SELECT coalesce(string_agg(replace(entry, quote_ident(%(name)s) || '.', ''), E'\\n'
                           ORDER BY replace(entry, quote_ident(%(name)s) || '.', '')), '')
FROM (
    SELECT format('%%s %%s %%s %%s', c.relname, c.relkind, c.relacl,
                  (SELECT string_agg(format('%%s:%%s:%%s:%%s', a.attname,
                                            format_type(a.atttypid, a.atttypmod),
                                            a.attnotnull, pg_get_expr(d.adbin, d.adrelid)),
                                     ',' ORDER BY a.attnum)
                   FROM pg_attribute a
                   LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                   WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped))
    FROM pg_class c WHERE c.relnamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('index %%s', pg_get_indexdef(i.indexrelid))
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
    WHERE c.relnamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('view %%s %%s', c.relname, pg_get_viewdef(c.oid))
    FROM pg_class c WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind = 'v'
    UNION ALL
    SELECT format('constraint %%s %%s', conname, pg_get_constraintdef(oid))
    FROM pg_constraint WHERE connamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('function %%s', pg_get_functiondef(oid))
    FROM pg_proc WHERE pronamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('trigger %%s', pg_get_triggerdef(t.oid))
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = %(schema)s::regnamespace AND NOT t.tgisinternal
    UNION ALL
    SELECT format('schema %%s %%s', nspacl, (SELECT max(version) FROM turnstore_schema))
    FROM pg_namespace WHERE oid = %(schema)s::regnamespace
) AS entries(entry)
"""


# Each catalogue row of the schema's objects (those the fingerprint renders) by the transaction
# that wrote it: DDL and GRANT write new row versions, so an unchanged stamp is an unchanged
# schema, read in ~2 ms where rendering every definition takes ~30. A changed stamp (a
# TRUNCATE's new file, a frozen row) only sends the schema to the fingerprint.
_STAMP = """
SELECT md5(string_agg(entry, ',' ORDER BY entry)) FROM (
    SELECT format('c%%s:%%s', oid, xmin) FROM pg_class
    WHERE relnamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('a%%s:%%s:%%s', a.attrelid, a.attnum, a.xmin)
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    WHERE c.relnamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('d%%s:%%s', d.oid, d.xmin)
    FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid
    WHERE c.relnamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('i%%s:%%s', i.indexrelid, i.xmin)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
    WHERE c.relnamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('r%%s:%%s', r.oid, r.xmin)
    FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
    WHERE c.relnamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('k%%s:%%s', oid, xmin) FROM pg_constraint
    WHERE connamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('p%%s:%%s', oid, xmin) FROM pg_proc WHERE pronamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('t%%s:%%s', t.oid, t.xmin)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = %(schema)s::regnamespace
    UNION ALL
    SELECT format('n%%s', xmin) FROM pg_namespace WHERE oid = %(schema)s::regnamespace
    UNION ALL
    SELECT format('v%%s', max(version)) FROM turnstore_schema
) AS entries(entry)
"""


def fingerprint(conn: Any, schema: str) -> str:
    """``schema``'s catalogue as one text (``conn``'s search_path must name it)."""
    row = conn.execute(_FINGERPRINT, {"schema": f'"{schema}"', "name": schema}).fetchone()
    return str(row[0])


class SchemaPool:
    """Emptied turnstore schemas on one server, for tests that want a fresh one."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._free: list[str] = []
        self._fresh: str | None = None  # a freshly migrated schema's fingerprint
        self._stamps: dict[str, str] = {}  # each kept schema's stamp when it was checked

    def take(self) -> str:
        """A schema name for a test: an emptied one if any, else a new name."""
        return self._free.pop() if self._free else f"t_{uuid.uuid4().hex[:12]}"

    def give_back(self, schema: str) -> None:
        """Empty ``schema`` for reuse if it is as turnstore made it, else drop it."""
        import psycopg

        with psycopg.connect(self._url, autocommit=True) as conn:
            try:
                if self._emptied(conn, schema):
                    self._free.append(schema)
                    return
            except psycopg.Error:
                pass  # whatever went wrong, a dropped schema cannot mislead the next test
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def _emptied(self, conn: Any, schema: str) -> bool:
        with conn.transaction():
            conn.execute(f'SET LOCAL search_path TO "{schema}"')
            row = conn.execute(_STAMP, {"schema": f'"{schema}"'}).fetchone()
            stamp = row[0] if row else ""
            if stamp != self._stamps.get(schema):
                if fingerprint(conn, schema) != self._fresh_fingerprint():
                    return False
                self._stamps[schema] = stamp
            # Rows go in any order: no foreign key is checked, no trigger fires.
            conn.execute("SET LOCAL session_replication_role = replica")
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> "
                "'turnstore_schema'",
                [schema],
            ).fetchall()
            # One round trip (the simple protocol takes several statements without parameters).
            conn.execute("; ".join(f'DELETE FROM "{table}"' for (table,) in tables))
            conn.execute(
                "SELECT setval(format('%%I.%%I', schemaname, sequencename), 1, false) "
                "FROM pg_sequences WHERE schemaname = %s",
                [schema],
            )
        return True

    def _fresh_fingerprint(self) -> str:
        if self._fresh is None:
            from turnstore import Store

            schema = f"t_ref_{uuid.uuid4().hex[:8]}"
            Store.open(self._url, schema=schema).close()
            import psycopg

            with psycopg.connect(self._url, autocommit=True) as conn:
                conn.execute(f'SET search_path TO "{schema}"')
                self._fresh = fingerprint(conn, schema)
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        return self._fresh

    def drain(self) -> None:
        """Drop every schema kept for reuse (at the end of the run)."""
        import psycopg

        if self._free:
            with psycopg.connect(self._url, autocommit=True) as conn:
                for schema in self._free:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            self._free.clear()


# The catalogues that creating and dropping schemas leaves dead rows in.
_CHURNED = (
    "pg_class, pg_attribute, pg_attrdef, pg_depend, pg_index, pg_trigger, pg_type, "
    "pg_constraint, pg_statistic, pg_rewrite"
)


def tidy_catalogue(url: str) -> None:
    """Compact the catalogues that test runs bloat, before a run.

    Each run creates and drops hundreds of schemas; on a server without autovacuum (as the
    test server is) their dead rows pile up run after run: pg_attribute at 180 MB for 5,000
    live rows after a few runs, every scan of the catalogue (the fingerprint, the stamp, DDL)
    reading all of it. ``VACUUM FULL`` rewrites them (~1 s); it needs a superuser, and gives
    up after a few seconds' wait for another session's lock: then the run is only slower.
    """
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            conn.execute("SET lock_timeout = '5s'")
            conn.execute(f"VACUUM FULL {_CHURNED}")
    except psycopg.Error:
        pass  # no server (its tests say so), not a superuser, or a lock held: not a test

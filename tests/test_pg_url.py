"""Which schema a ``postgresql://`` URL names (targets.split_schema): parsing alone, no server.

That the store then keeps its tables there is in test_postgres.py.
"""

from __future__ import annotations

import pytest

from turnstore import ConfigurationError
from turnstore.domain.targets import split_schema

URL = "postgresql://me@db.example:5432/app"


@pytest.mark.parametrize(
    ("query", "schema", "kept"),
    [
        ("", "public", ""),
        ("?sslmode=disable", "public", "?sslmode=disable"),
        ("?schema=tenant_a", "tenant_a", ""),
        (
            "?sslmode=disable&schema=tenant_a&application_name=x",
            "tenant_a",
            "?sslmode=disable&application_name=x",
        ),
        ("?schema=My%20Schema", "My Schema", ""),  # verbatim, as schema= is
        ("?schema=%22q%22", '"q"', ""),
        # libpq's options: folded as PostgreSQL folds an unquoted name, unless double-quoted.
        ("?options=-csearch_path%3DTenant_A", "tenant_a", "?options=-csearch_path%3DTenant_A"),
        ("?options=-c%20search_path%3D%22Tenant%5C%20A%22", "Tenant A", None),  # \ escapes a space
        ("?options=--search-path%3Dtenant_a", "tenant_a", None),
        ("?options=-c%20statement_timeout%3D5s%20-c%20search_path%3Dtenant_a", "tenant_a", None),
        ("?options=-csearch_path%3Da%20-csearch_path%3Db", "b", None),  # the last one wins
        # Decoded as libpq decodes: + is a plus sign (in options it is part of the name).
        ("?schema=a+b", "a+b", ""),
        ("?options=-csearch_path%3D%22a+b%22", "a+b", None),
        ("?options=-csearch_path%3Da+-csearch_path%3Db", "a+-csearch_path=b", None),
        ("?options=-csearch_path%3DT%C3%9CR", "tÜr", None),  # the server folds ASCII only
        ("?options=-c%20search_path%3D%22a%2Cb%22", "a,b", None),  # a comma inside quotes
        ("?options=-c%20search_path%3D%22say%5C%20%22%22hi%22%22%22", 'say "hi"', None),
        ("?options=-cstatement_timeout%3D5s", "public", "?options=-cstatement_timeout%3D5s"),
        ("?schema=tenant_a&options=-csearch_path%3Dtenant_a", "tenant_a", None),  # agreeing
    ],
)
def test_the_url_names_the_schema(query: str, schema: str, kept: str | None) -> None:
    url, chosen = split_schema(URL + query, None)
    assert chosen == schema
    assert "schema=" not in url.replace("search_path", "")  # libpq never sees schema=
    if kept is not None:
        assert url == URL + kept


def test_the_keyword_agrees_with_the_url_or_stands_alone() -> None:
    assert split_schema(URL, "kw") == (URL, "kw")
    assert split_schema(URL + "?schema=kw", "kw") == (URL, "kw")
    assert split_schema(URL + "?options=-csearch_path%3Dkw", "kw")[1] == "kw"


@pytest.mark.parametrize(
    ("query", "keyword", "mentions"),
    [
        ("?schema=a", "b", "names schema 'a' but schema='b'"),
        ("?options=-csearch_path%3DA", "A", "names schema 'a' but schema='A'"),
        ("?schema=a&schema=b", None, "names schemas 'a' and 'b'"),
        ("?schema=a&options=-csearch_path%3Db", None, "names schemas 'a' and 'b'"),
        ("?options=-csearch_path%3Da%2Cpublic", None, "several schemas"),
        ("?options=-csearch_path%3D", None, "1 to 63 bytes"),
        ("?schema=", None, "1 to 63 bytes"),
        ("?schema=" + "x" * 64, None, "1 to 63 bytes"),
        ("?schema=" + "é" * 32, None, "1 to 63 bytes"),  # 64 bytes in UTF-8
        ("?schema=a%00b", None, "1 to 63 bytes"),
        # Bytes that are not UTF-8: before, decoded as U+FFFD, and migrate created that schema.
        ("?schema=%ff", None, "not UTF-8"),
        ("?schema=a%c3", None, "not UTF-8"),
        ("?options=-csearch_path%3D%ff", None, "not UTF-8"),
        # Names the server refuses as a search_path are refused here, not guessed at.
        ("?options=-csearch_path%3D%22abc", None, "not a schema name"),
        ("?options=-csearch_path%3Da%22b%22", None, "not a schema name"),
        ("?options=-csearch_path%3D%22a%22%22", None, "not a schema name"),
        ("?options=-c%20search_path%3Dmy%5C%20schema", None, "not a schema name"),
        ("", "", "1 to 63 bytes"),
        ("?schema=information_schema", None, "PostgreSQL's own"),
        ("?schema=pg_catalog", None, "PostgreSQL's own"),
        ("", "pg_toast", "PostgreSQL's own"),
    ],
)
def test_a_schema_named_badly_or_twice_is_refused(
    query: str, keyword: str | None, mentions: str
) -> None:
    with pytest.raises(ConfigurationError, match=mentions.replace("(", r"\(")):
        split_schema(URL + query, keyword)

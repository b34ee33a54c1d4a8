"""``turnstore usage`` and ``turnstore search`` with ``--branch NAME|RUN`` (with ``--session``),
and ``usage --details`` (issue 30: the CLI's side of ``Store.usage(branch=, details=True)`` and
``Store.search(branch=)``), on every backend; the refusals of a wrong branch."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

from builders import assistant, run_in_new_loop, user
from support import cli
from turnstore import Store, Usage
from turnstore.domain.model import TOKEN_FIELDS


def _usage(n: int) -> Usage:
    return Usage(1, 10 * n, n, 11 * n, n, 0, {"cached_tokens": n, "cache_write_tokens": 2 * n})


@pytest.fixture
def forked(cli_target: str) -> tuple[str, int, int, int]:
    """Session s: q1 → q2 (branch "main") and q1 → q2 edited (branch "alt", the head);
    session t: one run, its own branch "other". The target and s's run ids."""

    async def fill() -> tuple[int, int, int]:
        async with Store.open(cli_target) as store:
            first = await store.add_items("s", [user("q1 apples"), assistant("a1")], _usage(1))
            second = await store.add_items("s", [user("q2 pears"), assistant("a2")], _usage(2))
            assert first is not None
            assert second is not None
            await store.name_branch("s", second, "main")
            edited = await store.fork("s", second, "q2 plums")
            await store.add_items("s", [assistant("a2 plums")], _usage(4))
            await store.name_branch("s", edited.id, "alt")
            other = await store.add_items("t", [user("q1 pears")], Usage(1, 5, 5, 10, 0, 0))
            assert other is not None
            await store.name_branch("t", other, "other")
            return first, second, edited.id

    return (cli_target, *run_in_new_loop(fill))


def _json(target: str, *args: str) -> Any:
    return json.loads(cli("--db", target, *args, "--json").stdout)


def _error(result: Any) -> str:
    """The one line a refused command prints, with nothing on stdout."""
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return str(lines[0])


def test_usage_of_a_branch(forked: tuple[str, int, int, int]) -> None:
    db, first, second, edited = forked

    def totals(*args: str) -> list[tuple[str, int]]:
        return [(r["key"], r["usage"]["total_tokens"]) for r in _json(db, "usage", *args)]

    assert totals("--session", "s") == [("s", 11 * 7)]
    assert totals("--session", "s", "--branch", "main") == [("s", 11 * 3)]
    assert totals("--session", "s", "--branch", "alt") == [("s", 11 * 5)]
    assert totals("--session", "s", "--branch", str(second)) == [("s", 11 * 3)]
    assert totals("--session", "s", "--branch", "alt", "--by", "run") == [
        (str(first), 11),
        (str(edited), 44),
    ]
    text = cli("--db", db, "usage", "--session", "s", "--branch", "main").stdout
    assert "33" in text
    assert "77" not in text


def test_search_of_a_branch(forked: tuple[str, int, int, int]) -> None:
    db, first, second, edited = forked

    def found(query: str, *args: str) -> list[int]:
        return sorted(hit["run_id"] for hit in _json(db, "search", query, *args))

    assert len(found("pears")) == 2  # s's q2 and t's
    assert found("pears", "--session", "s", "--branch", "main") == [second]
    assert found("pears", "--session", "s", "--branch", "alt") == []
    assert found("plums", "--session", "s", "--branch", "alt") == [edited, edited]
    assert found("apples", "--session", "s", "--branch", str(edited)) == [first]
    count = _json(db, "search", "plums", "--session", "s", "--branch", "main", "--count")
    assert count == [{"matches": 0, "exact": True}]
    text = cli("--db", db, "search", "plums", "--session", "s", "--branch", "alt").stdout
    assert "plums" in text


@pytest.mark.parametrize("command", [["usage"], ["search", "pears"], ["search", "x", "--count"]])
def test_a_wrong_branch_is_refused(forked: tuple[str, int, int, int], command: list[str]) -> None:
    db, first, _, _ = forked
    alone = cli("--db", db, *command, "--branch", "main", code=2)
    assert "--session" in _error(alone)
    unknown = cli("--db", db, *command, "--session", "s", "--branch", "nowhere", code=1)
    assert "no branch named 'nowhere'" in _error(unknown)
    missing = cli("--db", db, *command, "--session", "s", "--branch", str(10**9), code=1)
    assert str(10**9) in _error(missing)
    # A branch of another session, by its name or by one of its runs.
    named = cli("--db", db, *command, "--session", "s", "--branch", "other", code=1)
    assert "no branch named 'other'" in _error(named)
    theirs = cli("--db", db, *command, "--session", "t", "--branch", str(first), code=1)
    assert "another session" in _error(theirs)


def test_usage_details(forked: tuple[str, int, int, int]) -> None:
    db = forked[0]
    rows = {r["key"]: r["usage"] for r in _json(db, "usage", "--details")}
    assert rows["s"]["input_tokens_details"] == {"cache_write_tokens": 14, "cached_tokens": 7}
    # Every record has every field any group reports: 0 where its group has none.
    assert rows["t"]["input_tokens_details"] == {"cache_write_tokens": 0, "cached_tokens": 0}
    assert _json(db, "usage")[0]["usage"]["input_tokens_details"] == {}  # not asked for
    lines = cli("--db", db, "usage", "--details", "--ndjson").stdout.splitlines()
    assert [json.loads(line)["usage"] for line in lines] == [rows["s"], rows["t"]]
    for flag, delimiter in (("--csv", ","), ("--tsv", "\t")):
        out = cli("--db", db, "usage", "--details", "--session", "s", "--branch", "alt", flag)
        table = list(csv.DictReader(io.StringIO(out.stdout), delimiter=delimiter))
        assert [
            (r["usage.input_tokens_details.cached_tokens"], r["usage.total_tokens"]) for r in table
        ] == [("5", "55")]
        assert "usage.input_tokens_details" not in table[0]
        assert list(table[0]) == [  # the row's own order, the details spread where they are
            "key",
            "runs",
            *(f"usage.{name}" for name in TOKEN_FIELDS),
            "usage.input_tokens_details.cache_write_tokens",
            "usage.input_tokens_details.cached_tokens",
            "cost",
            "unpriced",
            "annotation",
        ]
    by_run = cli("--db", db, "usage", "--details", "--session", "s", "--by", "run").stdout
    assert "token details" in by_run
    assert "cache_write_tokens" in by_run
    assert max(len(line) for line in by_run.splitlines()) <= 80
    assert "token details" not in cli("--db", db, "usage").stdout
    bare = cli("--db", db, "usage", "--details", "--session", "t").stdout
    assert "No token details." in bare

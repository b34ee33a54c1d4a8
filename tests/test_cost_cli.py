"""``turnstore usage`` with cost (issue 28), on every backend: the cost column, ? for an unknown
cost, --sort, --prices FILE (layered over the shipped table, refused when hostile), and the
``cost`` field of --json, --ndjson and --csv."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from builders import run_in_new_loop
from costdata import ALICE, JULY, M_OLD, MAY, PRICE_ENTRIES, build
from support import cli
from turnstore import Store


@pytest.fixture
def target(cli_target: str) -> str:
    async def fill() -> None:
        async with Store.open(cli_target) as store:
            await build(store)

    run_in_new_loop(fill)
    return cli_target


@pytest.fixture
def prices_file(tmp_path: Path) -> str:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"as_of": "2025-08-01", "prices": PRICE_ENTRIES}))
    return str(path)


def usage_json(target: str, *args: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(cli("--db", target, "usage", *args, "--json").stdout)
    return rows


def test_cost_unknown_without_prices(target: str) -> None:
    # The shipped table prices none of the test's models: every cost with tokens is unknown.
    rows = {row["key"]: row["cost"] for row in usage_json(target)}
    assert rows == {"a": None, "b": None, "c": None, "d": 0.0}
    text = cli("--db", target, "usage").stdout
    assert "cost" in text
    assert "?" in text
    assert "no price for 'm-new', 'm-old', 'mystery-model'" in text
    assert "tokens with no model recorded" in text


def test_cost_with_a_price_file(target: str, prices_file: str) -> None:
    rows = {row["key"]: row["cost"] for row in usage_json(target, "--prices", prices_file)}
    assert rows == {"a": pytest.approx(ALICE), "b": None, "c": None, "d": 0.0}
    by_run = usage_json(target, "--by", "run", "--prices", prices_file)
    # The price change of m-new applies by date: May's run dearer than July's.
    assert [row["cost"] for row in by_run[:3]] == [
        pytest.approx(M_OLD),
        pytest.approx(MAY),
        pytest.approx(JULY),
    ]
    text = cli("--db", target, "usage", "--prices", prices_file, "--by", "user").stdout
    assert f"${ALICE:,.2f}" in text
    assert "no price for 'mystery-model'" in text


def test_sort(target: str, prices_file: str) -> None:
    def keys(*args: str) -> list[str | None]:
        return [row["key"] for row in usage_json(target, "--prices", prices_file, *args)]

    assert keys() == ["a", "b", "c", "d"]
    assert keys("--sort", "key") == ["a", "b", "c", "d"]
    assert keys("--sort", "tokens") == ["a", "b", "c", "d"]
    assert keys("--sort", "runs")[0] == "a"
    # Largest cost first, an unknown cost last.
    assert keys("--sort", "cost") == ["a", "d", "b", "c"]
    assert keys("--by", "run", "--sort", "cost")[:3] == ["2", "1", "3"]
    table = cli("--db", target, "usage", "--prices", prices_file, "--sort", "cost").stdout
    assert table.index(" a ") < table.index(" d ") < table.index(" b ")
    cli("--db", target, "usage", "--sort", "price", code=2)


def test_cost_in_ndjson_and_csv(target: str, prices_file: str) -> None:
    lines = cli("--db", target, "usage", "--prices", prices_file, "--ndjson").stdout.splitlines()
    assert [json.loads(line)["cost"] for line in lines][1:] == [None, None, 0.0]
    text = cli("--db", target, "usage", "--prices", prices_file, "--csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert "cost" in rows[0]
    assert float(rows[0]["cost"]) == pytest.approx(ALICE)
    assert rows[1]["cost"] == ""


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"model": "x", "input": -1, "output": 1}]', "from 0"),
        ('[{"model": "x", "input": NaN, "output": 1}]', "NaN"),
        ('[{"model": "x", "input": "1", "output": 1}]', "must be a number"),
        ("not json", "not valid JSON"),
        (
            '[{"model": "x", "input": 1, "output": 1},'
            ' {"model": "x", "input": 2, "output": 2, "valid_from": "2025-01-01"}]',
            "overlap",
        ),
    ],
)
def test_hostile_price_file_refused(
    target: str, tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = cli("--db", target, "usage", "--prices", str(path), code=1)
    assert message in result.stderr
    missing = cli("--db", target, "usage", "--prices", str(tmp_path / "none.json"), code=1)
    assert "cannot read the price file" in missing.stderr


def test_usage_with_annotations(target: str, prices_file: str) -> None:
    """``usage --annotation NAME``: cost and the thumbs beside it, per user and per session,
    in the table, --json and --csv; ``annotations --by user|session``."""
    for run, value in ((1, "0"), (2, "1"), (4, "0"), (4, "0")):
        cli("--db", target, "annotate", str(run), "thumbs", "--value", value)
    rows = usage_json(target, "--by", "user", "--prices", prices_file, "--annotation", "thumbs")
    assert [
        (row["key"], row["cost"] is not None, row["annotation"]["count"], row["annotation"]["mean"])
        for row in rows
    ] == [(None, False, 0, None), ("alice", True, 2, 0.5), ("bob", False, 2, 0.0)]
    assert all(row["annotation"] is None for row in usage_json(target))
    text = cli("--db", target, "usage", "--annotation", "thumbs", "--sort", "runs").stdout
    assert "thumbs" in text
    assert "mean" in text
    assert "0.25" in text  # the total's mean: one up of four
    table = csv.DictReader(
        io.StringIO(cli("--db", target, "usage", "--annotation", "thumbs", "--csv").stdout)
    )
    assert [(row["key"], row["annotation.count"], row["annotation.mean"]) for row in table] == [
        ("a", "2", "0.5"),
        ("b", "2", "0.0"),
        ("c", "0", ""),
        ("d", "0", ""),
    ]
    by_user = json.loads(cli("--db", target, "annotations", "--by", "user", "--json").stdout)
    assert [(row["key"], row["count"]) for row in by_user] == [("alice", 2), ("bob", 2)]
    text = cli("--db", target, "annotations", "--by", "session").stdout
    assert " a " in text
    assert " b " in text
    refused = cli("--db", target, "usage", "--annotation", "a\x01\x00b", code=1)
    assert "annotation" in refused.stderr
    # --sort annotation: the mean of --annotation NAME, largest first, no mean last.
    ordered = usage_json(target, "--by", "user", "--annotation", "thumbs", "--sort", "annotation")
    assert [row["key"] for row in ordered] == ["alice", "bob", None]
    refused = cli("--db", target, "usage", "--sort", "annotation", code=2)
    assert "--annotation" in refused.stderr
    refused = cli("--db", target, "usage", "--annotation", "", code=1)
    assert "an annotation's name must be non-empty" in refused.stderr

"""The command line's annotations (issue 28): ``annotate``, ``annotations`` (filters,
statistics, --json/--csv), annotations in ``show`` and the ``runs --annotated`` filter, on
every backend; refusals as one line, nothing stored."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from typing import Any

from builders import converse
from support import cli
from turnstore import Store, StructuredSession


def _conversation(db: str) -> list[int]:
    async def write() -> list[int]:
        async with Store.open(db) as store:
            return await converse(StructuredSession("s", store), "q1", "q2")

    return asyncio.run(write())


def _json(*args: str) -> Any:
    return json.loads(cli(*args, "--json").stdout)


def test_annotate_then_list_show_and_filter_runs(cli_target: str) -> None:
    db = cli_target
    first, second = _conversation(db)
    made = _json(
        "annotate", str(second), "thumbs", "--value", "0", "--comment", "wrong", "--source",
        "user", "--db", db,
    )  # fmt: skip
    assert (made["run_id"], made["name"], made["value"], made["source"]) == (
        second,
        "thumbs",
        0,
        "user",
    )
    said = cli("annotate", str(first), "label", "--label", "good", "--author", "ann", "--db", db)
    assert f"on run {first} of session s" in said.stdout
    listed = _json("annotations", "--db", db)
    assert [(n["run_id"], n["name"], n["label"]) for n in listed] == [
        (second, "thumbs", None),
        (first, "label", "good"),
    ]
    assert [
        n["run_id"] for n in _json("annotations", "--name", "thumbs", "--max", "0", "--db", db)
    ] == [second]
    assert _json("annotations", "--run", str(first), "--source", "user", "--db", db) == []
    rows = list(csv.DictReader(io.StringIO(cli("annotations", "--csv", "--db", db).stdout)))
    assert [row["name"] for row in rows] == ["thumbs", "label"]
    stats = _json("annotations", "--by", "branch", "--session", "s", "--name", "thumbs", "--db", db)
    assert [(s["key"], s["count"], s["mean"]) for s in stats] == [(f"#{first}", 1, 0.0)]
    shown = _json("show", "s", "--db", db)
    assert [[n["name"] for n in run["annotations"]] for run in shown["runs"]] == [
        ["label"],
        ["thumbs"],
    ]
    text = cli("show", "s", "--db", db).stdout
    assert "✎ thumbs 0 “wrong”  user" in text
    down = _json("runs", "s", "--annotated", "thumbs=0", "--db", db)
    assert [run["id"] for run in down] == [second]
    assert [run["id"] for run in _json("runs", "s", "--annotated", "label=good", "--db", db)] == [
        first
    ]
    assert _json("runs", "s", "--annotated", "thumbs=1", "--db", db) == []
    # runs --json and --ndjson carry each run's annotations, as show does (of the runs shown).
    listed = _json("runs", "s", "--db", db)
    assert [[n["name"] for n in run["annotations"]] for run in listed] == [["label"], ["thumbs"]]
    assert listed[1]["annotations"][0]["comment"] == "wrong"
    lines = cli("runs", "s", "--ndjson", "--last", "1", "--db", db).stdout.splitlines()
    assert [[n["name"] for n in json.loads(line)["annotations"]] for line in lines] == [["thumbs"]]
    rows = list(csv.DictReader(io.StringIO(cli("runs", "s", "--csv", "--db", db).stdout)))
    assert [[n["name"] for n in json.loads(row["annotations"])] for row in rows] == [
        ["label"],
        ["thumbs"],
    ]  # a JSON cell, as every list is in CSV


def test_bad_annotations_are_one_line_and_store_nothing(cli_target: str) -> None:
    db = cli_target
    (run,) = _conversation(db)[:1]
    for args, message in (
        (["--value", "nan"], "finite number"),
        (["--comment", "x" * 70_000], "at most 65536"),
        (["--label", " padded"], "leading or trailing"),
    ):
        failed = cli("annotate", str(run), "thumbs", *args, "--db", db, code=1)
        assert message in failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1
    assert "no run 999999" in cli("annotate", "999999", "thumbs", "--db", db, code=1).stderr
    cli("annotate", str(run), "thumbs", "--source", "boss", "--db", db, code=2)
    assert _json("annotations", "--db", db) == []

"""The command line's ``dataset`` (issue 28): runs selected by the filters ``runs`` and
``annotations`` have, written as JSONL in each format to a file or stdout, on every backend;
refusals as one line, nothing written."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from builders import assistant, call, converse, output, run_items, user
from support import cli
from turnstore import Store, StructuredSession

FAILED_OUTPUT = "An error occurred while running the tool. Please try again."


def _database(db: str) -> list[int]:
    """Session "s" (alice): q1, q2 (thumbs-down), q3 (labelled hallucinated); session "t":
    a run whose tool failed. Returns s's run ids, then t's."""

    async def write() -> list[int]:
        async with Store.open(db) as store:
            await store.update_session("s", user_id="alice")
            runs = await converse(StructuredSession("s", store), "q1", "q2", "q3")
            await store.annotate(runs[1], "thumbs", value=0, source="user")
            await store.annotate(runs[2], "review", label="hallucinated")
            failing = [user("refund"), call("c1", "refund"), output("c1", FAILED_OUTPUT)]
            other = await store.add_items("t", [*failing, assistant("sorry", item_id="m-t")])
            assert other is not None
            return [*runs, other]

    return asyncio.run(write())


def _lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def test_dataset_writes_each_format_of_the_runs_selected(cli_target: str, tmp_path: Path) -> None:
    db = cli_target
    _, q2, _, failed = _database(db)
    target = tmp_path / "down.jsonl"
    said = cli("dataset", "--annotated", "thumbs=0", "-o", str(target), "--db", db)
    assert f"Wrote 1 record (turnstore) to {target}." in said.stdout
    (record,) = _lines(target)
    assert (record["session_id"], record["run_id"], record["user_id"]) == ("s", q2, "alice")
    assert record["input"] == [*run_items("q1"), user("q2")]
    assert record["output"] == run_items("q2")[1:]
    assert [a["name"] for a in record["annotations"]] == ["thumbs"]

    chat = tmp_path / "chat.jsonl"
    cli("dataset", "--session", "s", "-f", "openai-chat", "-o", str(chat), "--db", db)
    assert [len(line["messages"]) for line in _lines(chat)] == [4, 8, 12]
    assert _lines(chat)[0]["messages"][-1] == {"role": "assistant", "content": "answer q1"}

    plain = tmp_path / "plain.jsonl"
    cli("dataset", "--failed", "--format", "plain", "-o", str(plain), "--db", db)
    (row,) = _lines(plain)
    assert (row["input"], row["output"], row["metadata"]["run_id"]) == ("refund", "sorry", failed)
    assert row["metadata"]["tool_calls"][0]["failed"] is True


def test_dataset_filters(cli_target: str, tmp_path: Path) -> None:
    db = cli_target
    q1, q2, q3, failed = _database(db)
    target = tmp_path / "d.jsonl"

    def ids(*args: str) -> list[int]:
        cli("dataset", *args, "-o", str(target), "--db", db)
        return [line["run_id"] for line in _lines(target)]

    assert ids() == [q1, q2, q3, failed]
    assert ids("--annotated", "review=hallucinated") == [q3]
    assert ids("--annotated", "thumbs", "--source", "user") == [q2]
    assert ids("--label", "hallucinated") == [q3]
    assert ids("--annotated", "thumbs", "--max", "0.5") == [q2]
    assert ids("--annotated", "thumbs", "--min", "1") == []
    assert ids("--user", "alice", "--limit", "2") == [q1, q2]
    assert ids("--search", "refund") == [failed]
    assert ids("--since", "1d") == [q1, q2, q3, failed]
    assert ids("--until", "1d") == []
    assert ids("--agent", "nobody") == []
    assert ids("--model", "nobody") == []


def test_dataset_to_stdout(cli_target: str) -> None:
    db = cli_target
    _database(db)
    shown = cli("dataset", "--session", "t", "-f", "plain", "-o", "-", "--db", db)
    (line,) = shown.stdout.splitlines()
    assert json.loads(line)["input"] == "refund"
    cli("dataset", "-o", "-", "--json", "--db", db, code=1)


def test_dataset_json_summary(cli_target: str, tmp_path: Path) -> None:
    db = cli_target
    _database(db)
    target = tmp_path / "d.jsonl"
    summary = json.loads(
        cli("dataset", "--user", "alice", "-o", str(target), "--json", "--db", db).stdout
    )
    assert summary == {"records": 3, "format": "turnstore", "output": str(target)}


def test_bad_filters_are_one_line_and_write_nothing(cli_target: str, tmp_path: Path) -> None:
    db = cli_target
    _database(db)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "d.jsonl"
    for args, message in (
        (["--min", "nan"], "finite"),
        (["--since", "yesterday"], "--since takes"),
        (["--agent", "a\x00b"], "NUL"),
        (["--annotated", "thumbs=0", "--max", "1"], "leave out --max"),
        (["--annotated", "review=bad", "--label", "x"], "leave out --label"),
    ):
        failed = cli("dataset", *args, "-o", str(target), "--db", db, code=1)
        assert message in failed.stderr, failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1
    cli("dataset", "-f", "csv", "-o", str(target), "--db", db, code=2)
    cli("dataset", "--db", db, code=2)  # -o is required
    assert list(out.iterdir()) == []


def test_dataset_refuses_to_overwrite_the_database(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    _database(db)
    failed = cli("dataset", "-o", db, "--db", db, code=1)
    assert "would destroy the database" in failed.stderr
    assert Path(db).stat().st_size > 0

"""The CLI on a long session (issue 16): ``runs`` and ``show`` print a window of it (--last,
--from, --limit; a page by default on a terminal, everything to a pipe), and branches by name
(``branches``, ``branch name``, ``branch switch``)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from typer.testing import CliRunner

from builders import assistant, user
from turnstore import NewRun, Store
from turnstore.cli import app, reading

RUNS = 120
runner = CliRunner()


def cli(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


@pytest.fixture
def long_db(cli_target: str) -> tuple[str, list[int]]:
    """A session of RUNS runs in one line, with a regenerated last-but-one run."""

    async def build() -> list[int]:
        async with Store.open(cli_target) as store:
            ids = await store.add_runs(
                "long",
                [
                    NewRun([user(f"question {n}"), assistant(f"answer {n}")], parent=n - 1)
                    if n
                    else NewRun([user("question 0"), assistant("answer 0")])
                    for n in range(RUNS)
                ],
                head=RUNS - 1,
            )
            fork = await store.fork("long", ids[-2], "question again")
            await store.move_head("long", ids[-1], to_parent=False)
            return [*ids, fork.id]

    return cli_target, asyncio.run(build())


def questions(text: str) -> list[int]:
    """The numbered questions ``text`` shows, in order."""
    return [int(number) for number in re.findall(r"question (\d+)", text)]


def tree(shown: str) -> str:
    """``show``'s output below its title (which holds the session's title: question 0)."""
    return shown.split("\n", 1)[1]


def test_runs_last_from_and_limit(long_db: tuple[str, list[int]]) -> None:
    db, ids = long_db
    every = json.loads(cli("runs", "long", "--db", db, "--json").stdout)
    assert [run["id"] for run in every] == ids[:RUNS]  # a script gets every run
    last = json.loads(cli("runs", "long", "--last", "5", "--db", db, "--json").stdout)
    assert [run["id"] for run in last] == ids[RUNS - 5 : RUNS]
    page = json.loads(
        cli("runs", "long", "--from", str(ids[10]), "--limit", "3", "--db", db, "--json").stdout
    )
    assert [run["id"] for run in page] == ids[10:13]
    text = cli("runs", "long", "--from", str(ids[10]), "--limit", "3", "--db", db).stdout
    assert questions(text) == [10, 11, 12]
    footer = " ".join(text.split())
    assert f"runs 11–13 of {RUNS} (the active path)" in footer
    assert f"earlier: --from {ids[0]} --limit 50" in footer
    assert f"later: --from {ids[13]}" in footer
    assert cli("runs", "long", "--last", "0", "--db", db).stdout.count("question") == RUNS


def test_a_terminal_gets_the_newest_page(
    long_db: tuple[str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _ = long_db
    assert questions(cli("runs", "long", "--db", db).stdout) == list(range(RUNS))  # a pipe
    monkeypatch.setattr(reading, "on_terminal", lambda: True)
    text = cli("runs", "long", "--db", db).stdout
    assert questions(text) == list(range(RUNS - 50, RUNS))
    assert f"runs {RUNS - 49}–{RUNS} of {RUNS}" in " ".join(text.split())
    assert questions(cli("runs", "long", "--last", "0", "--db", db).stdout) == list(range(RUNS))
    shown = tree(cli("show", "long", "--db", db).stdout)
    assert set(questions(shown)) == set(range(RUNS - 50, RUNS))
    assert "question again" in shown  # the branch that forks inside the window


def test_show_a_window_of_the_tree(long_db: tuple[str, list[int]]) -> None:
    db, ids = long_db
    whole = cli("show", "long", "--last", "3", "--db", db).stdout
    text = tree(whole)
    assert questions(text) == [RUNS - 3, RUNS - 2, RUNS - 1]
    assert "question again" in text
    assert f"{RUNS + 1} runs · 2 branches" in whole  # the title counts the whole session
    top = tree(cli("show", "long", "--from", str(ids[0]), "--limit", "2", "--db", db).stdout)
    assert questions(top) == [0, 1]
    assert "question again" not in top
    data = json.loads(cli("show", "long", "--last", "3", "--db", db, "--json").stdout)
    assert {run["user_message"] for run in data["runs"]} == {
        f"question {RUNS - 3}",
        f"question {RUNS - 2}",
        f"question {RUNS - 1}",
        "question again",  # a sibling of the window's second run
    }
    assert len(json.loads(cli("show", "long", "--db", db, "--json").stdout)["runs"]) == RUNS + 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--last", "3", "--from", "1"], "give one"),
        (["--limit", "3"], "give --from too"),
        (["--from", "999999"], "run 999999 is not in the active path"),
        (["--last", "-1"], ""),
    ],
)
def test_window_options_are_checked(
    long_db: tuple[str, list[int]], args: list[str], message: str
) -> None:
    db, _ = long_db
    for command in ("runs", "show"):
        result = cli(command, "long", *args, "--db", db, code=result_code(message))
        assert message in result.stderr
        assert "Traceback" not in result.output


def result_code(message: str) -> int:
    return 1 if message else 2  # Typer refuses a value out of range itself


def test_branches_name_unname_and_switch(long_db: tuple[str, list[int]]) -> None:
    db, ids = long_db
    listed = json.loads(cli("branches", "long", "--db", db, "--json").stdout)
    assert [(b["fork_run_id"], b["forks_from"], b["origin"], b["active"]) for b in listed] == [
        (ids[0], None, None, True),
        (ids[-1], ids[RUNS - 3], "edit", False),
    ]
    cli("branches", "long", "--name", "main", "--db", db)  # the head's branch
    cli("branches", "long", "--name", "retry", "--run", str(ids[-1]), "--db", db)
    text = cli("branches", "long", "--db", db).stdout
    assert "main" in text
    assert "retry" in text
    assert "edit" in text
    switched = json.loads(cli("branches", "long", "--switch", "retry", "--db", db, "--json").stdout)
    assert [b["active"] for b in switched] == [False, True]
    taken = cli("branches", "long", "--name", "main", "--run", str(ids[-1]), "--db", db, code=1)
    assert "already has a branch named 'main'" in taken.stderr
    cli("branches", "long", "--unname", "--run", str(ids[-1]), "--db", db)
    names = [b["name"] for b in json.loads(cli("branches", "long", "--db", db, "--json").stdout)]
    assert names == ["main", None]
    missing = cli("branches", "long", "--switch", "retry", "--db", db, code=1)
    assert "no branch named 'retry'" in missing.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--name", "x", "--switch", "y"],
        ["--unname"],
        ["--run", "1"],
        ["--name", "bad\nname"],
        ["--name", " padded"],
    ],
)
def test_branch_changes_are_checked(long_db: tuple[str, list[int]], args: list[str]) -> None:
    db, _ = long_db
    before = cli("branches", "long", "--db", db, "--json").stdout
    result = runner.invoke(app, ["branches", "long", *args, "--db", db])
    assert result.exit_code in (1, 2), result.output
    assert result.stderr.startswith("error: ")
    assert cli("branches", "long", "--db", db, "--json").stdout == before

"""The CLI's turn numbers and branch deletion (issue 30): ``runs`` and ``show`` print each run's
turn, ``branches`` its counts, ``--run turn:N`` addresses a run, ``--delete`` refuses the
active branch without ``--force``."""

from __future__ import annotations

import asyncio
import json

from builders import converse
from support import cli
from turnstore import Store, StructuredSession


async def _forked(target: str) -> list[int]:
    """q1 → q2 → q3 named "main", and "alt" (q2 asked again) the active branch."""
    async with Store.open(target) as store:
        session = StructuredSession("s", store)
        runs = await converse(session, "q1", "q2", "q3")
        await session.name_branch("main")
        await session.create_branch_from_turn(2, "alt")
        await converse(session, "q2 again")
        return runs


def test_runs_and_show_print_turn_numbers(cli_target: str) -> None:
    asyncio.run(_forked(cli_target))
    table = cli("runs", "s", "--db", cli_target).stdout
    assert "turn" in table
    shown = cli("show", "s", "--db", cli_target).stdout
    assert "turn 1 ·" in shown
    assert "turn 3 ·" in shown


def test_branches_counts_turn_addresses_and_delete(cli_target: str) -> None:
    runs = asyncio.run(_forked(cli_target))
    found = json.loads(cli("branches", "s", "--db", cli_target, "--json").stdout)
    counts = {b["name"]: (b["message_count"], b["user_turns"], b["active"]) for b in found}
    assert counts == {"main": (12, 3, False), "alt": (8, 2, True)}
    assert "user turns" in cli("branches", "s", "--db", cli_target).stdout
    cli("branches", "s", "--db", cli_target, "--name", "first", "--run", "turn:3@main")
    names = [
        b["name"] for b in json.loads(cli("branches", "s", "--db", cli_target, "--json").stdout)
    ]
    assert names == ["first", "alt"]
    refused = cli("branches", "s", "--db", cli_target, "--delete", "alt", code=1)
    assert "force=True" in refused.stderr
    cli("branches", "s", "--db", cli_target, "--delete", "alt", "--force")
    left = json.loads(cli("branches", "s", "--db", cli_target, "--json").stdout)
    assert [(b["name"], b["leaf_run_id"], b["active"]) for b in left] == [
        ("first", runs[2], True)  # the head moved up to run 1, on the branch left
    ]
    cli("branches", "s", "--db", cli_target, "--force", code=2)  # --force goes with --delete
    cli("branches", "s", "--db", cli_target, "--name", "x", "--run", "turn:x", code=1)

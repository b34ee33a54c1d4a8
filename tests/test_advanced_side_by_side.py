"""AdvancedSQLiteSession and StructuredSession driven through one script of branch operations
and analytics (issue 30, acceptance): what each returns is compared, turnstore on every
backend. Where they differ by design (README, "Coming from AdvancedSQLiteSession") the script
says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import RunContextWrapper
from agents.extensions.memory import AdvancedSQLiteSession
from agents.usage import InputTokensDetails, OutputTokensDetails
from agents.usage import Usage as SDKUsage

from builders import run_items
from turnstore import Store, StructuredSession


def _usage(n: int) -> SDKUsage:
    return SDKUsage(
        requests=n,
        input_tokens=100 * n,
        output_tokens=10 * n,
        total_tokens=110 * n,
        input_tokens_details=InputTokensDetails(cached_tokens=n, cache_write_tokens=3 * n),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=2 * n),
    )


class Both:
    """The SDK's session and ours, each given every step of the script."""

    def __init__(self, sdk: AdvancedSQLiteSession, ours: StructuredSession) -> None:
        self.sdk, self.ours = sdk, ours

    async def turn(self, tag: str, n: int) -> None:
        """One Runner call: its items, then its usage (the SDK's store_run_usage)."""
        wrapper: RunContextWrapper[None] = RunContextWrapper(context=None)
        wrapper.usage = _usage(n)
        await self.sdk.add_items(run_items(tag))  # type: ignore[arg-type]
        await self.sdk.store_run_usage(_Result(wrapper))  # type: ignore[arg-type]
        await self.ours.add_items(run_items(tag), wrapper=wrapper)

    async def same(self, method: str, *args: Any, **branch: Any) -> Any:
        """Call ``method`` on both (``branch_id=`` for the SDK, ``branch=`` for ours) and
        check that they agree; return the result."""
        sdk_kwargs = {"branch_id": branch["branch"]} if branch else {}
        theirs = await getattr(self.sdk, method)(*args, **sdk_kwargs)
        mine = await getattr(self.ours, method)(*args, **branch)
        assert _comparable(mine) == _comparable(theirs), method
        return mine


class _Result:
    def __init__(self, wrapper: RunContextWrapper[None]) -> None:
        self.context_wrapper = wrapper


def _comparable(value: Any) -> Any:
    """Without what each stores its own way: timestamps, and the token details' fields that
    were not reported (null in the SDK's, left out in turnstore's: tests/test_token_details.py
    compares the details themselves)."""
    if isinstance(value, list):
        return [_comparable(each) for each in value]
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k != "timestamp" and v is not None}
    return value


async def _branches(both: Both) -> None:
    theirs = {
        b["branch_id"]: (b["message_count"], b["user_turns"], b["is_current"])
        for b in await both.sdk.list_branches()
    }
    mine = {
        b.name: (b.message_count, b.user_turns, b.active) for b in await both.ours.list_branches()
    }
    assert mine == theirs


async def test_one_script_two_sessions(store: Store, tmp_path: Path) -> None:
    sdk = AdvancedSQLiteSession(
        session_id="s", db_path=str(tmp_path / "sdk.db"), create_tables=True
    )
    both = Both(sdk, StructuredSession("s", store))
    await both.turn("q1 Paris", 1)
    await both.ours.name_branch("main")  # the SDK's first branch is "main" by itself
    await both.turn("q2 Lyon", 2)
    await both.turn("q3 Nice", 3)
    await _branches(both)
    await both.same("get_items")
    await both.same("get_conversation_turns")
    await both.same("get_tool_usage")
    await both.same("get_turn_usage")
    await both.same("get_turn_usage", 2)
    await both.same("get_session_usage")

    assert await both.same("create_branch_from_turn", 2, "alt") == "alt"
    await both.same("get_items")  # turn 1 only: turn 2 is to be asked again
    await both.turn("q2 Marseille", 4)
    await both.turn("q3 Lille", 5)
    await _branches(both)
    for branch in ("main", "alt"):
        await both.same("get_items", branch=branch)
        await both.same("get_items", 3, branch=branch)
        await both.same("get_conversation_turns", branch=branch)
        await both.same("find_turns_by_content", "q2", branch=branch)
        await both.same("get_tool_usage", branch=branch)
        await both.same("get_session_usage", branch=branch)
        await both.same("get_turn_usage", branch=branch)
        await both.same("get_turn_usage", 3, branch=branch)
    await both.same("get_session_usage")
    await both.same("find_turns_by_content", "LILLE")

    assert await both.same("create_branch_from_content", "lille", "again") == "again"
    await both.same("get_items")  # turns 1-2 of "alt"
    await both.turn("q3 Nice again", 6)
    await _branches(both)
    await both.same("get_items", branch="again")
    await both.same("get_items", branch="alt")

    for side in (sdk, both.ours):
        with pytest.raises(ValueError, match="force=True"):  # the current branch
            await side.delete_branch("again")
    for side in (sdk, both.ours):
        await side.switch_to_branch("main")
    await both.same("get_items")
    await both.same("delete_branch", "alt")
    await _branches(both)
    await both.same("get_items", branch="again")
    # By design: "alt"'s turn 2 is the beginning of "again" too, so deleting "alt" keeps it
    # and its usage; the SDK copied its messages to "again" but not its usage, which goes.
    theirs = await sdk.get_session_usage()
    mine = await both.ours.get_session_usage()
    assert theirs is not None
    assert mine == {**theirs, "requests": theirs["requests"] + 4, "total_turns": 5} | {
        key: theirs[key] + value
        for key, value in (("input_tokens", 400), ("output_tokens", 40), ("total_tokens", 440))
    }
    sdk.close()

"""The sessions list across the whole store (issue 29), on every backend: each filter keeps the
sessions it names, every order sorts the whole catalogue (not a page), pages carry the filters
and the order on, and the count agrees with the listing."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from catalogue import BIG_TOKENS, build_catalogue
from support import cli
from turnstore import FIRST_PAGE, InvalidOperationError, PageCursor, Store

NAMED = {"old-big", "weather", "refund", "idle"}


async def _ids(store: Store, **kwargs: Any) -> list[str]:
    """Every session the listing keeps, page after page (3 a page), in its order."""
    ids: list[str] = []
    after: PageCursor = FIRST_PAGE
    while True:
        page = await store.sessions(limit=3, after=after, **kwargs)
        ids += [info.session_id for info in page]
        if page.next_cursor is None:
            return ids
        after = page.next_cursor


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"user_id": "bob"}, {"refund", "idle"}),
        ({"agent_name": "planner"}, {"old-big"}),
        ({"model": "gpt-small"}, {"weather", "refund", "filler-00", "filler-01"}),
        ({"run_status": "failed"}, {"refund"}),
        ({"failed_tool_calls": True}, {"weather"}),
        ({"metadata": {"tier": "gold"}}, {"refund"}),
        ({"title": "PARIS"}, {"weather"}),
        ({"title": "order 4"}, {"refund"}),
        ({"model": "gpt-small", "user_id": "alice"}, {"weather"}),
        ({"model": "gpt-small", "failed_tool_calls": True, "user_id": "bob"}, set()),
        ({"agent_name": "nobody"}, set()),
    ],
)
async def test_each_filter_keeps_what_it_names(
    store: Store, filters: dict[str, Any], expected: set[str]
) -> None:
    await build_catalogue(store, fillers=2)
    for order in ("created_at", "tokens", "failures"):
        ids = await _ids(store, order_by=order, **filters)
        assert set(ids) == expected, order
        assert len(ids) == len(expected), (order, ids)
    assert await store.count_sessions(**filters) == len(expected)


async def test_time_filters_and_the_count(store: Store) -> None:
    times = await build_catalogue(store, fillers=2)
    assert await store.count_sessions() == 6
    later = await _ids(store, created_after=times["between"])
    assert set(later) == {"weather", "refund", "idle", "filler-00", "filler-01"}
    assert await store.count_sessions(created_after=times["between"]) == 5
    assert await _ids(store, created_before=times["between"]) == ["old-big"]
    future = datetime.now(timezone.utc) + timedelta(days=1)
    assert await store.count_sessions(updated_after=future) == 0


async def test_orders_sort_the_whole_catalogue(store: Store) -> None:
    await build_catalogue(store, fillers=4)
    # The oldest session has the most tokens, runs and tool calls: first, although a page by
    # creation time would not hold it.
    newest = await store.sessions(limit=3)
    assert "old-big" not in [info.session_id for info in newest]
    by_tokens = await _ids(store, order_by="tokens")
    assert by_tokens[:3] == ["old-big", "refund", "weather"]
    assert by_tokens[-1] == "idle"  # no runs: zero tokens, last
    summaries = await store.session_summaries(by_tokens)
    tokens = [summaries[sid].total_tokens for sid in by_tokens]
    assert tokens == sorted(tokens, reverse=True)
    assert tokens[0] == BIG_TOKENS
    assert (await _ids(store, order_by="runs"))[0] == "old-big"
    assert (await _ids(store, order_by="tool_calls"))[:2] == ["old-big", "weather"]
    assert (await _ids(store, order_by="failures"))[:2] == ["weather", "refund"]
    for order in ("runs", "tool_calls", "failures", "updated_at"):
        ids = await _ids(store, order_by=order)
        assert sorted(ids) == sorted(by_tokens), order  # every session once
    assert await _ids(store, order_by="tokens", user_id="bob") == ["refund", "idle"]


async def test_ties_are_broken_by_session_id_across_pages(store: Store) -> None:
    await build_catalogue(store, fillers=7)  # seven sessions of 10 tokens each
    ids = await _ids(store, order_by="tokens", model="gpt-small")
    assert ids[:2] == ["refund", "weather"]
    assert ids[2:] == sorted(ids[2:], reverse=True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"run_status": "broken"},
        {"order_by": "cost"},
        {"failed_tool_calls": "yes"},
        {"title": "\x00"},
        {"model": "\ud800"},
        {"agent_name": 3},
        {"metadata": {"k": [1]}},
    ],
)
async def test_bad_filters_are_refused(store: Store, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidOperationError):
        await store.sessions(**kwargs)
    filters = {name: value for name, value in kwargs.items() if name != "order_by"}
    if filters:
        with pytest.raises(InvalidOperationError):
            await store.count_sessions(**filters)


async def test_a_cursor_keeps_its_order(store: Store) -> None:
    await build_catalogue(store, fillers=2)
    page = await store.sessions(order_by="tokens", limit=2)
    assert page.next_cursor is not None
    with pytest.raises(InvalidOperationError, match="ordered by tokens"):
        await store.sessions(order_by="runs", after=page.next_cursor)
    with pytest.raises(InvalidOperationError, match="not a sessions cursor"):
        await store.sessions(order_by="tokens", after=page.next_cursor[:-4] + "AAAA")


def _cli_json(*args: str) -> Any:
    return json.loads(cli(*args, "--json").stdout)


def test_the_cli_filters_sorts_and_counts(cli_target: str) -> None:
    async def write() -> None:
        async with Store.open(cli_target) as store:
            await build_catalogue(store, fillers=3)

    asyncio.run(write())
    db = ("--db", cli_target)
    listed = _cli_json("sessions", "--sort", "tokens", "--limit", "2", *db)
    assert [s["session_id"] for s in listed["sessions"]] == ["old-big", "refund"]
    assert listed["total"] == 7
    assert listed["sessions"][0]["total_tokens"] == BIG_TOKENS
    rest = _cli_json("sessions", "--sort", "tokens", "--after", listed["next_cursor"], *db)
    assert rest["sessions"][0]["session_id"] == "weather"
    for args, expected in [
        (("--failed-tools",), ["weather"]),
        (("--status", "failed"), ["refund"]),
        (("--agent", "planner"), ["old-big"]),
        (("--model", "gpt-small", "--user", "bob"), ["refund"]),
        (("--title", "paris"), ["weather"]),
        (("--meta", "tier=gold"), ["refund"]),
        (("--since", "7d", "--until", "2999-01-01", "--user", "carol"), ["old-big"]),
        (("--since", "2999-01-01"), []),
    ]:
        found = _cli_json("sessions", *args, *db)
        assert [s["session_id"] for s in found["sessions"]] == expected, args
        assert found["total"] == len(expected)
    text = cli("sessions", "--sort", "failures", "--limit", "2", *db).stdout
    assert "2 of 7 sessions" in text
    cli("sessions", "--sort", "cost", *db, code=2)
    assert "--since" in cli("sessions", "--since", "yesterday", *db, code=1).stderr

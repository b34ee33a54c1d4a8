"""Search across the whole store (issue 29): a bounded count of matches, later pages, filters
(user, agent, model, time range, session), and tool calls' errors found, on every backend."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from builders import SDK_TOOL_ERROR, call, failed_call_with_span_error, output, user
from support import sql
from turnstore import (
    ArgumentTypeError,
    InvalidOperationError,
    SearchCount,
    SessionPatch,
    Store,
)
from turnstore.core.search import COUNT_BOUND


async def test_a_tool_error_from_its_span_is_found(store: Store) -> None:
    item_id = await failed_call_with_span_error(store, "s", "ZeroDivisionError: division by zero")
    [call_row] = await store.tool_calls(session_id="s")
    assert (call_row.status, call_row.error) == ("failed", "ZeroDivisionError: division by zero")
    [hit] = await store.search("division")
    assert (hit.item_id, hit.type, hit.tool_error) == (item_id, "function_call_output", True)
    assert hit.snippet == "ZeroDivisionError: division by zero"
    assert [hit.snippet[a:b] for a, b in hit.matches] == ["division"]
    assert [h.item_id for h in await store.search("zerodivisionerror", order="recent")] == [item_id]
    assert await store.search_count("division") == SearchCount(1, exact=True)
    # The output's own text is found as before, once, as text.
    [text_hit] = await store.search("occurred")
    assert (text_hit.item_id, text_hit.tool_error) == (item_id, False)
    # Filters apply to error hits as to the others; a deleted session's errors go with it.
    assert await store.search("division", session_id="other") == []
    assert await store.search("division", types=["message"]) == []
    await store.delete_session("s")
    assert await store.search("division") == []
    assert await store.search_count("division") == SearchCount(0, exact=True)


async def test_an_mcp_error_is_found(store: Store) -> None:
    mcp = {
        "type": "mcp_call",
        "id": "mcp_1",
        "name": "lookup",
        "server_label": "crm",
        "arguments": "{}",
        "output": None,
        "error": "upstream refused the connection",
        "status": "failed",
    }
    await store.add_items("s", [user("look it up"), mcp])
    [hit] = await store.search("refused")
    assert (hit.type, hit.tool_error) == ("mcp_call", True)


async def test_an_error_that_is_the_output_is_found_once(store: Store) -> None:
    # Releases before 0.23 put the exception's text into the output: error and output agree.
    text = SDK_TOOL_ERROR + " Error: KeyError missing"
    await store.add_items("s", [user("q"), call("c1", "f"), output("c1", text)])
    [hit] = await store.search("KeyError")
    assert not hit.tool_error
    assert await store.search_count("KeyError") == SearchCount(1, exact=True)


async def test_count_and_pages(store: Store) -> None:
    for n in range(7):
        await store.add_items(f"s{n}", [user(f"common word {n}")])
    first = await store.search("common", limit=3, order="recent")
    second = await store.search("common", limit=3, offset=3, order="recent")
    last = await store.search("common", limit=3, offset=6, order="recent")
    everything = await store.search("common", limit=10, order="recent")
    assert [h.item_id for h in first + second + last] == [h.item_id for h in everything]
    assert len(everything) == 7
    assert await store.search("common", offset=7) == []
    ranked = await store.search("common", limit=10)
    paged = [h for n in range(0, 7, 2) for h in await store.search("common", limit=2, offset=n)]
    assert [h.item_id for h in paged] == [h.item_id for h in ranked]
    assert await store.search_count("common") == SearchCount(7, exact=True)
    assert str(await store.search_count("common")) == "7"
    assert await store.search_count("common -word") == SearchCount(0, exact=True)
    assert await store.search_count("") == SearchCount(0, exact=True)


async def test_a_count_stops_at_its_bound(store: Store) -> None:
    batch = [user(f"plenty {n}") for n in range(COUNT_BOUND + 5)]
    # One user message starts one run: COUNT_BOUND + 5 runs in one write.
    await store.add_items("s", batch)
    count = await store.search_count("plenty")
    assert count == SearchCount(COUNT_BOUND, exact=False)
    assert str(count) == f"more than {COUNT_BOUND:,}"
    assert await store.search_count("plenty", types=["function_call"]) == SearchCount(0, True)


async def test_filters(store: Store) -> None:
    await store.add_items("a", [user("needle one")], info=SessionPatch(user_id="ann"))
    await store.add_items("b", [user("needle two")], info=SessionPatch(user_id="bob"))
    await store.add_items("c", [user("needle three")])
    await sql(
        store,
        "UPDATE runs SET agent_name = 'triage', model = 'gpt-x' WHERE session_id = 'a'",
        write=True,
    )
    await sql(store, "UPDATE runs SET agent_name = 'triage' WHERE session_id = 'b'", write=True)

    async def found(**filters: object) -> list[str]:
        hits = await store.search("needle", **filters)  # type: ignore[arg-type]
        count = await store.search_count("needle", **filters)  # type: ignore[arg-type]
        assert count == SearchCount(len(hits), exact=True)
        return sorted(hit.session_id for hit in hits)

    assert await found() == ["a", "b", "c"]
    assert await found(user_id="bob") == ["b"]
    assert await found(session_id="c") == ["c"]
    assert await found(agent="triage") == ["a", "b"]
    assert await found(model="gpt-x") == ["a"]
    assert await found(agent="triage", model="gpt-x") == ["a"]
    assert await found(agent="nobody") == []
    now = datetime.now(timezone.utc)
    assert await found(since=now - timedelta(hours=1)) == ["a", "b", "c"]
    assert await found(since=now + timedelta(hours=1)) == []
    assert await found(until=now - timedelta(hours=1)) == []
    assert await found(until=now + timedelta(hours=1), user_id="ann") == ["a"]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"offset": -1}, InvalidOperationError),
        ({"offset": 10_001}, InvalidOperationError),
        ({"offset": math.nan}, ArgumentTypeError),
        ({"offset": "2"}, ArgumentTypeError),
        ({"agent": "a\x00b"}, InvalidOperationError),
        ({"model": "\ud800"}, InvalidOperationError),
        ({"agent": 3}, ArgumentTypeError),
        ({"since": "yesterday"}, ArgumentTypeError),
        ({"until": math.inf}, ArgumentTypeError),
    ],
)
async def test_bad_arguments_are_refused(
    store: Store, arguments: dict[str, object], error: type[Exception]
) -> None:
    await store.add_items("s", [user("word")])
    with pytest.raises(error):
        await store.search("word", **arguments)  # type: ignore[arg-type]
    if "offset" not in arguments:
        with pytest.raises(error):
            await store.search_count("word", **arguments)  # type: ignore[arg-type]
    assert [hit.session_id for hit in await store.search("word", offset=0)] == ["s"]


async def test_a_huge_limit_with_an_offset(store: Store) -> None:
    await store.add_items("s", [user("word one"), user("word two")])
    assert len(await store.search("word", limit=2**63 - 1, offset=1)) == 1

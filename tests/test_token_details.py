"""The token details as the SDK reports them, stored whole per run and per model call (issue
30): every field, a field the SDK does not know yet and nested ones included, summed over a
run's requests and over several writes of one Runner call; compared with what
AdvancedSQLiteSession's ``turn_usage`` keeps of the same usage."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import RunContextWrapper
from agents.extensions.memory import AdvancedSQLiteSession
from agents.usage import InputTokensDetails, OutputTokensDetails
from agents.usage import Usage as SDKUsage

from builders import assistant, user
from support import sql
from turnstore import ResponseRecord, Store, StructuredSession, Telemetry, Usage
from turnstore.errors import InvalidOperationError


def _request(n: int) -> SDKUsage:
    """One model request's usage, as the Responses API reports it: the details carry a nested
    object (cache writes by retention) and a field no SDK class declares (``audio_tokens``)."""
    return SDKUsage(
        requests=1,
        input_tokens=100 * n,
        output_tokens=10 * n,
        total_tokens=110 * n,
        input_tokens_details=InputTokensDetails.model_validate(
            {
                "cached_tokens": n,
                "cache_write_tokens": 3 * n,
                "cache_write_tokens_details": {"ttl_30m_tokens": 2 * n, "ttl_12h_tokens": n},
                "audio_tokens": 5 * n,
            }
        ),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=2 * n),
    )


def _expected(*ns: int) -> tuple[dict[str, int], dict[str, int]]:
    n = sum(ns)
    inputs = {
        "cached_tokens": n,
        "cache_write_tokens": 3 * n,
        "cache_write_tokens_details.ttl_30m_tokens": 2 * n,
        "cache_write_tokens_details.ttl_12h_tokens": n,
        "audio_tokens": 5 * n,
    }
    return inputs, {"reasoning_tokens": 2 * n}


async def test_a_run_keeps_every_field_of_its_requests_details(store: Store) -> None:
    """Two writes of one Runner call (the second adds the usage since the first, in SQL), the
    requests' details summed field by field; the counts the SDK's running total drops
    (``audio_tokens``, the nested cache writes) are kept from its per-request entries."""
    session = StructuredSession("s", store)
    wrapper: RunContextWrapper[None] = RunContextWrapper(context=None)
    wrapper.usage.add(_request(1))
    await session.add_items([user("q")], wrapper=wrapper)
    wrapper.usage.add(_request(2))
    wrapper.usage.add(_request(4))
    await session.add_items([assistant("a")], wrapper=wrapper)
    (run,) = await store.runs("s")
    inputs, outputs = _expected(1, 2, 4)
    assert run.usage == Usage(3, 700, 70, 770, 7, 14, inputs, outputs)
    # The SDK's own total keeps only the fields it knows.
    assert "audio_tokens" not in wrapper.usage.input_tokens_details.model_dump()
    (row,) = await store.usage(group_by="run")
    assert (row.usage.cached_tokens, row.usage.reasoning_tokens) == (7, 14)
    # Queried as JSON in SQL, under the SDK's names.
    field = (
        "json_extract(input_tokens_details, '$.audio_tokens')"
        if store.dialect == "sqlite"
        else "(input_tokens_details ->> 'audio_tokens')::int"
    )
    assert await sql(store, f"SELECT {field} FROM runs") == [(35,)]


async def test_a_model_call_keeps_its_details(store: Store) -> None:
    details = _expected(3)
    usage = Usage(1, 300, 30, 330, 3, 6, *details)
    now = datetime.now(timezone.utc)
    record = ResponseRecord("A", "m", "r", None, usage, now, now, 1.0)
    await store.add_items("s", [user("q"), assistant("a")], telemetry=Telemetry([record]))
    (call,) = await store.model_responses(session_id="s")
    assert call.usage == usage
    (run,) = await store.runs("s")
    assert run.usage.input_tokens_details == {}  # given no usage of its own


async def test_wrong_details_are_refused_and_change_nothing(store: Store) -> None:
    # A field's name is text as every other (PostgreSQL's jsonb refuses NUL and lone
    # surrogates; SQLite stored them, and every usage(details=True) then failed).
    wrong = ({"cached_tokens": -1}, {"cached_tokens": "1"}, {1: 2}, {"x": True})
    for details in (*wrong, {"a\x00": 1}, {"\ud800": 1}):
        with pytest.raises(InvalidOperationError, match="input_tokens_details"):
            await store.add_items("s", [user("q")], Usage(1, 1, 1, 2, 0, 0, details))  # type: ignore[arg-type]
    assert await store.runs("s") == []


async def test_sdk_details_whose_names_no_database_stores_are_left_out(store: Store) -> None:
    sdk = SDKUsage(requests=1, input_tokens=3, output_tokens=1, total_tokens=4)
    sdk.input_tokens_details = InputTokensDetails.model_validate(
        {"cached_tokens": 1, "cache_write_tokens": 0, "a\x00": 2}  # (no lone surrogate here)
    )
    session = StructuredSession("s", store)
    await session.add_items([user("q")], wrapper=RunContextWrapper(context=None, usage=sdk))
    (run,) = await store.runs("s")
    assert run.usage.input_tokens_details == {"cached_tokens": 1}
    (row,) = await store.usage(details=True)
    assert row.usage.input_tokens_details == {"cached_tokens": 1}


async def test_against_advanced_sqlite_session_s_turn_usage(store: Store, tmp_path: Path) -> None:
    """The same Runner call's usage given to both: AdvancedSQLiteSession keeps the details'
    declared fields of the run's running total (``__dict__``: not ``audio_tokens``, and not
    the cache writes by retention, which the SDK's total drops), turnstore every count of
    the requests; where both keep one, they agree."""
    sdk = AdvancedSQLiteSession(session_id="s", db_path=str(tmp_path / "a.db"), create_tables=True)
    session = StructuredSession("s", store)
    plain: RunContextWrapper[None] = RunContextWrapper(context=None)
    plain.usage = SDKUsage(
        requests=1,
        input_tokens=10,
        output_tokens=2,
        total_tokens=12,
        input_tokens_details=InputTokensDetails.model_validate(
            {"cached_tokens": 4, "cache_write_tokens": 1, "audio_tokens": 3}
        ),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=1),
    )
    nested: RunContextWrapper[None] = RunContextWrapper(context=None)
    nested.usage.add(_request(1))

    class Result:
        def __init__(self, wrapper: Any) -> None:
            self.context_wrapper = wrapper

    for tag, wrapper in (("plain", plain), ("nested", nested)):
        await sdk.add_items([user(tag), assistant(tag)])  # type: ignore[list-item]
        await sdk.store_run_usage(Result(wrapper))  # type: ignore[arg-type]
        await session.add_items([user(tag), assistant(tag)], wrapper=wrapper)
    with sdk._locked_connection() as conn:
        stored = [
            (json.loads(i) if i else None, json.loads(o) if o else None)
            for i, o in conn.execute(
                "SELECT input_tokens_details, output_tokens_details FROM turn_usage "
                "ORDER BY user_turn_number"
            )
        ]
    theirs = {k: v for k, v in stored[0][0].items() if v is not None}
    assert theirs == {"cached_tokens": 4, "cache_write_tokens": 1}  # audio_tokens lost
    # From the SDK's running total: the cache writes by retention and the audio tokens lost.
    assert stored[1][0] == {
        "cached_tokens": 1,
        "cache_write_tokens": 3,
        "cache_write_tokens_details": None,
    }
    first, second = await store.runs("s")
    assert first.usage.input_tokens_details == {**theirs, "audio_tokens": 3}
    assert first.usage.output_tokens_details == stored[0][1]
    assert (second.usage.input_tokens_details, second.usage.output_tokens_details) == _expected(1)
    # get_turn_usage answers in the SDK's shape, nested objects nested.
    turn = await session.get_turn_usage(2)
    assert turn["input_tokens_details"]["cache_write_tokens_details"] == {
        "ttl_30m_tokens": 2,
        "ttl_12h_tokens": 1,
    }


async def test_usage_sums_the_details_field_by_field(store: Store) -> None:
    """``Store.usage(details=True)``: each group's details summed as its tokens are (a model
    or agent: its model calls' where the hooks recorded them, else the run's own)."""
    session = StructuredSession("s", store)
    wrapper: RunContextWrapper[None] = RunContextWrapper(context=None)
    wrapper.usage.add(_request(1))
    wrapper.usage.add(_request(2))
    await session.add_items([user("q1"), assistant("a1")], wrapper=wrapper)
    now = datetime.now(timezone.utc)
    call = Usage(1, 400, 40, 440, 4, 8, *_expected(4))
    record = ResponseRecord("A", "m", "r", None, call, now, now, 1.0)
    await store.add_items("s", [user("q2")], call)
    await store.add_items("s", [assistant("a2")], telemetry=Telemetry([record]))  # on q2's run
    (row,) = await store.usage("session", details=True)
    assert (row.usage.input_tokens_details, row.usage.output_tokens_details) == _expected(1, 2, 4)
    by_model = {r.key: r.usage for r in await store.usage("model", details=True, cost=False)}
    assert (by_model["m"].input_tokens_details, by_model["m"].output_tokens_details) == (
        _expected(4)
    )
    assert by_model[None].input_tokens_details == _expected(1, 2)[0]
    by_run = await store.usage("run", session_id="s", details=True, branch=None)
    assert [r.usage.output_tokens_details for r in by_run] == [
        _expected(1, 2)[1],
        _expected(4)[1],
    ]
    (plain,) = await store.usage("session")
    assert plain.usage.input_tokens_details == {}  # details=False: the counts alone
    with pytest.raises(TypeError):
        await store.usage("session", details="yes")  # type: ignore[arg-type]

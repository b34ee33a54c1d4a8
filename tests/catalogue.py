"""A catalogue of sessions that differ in every way the sessions list filters and sorts by: the
store tests (tests/test_session_list.py) and the viewer's browser tests read it.

Oldest first: ``old-big`` holds the most tokens, runs and tool calls, so that a sort by them
puts it first although it is the oldest session; ``weather`` has a failed tool call; ``refund``
a failed run and an edited question (two branches); ``idle`` no runs at all; then ``fillers``
sessions of one small run each, the newest, enough to push the others off the first page.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from builders import assistant, call, output, user
from support import sql
from turnstore import ResponseRecord, Store, StructuredSession, Telemetry, Usage
from turnstore.domain.toolcalls import failed_sql

SDK_ERROR = "An error occurred while running the tool. Please try again."
BIG_TOKENS = 1_179_068  # issue 29's largest session


def _telemetry(agent: str, model: str, tokens: int) -> Telemetry:
    when = datetime.now(timezone.utc)
    spent = Usage(requests=1, input_tokens=tokens, total_tokens=tokens)
    record = ResponseRecord(agent, model, None, None, spent, None, when, None)
    return Telemetry(responses=[record])


async def _turn(
    store: Store,
    session_id: str,
    items: list[dict[str, Any]],
    *,
    agent: str,
    model: str,
    tokens: int,
) -> None:
    await store.add_items(
        session_id,
        items,
        Usage(requests=1, input_tokens=tokens, total_tokens=tokens),
        telemetry=_telemetry(agent, model, tokens),
    )


async def build_catalogue(store: Store, fillers: int = 0) -> dict[str, Any]:
    """Write the catalogue; returns the time between ``old-big`` and the rest (``since``)."""
    for n in range(4):  # four runs, two tool calls each
        await _turn(
            store,
            "old-big",
            [
                user(f"Plan the migration, step {n}"),
                call(f"c{n}a", "read_schema"),
                output(f"c{n}a", "tables: 12"),
                call(f"c{n}b", "read_schema"),
                output(f"c{n}b", "tables: 12"),
                assistant(f"Step {n} planned."),
            ],
            agent="planner",
            model="gpt-big",
            tokens=BIG_TOKENS // 4 + (BIG_TOKENS % 4 if n == 0 else 0),
        )
    await store.update_session("old-big", user_id="carol", title="Database migration plan")
    between = datetime.now(timezone.utc)
    await _turn(
        store,
        "weather",
        [
            user("Weather in Paris?"),
            call("w1", "get_weather", '{"city": "Paris"}'),
            output("w1", SDK_ERROR),
            assistant("I could not reach the weather service."),
        ],
        agent="weather",
        model="gpt-small",
        tokens=300,
    )
    await store.update_session(
        "weather", user_id="alice", title="Weather in Paris", metadata={"tier": "free"}
    )
    # A question left unanswered below a new one: the first run failed.
    await store.add_items("refund", [user("Refund order 42")])
    await _turn(
        store,
        "refund",
        [user("Hello? Refund order 42"), assistant("Refunded.")],
        agent="triage",
        model="gpt-small",
        tokens=81_878,
    )
    # Then the user edited the question: a second branch, the active one, to compare.
    refund = StructuredSession("refund", store)
    asked = (await refund.runs())[-1]
    await refund.edit(asked.id, "Refund order 42 to my card, please")
    await refund.add_items([assistant("Refunded to your card.")])
    await store.update_session(
        "refund", user_id="bob", title="Refund for order 42", metadata={"tier": "gold"}
    )
    await store.update_session("idle", user_id="bob", title="Nothing said yet")
    for n in range(fillers):
        await _turn(
            store,
            f"filler-{n:02d}",
            [user(f"Filler question {n}"), assistant("Filler answer.")],
            agent="triage",
            model="gpt-small",
            tokens=10,
        )
        await store.update_session(f"filler-{n:02d}", user_id="dave")
    return {"between": between}


# Each session's totals, which the writes keep (tests/test_session_totals.py), and what its
# rows add up to, computed from scratch.
TOTALS = (
    "run_count, total_tokens, tool_call_count, failed_run_count, failed_call_count, failure_count"
)
# What the rows add up to: every run of every branch (compaction and compacted runs too).
FROM_SCRATCH = f"""
    SELECT s.session_id,
        (SELECT count(*) FROM runs r WHERE r.session_id = s.session_id),
        (SELECT coalesce(sum(r.total_tokens), 0) FROM runs r WHERE r.session_id = s.session_id),
        (SELECT count(*) FROM tool_calls t WHERE t.session_id = s.session_id),
        (SELECT count(*) FROM runs r WHERE r.session_id = s.session_id AND r.status = 'failed'),
        (SELECT count(*) FROM tool_calls t WHERE t.session_id = s.session_id
            AND {failed_sql()}),
        (SELECT count(*) FROM runs r WHERE r.session_id = s.session_id AND r.status = 'failed')
        + (SELECT count(*) FROM tool_calls t WHERE t.session_id = s.session_id
            AND {failed_sql()})
    FROM sessions s ORDER BY s.session_id"""


async def kept(store: Store) -> list[tuple[Any, ...]]:
    """Each session's kept totals (sessions.run_count …), by session id."""
    return await sql(store, f"SELECT session_id, {TOTALS} FROM sessions ORDER BY session_id")


async def assert_kept(store: Store) -> None:
    """Every session's kept totals are what its rows add up to."""
    expected = [
        tuple(int(v) if i else v for i, v in enumerate(row))
        for row in await sql(store, FROM_SCRATCH)
    ]
    found = [tuple(int(v) if i else v for i, v in enumerate(row)) for row in await kept(store)]
    assert found == expected

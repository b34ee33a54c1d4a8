"""A database holding everything turnstore stores (``build_rich``), and every table of a
database as rows comparable across databases (``dump``): ids as (session, ordinal), times as
UTC, metadata decoded. What the round trips of ``copy`` (tests/test_copy.py) and of an
export and import (tests/test_export_roundtrip.py) compare.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from builders import assistant, call, output, user
from support import sql
from turnstore import Store, StructuredSession, Usage
from turnstore.core.spans import SpanRecord

__all__ = ["HOSTILE", "assert_rich", "build_rich", "dump"]

# Columns that hold a run's id, an item's id; the rest are compared as they are.
_RUN_LINKS = {"parent_id", "prior_run_id", "compacted_by", "head_run_id", "run_id"}
_ITEM_LINKS = {"call_item_id", "output_item_id"}
_CALL_LINKS = {"tool_call_id"}
# What a copy (and an export) does not carry (see turnstore.importers.copy), and derived columns.
_NOT_COPIED = {"operations", "sdk_adopted"}
_DERIVED = {"search_vector"}
_COPIED_TABLES = {
    "sessions",
    "runs",
    "items",
    "tool_calls",
    "model_responses",
    "spans",
    "branch_names",
    "annotations",
}

HOSTILE = [
    "lone \ud800 surrogate",
    "nul \x00 inside",
    "mark \ufdd0 noncharacter",
    "é" * 50_000,
    "",
    "'; DROP TABLE runs; --",
]


async def _runner_conversation(store: Store, session_id: str) -> None:
    """A conversation through the real Runner with the session's hooks: a tool call with its
    timing, a handoff (agent attribution), model calls with usage."""
    from agents import Agent, Runner, function_tool
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
    from agents.usage import InputTokensDetails, OutputTokensDetails
    from agents.usage import Usage as SDKUsage

    def usage(inp: int, out: int) -> SDKUsage:
        return SDKUsage(
            requests=1,
            input_tokens=inp,
            output_tokens=out,
            total_tokens=inp + out,
            input_tokens_details=InputTokensDetails(cached_tokens=1, cache_write_tokens=0),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=2),
        )

    @function_tool
    def weather(city: str) -> str:
        """The weather."""
        return f"Rain in {city}"

    model = ScriptedModel(
        [
            ModelStep(
                output=[function_call("weather", {"city": "Oslo"}, call_id="c1")],
                usage=usage(10, 2),
            ),
            ModelStep(output=[assistant_message("It rains.")], usage=usage(20, 3)),
            ModelStep(
                output=[function_call("transfer_to_billing", {}, call_id="h1")], usage=usage(5, 1)
            ),
            ModelStep(output=[assistant_message("Billing here.")], usage=usage(7, 4)),
        ]
    )
    billing = Agent("Billing", model=model)
    agent = Agent("Assistant", model=model, tools=[weather], handoffs=[billing])
    session = StructuredSession(session_id, store, user_id="ann", metadata={"z": 1, "a": [2]})
    await Runner.run(agent, "Weather in Oslo?", session=session, hooks=session.hooks)
    await Runner.run(agent, "A billing question", session=session, hooks=session.hooks)


async def _spans(store: Store, session_id: str, run_id: int) -> None:
    start = datetime(2025, 3, 1, 12, tzinfo=timezone.utc)
    spans = [
        SpanRecord(
            run_id=run_id,
            trace_id="trace_1",
            span_id=f"span_{n}",
            parent_span_id=None if n == 0 else "span_0",
            kind=kind,
            name=name,
            started_at=store.backend.bind_time(start + timedelta(milliseconds=n)),
            ended_at=store.backend.bind_time(start + timedelta(milliseconds=5 + n)),
            duration_ms=5.0,
            error=error,
            data=json.dumps({"input": HOSTILE[2], "n": n}),
        )
        for n, (kind, name, error) in enumerate(
            [("agent", "Assistant", None), ("function", "lookup", "boom: it's <broken>")]
        )
    ]
    await store._record_spans(session_id, spans)


async def build_rich(store: Store) -> None:
    """Sessions holding everything turnstore stores."""
    await _runner_conversation(store, "runner")
    # A tree: five turns, an edit of the third (a branch), the head moved back, usage.
    for n in range(5):
        await store.add_items("tree", [user(f"q{n}"), assistant(f"a{n}")], Usage(1, n, n, 2 * n))
    runs = await store.runs("tree")
    edited = await store.fork("tree", runs[2].id, "q2, edited")
    await store.add_items("tree", [call("k1", "lookup"), output("k1", "found"), assistant("ok")])
    await store.move_head("tree", runs[4].id, to_parent=False)
    await store.update_session("tree", user_id="bob", title="A tree", metadata={"k": "v"})
    # Named branches: the edit's (by its fork run) and the first one's.
    await store.name_branch("tree", runs[2].id, "<b>first</b> \U0001f600")
    await store.name_branch("tree", edited.id, "edited 'q2'")
    # Trace spans as turnstore.tracing stores them: a parent and a failed child.
    await _spans(store, "tree", runs[1].id)
    # Compaction: the model's view replaced, the transcript kept and linked.
    for n in range(3):
        await store.add_items("compacted", [user(f"c{n}"), assistant(f"r{n}")])
    assert await store.compact("compacted", [user("summary of c0..c2")])
    await store.add_items("compacted", [user("after"), assistant("compacted answer")])
    # An approval left pending, an output with no call.
    await store.add_items("pending", [user("delete it"), call("p1", "delete_file")])
    await store.add_items("orphan", [user("hi"), output("zz", "orphan output")])
    # Hostile strings in items, keys in odd orders, a hostile session id, title and metadata.
    for n, text in enumerate(HOSTILE):
        item = {"z": text, "role": "user", "content": text, "a": {"y": 1, "b": [text]}}
        await store.add_items("hostile 'id' \u00e9\U0001f600", [item, assistant(text, f"m{n}")])
    await store.update_session(
        "hostile 'id' \u00e9\U0001f600", title="t\u00e9\U0001f600", metadata={"q": "\u00e9"}
    )
    # A session with catalogue fields and no runs.
    await store.update_session("bare", user_id="ann", title="nothing yet")
    await _annotations(store)


async def _annotations(store: Store) -> None:
    """Annotations: of a run off the active path, of a tool call, of a compacted run, two of
    one name on one run, one corrected since."""
    tree = [run for run, _ in await store.tree("tree")]
    calls = await store.tool_calls(session_id="tree")
    late = await store.annotate(tree[0].id, "thumbs", value=1, source="user", author="ann")
    await store.annotate(calls[0].run_id, "correctness", value=0.25, tool_call_id=calls[0].id)
    for reviewer in ("r1", "r2"):
        await store.annotate(tree[-1].id, "label", label="hallucinated", author=reviewer)
    compacted = [run for run, _ in await store.tree("compacted")]
    await store.annotate(compacted[0].id, "note", comment="é 😀 " * 10)
    await store.update_annotation(late.id, value=0, comment="changed my mind")


async def _columns(store: Store, table: str) -> list[str]:
    if store.backend.dialect == "sqlite":
        rows = await sql(store, f"SELECT name FROM pragma_table_info('{table}') ORDER BY cid")
    else:
        rows = await sql(
            store,
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = {t} ORDER BY ordinal_position",
            t=table,
        )
    return [name for (name,) in rows if name not in _DERIVED]


async def _tables(store: Store) -> set[str]:
    if store.backend.dialect == "sqlite":
        # The search indexes (items_fts, tool_errors_fts) are derived: the target's own
        # writes and triggers fill them, so a copy carries their sources, not them.
        rows = await sql(
            store,
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'items_fts%' "
            "AND name NOT LIKE 'tool_errors_fts%' "
            "AND name NOT IN ('sqlite_sequence', 'turnstore_schema')",
        )
    else:
        rows = await sql(
            store,
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'turnstore_schema'",
        )
    return {name for (name,) in rows}


def _value(column: str, value: Any) -> Any:
    """A value comparable across backends: times as UTC datetimes, JSON (metadata, token
    details) decoded."""
    if value is not None and (column.endswith("_at")):
        when = value if isinstance(value, datetime) else datetime.fromisoformat(value)
        return when.astimezone(timezone.utc)
    if column == "metadata" or column.endswith("_tokens_details"):
        return json.loads(value) if isinstance(value, str) else value
    return value


async def dump(store: Store) -> dict[str, list[dict[str, Any]]]:
    """Every copied table, rows in (session, id) order, every id as (session, ordinal)."""
    tables = await _tables(store)
    unknown = tables - _COPIED_TABLES - _NOT_COPIED
    assert not unknown, f"tables the copy does not know: {unknown} (carry them in core.transfer)"
    raw: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {}
    for table in sorted(_COPIED_TABLES):
        columns = await _columns(store, table)
        # Run ids are new in a copy but keep their order: a row without an id sorts by its run.
        order = "session_id" + next((f", {key}" for key in ("id", "run_id") if key in columns), "")
        rows = await sql(store, f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}")
        raw[table] = (columns, rows)
    ordinal: dict[str, dict[int, tuple[str, int]]] = {}
    for table in ("runs", "items", "tool_calls"):
        columns, rows = raw[table]
        seen: dict[str, int] = {}
        mapping = ordinal[table] = {}
        for row in rows:
            record = dict(zip(columns, row, strict=True))
            sid = record["session_id"]
            mapping[record["id"]] = (sid, seen.setdefault(sid, 0))
            seen[sid] += 1
    result: dict[str, list[dict[str, Any]]] = {}
    for table, (columns, rows) in raw.items():
        records = []
        for row in rows:
            record = {}
            for column, value in zip(columns, row, strict=True):
                if column == "id":
                    continue
                if column in _RUN_LINKS and value is not None:
                    value = ordinal["runs"].get(value, ("dangling", value))
                elif column in _ITEM_LINKS and value is not None:
                    value = ordinal["items"].get(value, ("dangling", value))
                elif column in _CALL_LINKS and value is not None:
                    value = ordinal["tool_calls"].get(value, ("dangling", value))
                record[column] = _value(column, value)
            records.append(record)
        result[table] = records
    return result


def assert_rich(tables: dict[str, list[dict[str, Any]]]) -> None:
    """The database holds what a copy could lose (so that the comparison means something)."""
    runs, calls = tables["runs"], tables["tool_calls"]
    assert any(run["agent_name"] == "Billing" and run["model"] for run in runs)
    assert any(run["kind"] == "compaction" and run["prior_run_id"] is None for run in runs)
    assert any(run["compacted_by"] is not None for run in runs)
    assert any(run["cached_tokens"] and run["reasoning_tokens"] for run in runs)
    # The token details as the SDK reported them, per run and per model call.
    assert any(run["input_tokens_details"] and run["output_tokens_details"] for run in runs)
    assert all(row["input_tokens_details"] for row in tables["model_responses"])
    assert {run["status"] for run in runs} >= {"completed", "interrupted", "compacted"}
    assert any(call["duration_ms"] is not None and call["started_at"] for call in calls)
    assert any(call["output_item_id"] is None for call in calls)
    assert any(call["call_item_id"] is None for call in calls)
    assert len(tables["model_responses"]) == 4
    assert [span["error"] for span in tables["spans"]] == [None, "boom: it's <broken>"]
    assert len(tables["branch_names"]) == 2
    assert {s["user_id"] for s in tables["sessions"]} == {"ann", "bob", None}
    notes = tables["annotations"]
    assert len(notes) == 5
    assert any(note["tool_call_id"] is not None for note in notes)
    assert any(note["updated_at"] is not None for note in notes)
    assert any(s["head_run_id"] is None for s in tables["sessions"])

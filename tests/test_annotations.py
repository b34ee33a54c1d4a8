"""Conformance tests of annotations (issue 28): feedback, scores, labels and notes on runs,
kept with their run through edits and compactions, gone with it, read back per run, per
session and across sessions, summed per group; hostile input refused with nothing stored.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import assistant, call, converse, output, snapshot, user
from costdata import ALICE, PRICES, build
from support import sql
from turnstore import (
    ArgumentTypeError,
    InvalidOperationError,
    NotFoundError,
    RunNotFoundError,
    Store,
    StructuredSession,
)
from turnstore.core.annotation_checks import MAX_ANNOTATION_NAME, MAX_COMMENT


async def test_an_annotation_is_stored_and_read_back_per_run_session_and_name(
    store: Store,
) -> None:
    runs = await converse(StructuredSession("s", store), "q1", "q2")
    await converse(StructuredSession("t", store), "other")
    down = await store.annotate(runs[1], "thumbs", value=0, comment="wrong", source="user")
    assert (down.session_id, down.run_id, down.name, down.value, down.comment, down.source) == (
        "s",
        runs[1],
        "thumbs",
        0.0,
        "wrong",
        "user",
    )
    assert down.updated_at is None
    assert down.tool_call_id is None
    up = await store.annotate(runs[0], "thumbs", value=1, author="ann")
    other = (await store.runs("t"))[0].id
    elsewhere = await store.annotate(other, "thumbs", value=1)
    assert await store.annotations(run_id=runs[1]) == [down]
    assert await store.annotations(session_id="s") == [down, up]
    assert await store.annotations(name="thumbs") == [down, up, elsewhere]
    assert await store.annotations(name="thumbs", max_value=0.5) == [down]
    assert await store.annotations(name="thumbs", min_value=1, session_id="s") == [up]
    assert await store.annotations(source="user") == [down]
    assert await store.annotations(name="thumbs", limit=2) == [up, elsewhere]  # the newest
    assert await store.annotations(run_id=runs[1], session_id="t") == []
    assert await store.annotations(run_id=10**6) == []
    later = datetime.now(timezone.utc) + timedelta(days=1)
    assert await store.annotations(since=later) == []
    assert await store.annotations(until=later, session_id="t") == [elsewhere]


async def test_several_of_one_name_are_kept_and_a_correction_names_one(store: Store) -> None:
    (run,) = await converse(StructuredSession("s", store), "q1")
    first = await store.annotate(run, "label", label="hallucinated", author="r1")
    second = await store.annotate(run, "label", label="fine", author="r2")
    corrected = await store.update_annotation(second.id, label="hallucinated", comment="missed")
    assert (corrected.label, corrected.comment, corrected.author) == (
        "hallucinated",
        "missed",
        "r2",
    )
    assert corrected.updated_at is not None
    assert corrected.created_at == second.created_at
    assert await store.annotations(run_id=run) == [first, corrected]
    await store.delete_annotation(first.id)
    assert await store.annotations(run_id=run) == [corrected]
    with pytest.raises(NotFoundError):
        await store.delete_annotation(first.id)
    with pytest.raises(NotFoundError):
        await store.update_annotation(first.id, value=1)


async def test_the_session_annotates_its_head_run(store: Store) -> None:
    session = StructuredSession("s", store)
    with pytest.raises(RunNotFoundError, match="no run to annotate"):
        await session.annotate("thumbs", value=1)
    assert await store.session("s") is None  # nothing created
    runs = await converse(session, "q1", "q2")
    note = await session.annotate("thumbs", value=0)
    assert (note.run_id, note.source) == (runs[1], "user")
    assert (await session.annotate("thumbs", value=1, run_id=runs[0])).run_id == runs[0]
    (other,) = await converse(StructuredSession("t", store), "x")
    with pytest.raises(RunNotFoundError, match="another session"):
        await session.annotate("thumbs", value=1, run_id=other)


async def test_a_tool_call_is_annotated_only_as_part_of_its_run(store: Store) -> None:
    session = StructuredSession("s", store)
    await session.add_items([user("q"), call("c1", "lookup"), output("c1", "x"), assistant("a")])
    await session.add_items([user("q2"), assistant("a2", item_id="m2")])
    first, second = (run.id for run in await session.runs())
    (tool,) = await store.tool_calls(session_id="s")
    note = await store.annotate(first, "correct", value=1, tool_call_id=tool.id)
    assert note.tool_call_id == tool.id
    before = await snapshot(store)
    with pytest.raises(NotFoundError, match="no tool call"):
        await store.annotate(second, "correct", value=1, tool_call_id=tool.id)
    with pytest.raises(NotFoundError):
        await store.annotate(first, "correct", value=1, tool_call_id=10**9)
    assert await snapshot(store) == before
    stats = await store.annotation_stats("tool")
    assert [(row.key, row.count) for row in stats] == [("lookup", 1)]


async def test_annotations_stay_with_runs_moved_off_the_path_and_go_with_them(
    store: Store,
) -> None:
    session = StructuredSession("s", store)
    runs = await converse(session, "q1", "q2", "q3")
    kept = await store.annotate(runs[1], "thumbs", value=0)
    await session.edit(runs[1], "q2 edited")  # runs[1] leaves the active path
    assert await store.annotations(run_id=runs[1]) == [kept]
    assert await store.compact("s", [user("summary")])
    assert await store.annotations(session_id="s") == [kept]
    await store.delete_branch("s", runs[1], force=True)
    assert await store.annotations(session_id="s") == []
    await store.annotate(runs[0], "thumbs", value=1)
    await store.delete_session("s")
    assert await store.annotations() == []
    assert await sql(store, "SELECT count(*) FROM annotations") == [(0,)]


async def test_statistics_per_agent_day_and_branch(store: Store) -> None:
    session = StructuredSession("s", store)
    runs = await converse(session, "q1", "q2")
    edited = await session.edit(runs[1], "q2 edited")
    await store.name_branch("s", edited.id, "retry")
    for run, value in ((runs[0], 1), (runs[1], 0), (edited.id, 1), (edited.id, 1)):
        await store.annotate(run, "thumbs", value=value)
    await store.annotate(runs[0], "label", label="ok")
    by_agent = await store.annotation_stats("agent")
    assert [(r.key, r.name, r.count, r.scored, r.runs, r.mean) for r in by_agent] == [
        (None, "label", 1, 0, 1, None),
        (None, "thumbs", 4, 4, 3, 0.75),
    ]
    (day,) = await store.annotation_stats("day", name="thumbs")
    assert day.key == datetime.now(timezone.utc).date().isoformat()
    assert day.count == 4
    by_branch = await store.annotation_stats("branch", session_id="s", name="thumbs")
    assert [(r.key, r.count, r.runs, r.mean, r.minimum, r.maximum) for r in by_branch] == [
        (f"#{runs[0]}", 2, 2, 0.5, 0.0, 1.0),
        ("retry", 2, 1, 1.0, 1.0, 1.0),
    ]
    with pytest.raises(InvalidOperationError, match="session_id"):
        await store.annotation_stats("branch")


_WRONG: list[dict[str, Any]] = [
    {"value": math.nan},
    {"value": math.inf},
    {"value": -math.inf},
    {"value": True},
    {"value": "1"},
    {"value": 10**400},
    {"comment": "x" * (MAX_COMMENT + 1)},
    {"comment": "nul \x00"},
    {"comment": "lone \ud800"},
    {"label": "x" * (MAX_ANNOTATION_NAME + 1)},
    {"label": "a\nb"},
    {"label": " padded"},
    {"source": "boss"},
    {"source": None},
    {"author": "\x00"},
    {"author": "a" * 2000},
    {"tool_call_id": "1"},
]


@pytest.mark.parametrize("wrong", _WRONG, ids=lambda wrong: next(iter(wrong)))
async def test_hostile_fields_are_refused_and_nothing_is_stored(
    store: Store, wrong: dict[str, Any]
) -> None:
    (run,) = await converse(StructuredSession("s", store), "q1")
    note = await store.annotate(run, "thumbs", value=1)
    before = await snapshot(store)
    with pytest.raises(InvalidOperationError):
        await store.annotate(run, "thumbs", **wrong)
    # A correction is checked as a new annotation is (None leaves a field as it is).
    correctable = {k: v for k, v in wrong.items() if k != "tool_call_id" and v is not None}
    if correctable:
        with pytest.raises(InvalidOperationError):
            await store.update_annotation(note.id, **correctable)
    assert await snapshot(store) == before


async def test_unknown_runs_are_not_found(store: Store) -> None:
    await converse(StructuredSession("s", store), "q1")
    before = await snapshot(store)
    for run_id in (10**6, 2**63, -1):
        with pytest.raises(RunNotFoundError):
            await store.annotate(run_id, "thumbs", value=1)
    with pytest.raises(InvalidOperationError):
        await store.annotate("1", "thumbs")  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError):
        await store.annotate(None, "thumbs")
    assert await snapshot(store) == before


_LABELS = st.text(max_size=250)
_VALUES = st.none() | st.floats() | st.integers(min_value=-(2**1100), max_value=2**1100)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=_LABELS, label=st.none() | _LABELS, value=_VALUES, comment=st.none() | st.text())
def test_any_input_is_stored_exactly_or_refused_with_nothing_stored(
    shared_loop_store: Any, name: str, label: str | None, value: Any, comment: str | None
) -> None:
    loop, store = shared_loop_store

    async def example() -> None:
        runs = await store.runs("s")
        if not runs:
            await converse(StructuredSession("s", store), "q1")
            runs = await store.runs("s")
        before = await snapshot(store)
        try:
            note = await store.annotate(runs[0].id, name, value=value, label=label, comment=comment)
        except InvalidOperationError:
            assert await snapshot(store) == before
            return
        assert (note.name, note.label, note.comment) == (name, label, comment)
        assert note.value == (None if value is None else float(value))
        assert await store.annotations(run_id=runs[0].id, limit=1) == [note]

    loop.run_until_complete(example())


async def test_the_catalogue_keeps_sessions_with_feedback(store: Store) -> None:
    """``Store.sessions(annotation=..., annotation_min/max=...)``: the sessions with any
    thumbs-down, any thumbs-up, any annotation of a name; on every page and in the count."""
    runs = {}
    for sid in ("down", "up", "both", "label", "none"):
        runs[sid] = await converse(StructuredSession(sid, store), "q1", "q2")
    await store.annotate(runs["down"][0], "thumbs", value=0)
    await store.annotate(runs["up"][1], "thumbs", value=1)
    await store.annotate(runs["both"][0], "thumbs", value=1)
    await store.annotate(runs["both"][1], "thumbs", value=0)
    await store.annotate(runs["label"][1], "label", label="hallucinated")
    await store.annotate(runs["label"][0], "correctness", value=0.5)

    async def kept(**filters: Any) -> set[str]:
        ids = [info.session_id async for info in store.iter_sessions(page_size=1, **filters)]
        assert len(ids) == len(set(ids))
        assert await store.count_sessions(**filters) == len(ids)
        assert {i.session_id for i in await store.sessions(order_by="runs", **filters)} == set(ids)
        return set(ids)

    assert await kept(annotation="thumbs", annotation_max=0) == {"down", "both"}
    assert await kept(annotation="thumbs", annotation_min=1) == {"up", "both"}
    assert await kept(annotation="label") == {"label"}
    assert await kept(annotation_max=0.5) == {"down", "both", "label"}  # any name
    assert await kept(annotation="thumbs", annotation_min=2) == set()
    assert await kept(annotation="thumbs", user_id="nobody") == set()
    assert len(await kept()) == 5
    for bad in (
        {"annotation": "a\x00b"},
        {"annotation": "\ud800"},
        {"annotation_min": math.nan},
        {"annotation_max": "0"},
        {"annotation_max": True},
    ):
        with pytest.raises(InvalidOperationError):
            await store.sessions(**bad)


async def test_statistics_per_session_and_user(store: Store) -> None:
    await store.update_session("a", user_id="alice")
    first = await converse(StructuredSession("a", store), "q1", "q2")
    (other,) = await converse(StructuredSession("b", store), "q3")
    for run, value in ((first[0], 0), (first[1], 1), (first[1], 0), (other, 1)):
        await store.annotate(run, "thumbs", value=value)
    by_session = await store.annotation_stats("session", name="thumbs")
    assert [(r.key, r.count, r.runs, r.mean) for r in by_session] == [
        ("a", 3, 2, pytest.approx(1 / 3)),
        ("b", 1, 1, 1.0),
    ]
    by_user = await store.annotation_stats("user")
    assert [(r.key, r.name, r.count) for r in by_user] == [
        (None, "thumbs", 1),
        ("alice", "thumbs", 3),
    ]
    assert await store.annotation_stats("user", session_id="b") == [by_user[0]]


async def test_usage_carries_the_annotations_of_each_groups_runs(store: Store) -> None:
    """Cost and the thumbs-down rate side by side: ``Store.usage(annotation=NAME)`` counts the
    annotations of each group's runs under the run's group, with zeros where there are none."""
    runs = await build(store)
    await store.annotate(runs["old"], "thumbs", value=0)
    await store.annotate(runs["may"], "thumbs", value=1)
    await store.annotate(runs["mystery"], "thumbs", value=0, source="user")
    await store.annotate(runs["mystery"], "thumbs", value=1)
    await store.annotate(runs["mystery"], "label", label="slow")

    async def notes(group: str, **filters: Any) -> dict[str | None, tuple[int, int, Any]]:
        rows = await store.usage(group, annotation="thumbs", prices=PRICES, **filters)  # type: ignore[arg-type]
        assert all(row.annotation is not None and row.annotation.key == row.key for row in rows)
        return {r.key: (r.annotation.count, r.annotation.runs, r.annotation.mean) for r in rows}  # type: ignore[union-attr]

    assert await notes("user") == {None: (0, 0, None), "alice": (2, 2, 0.5), "bob": (2, 1, 0.5)}
    assert await notes("model") == {
        None: (0, 0, None),
        "m-new": (1, 1, 1.0),
        "m-old": (1, 1, 0.0),
        "mystery-model": (2, 1, 0.5),
    }
    assert (await notes("run"))[str(runs["old"])] == (1, 1, 0.0)
    assert await notes("session", user_id="bob") == {"b": (2, 1, 0.5)}
    today = datetime.now(timezone.utc).date().isoformat()
    assert (await notes("day"))[today] == (4, 3, 0.5)  # the runs' day, not the prices'
    later = datetime.now(timezone.utc) + timedelta(days=1)
    assert await notes("agent", since=later) == {}
    by_model = await store.annotation_stats("model", name="thumbs")
    assert [(r.key, r.count, r.mean) for r in by_model] == [
        ("m-new", 1, 1.0),
        ("m-old", 1, 0.0),
        ("mystery-model", 2, 0.5),
    ]
    (row,) = await store.usage("user", user_id="alice", prices=PRICES)
    assert row.annotation is None
    assert row.cost == pytest.approx(ALICE)
    for bad in ("a\x00b", "\ud800", 1):
        with pytest.raises(InvalidOperationError):
            await store.usage(annotation=bad)  # type: ignore[arg-type]


async def test_usage_refuses_the_names_annotate_refuses(store: Store) -> None:
    # One rule for an annotation's name: a name no annotation can have is refused by usage
    # with annotate's own error, not looked up for nothing.
    (run,) = await converse(StructuredSession("s", store), "q1")
    for bad in ("", " thumbs", "n" * (MAX_ANNOTATION_NAME + 1)):
        with pytest.raises(InvalidOperationError) as by_usage:
            await store.usage(annotation=bad)
        with pytest.raises(InvalidOperationError) as by_annotate:
            await store.annotate(run, bad, value=1)
        assert str(by_usage.value) == str(by_annotate.value)
    assert await store.annotations(session_id="s") == []


async def test_a_page_of_runs_annotations_in_one_query(store: Store) -> None:
    # annotations_of_runs: what runs --json carries. The runs given, not others of the same
    # id range (another branch's, another session's), each run's in the order made; one
    # statement for the page, whatever its length.
    session = StructuredSession("s", store)
    first, second, third = await converse(session, "q1", "q2", "q3")
    edited = await session.edit(second, "q2b")  # a run of another branch, inside the range
    others = await converse(StructuredSession("t", store), "other")
    for run_id, name in [(third, "b"), (first, "a"), (edited.id, "x"), (third, "c")]:
        await store.annotate(run_id, name, value=1)
    await store.annotate(others[0], "y", value=1)
    seen: list[Any] = []
    real = store.backend.run

    async def counting(factory: Any, *, write: bool) -> Any:
        def counted() -> Any:
            op = factory()
            query = op.send(None)
            try:
                while True:
                    seen.append(query)
                    query = op.send((yield query))
            except StopIteration as stop:
                return stop.value

        return await real(counted, write=write)

    store.backend.run = counting  # type: ignore[method-assign]
    try:
        found = await store.annotations_of_runs("s", [first, second, third])
    finally:
        del store.backend.run
    assert len(seen) == 1
    assert {run_id: [n.name for n in notes] for run_id, notes in found.items()} == {
        first: ["a"],
        third: ["b", "c"],
    }
    assert await store.annotations_of_runs("s", []) == {}
    assert await store.annotations_of_runs("t", [first, third]) == {}
    with pytest.raises(InvalidOperationError):
        await store.annotations_of_runs("s", first)  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError):
        await store.annotations_of_runs("s", ["1"])  # type: ignore[list-item]

"""The spans queries on every backend, without the SDK: what ``turnstore.tracing`` writes is
read back exactly, hostile strings included; bad arguments are refused; spans of a run that is
gone are dropped."""

from __future__ import annotations

from datetime import timedelta

import pytest

from builders import SPAN_START, call, output, span_record, user
from turnstore import InvalidOperationError, RunNotFoundError, Store, TraceSpan
from turnstore.core.spans import ToolOutcome, encode_data

HOSTILE = "x\x00y \ud800 '; DROP TABLE spans; -- <b>\u202e\ufdd0"
# As text columns hold it: NUL, the lone surrogate and the search marks replaced.
CLEAN = "x\ufffdy \ufffd '; DROP TABLE spans; -- <b>\u202e\ufffd"


async def test_spans_read_back_in_order(store: Store) -> None:
    await store.add_items("s", [user("q1"), call("c1", "f", '{"a": 1}'), output("c1", "ok")])
    await store.add_items("t", [user("q2")])
    [run] = await store.runs("s")
    [other] = await store.runs("t")
    await store._record_spans(
        "s",
        [
            span_record(store, run.id, 2, error=None),
            span_record(store, run.id, 0),
            span_record(
                store,
                run.id,
                1,
                name="f",
                error=CLEAN,
                data=encode_data({"input": HOSTILE}),
                outcome=ToolOutcome("f", '{"a": 1}', 0, "failed", CLEAN),
            ),
        ],
    )
    await store._record_spans("t", [span_record(store, other.id, 3, kind="generation")])
    spans = await store.spans(run_id=run.id)
    assert [span.span_id for span in spans] == ["span_0", "span_1", "span_2"]
    assert spans[0].started_at == SPAN_START
    assert spans[1].parent_span_id == "span_0"
    assert spans[1].error == CLEAN
    assert spans[1].data == {"input": HOSTILE}
    assert spans[1].failed
    assert not spans[2].failed
    assert await store.spans(session_id="s") == spans
    assert await store.spans(session_id="s", limit=1) == spans[:1]
    assert await store.spans(session_id="t", run_id=run.id) == []
    [calls] = await store.tool_calls(session_id="s")
    assert (calls.status, calls.error) == ("failed", CLEAN)
    # The slowest and the failed, across the store or one session, of one kind.
    assert [s.span_id for s in await store.slowest_spans(limit=3)] == ["span_3", "span_2", "span_1"]
    assert [s.span_id for s in await store.slowest_spans(kind="function")] == ["span_2", "span_1"]
    assert [s.span_id for s in await store.slowest_spans(session_id="t")] == ["span_3"]
    assert [s.span_id for s in await store.error_spans()] == ["span_1"]
    assert await store.error_spans(session_id="t") == []
    assert await store.error_spans(kind="agent") == []


async def test_spans_of_a_run_that_is_gone_are_dropped(store: Store) -> None:
    await store.add_items("s", [user("q1")])
    [run] = await store.runs("s")
    await store.delete_session("s")
    await store._record_spans("s", [span_record(store, run.id, 0)])
    await store.add_items("s", [user("q2")])
    assert await store.spans(session_id="s") == []


async def test_bad_arguments_are_refused(store: Store) -> None:
    with pytest.raises(InvalidOperationError):
        await store.spans()
    with pytest.raises(RunNotFoundError):
        await store.spans(run_id=12345)
    with pytest.raises(InvalidOperationError):
        await store.spans(run_id="1")  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError):
        await store.slowest_spans(limit=0)
    with pytest.raises(InvalidOperationError):
        await store.error_spans(kind=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError):
        await store._record_spans("s", ["not a span"])  # type: ignore[list-item]


# ---------------------------------------------------------------------------------------------
# The viewer's timeline


def _span(n: int, parent: int | None, start: float | None, ms: float | None) -> TraceSpan:
    started = None if start is None else SPAN_START + timedelta(milliseconds=start)
    ended = None if started is None or ms is None else started + timedelta(milliseconds=ms)
    return TraceSpan(
        id=n,
        session_id="s",
        run_id=1,
        trace_id="t",
        span_id=f"s{n}",
        parent_span_id=None if parent is None else f"s{parent}",
        kind="agent",
        name=None,
        started_at=started,
        ended_at=ended,
        duration_ms=ms,
        error=None,
        data={"triggered": True} if n == 3 else {},
    )


def test_the_waterfall_nests_children_under_parents_in_time_order() -> None:
    from turnstore.web.timeline import WIDTH, waterfall

    rows = waterfall(
        [
            _span(4, 1, 60, 40),
            _span(1, None, 0, 100),
            _span(2, 1, 10, 0),  # an instant
            _span(3, 9, 50, 10),  # its parent is not stored: shown at the top level
            _span(5, None, None, None),  # never started
        ]
    )
    assert [(row.span.id, row.depth) for row in rows] == [(1, 0), (2, 1), (4, 1), (3, 0), (5, 0)]
    bars = {row.span.id: (round(row.x), round(row.width)) for row in rows}
    assert bars == {1: (0, WIDTH), 2: (100, 2), 4: (600, 400), 3: (500, 100), 5: (0, 2)}
    assert not rows[0].tripped  # not a guardrail
    # Every span in one instant fills the axis; parents in a cycle are still shown, once.
    [row] = waterfall([_span(1, None, 0, 0)])
    assert (row.x, row.width) == (0.0, float(WIDTH))
    cycle = waterfall([_span(1, 2, 0, 5), _span(2, 1, 1, 5)])
    assert sorted(row.span.id for row in cycle) == [1, 2]
    assert waterfall([]) == []


def test_the_time_axis_ticks_round_steps_from_zero() -> None:
    from turnstore.web.timeline import WIDTH, axis

    ticks = axis([_span(1, None, 0, 100), _span(2, 1, 10, 5)])
    assert [tick.label for tick in ticks] == [f"{n} ms" for n in range(0, 101, 20)]
    assert [round(tick.x) for tick in ticks] == [round(n / 100 * WIDTH) for n in range(0, 101, 20)]
    assert [t.label for t in axis([_span(1, None, 0, 90_000)])][:3] == ["0 ms", "20 s", "40 s"]
    assert len(axis([_span(1, None, 0, 12_345_678)])) <= 9
    assert [t.label for t in axis([_span(1, None, 0, 0)])] == ["0 ms"]
    assert axis([_span(1, None, None, None)]) == []


def test_a_span_opens_to_its_data_the_telling_fields_first() -> None:
    from dataclasses import replace

    from turnstore.web.timeline import details

    span = replace(
        _span(1, None, 0, 5),
        error="boom",
        data={"zeta": 1, "output": "out", "model": "gpt", "empty": "", "to_agent": "Billing"},
    )
    assert details(span) == [
        ("model", "gpt"),
        ("output", "out"),
        ("to_agent", "Billing"),
        ("error", "boom"),
        ("zeta", 1),
    ]


async def test_the_timeline_page(store: Store) -> None:
    from starlette.testclient import TestClient

    from turnstore.web import create_app

    await store.add_items("s", [user("q1")])
    [run] = await store.runs("s")
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    page = client.get(f"/runs/{run.id}/timeline")
    assert page.status_code == 200
    assert "No trace spans are stored for this turn" in page.text
    await store._record_spans(
        "s",
        [span_record(store, run.id, 0), span_record(store, run.id, 1, error=CLEAN, name=HOSTILE)],
    )
    page = client.get(f"/runs/{run.id}/timeline")
    assert page.status_code == 200
    assert page.text.count('<tr class="span') == 2
    assert "DROP TABLE spans; -- &lt;b&gt;" in page.text  # escaped, never markup
    assert "<b>" not in page.text.split("<main", 1)[1]
    assert client.get("/runs/123456/timeline").status_code == 404
    session_page = client.get("/sessions/s")
    assert f'href="/runs/{run.id}/timeline"' in session_page.text

"""A run's timeline: its trace spans as a waterfall, laid out here and drawn by a template
(one SVG bar per span: the viewer's policy allows no inline styles)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ..domain.model import TraceSpan

__all__ = ["WIDTH", "Row", "Tick", "axis", "details", "waterfall"]

WIDTH = 1000
"""The width of the timeline in SVG units: every bar is placed in 0..WIDTH."""
_MIN_BAR = 2.0  # an instant span still shows


@dataclass(frozen=True, slots=True)
class Row:
    """One span on the timeline: its depth in the span tree and its bar."""

    span: TraceSpan
    depth: int
    x: float
    width: float

    @property
    def tripped(self) -> bool:
        """A guardrail span whose tripwire triggered."""
        return self.span.kind == "guardrail" and self.span.data.get("triggered") is True


def _order(span: TraceSpan) -> tuple[float, int]:
    """Spans by start, those without one last."""
    start = span.started_at.timestamp() if span.started_at is not None else math.inf
    return start, span.id


def waterfall(spans: Sequence[TraceSpan]) -> list[Row]:
    """The spans depth first (children under their parent, each level by start time), each
    with a bar on one time axis from the first start to the last end."""
    starts = [span.started_at for span in spans if span.started_at is not None]
    ends = [span.ended_at or span.started_at for span in spans if span.started_at is not None]
    first = min(starts, default=None)
    total = (max(e for e in ends if e is not None) - first).total_seconds() if first else 0.0
    known = {span.span_id for span in spans}
    children: dict[str | None, list[TraceSpan]] = defaultdict(list)
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in known else None
        children[parent].append(span)

    def bar(span: TraceSpan) -> tuple[float, float]:
        if first is None or span.started_at is None:
            return 0.0, _MIN_BAR
        if total <= 0:  # every span in one instant
            return 0.0, float(WIDTH)
        x = (span.started_at - first).total_seconds() / total * WIDTH
        end = span.ended_at or span.started_at
        width = (end - span.started_at).total_seconds() / total * WIDTH
        return x, max(_MIN_BAR, min(width, WIDTH - x))

    rows: list[Row] = []
    seen: set[int] = set()

    def visit(parent: str | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=_order):
            if span.id in seen:  # a span that names itself as an ancestor
                continue
            seen.add(span.id)
            rows.append(Row(span, depth, *bar(span)))
            visit(span.span_id, depth + 1)

    visit(None, 0)
    # Spans caught in a cycle of parents are shown last, at the top level.
    rows.extend(Row(span, 0, *bar(span)) for span in spans if span.id not in seen)
    return rows


@dataclass(frozen=True, slots=True)
class Tick:
    """A mark of the time axis: where (0..WIDTH) and the time since the first start."""

    x: float
    label: str


_STEPS_MS = [m * 10**e for e in range(-1, 8) for m in (1, 2, 5)]


def _label(ms: float) -> str:
    if ms >= 60_000:
        return f"{ms / 60_000:g} min"
    if ms >= 1_000:
        return f"{ms / 1_000:g} s"
    return f"{ms:g} ms"


def axis(spans: Sequence[TraceSpan], most: int = 8) -> list[Tick]:
    """The ticks of the waterfall's time axis: 0 and every round step (1, 2 or 5 times a
    power of ten, in ms) up to the span of the run, at most ``most`` of them."""
    starts = [span.started_at for span in spans if span.started_at is not None]
    if not starts:
        return []
    first = min(starts)
    ends = [span.ended_at or span.started_at for span in spans if span.started_at is not None]
    total_ms = (max(e for e in ends if e is not None) - first).total_seconds() * 1000
    if total_ms <= 0:
        return [Tick(0.0, _label(0))]
    step = next((s for s in _STEPS_MS if total_ms / s <= most), _STEPS_MS[-1])
    count = int(total_ms // step)
    return [Tick(n * step / total_ms * WIDTH, _label(round(n * step, 6))) for n in range(count + 1)]


# What a span's data shows first, when it has them; then the rest, by name.
_FIRST = ("model", "usage", "input", "output", "from_agent", "to_agent", "error")


def details(span: TraceSpan) -> list[tuple[str, object]]:
    """The span's data as (field, value) to show: its model, usage, tool input and output,
    handoff target and error first, then every other field; empty values left out."""
    data = dict(span.data)
    if span.error is not None:
        data.setdefault("error", span.error)
    shown = [(name, data.pop(name)) for name in _FIRST if name in data]
    shown += sorted(data.items())
    return [(name, value) for name, value in shown if value not in (None, "", [], {})]

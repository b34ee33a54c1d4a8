"""A run's timeline: its trace spans as a waterfall, laid out here and drawn by a template
(one SVG bar per span: the viewer's policy allows no inline styles)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ..domain.model import TraceSpan

__all__ = ["WIDTH", "Row", "waterfall"]

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

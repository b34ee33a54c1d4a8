"""Pure helpers of the web viewer: text shaping, numbers, durations, and the usage chart.

Nothing here builds HTML: templates do, with autoescaping, so every stored string reaches the
page as text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

from ..domain import jsonout
from ..domain.model import ToolCall

__all__ = [
    "Bar",
    "Chart",
    "Pretty",
    "bar_chart",
    "call_class",
    "fill_days",
    "item_kind",
    "number",
    "pretty",
    "run_duration_ms",
    "status_class",
    "timestamp",
    "to_json",
]

# A page stays light whatever a tool returned; the full text is one click away.
PREVIEW_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Pretty:
    """A value made readable: JSON indented, or text as it is, cut at a limit."""

    text: str
    is_json: bool
    truncated: bool
    length: int


def pretty(value: str | None, limit: int | None = PREVIEW_CHARS) -> Pretty:
    """``value`` indented when it is a JSON object or array, else as is; cut at ``limit``."""
    if value is None:
        return Pretty("", False, False, 0)
    text, is_json = value, False
    stripped = value.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            text = jsonout.dumps(json.loads(value), indent=2)
            is_json = True
        except (ValueError, RecursionError):  # not JSON, or nested past the parser: as is
            pass
    if limit is not None and len(text) > limit:
        return Pretty(text[:limit], is_json, True, len(text))
    return Pretty(text, is_json, False, len(text))


def to_json(value: Any) -> str:
    """A stored item, indented, keys in their stored order."""
    return jsonout.dumps(value, indent=2)


def number(value: float | None) -> str:
    """An integer with thousands separators; empty for None."""
    return "" if value is None else f"{value:,.0f}"


# An item's type as people say it (the search page's "where"); others show their own name
# with its underscores as spaces.
_ITEM_KINDS = {
    "function_call": "tool call",
    "function_call_output": "tool output",
    "custom_tool_call": "tool call",
    "custom_tool_call_output": "tool output",
    "computer_call": "computer call",
    "computer_call_output": "computer output",
    "file_search_call": "file search",
    "web_search_call": "web search",
    "mcp_call": "MCP call",
    "mcp_list_tools": "MCP tools",
    "reasoning": "reasoning",
    "compaction": "compaction",
}


def item_kind(item_type: str, role: str | None) -> str:
    """Where a search match lies, readable: ``user message``, ``assistant message``, ``tool
    output``, … (never an identifier split mid-word)."""
    if item_type == "message" and role:
        return f"{role} message"
    return _ITEM_KINDS.get(item_type, item_type.replace("_", " "))


def run_duration_ms(created_at: datetime, updated_at: datetime) -> float | None:
    """How long a run was written for: its first item to its last; None when instantaneous."""
    ms = (updated_at - created_at).total_seconds() * 1000
    return ms if ms > 0 else None


def timestamp(value: datetime | None) -> str:
    """A time in UTC to the second, the form the page shows."""
    if value is None:
        return ""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%d %H:%M:%S")


_STATUS_CLASSES = {
    "completed": "ok",
    "failed": "bad",
    "incomplete": "bad",
    "pending": "wait",
    "interrupted": "wait",
    "in_progress": "wait",
    "searching": "wait",
    "generating": "wait",
}


def status_class(status: str | None) -> str:
    """The CSS class of a status badge: ok, bad, wait or other."""
    return _STATUS_CLASSES.get(status or "", "other")


def call_class(call: ToolCall) -> str:
    """The CSS class of a tool call's status badge: bad when the call failed (``ToolCall.failed``,
    whatever its status says), else as ``status_class``."""
    return "bad" if call.failed else status_class(call.status)


# ---------------------------------------------------------------------------------------------
# The usage chart: geometry computed here, drawn by a template as inline SVG.


@dataclass(frozen=True, slots=True)
class Bar:
    """One day's column: a lower and an upper segment (input and output tokens)."""

    x: float
    width: float
    label: str
    lower: float  # height of the lower segment
    upper: float  # height of the upper segment
    lower_value: int
    upper_value: int
    show_label: bool


@dataclass(frozen=True, slots=True)
class Chart:
    """A stacked bar chart laid out in a ``width`` by ``height`` box."""

    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    bars: list[Bar]
    ticks: list[tuple[float, str]]  # (y, label) of each horizontal grid line

    @property
    def baseline(self) -> int:
        """The y of the x axis."""
        return self.top + self.plot_height


def _nice_step(maximum: float, steps: int = 4) -> float:
    """A round grid step (1, 2 or 5 times a power of ten) that covers ``maximum`` in ``steps``."""
    raw = maximum / steps
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return float(factor * power)
    return float(10 * power)


def _short(value: float) -> str:
    """An axis label: 950, 1.5k, 20k, 3M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.1f}".removesuffix(".0") + suffix
    return f"{value:.0f}"


def fill_days(
    points: Sequence[tuple[date, int, int]], max_days: int = 366
) -> list[tuple[date, int, int]]:
    """Days from the first to the last point with no gaps (absent days are zero).

    More than ``max_days`` days: the points as given, so that a sparse history of years does
    not become thousands of empty bars.
    """
    if not points:
        return []
    ordered = sorted(points)
    first, last = ordered[0][0], ordered[-1][0]
    span = (last - first).days + 1
    if span > max_days:
        return list(ordered)
    by_day = {day: (day, lower, upper) for day, lower, upper in ordered}
    return [
        by_day.get(first + timedelta(days=i), (first + timedelta(days=i), 0, 0))
        for i in range(span)
    ]


def bar_chart(
    points: Sequence[tuple[str, int, int]],
    width: int = 880,
    height: int = 260,
) -> Chart:
    """Lay out stacked bars for ``(label, lower, upper)`` points, left to right."""
    left, top, right, bottom = 56, 12, 12, 28
    plot_width, plot_height = width - left - right, height - top - bottom
    maximum = max((lower + upper for _, lower, upper in points), default=0)
    step = _nice_step(maximum) if maximum > 0 else 1.0
    top_value = step * max(1, math.ceil(maximum / step))
    scale = plot_height / top_value
    ticks = [
        (top + plot_height - i * step * scale, _short(i * step))
        for i in range(round(top_value / step) + 1)
    ]
    slot = plot_width / max(1, len(points))
    bar_width = max(1.0, min(slot * 0.72, 48.0))  # a few days: bars, not slabs
    every = max(1, math.ceil(len(points) / 10))  # at most ~10 labels under the axis
    bars = [
        Bar(
            x=left + i * slot + (slot - bar_width) / 2,
            width=bar_width,
            label=label,
            lower=lower * scale,
            upper=upper * scale,
            lower_value=lower,
            upper_value=upper,
            show_label=i % every == 0,
        )
        for i, (label, lower, upper) in enumerate(points)
    ]
    return Chart(width, height, left, top, plot_width, plot_height, bars, ticks)

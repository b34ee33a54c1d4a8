"""Durations, one rule each for keeping them and for showing them.

Kept: every duration turnstore records or returns (``ToolCall.duration_ms``,
``ModelResponse.latency_ms``, ``ToolStats``'s ``*_ms``) is in milliseconds, rounded to the
microsecond (``MS_DECIMALS``): a clock's nanoseconds past that are noise, not data.

Shown (the CLI and the viewer alike): two significant digits below 100 ms (``0.93 ms``,
``5.4 ms``, ``27 ms``), whole milliseconds below a second (``850 ms``), then seconds, minutes
and hours (``2.4 s``, ``3 min 05 s``, ``1 h 02 min``).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

__all__ = ["MS_DECIMALS", "duration_text", "elapsed_ms", "kept_ms", "written_duration"]

MS_DECIMALS = 3
"""Milliseconds are kept to this many decimals: the microsecond."""


def elapsed_ms(start: float, end: float) -> float:
    """The milliseconds between two ``time.perf_counter()`` readings, as kept."""
    return round((end - start) * 1000, MS_DECIMALS)


def kept_ms(value: Any) -> float | None:
    """A duration read back (an average, a percentile, a value stored before this rule) as
    kept: milliseconds to the microsecond. None when unknown: NULL, or a value that is no
    finite number (text written by hand into SQLite's REAL column, NaN), which never fails a
    listing."""
    try:
        ms = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return round(ms, MS_DECIMALS) if math.isfinite(ms) else None


def duration_text(ms: float | None) -> str:
    """A duration for people, by the rule above; empty when unknown."""
    if ms is None or ms < 0 or math.isnan(ms):
        return ""
    if ms < 99.5:  # 99.5 and above round to 100, in whole milliseconds below
        return f"{ms:.2g} ms" if ms >= 0.01 or ms == 0 else "< 0.01 ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, whole = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {whole:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"([0-9]{1,9})([smhdw])")
# The longest duration whose cutoff a datetime can hold (it reaches back from now).
_LONGEST = timedelta(days=365 * 1000)


def written_duration(text: str) -> timedelta | None:
    """A duration as people write one for ``--since 7d`` or ``prune --idle-for 90d`` (the CLI)
    and the viewer's time range: ``90d``, ``12h``, ``30m``, ``2w``, ``45s``; None when
    ``text`` is not written so. ValueError when it is zero or more than a thousand years."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        return None
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if not 0 < seconds <= _LONGEST.total_seconds():
        raise ValueError(f"{text!r} is zero or more than 1000 years")
    return timedelta(seconds=seconds)

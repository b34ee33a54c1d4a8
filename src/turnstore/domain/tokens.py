"""Token counts and details: what the database stores of the figures someone else counted,
and how usages add up. Shared by the checks (``validate``), the rows, the session and the
importers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .model import DETAIL_FIELDS, TOKEN_FIELDS, Usage
from .text import storable

__all__ = [
    "MAX_INT",
    "clamped",
    "clamped_details",
    "is_count",
    "is_detail_name",
    "summed_details",
    "usage_sum",
    "usage_with",
]

MAX_INT = 2**63 - 1
"""The largest integer either backend stores (SQLite INTEGER, PostgreSQL BIGINT)."""


def is_count(value: Any) -> bool:
    """Whether ``value`` is an int the database stores as a count (0 to ``MAX_INT``)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT


def clamped(value: Any, limit: int) -> int:
    try:
        number = int(value or 0)
    except (TypeError, ValueError, OverflowError):  # not a number, NaN, infinity
        number = 0
    return min(max(number, 0), limit)


def is_detail_name(key: Any) -> bool:
    """Whether ``key`` names a token detail both backends store: text without NUL or lone
    surrogates (PostgreSQL's jsonb refuses them)."""
    return isinstance(key, str) and storable(key)


def clamped_details(details: Any, prefix: str = "") -> dict[str, int]:
    """Token details someone else reported (a mapping of counts, as the SDK's
    ``input_tokens_details`` dumps), as the database stores them: each count clamped into
    0..``MAX_INT``; a nested object's counts under dotted names
    (``cache_write_tokens_details.ttl_30m_tokens``), so that every count is one field that
    sums; what is not a count (null: not reported, text, a bool) or has a name no database
    stores (``is_detail_name``) is left out. Never raises."""
    if not isinstance(details, Mapping):
        return {}
    flat: dict[str, int] = {}
    for key, value in details.items():
        if not is_detail_name(key):
            continue
        if isinstance(value, Mapping):
            flat.update(clamped_details(value, f"{prefix}{key}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[prefix + key] = clamped(value, MAX_INT)
    return flat


def usage_with(counts: Sequence[int], inputs: dict[str, int], outputs: dict[str, int]) -> Usage:
    """A ``Usage`` of its counts (in ``TOKEN_FIELDS``' order) and its token details."""
    requests, input_tokens, output_tokens, total_tokens, cached, reasoning = counts
    return Usage(
        requests, input_tokens, output_tokens, total_tokens, cached, reasoning, inputs, outputs
    )


def summed_details(*details: dict[str, int]) -> dict[str, int]:
    """Token details added field by field."""
    total: dict[str, int] = {}
    for one in details:
        for key, count in one.items():
            total[key] = total.get(key, 0) + count
    return total


def usage_sum(usages: Iterable[Usage]) -> Usage:
    """Usages added: each count, and each field of the token details."""
    listed = list(usages)
    counts = [sum(getattr(u, name) for u in listed) for name in TOKEN_FIELDS]
    inputs, outputs = (
        summed_details(*(getattr(u, name) for u in listed)) for name in DETAIL_FIELDS
    )
    return usage_with(counts, inputs, outputs)

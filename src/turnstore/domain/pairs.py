"""Metadata filters as people type them, ``KEY=VALUE``: the CLI's ``--meta`` and the viewer's
sessions list read them by one rule."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidOperationError

__all__ = ["metadata_pairs"]


def metadata_pairs(pairs: Sequence[str], name: str) -> dict[str, Any] | None:
    """``KEY=VALUE`` pairs as a metadata filter (None for none); a value that reads as a JSON
    scalar (42, true, null) is that value, anything else the text as typed."""
    if not pairs:
        return None
    result: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise InvalidOperationError(f"{name} takes KEY=VALUE, not {pair!r}")
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            value = raw
        result[key] = value if isinstance(value, (str, int, float, bool, type(None))) else raw
    return result

"""Token usage as the Agents SDK reports it (``agents.usage.Usage`` or the like) → ``Usage``.

SDK-free (it reads attributes), so the session and the Runner hooks share it without importing
each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..domain import validate
from ..domain.model import Usage
from ..domain.tokens import clamped_details

__all__ = ["usage_from", "usage_of"]


def usage_of(wrapper: Any) -> Usage | None:
    """The cumulative run usage the SDK carries on its ``RunContextWrapper``, if any."""
    usage = getattr(wrapper, "usage", None)
    return None if usage is None else usage_from(usage)


def usage_from(usage: Any) -> Usage:
    """A ``Usage`` from an SDK usage object (``agents.usage.Usage`` or the like).

    Its token details are those of its requests (``request_usage_entries``, where the SDK
    keeps each request's details as the model reported them, every field included), summed
    field by field; without such entries, the object's own. The SDK's running total keeps
    only the fields it knows, so the entries are what keeps a field a later SDK or provider
    adds. Figures are clamped into what the database stores (see ``validate.clamped_usage``):
    the turn is stored whatever the figures say.
    """
    input_details = getattr(usage, "input_tokens_details", None)
    output_details = getattr(usage, "output_tokens_details", None)
    entries = getattr(usage, "request_usage_entries", None)
    if isinstance(entries, list) and entries:
        inputs = _summed(getattr(entry, "input_tokens_details", None) for entry in entries)
        outputs = _summed(getattr(entry, "output_tokens_details", None) for entry in entries)
    else:
        inputs, outputs = _dumped(input_details), _dumped(output_details)
    return validate.clamped_usage(
        requests=getattr(usage, "requests", 0),
        input_tokens=getattr(usage, "input_tokens", 0),
        output_tokens=getattr(usage, "output_tokens", 0),
        total_tokens=getattr(usage, "total_tokens", 0),
        cached_tokens=getattr(input_details, "cached_tokens", 0),
        reasoning_tokens=getattr(output_details, "reasoning_tokens", 0),
        input_tokens_details=inputs,
        output_tokens_details=outputs,
    )


def _dumped(details: Any) -> dict[str, Any]:
    """Token details as the SDK holds them (a pydantic model, extra fields included), as a
    dict of their fields; ``{}`` for None."""
    if details is None:
        return {}
    if isinstance(details, Mapping):
        return dict(details)
    dump = getattr(details, "model_dump", None)
    if callable(dump):
        dumped = dump()
        return dict(dumped) if isinstance(dumped, Mapping) else {}
    return dict(getattr(details, "__dict__", {}))


def _summed(details: Iterable[Any]) -> dict[str, Any]:
    """Each count of several requests' token details, summed field by field."""
    total: dict[str, Any] = {}
    for one in details:
        for key, value in clamped_details(_dumped(one)).items():
            total[key] = total.get(key, 0) + value
    return total

"""Token usage as the Agents SDK reports it (``agents.usage.Usage`` or the like) → ``Usage``.

SDK-free (it reads attributes), so the session and the Runner hooks share it without importing
each other.
"""

from __future__ import annotations

from typing import Any

from ..domain import validate
from ..domain.model import Usage

__all__ = ["usage_from", "usage_of"]


def usage_of(wrapper: Any) -> Usage | None:
    """The cumulative run usage the SDK carries on its ``RunContextWrapper``, if any."""
    usage = getattr(wrapper, "usage", None)
    return None if usage is None else usage_from(usage)


def usage_from(usage: Any) -> Usage:
    """A ``Usage`` from an SDK usage object (``agents.usage.Usage`` or the like).

    Figures are clamped into what the database stores (see ``validate.clamped_usage``): the
    turn is stored whatever the figures say.
    """
    input_details = getattr(usage, "input_tokens_details", None)
    output_details = getattr(usage, "output_tokens_details", None)
    return validate.clamped_usage(
        requests=getattr(usage, "requests", 0),
        input_tokens=getattr(usage, "input_tokens", 0),
        output_tokens=getattr(usage, "output_tokens", 0),
        total_tokens=getattr(usage, "total_tokens", 0),
        cached_tokens=getattr(input_details, "cached_tokens", 0),
        reasoning_tokens=getattr(output_details, "reasoning_tokens", 0),
    )

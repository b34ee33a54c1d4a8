"""What text both backends store: no NUL (PostgreSQL's text and jsonb refuse it) and no lone
surrogate (no UTF-8 encoder writes one). The one rule behind the argument checks
(``validate``) and the token details' names (``tokens``)."""

from __future__ import annotations

__all__ = ["encodes", "storable"]


def encodes(value: str) -> bool:
    """Whether ``value`` is valid UTF-8 text (holds no lone surrogate)."""
    # ASCII needs no encoding to be known valid: most arguments are.
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable(value: str) -> bool:
    """Whether both backends store ``value`` as text: no NUL, no lone surrogate."""
    return "\x00" not in value and encodes(value)

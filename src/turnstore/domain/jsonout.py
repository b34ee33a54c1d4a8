"""How turnstore writes JSON for output: the CLI's ``--json``, exports, the viewer's items.

One writer, ``dumps``: turnstore's records (dataclasses such as ``Run``, ``ToolCall``,
``SearchResult``) become objects of their fields, datetimes ISO 8601 text, tuples arrays;
text stays readable UTF-8, except in a value holding a lone surrogate (which stored items may
hold, and no UTF-8 can carry), which is written with ``\\u`` escapes instead: the same data
when parsed.

Stored items are another job, done by the item codec (``core/codec.py``): the exact text a
row keeps and reads back (checked nesting and keys, a compact form, fast decoding), not a
presentation of values.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Any

__all__ = ["dumps", "fields"]


def fields(record: Any) -> dict[str, Any]:
    """A dataclass instance's fields as a dict (not recursing: ``dumps`` handles the rest)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return fields(value)
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON text (see the module docstring)."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, default=_default)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: \u-escaped instead
            text = json.dumps(value, indent=indent, default=_default)
    return text

"""Pydantic AI messages (``ModelMessagesTypeAdapter``'s JSON) → the items turnstore stores.

A ``request``'s parts: ``system-prompt`` → a system message; ``user-prompt`` → a user
message (a run starts there; text and ``image-url`` parts become ``input_text`` and
``input_image``, others are kept verbatim); ``tool-return`` → a ``function_call_output``
(content that is not text as JSON text; a retried or failed one's too); ``retry-prompt`` →
the tool's output when it names a tool (the call failed: its output is the retry text), else
a developer message, as ``retry-feedback`` is; any other part is kept verbatim as an item.

A ``response``'s parts: ``text`` → an assistant message; ``tool-call`` → a ``function_call``
(``tool_call_id`` → ``call_id``, ``args`` as JSON text); ``thinking`` → a reasoning item with
its text. Its ``usage`` is the run's tokens (``cache_read_tokens`` cached; the reasoning tokens
of ``details``), one request each; its ``timestamp`` the run's time when it starts one.

Not kept: parts' ``timestamp`` (but the run's), ``provider_*`` fields, ``signature``, a
request's ``instructions`` and ``metadata``, ``model_name`` (the run has no model column for
imports).
"""

from __future__ import annotations

from typing import Any

from ..domain import validate
from ..domain.jsonout import dumps
from .histories import Converted, History, keyed_histories

__all__ = ["convert", "read"]


def read(parsed: Any, stem: str) -> list[tuple[str, History]]:
    """A list of messages, or an object of session id → messages."""
    return keyed_histories(parsed, stem)


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value)


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append({"type": "input_text", "text": part})
        elif isinstance(part, dict) and part.get("kind") == "image-url" and "url" in part:
            parts.append({"type": "input_image", "image_url": part["url"], "detail": "auto"})
        else:
            parts.append(part)
    return parts


def convert(message: Any) -> Converted:
    """One ``ModelRequest`` or ``ModelResponse``, as its JSON."""
    kind = message["kind"]
    items: list[dict[str, Any]] = []
    if kind == "request":
        for part in message["parts"]:
            items.append(_request_part(part))
        created = next((p.get("timestamp") for p in message["parts"] if "timestamp" in p), None)
        return Converted(items, created_at=message.get("timestamp") or created)
    if kind != "response":
        raise ValueError(f"not a Pydantic AI message kind: {kind!r}")
    for part in message["parts"]:
        part_kind = part["part_kind"]
        if part_kind == "text":
            items.append({"role": "assistant", "content": part["content"]})
        elif part_kind == "tool-call":
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.get("tool_call_id") or "",
                    "name": part["tool_name"],
                    "arguments": _json_text(part.get("args") or {}),
                }
            )
        elif part_kind == "thinking":
            items.append(
                {
                    "type": "reasoning",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": part["content"]}],
                }
            )
        else:
            items.append(dict(part))  # a builtin tool's call or return, a file: verbatim
    usage = message.get("usage")
    return Converted(
        items, _usage(usage) if isinstance(usage, dict) else None, message.get("timestamp")
    )


def _request_part(part: dict[str, Any]) -> dict[str, Any]:
    part_kind = part["part_kind"]
    if part_kind == "system-prompt":
        return {"role": "system", "content": part["content"]}
    if part_kind == "user-prompt":
        return {"role": "user", "content": _user_content(part["content"])}
    if part_kind == "tool-return":
        return {
            "type": "function_call_output",
            "call_id": part.get("tool_call_id") or "",
            "output": _json_text(part.get("content")),
        }
    if part_kind == "retry-prompt" and part.get("tool_name"):
        return {
            "type": "function_call_output",
            "call_id": part.get("tool_call_id") or "",
            "output": _json_text(part.get("content")),
        }
    if part_kind in ("retry-prompt", "retry-feedback"):
        return {"role": "developer", "content": _json_text(part.get("content"))}
    return dict(part)  # instructions, settings and capability changes: verbatim


def _usage(usage: dict[str, Any]) -> Any:
    details = usage.get("details") or {}
    inputs, outputs = usage.get("input_tokens") or 0, usage.get("output_tokens") or 0
    return validate.clamped_usage(
        requests=1,
        input_tokens=inputs,
        output_tokens=outputs,
        total_tokens=(inputs if isinstance(inputs, int) else 0)
        + (outputs if isinstance(outputs, int) else 0),
        cached_tokens=usage.get("cache_read_tokens"),
        reasoning_tokens=details.get("reasoning_tokens") if isinstance(details, dict) else 0,
    )

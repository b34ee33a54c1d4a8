"""LangChain messages (``messages_to_dict``'s JSON) → the items turnstore stores.

- ``system`` → a system message; ``human`` → a user message (a run starts there);
- ``ai`` → an assistant message with its text (when it has any), then a ``function_call``
  per entry of ``tool_calls`` (``id`` → ``call_id``, ``args`` as JSON text); its
  ``usage_metadata`` is the run's tokens (``input_token_details.cache_read`` cached,
  ``output_token_details.reasoning`` reasoning);
- ``tool`` → a ``function_call_output`` (``tool_call_id``, ``content``).

Text content blocks become text parts; other blocks are kept verbatim. Not kept:
``additional_kwargs``, ``response_metadata``, ``invalid_tool_calls``, a tool's ``artifact``
and ``status``, message ``id`` and ``name``.
"""

from __future__ import annotations

from typing import Any

from ..domain import validate
from ..domain.jsonout import dumps
from .histories import Converted, History, keyed_histories

__all__ = ["convert", "read"]


def read(parsed: Any, stem: str) -> list[tuple[str, History]]:
    """A list of messages, or an object of session id → messages (``messages_to_dict``'s)."""
    return keyed_histories(parsed, stem)


def _content(content: Any, text_type: str) -> Any:
    if isinstance(content, list):
        return [
            {"type": text_type, "text": block}
            if isinstance(block, str)
            else {"type": text_type, "text": block["text"]}
            if isinstance(block, dict) and block.get("type") == "text" and "text" in block
            else block
            for block in content
        ]
    return content


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for block in content or []:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            texts.append(str(block.get("text", "")))
    return "".join(texts)


def convert(message: Any) -> Converted:
    """One message: ``{"type": ..., "data": {...}}`` as ``messages_to_dict`` writes it (or
    its ``data`` alone)."""
    data = message.get("data", message)
    kind = message.get("type") or data.get("type")
    content = data.get("content", "")
    if kind == "human":
        return Converted([{"role": "user", "content": _content(content, "input_text")}])
    if kind == "system":
        return Converted([{"role": "system", "content": _content(content, "input_text")}])
    if kind == "tool":
        output = content if isinstance(content, str) else dumps(content)
        item = {"type": "function_call_output", "call_id": data["tool_call_id"], "output": output}
        return Converted([item])
    if kind not in ("ai", "AIMessageChunk"):
        raise ValueError(f"not a LangChain message type: {kind!r}")
    items: list[dict[str, Any]] = []
    text = _text(content)
    if text:
        items.append({"role": "assistant", "content": text})
    for call in data.get("tool_calls") or []:
        args = call.get("args", {})
        items.append(
            {
                "type": "function_call",
                "call_id": call.get("id") or "",
                "name": call["name"],
                "arguments": args if isinstance(args, str) else dumps(args),
            }
        )
    usage = data.get("usage_metadata")
    return Converted(items, _usage(usage) if isinstance(usage, dict) else None)


def _usage(usage: dict[str, Any]) -> Any:
    inputs = usage.get("input_token_details") or {}
    outputs = usage.get("output_token_details") or {}
    return validate.clamped_usage(
        requests=1,
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
        total_tokens=usage.get("total_tokens"),
        cached_tokens=inputs.get("cache_read"),
        reasoning_tokens=outputs.get("reasoning"),
    )

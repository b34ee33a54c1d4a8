"""Google ADK sessions (a ``Session``'s JSON, its ``events``) → the items turnstore stores.

Each event's ``content.parts``: ``text`` → a user message when the event's ``author`` is
``user`` (a run starts there), else an assistant message (``thought`` text: a reasoning
item); ``function_call`` → a ``function_call`` (``id`` → ``call_id``, ``args`` as JSON text);
``function_response`` → a ``function_call_output`` (its ``response`` as JSON text). An
event's ``usage_metadata`` is its run's tokens (``prompt_token_count`` input,
``candidates_token_count`` output, ``cached_content_token_count`` cached,
``thoughts_token_count`` reasoning), one request each; its ``timestamp`` (seconds) the run's
time. The session's ``id`` names it and its ``user_id`` is its user; fields are read in ADK's
snake_case or its JSON aliases' camelCase.

Not kept: ``actions`` (state deltas, transfers), ``state``, ``invocation_id``, ``branch``,
partial events (``partial``: a stream's pieces, whose whole event follows), inline data and
file parts (kept verbatim as content parts of the message).
"""

from __future__ import annotations

from typing import Any

from ..domain import validate
from ..domain.jsonout import dumps
from .histories import Converted, History

__all__ = ["convert", "read"]


def _get(source: Any, name: str, default: Any = None) -> Any:
    """``name`` in snake_case, or as ADK's JSON aliases spell it (camelCase)."""
    if not isinstance(source, dict):
        return default
    if name in source:
        return source[name]
    head, *rest = name.split("_")
    return source.get(head + "".join(word.title() for word in rest), default)


def read(parsed: Any, stem: str) -> list[tuple[str, History]]:
    """A session object, or a list of them; each named by its ``id``."""
    sessions = parsed if isinstance(parsed, list) else [parsed]
    found = []
    for index, session in enumerate(sessions):
        events = _get(session, "events")
        if not isinstance(events, list):
            raise ValueError(f"session {index + 1} has no list of events")
        sid = _get(session, "id")
        catalogue = {"user_id": _get(session, "user_id")} if _get(session, "user_id") else {}
        found.append((str(sid) if sid else stem, History(events, catalogue)))
    return found


def convert(event: Any) -> Converted:
    """One event."""
    if _get(event, "partial"):
        return Converted([])
    content = _get(event, "content") or {}
    from_user = _get(event, "author") == "user"
    items: list[dict[str, Any]] = []
    texts: list[Any] = []
    for part in _get(content, "parts") or []:
        call, response = _get(part, "function_call"), _get(part, "function_response")
        if call is not None:
            items.append(
                {
                    "type": "function_call",
                    "call_id": _get(call, "id") or "",
                    "name": _get(call, "name"),
                    "arguments": dumps(_get(call, "args") or {}),
                }
            )
        elif response is not None:
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": _get(response, "id") or "",
                    "output": dumps(_get(response, "response")),
                }
            )
        elif _get(part, "thought") and isinstance(_get(part, "text"), str):
            reasoning = [{"type": "reasoning_text", "text": _get(part, "text")}]
            items.append({"type": "reasoning", "summary": [], "content": reasoning})
        elif isinstance(_get(part, "text"), str):
            texts.append(_get(part, "text"))
        else:
            texts.append(part)  # inline data, a file, code: kept verbatim
    if texts:
        text_only = all(isinstance(text, str) for text in texts)
        if from_user:
            body: Any = "".join(texts) if text_only else [_part(t, "input_text") for t in texts]
            items.insert(0, {"role": "user", "content": body})
        else:
            body = "".join(texts) if text_only else [_part(t, "output_text") for t in texts]
            items.insert(0, {"role": "assistant", "content": body})
    usage = _get(event, "usage_metadata")
    return Converted(items, _usage(usage) if usage else None, _get(event, "timestamp"))


def _part(text: Any, kind: str) -> Any:
    return {"type": kind, "text": text} if isinstance(text, str) else text


def _usage(usage: Any) -> Any:
    return validate.clamped_usage(
        requests=1,
        input_tokens=_get(usage, "prompt_token_count"),
        output_tokens=_get(usage, "candidates_token_count"),
        total_tokens=_get(usage, "total_token_count"),
        cached_tokens=_get(usage, "cached_content_token_count"),
        reasoning_tokens=_get(usage, "thoughts_token_count"),
    )

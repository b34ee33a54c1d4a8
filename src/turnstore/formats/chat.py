"""Chat Completions messages ↔ the Responses items turnstore stores, both ways, exactly.

An application that keeps a Chat Completions ``messages`` list stores it as items (so its
runs, tool calls and tokens land in the same columns as the Agents SDK's) and reads back the
list it wrote. The rules are the SDK's (``agents.models.chatcmpl_converter``), written here
so that they hold without it:

- a ``system``, ``developer`` or ``user`` message is an input message of the same role; its
  ``text``, ``image_url`` and ``file`` parts are ``input_text``, ``input_image`` and
  ``input_file`` parts;
- an ``assistant`` message is an assistant message (its ``text`` parts ``output_text``
  parts) unless its content is null, then one ``function_call`` item per tool call;
- a ``tool`` message is a ``function_call_output`` item.

What the items cannot hold (a message's ``name``, ``refusal``, ``audio``; an assistant's null
content beside text; a content part of another shape; where a message's tool calls end when
two assistant messages follow each other) rides on its first item under ``turnstore_chat``,
so that reading back is exact. Such an item is turnstore's own: the Responses API would refuse
it, so a session written from a messages list that uses them is for ``get_messages`` only.

Reading items the Agents SDK wrote gives what its converter gives for them: an assistant's
``output_text`` parts joined by newlines, a refusal as ``refusal``, reasoning and other items
the Chat Completions API has no message for left out (docs/chat.md lists them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..domain import validate
from ..domain.model import Usage
from ..errors import InvalidOperationError

__all__ = ["EXTRA", "completion_usage", "items_to_messages", "messages_to_items"]

EXTRA = "turnstore_chat"
"""The item key holding what a message had that its items cannot hold."""

_INPUT_ROLES = frozenset({"system", "developer", "user"})


def _part_to_item(part: Any, role: str) -> Any:
    """A content part as a Responses part, or unchanged when it has no exact equivalent."""
    if not isinstance(part, Mapping):
        return part
    keys = set(part)
    kind = part.get("type")
    if kind == "text" and keys == {"type", "text"} and isinstance(part["text"], str):
        return {
            "type": "output_text" if role == "assistant" else "input_text",
            "text": part["text"],
        }
    if role == "assistant":
        return part
    if kind == "image_url" and keys == {"type", "image_url"}:
        image = part["image_url"]
        if (
            isinstance(image, Mapping)
            and set(image) in ({"url"}, {"url", "detail"})
            and all(isinstance(value, str) for value in image.values())
        ):
            return {"type": "input_image", "image_url": image["url"]} | (
                {"detail": image["detail"]} if "detail" in image else {}
            )
    if kind == "file" and keys == {"type", "file"} and isinstance(part["file"], Mapping):
        file = part["file"]
        if file and set(file) <= {"file_id", "file_data", "filename"}:
            return {"type": "input_file", **file}
    return part


def _part_to_chat(part: Any) -> Any:
    if not isinstance(part, Mapping):
        return part
    kind = part.get("type")
    if kind in ("input_text", "output_text"):
        return {"type": "text", "text": part.get("text")}
    if kind == "input_image" and "image_url" in part:
        image = {"url": part["image_url"]}
        if part.get("detail") is not None:
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        return {"type": "file", "file": {k: v for k, v in part.items() if k != "type"}}
    return part


def _content_to_item(content: Any, role: str) -> Any:
    if isinstance(content, list):
        return [_part_to_item(part, role) for part in content]
    return content


def _content_to_chat(content: Any) -> Any:
    if isinstance(content, list):
        return [_part_to_chat(part) for part in content]
    return content


def _with_extra(item: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    if extra:
        item[EXTRA] = extra
    return item


def _rest(message: Mapping[str, Any], taken: Iterable[str]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if key not in taken}


def _is_function_call(call: Any) -> bool:
    function = call.get("function") if isinstance(call, Mapping) else None
    return (
        isinstance(call, Mapping)
        and set(call) == {"id", "type", "function"}
        and call["type"] == "function"
        and isinstance(function, Mapping)
        and set(function) == {"name", "arguments"}
    )


def _tool_call_items(calls: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call",
            "call_id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"]["arguments"],
        }
        for call in calls
    ]


def messages_to_items(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """The items that ``messages`` (Chat Completions messages) are, by the rules above."""
    items: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InvalidOperationError(
                f"messages[{index}] must be a mapping with a role, got {message!r:.80}"
            )
        role = message["role"]
        if role in _INPUT_ROLES:
            if "content" not in message:
                raise InvalidOperationError(f"messages[{index}] ({role}) has no content")
            item = {"role": role, "content": _content_to_item(message["content"], role)}
            items.append(_with_extra(item, _rest(message, ("role", "content"))))
        elif role == "tool":
            if "tool_call_id" not in message or "content" not in message:
                raise InvalidOperationError(
                    f"messages[{index}] (tool) needs tool_call_id and content"
                )
            item = {
                "type": "function_call_output",
                "call_id": message["tool_call_id"],
                "output": message["content"],
            }
            items.append(_with_extra(item, _rest(message, ("role", "tool_call_id", "content"))))
        elif role == "assistant":
            items.extend(_assistant_items(message, items[-1] if items else None))
        else:
            raise InvalidOperationError(
                f"messages[{index}] has the role {role!r}: turnstore stores system, developer, "
                "user, assistant and tool messages"
            )
    return items


def _assistant_items(
    message: Mapping[str, Any], before: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    listed = message.get("tool_calls")
    # Only function calls are items; others (a custom tool's) ride on the message verbatim.
    exact = isinstance(listed, list) and bool(listed) and all(map(_is_function_call, listed))
    calls = _tool_call_items(listed) if exact else []  # type: ignore[arg-type]
    content = message.get("content")
    extra = _rest(message, ("role", "content", "tool_calls") if calls else ("role", "content"))
    if content is None and calls:
        if "content" not in message:
            extra["content"] = "absent"
        # Calls right after an assistant message or its calls would read back as that one's.
        if before is not None and (
            before.get("type") == "function_call" or before.get("role") == "assistant"
        ):
            extra["starts"] = True
        return [_with_extra(calls[0], extra), *calls[1:]]
    if content is None:
        extra["content"] = "absent" if "content" not in message else None
    item = {
        "role": "assistant",
        "content": _content_to_item("" if content is None else content, "assistant"),
    }
    return [_with_extra(item, extra), *calls]


def items_to_messages(items: Iterable[Any]) -> list[dict[str, Any]]:
    """The Chat Completions messages that ``items`` are: ``messages_to_items`` undone."""
    return list(_messages(items))


def _messages(items: Iterable[Any]) -> Iterator[dict[str, Any]]:
    assistant: dict[str, Any] | None = None  # the message that tool calls join
    for item in items:
        if not isinstance(item, Mapping):
            continue
        extra = dict(item.get(EXTRA) or {})
        kind = item.get("type")
        if kind == "function_call":
            starts = extra.pop("starts", False)
            if assistant is None or starts:
                if assistant is not None:
                    yield assistant
                assistant = {"role": "assistant", "content": None}
                if extra.pop("content", None) == "absent":
                    del assistant["content"]
                assistant.update(extra)
            assistant.setdefault("tool_calls", []).append(
                {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                }
            )
            continue
        if assistant is not None:
            yield assistant
            assistant = None
        if kind == "function_call_output":
            message = {
                "role": "tool",
                "tool_call_id": item.get("call_id"),
                "content": item.get("output"),
            }
            yield message | extra
            continue
        role = item.get("role")
        if kind not in (None, "message") or not isinstance(role, str):
            continue  # reasoning, hosted tool calls, compaction: no chat message holds them
        if role != "assistant":
            yield {"role": role, "content": _content_to_chat(item.get("content"))} | extra
            continue
        assistant = _assistant_message(item, extra)
        if "tool_calls" in assistant:
            yield assistant
            assistant = None
    if assistant is not None:
        yield assistant


def _assistant_message(item: Mapping[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    content = item.get("content")
    message: dict[str, Any] = {"role": "assistant"}
    if "content" in extra:
        marker = extra.pop("content")
        if marker != "absent":
            message["content"] = marker
    elif item.get("type") == "message" and isinstance(content, list):
        # The SDK's output message: its text parts joined, its refusal apart (as the SDK's
        # converter reads it).
        texts = [str(p["text"]) for p in content if isinstance(p, Mapping) and "text" in p]
        refusals = [p.get("refusal") for p in content if isinstance(p, Mapping) and "refusal" in p]
        message["content"] = "\n".join(texts) if texts else None
        if refusals:
            message["refusal"] = refusals[-1]
    else:
        message["content"] = _content_to_chat(content)
    message.update(extra)
    return message


def completion_usage(usage: Any) -> Usage | None:
    """A ``Usage`` from a Chat Completions response's ``usage`` (the object or its dict): one
    request; cached and reasoning tokens from its details. None stays None."""
    if usage is None or isinstance(usage, Usage):
        return usage

    def figure(source: Any, name: str) -> Any:
        value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
        return 0 if value is None else value

    prompt = figure(usage, "prompt_tokens")
    completion = figure(usage, "completion_tokens")
    return validate.clamped_usage(
        requests=1,
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=figure(usage, "total_tokens"),
        cached_tokens=figure(figure(usage, "prompt_tokens_details") or {}, "cached_tokens"),
        reasoning_tokens=figure(
            figure(usage, "completion_tokens_details") or {}, "reasoning_tokens"
        ),
    )

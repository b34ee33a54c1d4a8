"""Classify one Responses-API input item into the columns turnstore extracts from it.

Pure functions: no I/O, no driver imports. The verbatim item is stored elsewhere; what is
computed here only fills the structured columns (type, role, call_id, tool name, text,
arguments, output, status, error), so a classification that misses a field loses nothing.

Dispatch is a dict from item type to a small handler; every tool type is one row of
``_HANDLERS`` built by ``_tool`` from the item's field names (checked against the
``openai.types.responses`` input-item definitions and what openai-agents 0.24 writes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .toolcalls import item_error

__all__ = ["ItemInfo", "ItemKind", "classify", "clean_text"]

ItemKind = Literal["message", "tool_call", "tool_output", "hosted_tool", "other", "unknown"]


@dataclass(frozen=True, slots=True)
class ItemInfo:
    """What turnstore extracts from one item. See ``classify``."""

    type: str
    kind: ItemKind
    role: str | None = None
    call_id: str | None = None
    name: str | None = None
    tool_kind: str | None = None
    text: str | None = None
    arguments: str | None = None
    output: str | None = None
    status: str | None = None
    error: str | None = None

    @property
    def starts_run(self) -> bool:
        """A user message starts a new run."""
        return self.kind == "message" and self.role == "user"


_Handler = Callable[[Mapping[str, Any]], ItemInfo]
_Getter = Callable[[Mapping[str, Any]], str | None]

# NUL is refused by PostgreSQL TEXT, lone surrogates by every UTF-8 encoder; U+FDD0 and U+FDD1
# are the search's snippet marks (core.search.SNIPPET_MARKS), which stored text must not hold.
_UNSAFE = re.compile("[\x00\ud800-\udfff\ufdd0\ufdd1]")
# Stand-ins for media parts: the (often base64) payload stays in the verbatim item only.
_MEDIA = {"input_image": "<image>", "computer_screenshot": "<image>", "input_file": "<file>"}
_MARKERS = frozenset(_MEDIA.values())
_PART_KEYS = ("text", "refusal", "stdout", "stderr")  # shell output entries carry stdout/stderr


def clean_text(s: str) -> str:
    """Return ``s`` with NUL, lone surrogates and the snippet marks replaced by U+FFFD."""
    if s.isascii():  # O(1) in CPython, and ASCII can only hold NUL of them
        return s.replace("\x00", "\ufffd") if "\x00" in s else s
    return _UNSAFE.sub("\ufffd", s) if _UNSAFE.search(s) else s


def _str(value: object) -> str | None:
    return clean_text(value) if isinstance(value, str) else None


def _dump(value: object) -> str | None:
    try:
        return clean_text(json.dumps(value, ensure_ascii=False, default=str))
    # Cycles, odd keys, a failing __str__: the column stays empty; the item itself is kept.
    except Exception:
        return None


def _text(value: object) -> str | None:
    """A str as is, None as None, anything else as JSON."""
    if isinstance(value, str):
        return clean_text(value)
    return None if value is None else _dump(value)


def _parts(parts: list[Any] | tuple[Any, ...], media: bool) -> str | None:
    """Join the texts of content parts; with ``media``, images and files leave a marker."""
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            if part:
                texts.append(part)
        elif isinstance(part, Mapping):
            found = False
            for key in _PART_KEYS:
                value = part.get(key)
                if isinstance(value, str) and value:
                    texts.append(value)
                    found = True
            kind = part.get("type")
            if media and not found and isinstance(kind, str) and kind in _MEDIA:
                texts.append(_MEDIA[kind])
    return clean_text("\n".join(texts)) if texts else None


def _output(value: object) -> str | None:
    """An output as text: a str as is, content parts' texts joined, else JSON."""
    if isinstance(value, str):
        return clean_text(value)
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        joined = _parts(value, media=True)
        if joined is not None:
            return joined
    elif isinstance(value, Mapping):
        kind = value.get("type")
        if isinstance(kind, str) and kind in _MEDIA:  # computer_call_output's screenshot
            return _MEDIA[kind]
    return _dump(value)


def _get(*keys: str, conv: Callable[[object], str | None] = _text) -> _Getter:
    """A getter converting the first of ``keys`` that is present and not None."""

    def get(item: Mapping[str, Any]) -> str | None:
        for key in keys:
            value = item.get(key)
            if value is not None:
                return conv(value)
        return None

    return get


def _tool_names(item: Mapping[str, Any]) -> str | None:
    """The names of listed tools (mcp_list_tools, tool_search_output), one a line."""
    tools = item.get("tools")
    if not isinstance(tools, (list, tuple)):
        return None
    names: list[str] = []
    for tool in tools:
        if isinstance(tool, Mapping):
            for key in ("name", "server_label", "type"):  # namespaces and MCP servers: no name
                name = tool.get(key)
                if isinstance(name, str) and name:
                    names.append(name)
                    break
    return clean_text("\n".join(names)) if names else None


def _approval(item: Mapping[str, Any]) -> str | None:
    """mcp_approval_response: the decision and the optional reason."""
    approve, reason = item.get("approve"), _str(item.get("reason"))
    verdict = ("approved" if approve else "rejected") if isinstance(approve, bool) else None
    if verdict and reason:
        return f"{verdict}: {reason}"
    return verdict or reason


def _image(item: Mapping[str, Any]) -> str | None:
    # Never copy the base64 result; record only that there is one.
    return "<image>" if isinstance(item.get("result"), str) else None


def _tool(
    kind: ItemKind,
    tool_kind: str,
    name: str | None = None,
    *,
    ids: tuple[str, ...] = ("call_id",),
    args: _Getter | None = None,
    out: _Getter | None = None,
    error: _Getter | None = None,
    handoffs: bool = False,
) -> _Handler:
    """A handler for one tool item type.

    ``name`` is the fixed tool name for types without a name field (None: read "name");
    ``ids`` are the keys of the pairing id, tried in order.
    """

    def handle(item: Mapping[str, Any]) -> ItemInfo:
        call_id = None
        for key in ids:
            call_id = _str(item.get(key))
            if call_id is not None:
                break
        tool_name = _str(item.get("name")) if name is None else name
        arguments = args(item) if args else None
        output = out(item) if out else None
        status = _str(item.get("status"))
        err = error(item) if error else None
        if err is None and status is not None:  # the rule asks nothing more of a bare item
            err = item_error(kind, status, output)
        shown = output if output not in _MARKERS else None
        text = "\n".join(t for t in (arguments, shown) if t) or None
        return ItemInfo(
            type=item["type"],
            kind=kind,
            call_id=call_id,
            name=tool_name,
            # A handoff is a function call named transfer_to_*; its output can't tell.
            tool_kind="handoff"
            if handoffs and tool_name and tool_name.startswith("transfer_to_")
            else tool_kind,
            text=text,
            arguments=arguments,
            output=output,
            status=status,
            error=err,
        )

    return handle


def _message(item: Mapping[str, Any]) -> ItemInfo:
    content = item.get("content")
    if isinstance(content, str):
        text = clean_text(content) or None
    elif isinstance(content, (list, tuple)):
        text = _parts(content, media=False)
    else:
        text = None
    return ItemInfo(
        type="message",
        kind="message",
        role=_str(item.get("role")),
        text=text,
        status=_str(item.get("status")),
    )


def _reasoning(item: Mapping[str, Any]) -> ItemInfo:
    # The summary is what OpenAI models expose; other providers fill "content" instead.
    text = None
    for key in ("summary", "content"):
        parts = item.get(key)
        if isinstance(parts, (list, tuple)) and (text := _parts(parts, media=False)):
            break
    return ItemInfo(type="reasoning", kind="other", text=text, status=_str(item.get("status")))


def _other(item: Mapping[str, Any]) -> ItemInfo:
    return ItemInfo(type=item["type"], kind="other", status=_str(item.get("status")))


_OUT = _get("output", conv=_output)

_HANDLERS: dict[str, _Handler] = {
    "message": _message,
    "reasoning": _reasoning,
    **dict.fromkeys(
        (
            "compaction",
            "compaction_trigger",
            "item_reference",
            "additional_tools",
            "configuration_update",
        ),
        _other,
    ),
    # Calls paired later with an output item by call_id.
    "function_call": _tool("tool_call", "function", args=_get("arguments"), handoffs=True),
    "function_call_output": _tool("tool_output", "function", out=_OUT),
    "custom_tool_call": _tool("tool_call", "custom", args=_get("input")),
    "custom_tool_call_output": _tool("tool_output", "custom", out=_OUT),
    "computer_call": _tool("tool_call", "computer", "computer", args=_get("action", "actions")),
    "computer_call_output": _tool("tool_output", "computer", "computer", out=_OUT),
    "local_shell_call": _tool("tool_call", "local_shell", "local_shell", args=_get("action")),
    # The API type keys this output by "id"; the Agents SDK writes "call_id".
    "local_shell_call_output": _tool(
        "tool_output", "local_shell", "local_shell", ids=("call_id", "id"), out=_OUT
    ),
    "shell_call": _tool("tool_call", "shell", "shell", args=_get("action")),
    "shell_call_output": _tool("tool_output", "shell", "shell", out=_OUT),
    "apply_patch_call": _tool(
        "tool_call", "apply_patch", "apply_patch", args=_get("operation", "operations")
    ),
    "apply_patch_call_output": _tool("tool_output", "apply_patch", "apply_patch", out=_OUT),
    # Server-executed searches may have no call_id: the pair is then only adjacent.
    "tool_search_call": _tool("tool_call", "tool_search", "tool_search", args=_get("arguments")),
    "tool_search_output": _tool("tool_output", "tool_search", "tool_search", out=_tool_names),
    # Programmatic tool calling: JavaScript run by the API, paired by call_id.
    "program": _tool("tool_call", "program", "program", args=_get("code")),
    "program_output": _tool("tool_output", "program", "program", out=_get("result", conv=_output)),
    "mcp_approval_request": _tool("tool_call", "mcp_approval", ids=("id",), args=_get("arguments")),
    "mcp_approval_response": _tool(
        "tool_output", "mcp_approval", ids=("approval_request_id",), out=_approval
    ),
    # Hosted tools: one item is both the call and its result, keyed by its own id.
    "mcp_call": _tool(
        "hosted_tool", "mcp", ids=("id",), args=_get("arguments"), out=_OUT, error=_get("error")
    ),
    "mcp_list_tools": _tool(
        "hosted_tool",
        "mcp_list_tools",
        "mcp_list_tools",
        ids=("id",),
        out=_tool_names,
        error=_get("error"),
    ),
    "web_search_call": _tool(
        "hosted_tool", "web_search", "web_search", ids=("id",), args=_get("action")
    ),
    "file_search_call": _tool(
        "hosted_tool",
        "file_search",
        "file_search",
        ids=("id",),
        args=_get("queries"),
        out=_get("results"),
    ),
    "code_interpreter_call": _tool(
        "hosted_tool",
        "code_interpreter",
        "code_interpreter",
        ids=("id",),
        args=_get("code"),
        out=_get("outputs"),
    ),
    "image_generation_call": _tool(
        "hosted_tool",
        "image_generation",
        "image_generation",
        ids=("id",),
        args=_get("revised_prompt"),
        out=_image,
        error=_get("error"),
    ),
}


def classify(item: Mapping[str, Any]) -> ItemInfo:
    """Return the structured columns of ``item``. Never raises for a mapping.

    ``type`` is the item's "type", "message" for a typeless item with a "role" (how the
    SDK writes user input), else "unknown". Unknown types get ``kind="unknown"``. Every
    extracted string is safe for SQLite and PostgreSQL TEXT (no NUL, no lone surrogates).
    """
    item_type = item.get("type")
    if isinstance(item_type, str):
        handler = _HANDLERS.get(item_type)
        if handler is not None:
            return handler(item)
        return ItemInfo(type=clean_text(item_type), kind="unknown", status=_str(item.get("status")))
    if item_type is None and "role" in item:
        return _message(item)
    return ItemInfo(type="unknown", kind="unknown", status=_str(item.get("status")))

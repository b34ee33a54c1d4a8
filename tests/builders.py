"""Item builders shared by the session, tree and property tests.

Shapes follow what openai-agents 0.24 persists: the user input has no ``type`` key, model
output items are the Responses API's, tool outputs carry the call's ``call_id``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any


def user(text: str, **extra: Any) -> dict[str, Any]:
    """A user message as the SDK writes a str input: no ``type`` key."""
    return {"role": "user", "content": text, **extra}


def assistant(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    """A final assistant message, as the SDK converts a model output message."""
    return {
        "id": item_id,
        "content": [{"annotations": [], "text": text, "type": "output_text", "logprobs": []}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }


def call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    """A function tool call."""
    return {
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
        "type": "function_call",
        "id": f"fc_{call_id}",
        "status": "completed",
    }


def output(call_id: str, text: str) -> dict[str, Any]:
    """A function tool call's output."""
    return {"call_id": call_id, "output": text, "type": "function_call_output"}


def run_in_new_loop(coro_factory: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a coroutine in a fresh event loop on a thread of its own; return its value."""
    result: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro_factory()))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]

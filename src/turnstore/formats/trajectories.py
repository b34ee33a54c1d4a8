"""A session's course as other tools read agent trajectories: an ATIF trajectory (Harbor's
Agent Trajectory Interchange Format, which Phoenix and other tools upload) and the Vercel AI
SDK's ``UIMessage`` list. Pure rendering over ``queries.ExportData``, one course (the active
path): both formats hold a line, not a tree.

**atif** (``ATIF-v1.6``): a step per system or user message and per model response (the
assistant's items between two tool outputs or user messages): its ``message`` (the text),
``reasoning_content``, ``tool_calls`` (``tool_call_id``, ``function_name``, ``arguments`` as
an object: JSON text that is not one is ``{"input": text}``) and ``observation.results``
(each output, by ``source_call_id``). A run's tokens are its last agent step's ``metrics``
(turnstore keeps tokens per run, not per response); ``final_metrics`` sums them.

**ui-messages**: a ``UIMessage`` (``id``, ``role``, ``parts``, ``metadata``) per system and
user message, and one assistant message per run's answer: ``step-start`` before each model
response, ``reasoning``, ``text`` and ``tool-NAME`` parts (``toolCallId``, ``input``,
``state`` ``output-available`` with ``output``, ``output-error`` with ``errorText``, or
``input-available`` while it has no output). ``metadata`` holds the run id and its tokens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.queries import ExportData
from ..domain.jsonout import dumps
from ..domain.model import Run, ToolCall

__all__ = ["ATIF_VERSION", "atif", "ui_messages"]

ATIF_VERSION = "ATIF-v1.6"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = [
        str(part.get("text") or part.get("refusal") or "")
        for part in content or []
        if isinstance(part, Mapping)
    ]
    return "\n".join(text for text in texts if text)


def _arguments(text: Any) -> dict[str, Any]:
    try:
        parsed = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"input": text}


def _reasoning(item: Mapping[str, Any]) -> str:
    parts = [*(item.get("summary") or []), *(item.get("content") or [])]
    return _text(parts)


@dataclass
class _Response:
    """One model response: the assistant's items between two inputs."""

    texts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[Mapping[str, Any]] = field(default_factory=list)
    outputs: list[Mapping[str, Any]] = field(default_factory=list)


@dataclass
class _Input:
    role: str
    text: str


def _course(items: list[Any]) -> list[_Input | _Response]:
    """A run's items as inputs and model responses; a tool output joins its call's response
    (and ends it: what the model says next is a new response)."""
    course: list[_Input | _Response] = []
    response: _Response | None = None
    by_call: dict[Any, _Response] = {}
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind, role = item.get("type"), item.get("role")
        if kind in (None, "message") and role in ("system", "developer", "user"):
            response = None
            course.append(
                _Input("system" if role == "developer" else role, _text(item.get("content")))
            )
            continue
        if kind == "function_call_output":
            owner = by_call.get(item.get("call_id"))
            if owner is not None:
                owner.outputs.append(item)
                if owner is response:
                    response = None
            continue
        if response is None:
            response = _Response()
            course.append(response)
        if kind == "function_call":
            response.calls.append(item)
            by_call[item.get("call_id")] = response
        elif kind == "reasoning":
            response.reasoning.append(_reasoning(item))
        elif role == "assistant":
            response.texts.append(_text(item.get("content")))
    return course


def _metrics(run: Run) -> dict[str, int]:
    usage = run.usage
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "cached_tokens": usage.cached_tokens,
    }


def atif(data: ExportData) -> dict[str, Any]:
    """The session's active path as an ATIF trajectory (see the module docstring)."""
    steps: list[dict[str, Any]] = []
    for run, items in data.runs:
        last_agent: dict[str, Any] | None = None
        for part in _course(items):
            step: dict[str, Any] = {
                "step_id": len(steps) + 1,
                "timestamp": run.created_at.isoformat(),
            }
            if isinstance(part, _Input):
                step |= {"source": part.role, "message": part.text}
            else:
                step |= {"source": "agent", "message": "\n".join(part.texts)}
                if run.model:
                    step["model_name"] = run.model
                if part.reasoning:
                    step["reasoning_content"] = "\n".join(part.reasoning)
                if part.calls:
                    step["tool_calls"] = [
                        {
                            "tool_call_id": call.get("call_id"),
                            "function_name": call.get("name"),
                            "arguments": _arguments(call.get("arguments")),
                        }
                        for call in part.calls
                    ]
                if part.outputs:
                    step["observation"] = {
                        "results": [
                            {"source_call_id": out.get("call_id"), "content": _output(out)}
                            for out in part.outputs
                        ]
                    }
                last_agent = step
            steps.append(step)
        if last_agent is not None and run.usage.total_tokens:
            last_agent["metrics"] = _metrics(run)
    runs = [run for run, _ in data.runs]
    info = data.session
    return {
        "schema_version": ATIF_VERSION,
        "session_id": info.session_id,
        "agent": {
            "name": next((r.agent_name for r in reversed(runs) if r.agent_name), "agent"),
            "version": "unknown",
            **({"model_name": m} if (m := _last_model(runs)) else {}),
        },
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": sum(r.usage.input_tokens for r in runs),
            "total_completion_tokens": sum(r.usage.output_tokens for r in runs),
            "total_cached_tokens": sum(r.usage.cached_tokens for r in runs),
            "total_steps": len(steps),
        },
        "extra": {"turnstore": {"run_ids": [r.id for r in runs], "user_id": info.user_id}},
    }


def _last_model(runs: list[Run]) -> str | None:
    return next((r.model for r in reversed(runs) if r.model), None)


def _output(item: Mapping[str, Any]) -> str:
    output = item.get("output")
    return output if isinstance(output, str) else dumps(output)


def ui_messages(data: ExportData) -> list[dict[str, Any]]:
    """The session's active path as Vercel AI SDK ``UIMessage``s (see the module docstring)."""
    messages: list[dict[str, Any]] = []
    for run, items in data.runs:
        calls = {call.call_id: call for call in data.tool_calls.get(run.id, [])}
        answer: list[dict[str, Any]] = []
        for part in _course(items):
            if isinstance(part, _Input):
                messages.append(
                    {
                        "id": f"run-{run.id}-{len(messages)}",
                        "role": "system" if part.role == "system" else "user",
                        "parts": [{"type": "text", "text": part.text}],
                    }
                )
                continue
            answer.append({"type": "step-start"})
            answer += [{"type": "reasoning", "text": text} for text in part.reasoning]
            answer += [{"type": "text", "text": text} for text in part.texts if text]
            outputs = {out.get("call_id"): out for out in part.outputs}
            answer += [_tool_part(call, outputs, calls) for call in part.calls]
        if answer:
            messages.append(
                {
                    "id": f"run-{run.id}-answer",
                    "role": "assistant",
                    "parts": answer,
                    "metadata": {
                        "turnstore_run_id": run.id,
                        "model": run.model,
                        "inputTokens": run.usage.input_tokens,
                        "outputTokens": run.usage.output_tokens,
                        "totalTokens": run.usage.total_tokens,
                    },
                }
            )
    return messages


def _tool_part(
    call: Mapping[str, Any],
    outputs: Mapping[Any, Mapping[str, Any]],
    stored: Mapping[str | None, ToolCall],
) -> dict[str, Any]:
    call_id = call.get("call_id")
    part: dict[str, Any] = {
        "type": f"tool-{call.get('name')}",
        "toolCallId": call_id,
        "input": _arguments(call.get("arguments")),
    }
    output = outputs.get(call_id)
    record = stored.get(call_id)
    if output is None:
        return part | {"state": "input-available"}
    if record is not None and record.failed:
        return part | {"state": "output-error", "errorText": record.error or _output(output)}
    return part | {"state": "output-available", "output": _output(output)}

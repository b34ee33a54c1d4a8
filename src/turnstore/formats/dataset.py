"""A dataset record (``DatasetRecord``) as one JSONL line, in one of three shapes.

- **turnstore** (lossless): ``{"format": "turnstore.dataset", "version": 1, "session_id",
  "run_id", "user_id", "input": [items], "output": [items], "tool_calls": [...],
  "annotations": [...], "run": {...}}``, the items exactly as stored.
- **openai-chat**: ``{"messages": [...]}``, the shape of OpenAI's chat fine-tuning and evals
  JSONL: input then output as Chat Completions messages, by ``formats.chat``'s rules (the
  Agents SDK's converter's), tool calls as an assistant's ``tool_calls`` answered by ``tool``
  messages. Items no chat message holds (reasoning, hosted tool calls) are left out.
- **plain**: ``{"input": the user message, "output": the answer, "metadata": {...}}``, for
  evaluators that take a question and an answer; the ids, agent, model, tool calls and
  annotations in ``metadata``.
"""

from __future__ import annotations

from typing import Any, Literal

from ..domain.jsonout import dumps, fields
from ..domain.model import DatasetRecord
from .chat import items_to_messages

__all__ = ["DATASET_FORMATS", "VERSION", "DatasetFormat", "dataset_line", "dataset_object"]

DatasetFormat = Literal["turnstore", "openai-chat", "plain"]
DATASET_FORMATS: tuple[DatasetFormat, ...] = ("turnstore", "openai-chat", "plain")
VERSION = 1
"""The version of the turnstore shape."""


def dataset_object(record: DatasetRecord, fmt: DatasetFormat) -> dict[str, Any]:
    """The record as the JSON object of ``fmt`` (its values turnstore's records: ``dumps``
    writes them)."""
    run = record.run
    if fmt == "openai-chat":
        return {"messages": items_to_messages([*record.input, *record.output])}
    if fmt == "plain":
        return {
            "input": run.user_message,
            "output": run.assistant_message,
            "metadata": {
                "session_id": run.session_id,
                "run_id": run.id,
                "user_id": record.user_id,
                "agent_name": run.agent_name,
                "model": run.model,
                "status": run.status,
                "created_at": run.created_at,
                "tool_calls": [
                    {
                        "name": call.tool_name,
                        "arguments": call.arguments,
                        "output": call.output,
                        "failed": call.failed,
                    }
                    for call in record.tool_calls
                ],
                "annotations": [
                    {
                        "name": note.name,
                        "value": note.value,
                        "label": note.label,
                        "comment": note.comment,
                        "source": note.source,
                        "author": note.author,
                        "tool_call_id": note.tool_call_id,
                    }
                    for note in record.annotations
                ],
            },
        }
    return {
        "format": "turnstore.dataset",
        "version": VERSION,
        "session_id": run.session_id,
        "run_id": run.id,
        "user_id": record.user_id,
        "input": record.input,
        "output": record.output,
        "tool_calls": record.tool_calls,
        "annotations": record.annotations,
        "run": fields(run),
    }


def dataset_line(record: DatasetRecord, fmt: DatasetFormat) -> str:
    """The record as one line of JSONL in ``fmt`` (with its newline)."""
    return dumps(dataset_object(record, fmt)) + "\n"

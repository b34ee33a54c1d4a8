"""The typed values turnstore returns: runs, tool calls, branches, usage, sessions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["Branch", "Run", "SessionInfo", "ToolCall", "Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of a run (or a sum of runs)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Run:
    """One user message and everything the agent did in answer."""

    id: int
    session_id: str
    parent_id: int | None
    depth: int
    user_message: str | None
    assistant_message: str | None
    agent_name: str | None
    model: str | None
    status: str | None
    usage: Usage
    item_count: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call paired with its output (hosted tools: one item that is both)."""

    id: int
    session_id: str
    run_id: int
    call_id: str | None
    tool_name: str | None
    kind: str | None
    arguments: str | None
    output: str | None
    status: str | None
    error: str | None
    created_at: datetime
    completed_at: datetime | None
    duration_ms: float | None


@dataclass(frozen=True, slots=True)
class Branch:
    """A path from the root to a leaf run."""

    leaf_run_id: int
    depth: int
    last_user_message: str | None
    active: bool
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session's catalogue entry."""

    session_id: str
    user_id: str | None
    title: str | None
    head_run_id: int | None
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)

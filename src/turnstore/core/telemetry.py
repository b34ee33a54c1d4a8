"""What ``session.hooks`` recorded (model calls, tool timings), written with the session's
next write."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model import Usage
from . import statements as S
from .ops import Op
from .rows import usage_params

__all__ = ["ResponseRecord", "Telemetry", "ToolTiming", "record_telemetry"]


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    """One model call seen by ``session.hooks``; times are backend timestamps."""

    agent_name: str | None
    model: str | None
    response_id: str | None
    request_id: str | None
    usage: Usage
    started_at: Any
    completed_at: Any
    latency_ms: float | None


@dataclass(frozen=True, slots=True)
class ToolTiming:
    """When one tool call (by the model's ``call_id``) ran, as seen by ``session.hooks``."""

    call_id: str
    started_at: Any
    completed_at: Any
    duration_ms: float


@dataclass(slots=True)
class Telemetry:
    """What ``session.hooks`` recorded since the session last wrote."""

    responses: list[ResponseRecord] = field(default_factory=list)
    tools: list[ToolTiming] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.responses or self.tools)


def record_telemetry(session_id: str, run_id: int, telemetry: Telemetry) -> Op[None]:
    for record in telemetry.responses:
        yield S.INSERT_MODEL_RESPONSE(
            {
                "sid": session_id,
                "run_id": run_id,
                "agent_name": record.agent_name,
                "model": record.model,
                "response_id": record.response_id,
                "request_id": record.request_id,
                "started_at": record.started_at,
                "completed_at": record.completed_at,
                "latency_ms": record.latency_ms,
                **usage_params(record.usage),
            }
        )
    if telemetry.responses:
        last = telemetry.responses[-1]
        # The run is attributed to the agent (and model) that answered last.
        yield S.SET_RUN_AGENT(
            {
                "sid": session_id,
                "id": run_id,
                "agent_name": last.agent_name,
                "model": last.model,
            }
        )
    for timing in telemetry.tools:
        # The newest call with that call_id in the session: call ids repeat across runs with
        # some providers, and the one that just ran is the newest.
        yield S.SET_TOOL_TIMING(
            {
                "sid": session_id,
                "call_id": timing.call_id,
                "started_at": timing.started_at,
                "completed_at": timing.completed_at,
                "duration_ms": timing.duration_ms,
            }
        )

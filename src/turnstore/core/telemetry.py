"""What ``session.hooks`` recorded (model calls, tool timings), written with the session's
next write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..domain.model import Telemetry
from . import statements as S
from .ops import Op
from .tables import usage_params

__all__ = ["bind_times", "record_telemetry"]


def bind_times(telemetry: Telemetry, bind: Callable[[datetime], Any]) -> Telemetry:
    """``telemetry`` (checked: ``validate.telemetry_record``) with its times as the backend
    binds them (``Backend.bind_time``), which is what ``record_telemetry`` writes."""
    return Telemetry(
        [
            replace(
                record,
                started_at=None if record.started_at is None else bind(record.started_at),
                completed_at=bind(record.completed_at),
            )
            for record in telemetry.responses
        ],
        [
            replace(
                timing, started_at=bind(timing.started_at), completed_at=bind(timing.completed_at)
            )
            for timing in telemetry.tools
        ],
    )


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

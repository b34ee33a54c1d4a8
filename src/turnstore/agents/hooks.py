"""Run hooks that record timing and attribution: ``Runner.run(..., hooks=session.hooks)``.

``session.hooks`` (a ``SessionHooks``, an SDK ``RunHooks``) records, for each model call, the
agent, its model, the response id, usage and latency, and for each local tool call its start,
end and duration (function tools: the SDK hands them a ``ToolContext`` carrying the
``call_id``; tool kinds whose hook context has no ``call_id`` are not timed). Nothing is
written by the hooks themselves: what they saw waits in the session's ``Recorder`` and is
written with the session's next ``add_items``, in the same transaction as the items. The SDK
writes each model turn's items right after the turn, so the records land on the run they
belong to; a run that ends without writing again (an output guardrail trip) has its records
written with the next run's user message, on the run they belong to.

Each run's ``agent_name`` and ``model`` become those of the last model call in it. The model
is the agent's ``model`` setting: a name, or the ``model`` attribute of a ``Model`` object
(its class name if it has none); None when the agent leaves it to the run config.

This module imports the Agents SDK (the ``agents`` extra); ``turnstore`` itself does not.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from agents import RunHooks

from ..domain.items import clean_text
from ..domain.model import ResponseRecord, Telemetry, ToolTiming, Usage
from ..domain.units import elapsed_ms
from .usage import usage_from

__all__ = ["Recorder", "SessionHooks"]


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return usage_from(usage)


def model_name(agent: Any) -> str | None:
    """The model an agent is set to use, as a name (see the module docstring)."""
    model = getattr(agent, "model", None)
    if model is None or isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else type(model).__name__


def _text(value: Any) -> str | None:
    # What the SDK hands over is recorded, never refused (a turn is not lost over it): text
    # as a column holds it (items.clean_text), anything else unknown.
    return clean_text(value) if isinstance(value, str) else None


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Recorder:
    """What the hooks saw since the session last wrote. SDK-free, so it is easy to test.

    Its records pass ``validate.telemetry_record`` whatever the SDK hands over: text is
    cleaned as items' text is, times are UTC datetimes, and durations are measured with a
    monotonic clock.
    """

    def __init__(self) -> None:
        """Record nothing yet."""
        self._pending = Telemetry()
        self._llm: dict[Any, tuple[datetime, float]] = {}
        self._tools: dict[str, tuple[datetime, float]] = {}

    def llm_start(self, key: Any) -> None:
        """A model call began; ``key`` identifies it until ``llm_end``."""
        self._llm[key] = (_now(), time.perf_counter())

    def llm_end(self, key: Any, agent_name: str | None, model: str | None, response: Any) -> None:
        """A model call returned ``response`` (an SDK ``ModelResponse``)."""
        started = self._llm.pop(key, None)
        self._pending.responses.append(
            ResponseRecord(
                agent_name=_text(agent_name),
                model=_text(model),
                response_id=_text(getattr(response, "response_id", None)),
                request_id=_text(getattr(response, "request_id", None)),
                usage=_usage(getattr(response, "usage", None)),
                started_at=started[0] if started else None,
                completed_at=_now(),
                latency_ms=elapsed_ms(started[1], time.perf_counter()) if started else None,
            )
        )

    def tool_start(self, call_id: str) -> None:
        """The tool call ``call_id`` began to run."""
        self._tools[call_id] = (_now(), time.perf_counter())

    def tool_end(self, call_id: str) -> None:
        """The tool call ``call_id`` finished (whether it succeeded or not)."""
        started = self._tools.pop(call_id, None)
        if started is not None:
            self._pending.tools.append(
                ToolTiming(
                    call_id=clean_text(call_id),  # as the item's call_id is stored
                    started_at=started[0],
                    completed_at=_now(),
                    duration_ms=elapsed_ms(started[1], time.perf_counter()),
                )
            )

    def drain(self) -> Telemetry | None:
        """Take what is pending (None if nothing is)."""
        if not self._pending:
            return None
        pending, self._pending = self._pending, Telemetry()
        return pending

    def restore(self, telemetry: Telemetry) -> None:
        """Put back what a failed write took, ahead of anything recorded since."""
        self._pending = Telemetry(
            telemetry.responses + self._pending.responses, telemetry.tools + self._pending.tools
        )


class SessionHooks(RunHooks):
    """SDK run hooks that feed a session's ``Recorder``; get one from ``session.hooks``.

    To combine with hooks of your own, subclass this and call ``super()`` in the methods you
    override.
    """

    def __init__(self, recorder: Recorder) -> None:
        """Feed ``recorder``."""
        super().__init__()
        self.recorder = recorder

    async def on_llm_start(
        self, context: Any, agent: Any, system_prompt: Any, input_items: Any
    ) -> None:
        """Note when the model call began."""
        self.recorder.llm_start((id(context), id(agent)))

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        """Record the model call: agent, model, response id, usage, latency."""
        self.recorder.llm_end(
            (id(context), id(agent)), getattr(agent, "name", None), model_name(agent), response
        )

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        """Note when a tool call began (when the context names its ``call_id``)."""
        call_id = getattr(context, "tool_call_id", None)
        if isinstance(call_id, str):
            self.recorder.tool_start(call_id)

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        """Record the tool call's start, end and duration."""
        call_id = getattr(context, "tool_call_id", None)
        if isinstance(call_id, str):
            self.recorder.tool_end(call_id)

"""What happened inside each turn: the Agents SDK's trace spans, stored beside the conversation.

``turnstore.tracing.install()`` registers a tracing processor with the SDK
(``add_trace_processor``); from then on every ``StructuredSession`` of the process records the
spans of its runs — agents, turns, model calls (model, response id, usage, latency), tool
calls (name, input, output, the error's text), handoffs, guardrails, MCP tool listings and
custom spans — in the ``spans`` table, linked to the session and run. Read them with
``Store.spans``, ``Store.slowest_spans``, ``Store.error_spans``, the ``span_overview`` view,
the viewer's timeline of each run, or export them as OpenTelemetry data (``turnstore.otel``).

The SDK's other processors (its exporter to the OpenAI dashboard, say) stay as they are; the
SDK's tracing must be on (not ``set_tracing_disabled(True)``, ``RunConfig(
tracing_disabled=True)`` or ``OPENAI_AGENTS_DISABLE_TRACING=1``). ``session.hooks`` works with
or without tracing; with both, nothing is counted twice (the spans are a table of their own).
See docs/debugging.md. Needs the Agents SDK (the ``agents`` extra).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..domain.extras import require
from . import binding

if TYPE_CHECKING:
    from agents import RunContextWrapper

    from .processor import SpanStore

__all__ = ["aflush", "flush", "install", "installed", "trace_tool_error", "uninstall"]

_processor: SpanStore | None = None
_lock = threading.Lock()


def install() -> SpanStore:
    """Store the spans of every ``StructuredSession``'s runs from now on; idempotent.

    Returns the processor (an ``agents.tracing.TracingProcessor``), registered with the SDK.
    Without the SDK, a ``ConfigurationError`` names the ``agents`` extra.
    """
    global _processor
    with _lock:
        if _processor is None:
            require("agents", "turnstore.tracing")

            from agents.tracing import add_trace_processor

            from .processor import SpanStore

            _processor = SpanStore()
            add_trace_processor(_processor)
        binding.set_active(_processor.flush, _processor.aflush)
        return _processor


def uninstall() -> None:
    """Stop recording (spans already finished are written first). The processor stays
    registered with the SDK, idle: the SDK offers no way to remove one."""
    with _lock:
        if _processor is not None:
            binding.set_active(None)
            _processor.flush()


def installed() -> SpanStore | None:
    """The processor, while recording; else None."""
    return _processor if binding.active() else None


def flush() -> None:
    """Write every finished span now and wait (spans are otherwise written in batches, after
    each trace, off the Runner's path)."""
    if _processor is not None:
        _processor.flush()


async def aflush() -> None:
    """``flush`` without blocking the event loop."""
    if _processor is not None:
        await _processor.aflush()


def trace_tool_error(ctx: RunContextWrapper[Any], error: Exception) -> str:
    """A tool's ``failure_error_function`` that keeps its exception's text in the traces.

    ``@function_tool(failure_error_function=tracing.trace_tool_error)``: the model is told what
    the SDK's default handler tells it, and the exception's text goes to the tool's span, so
    turnstore stores it in ``spans.error`` and ``tool_calls.error``. The SDK (0.23 and later)
    keeps the default handler's exception out of every trace on purpose, since an exception
    may hold what should not leave the process; a tool opts in by naming this function, and
    ``RunConfig(trace_include_sensitive_data=False)`` still withholds the text.
    """
    from agents.tool import default_tool_error_function

    return default_tool_error_function(ctx, error)

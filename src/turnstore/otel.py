"""A session's turns and trace spans as OpenTelemetry data, for existing trace tools.

``otlp_traces(store, session_id)`` is the session as an OTLP ``ExportTraceServiceRequest`` in
OTLP/JSON (trace and span ids as hex, 64-bit integers as strings), following the GenAI
semantic conventions: each run is one trace whose root span is the turn
(``invoke_agent``, with the conversation id, agent, model and the run's tokens); under it the
SDK's spans stored by ``turnstore.tracing`` (agents ``invoke_agent``, model calls ``chat``
with model, response id and tokens, tools ``execute_tool``; handoffs, guardrails and the
rest keep the SDK's kind), or, for a run stored without tracing, its tool calls. A failed
span or call has status ERROR with the error's text. A run's annotations are events
``gen_ai.evaluation.result`` of its turn span (the GenAI conventions' evaluation results:
``gen_ai.evaluation.name``, ``.score.value``, ``.score.label``, ``.explanation``). ``send``
posts the same spans to an OTLP/HTTP endpoint with the OpenTelemetry SDK's exporter (the
``otel`` extra); ``turnstore otel`` does both from the command line.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .domain import validate
from .domain.extras import missing_extra
from .domain.model import Annotation, Run, ToolCall, TraceSpan
from .errors import ConfigurationError, SessionNotFoundError

if TYPE_CHECKING:
    from .store import Store

__all__ = ["otlp_traces", "send"]

SCOPE = "turnstore"
# OTLP's Span.SpanKind and Status.StatusCode, as their numbers.
INTERNAL, CLIENT = 1, 3
STATUS_ERROR = 2
_HEX = re.compile(r"[0-9a-f]+")


def _hex_id(value: str, digits: int) -> str:
    """An SDK id (``trace_<32 hex>``, ``span_<24 hex>``) as OTLP's ``digits`` hex digits;
    anything else (an id given by hand) hashed to as many."""
    tail = value.split("_", 1)[-1].lower()
    if len(tail) >= digits and _HEX.fullmatch(tail) and int(tail[:digits], 16):
        return tail[:digits]
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:digits]


def _nanos(when: datetime | None) -> str:
    return str(round(when.timestamp() * 1_000_000) * 1000) if when is not None else "0"


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _attributes(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(v)} for key, v in values.items() if v is not None]


def _tokens(usage: Any) -> dict[str, Any]:
    """The GenAI token attributes of a span's usage (the SDK's or the Responses API's)."""
    if not isinstance(usage, Mapping):
        return {}
    inputs = usage.get("input_tokens", usage.get("prompt_tokens"))
    outputs = usage.get("output_tokens", usage.get("completion_tokens"))
    return {
        "gen_ai.usage.input_tokens": inputs if isinstance(inputs, int) else None,
        "gen_ai.usage.output_tokens": outputs if isinstance(outputs, int) else None,
    }


def _span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    kind: int,
    start: datetime | None,
    end: datetime | None,
    attributes: Mapping[str, Any],
    error: str | None,
    events: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": _nanos(start),
        "endTimeUnixNano": _nanos(end or start),
        "attributes": _attributes(attributes),
    }
    if parent is not None:
        span["parentSpanId"] = parent
    if error is not None:
        span["status"] = {"code": STATUS_ERROR, "message": error}
    if events:
        span["events"] = list(events)
    return span


EVALUATION_EVENT = "gen_ai.evaluation.result"


def _evaluation(note: Annotation) -> dict[str, Any]:
    """An annotation as the GenAI conventions' evaluation result event (a correction: when it
    was corrected); what they have no attribute for under ``turnstore.annotation.*``."""
    return {
        "timeUnixNano": _nanos(note.updated_at or note.created_at),
        "name": EVALUATION_EVENT,
        "attributes": _attributes(
            {
                "gen_ai.evaluation.name": note.name,
                "gen_ai.evaluation.score.value": note.value,
                "gen_ai.evaluation.score.label": note.label,
                "gen_ai.evaluation.explanation": note.comment,
                "turnstore.annotation.id": note.id,
                "turnstore.annotation.source": note.source,
                "turnstore.annotation.author": note.author,
                "turnstore.annotation.tool_call_id": note.tool_call_id,
            }
        ),
    }


def _sdk_span(span: TraceSpan, trace_id: str, turn: str, common: Mapping[str, Any]) -> Any:
    data = span.data
    attributes: dict[str, Any] = {**common, "turnstore.span.kind": span.kind}
    kind, name = INTERNAL, f"{span.kind} {span.name}" if span.name else span.kind
    if span.kind == "agent":
        attributes.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": span.name})
        name = f"invoke_agent {span.name}"
    elif span.kind in ("generation", "response"):
        model = data.get("model")
        kind, name = CLIENT, f"chat {model}" if model else "chat"
        attributes.update(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.response.model": model,
                "gen_ai.response.id": data.get("response_id"),
                **_tokens(data.get("usage")),
            }
        )
    elif span.kind == "function":
        name = f"execute_tool {span.name}"
        attributes.update(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": span.name,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": data.get("input"),
                "gen_ai.tool.call.result": data.get("output"),
            }
        )
    elif span.kind == "handoff":
        attributes.update(
            {
                "turnstore.handoff.from": data.get("from_agent"),
                "turnstore.handoff.to": data.get("to_agent"),
            }
        )
    elif span.kind == "guardrail":
        attributes.update(
            {
                "turnstore.guardrail.name": span.name,
                "turnstore.guardrail.triggered": data.get("triggered"),
            }
        )
    # Every span of the run joins the turn's trace (a resumed run's second trace too), and
    # the roots hang under the turn.
    parent = _hex_id(span.parent_span_id, 16) if span.parent_span_id else turn
    return _span(
        trace_id,
        _hex_id(span.span_id, 16),
        parent,
        name,
        kind,
        span.started_at,
        span.ended_at,
        attributes,
        span.error,
    )


def _call_span(call: ToolCall, trace_id: str, turn: str, common: Mapping[str, Any]) -> Any:
    return _span(
        trace_id,
        _hex_id(f"call/{call.session_id}/{call.id}", 16),
        turn,
        f"execute_tool {call.tool_name}",
        INTERNAL,
        call.started_at or call.created_at,
        call.completed_at,
        {
            **common,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool_name,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": call.kind,
            "gen_ai.tool.call.arguments": call.arguments,
            "gen_ai.tool.call.result": call.output,
            "turnstore.tool_call.status": call.status,
        },
        call.error if call.error is not None else (call.status if call.failed else None),
    )


def _run_spans(
    run: Run,
    spans: Sequence[TraceSpan],
    calls: Sequence[ToolCall],
    notes: Sequence[Annotation],
) -> list[dict[str, Any]]:
    sid = run.session_id
    trace_id = _hex_id(spans[0].trace_id, 32) if spans else _hex_id(f"run/{sid}/{run.id}", 32)
    turn = _hex_id(f"turn/{sid}/{run.id}", 16)
    common = {"gen_ai.conversation.id": sid, "turnstore.run.id": run.id}
    # Without session.hooks a run names no agent: the last agent span does.
    agents = [span.name for span in spans if span.kind == "agent" and span.name]
    agent = run.agent_name or (agents[-1] if agents else None)
    ends = [span.ended_at for span in spans if span.ended_at is not None]
    starts = [span.started_at for span in spans if span.started_at is not None]
    root = _span(
        trace_id,
        turn,
        None,
        f"invoke_agent {agent}" if agent else "invoke_agent",
        INTERNAL,
        min([run.created_at, *starts]),
        max([run.updated_at, *ends]),
        {
            **common,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": "openai",
            "gen_ai.agent.name": agent,
            "gen_ai.request.model": run.model,
            "gen_ai.usage.input_tokens": run.usage.input_tokens,
            "gen_ai.usage.output_tokens": run.usage.output_tokens,
            "turnstore.run.parent_id": run.parent_id,
            "turnstore.run.status": run.status,
            "turnstore.run.user_message": run.user_message,
            "turnstore.run.assistant_message": run.assistant_message,
        },
        "the turn ended without an answer" if run.status == "failed" else None,
        [_evaluation(note) for note in notes],
    )
    if spans:
        return [root, *(_sdk_span(span, trace_id, turn, common) for span in spans)]
    return [root, *(_call_span(call, trace_id, turn, common) for call in calls)]


async def otlp_traces(store: Store, session_id: str) -> dict[str, Any]:
    """The session's every run (all branches) and its spans as an OTLP/JSON
    ``ExportTraceServiceRequest`` (see the module docstring). Raises
    ``SessionNotFoundError`` for an unknown session."""
    sid = validate.key(session_id, "session_id")
    if await store.session(sid) is None:
        raise SessionNotFoundError(f"no session {sid!r}")
    runs = [run for run, _ in await store.tree(sid)]
    by_run: dict[int, list[TraceSpan]] = {}
    for span in await store.spans(session_id=sid):
        by_run.setdefault(span.run_id, []).append(span)
    calls: dict[int, list[ToolCall]] = {}
    for call in await store.tool_calls(session_id=sid, limit=None):
        calls.setdefault(call.run_id, []).append(call)
    notes: dict[int, list[Annotation]] = {}
    for note in await store.annotations(session_id=sid, limit=None):
        notes.setdefault(note.run_id, []).append(note)
    spans = [
        otlp_span
        for run in runs
        for otlp_span in _run_spans(
            run, by_run.get(run.id, []), calls.get(run.id, []), notes.get(run.id, [])
        )
    ]

    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": _attributes(
                        {"service.name": "turnstore", "turnstore.session.id": sid}
                    )
                },
                "scopeSpans": [{"scope": {"name": SCOPE}, "spans": spans}],
            }
        ]
    }


async def send(
    store: Store,
    session_id: str,
    endpoint: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> int:
    """Send the session's turns and spans to an OTLP/HTTP collector (``endpoint``: its
    ``/v1/traces`` URL; None: the OpenTelemetry SDK's default and ``OTEL_EXPORTER_OTLP_*``
    variables); the number of spans sent. Needs the ``otel`` extra; raises
    ``ConfigurationError`` without it or when the collector refuses them."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult
    except ImportError as exc:
        raise missing_extra("otel", "sending to an OTLP collector", exc.name) from None
    request = await otlp_traces(store, session_id)
    spans = _readable_spans(request)
    exporter = OTLPSpanExporter(endpoint=endpoint, headers=dict(headers or {}), timeout=timeout)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    if result is not SpanExportResult.SUCCESS:
        raise ConfigurationError(
            f"the OTLP collector at {endpoint or 'the default'} refused the spans"
        )
    return len(spans)


def _readable_spans(request: Mapping[str, Any]) -> list[Any]:
    """The spans of an OTLP/JSON request as the OpenTelemetry SDK's ``ReadableSpan``."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    def plain(attributes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for attribute in attributes:
            [(kind, value)] = attribute["value"].items()
            values[attribute["key"]] = int(value) if kind == "intValue" else value
        return values

    spans = []
    for resource_spans in request["resourceSpans"]:
        resource = Resource(plain(resource_spans["resource"]["attributes"]))
        for scope_spans in resource_spans["scopeSpans"]:
            scope = InstrumentationScope(**scope_spans["scope"])
            for span in scope_spans["spans"]:
                trace_id = int(span["traceId"], 16)

                def context(span_id: str, trace_id: int = trace_id) -> SpanContext:
                    return SpanContext(trace_id, int(span_id, 16), False, TraceFlags(1))

                status = span.get("status")
                spans.append(
                    ReadableSpan(
                        name=span["name"],
                        context=context(span["spanId"]),
                        parent=context(span["parentSpanId"]) if "parentSpanId" in span else None,
                        resource=resource,
                        attributes=plain(span["attributes"]),
                        kind=SpanKind(span["kind"] - 1),  # the SDK counts from INTERNAL = 0
                        status=Status(StatusCode.ERROR, status["message"])
                        if status
                        else Status(StatusCode.UNSET),
                        start_time=int(span["startTimeUnixNano"]),
                        end_time=int(span["endTimeUnixNano"]),
                        events=[
                            Event(
                                event["name"],
                                plain(event["attributes"]),
                                int(event["timeUnixNano"]),
                            )
                            for event in span.get("events", [])
                        ],
                        instrumentation_scope=scope,
                    )
                )
    return spans

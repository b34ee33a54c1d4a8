"""Issue 17: a session's turns and spans as OpenTelemetry data (``turnstore.otel``).

The OTLP/JSON a session exports is parsed by the OTLP protobuf schema itself
(``opentelemetry-proto``: ``json_format.Parse`` into ``ExportTraceServiceRequest``, which
refuses unknown fields and wrong types), not read by eye; what ``send`` posts to a collector
(a loopback HTTP server here) decodes to the same spans.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from builders import assistant, call, output, user
from scripted import STORED_ERROR, converse_traced, tracing_on
from support import require_module
from turnstore import (
    ConfigurationError,
    SessionNotFoundError,
    Store,
    StructuredSession,
    otel,
    tracing,
)
from turnstore.cli import app

json_format = require_module("google.protobuf.json_format")
trace_service = require_module("opentelemetry.proto.collector.trace.v1.trace_service_pb2")


def parse(request: dict[str, Any]) -> Any:
    """``request`` as the protobuf message. OTLP/JSON writes ids as hex; protobuf's JSON
    mapping reads bytes as base64, so the ids are converted first (and checked for length)."""
    request = copy.deepcopy(request)
    for resource in request["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key, size in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
                    if key in span:
                        raw = bytes.fromhex(span[key])
                        assert len(raw) == size, (key, span[key])
                        span[key] = base64.b64encode(raw).decode()
    return json_format.Parse(json.dumps(request), trace_service.ExportTraceServiceRequest())


def attributes(span: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for attribute in span.attributes:
        kind = attribute.value.WhichOneof("value")
        values[attribute.key] = getattr(attribute.value, kind)
    return values


def spans_of(message: Any) -> list[Any]:
    return [span for r in message.resource_spans for s in r.scope_spans for span in s.spans]


async def test_a_traced_session_exports_as_otlp(open_store: Any) -> None:
    store = open_store()
    try:
        with tracing_on():
            await converse_traced("run", StructuredSession("s", store))
            await tracing.aflush()
        request = await otel.otlp_traces(store, "s")
        message = parse(json.loads(json.dumps(request)))
        spans = spans_of(message)
        runs = await store.runs("s")
        stored = await store.spans(session_id="s")
        assert len(spans) == len(runs) + len(stored)
        # One trace per run; every parent is a span of the same trace; one root each.
        by_id = {span.span_id: span for span in spans}
        assert len(by_id) == len(spans)
        roots = [span for span in spans if not span.parent_span_id]
        assert len(roots) == len(runs) == len({span.trace_id for span in spans})
        for span in spans:
            if span.parent_span_id:
                assert by_id[span.parent_span_id].trace_id == span.trace_id
            assert span.end_time_unix_nano >= span.start_time_unix_nano > 0
        first = roots[0]
        assert first.name == "invoke_agent Billing"
        assert attributes(first)["gen_ai.conversation.id"] == "s"
        assert attributes(first)["gen_ai.operation.name"] == "invoke_agent"
        assert attributes(first)["turnstore.run.user_message"] == "look k1 up"
        [failed] = [span for span in spans if span.name == "execute_tool lookup"]
        assert failed.status.code == 2  # STATUS_CODE_ERROR
        assert failed.status.message == STORED_ERROR
        assert attributes(failed)["gen_ai.tool.name"] == "lookup"
        assert attributes(failed)["gen_ai.tool.call.arguments"] == '{"key":"k1"}'
        assert {span.name for span in spans} >= {
            "invoke_agent Assistant",
            "invoke_agent Billing",
            "handoff Assistant -> Billing",
            "guardrail no_forbidden",
            "execute_tool delete_file",
            "chat",
        }
        [trip] = [
            span
            for span in spans
            if span.name == "guardrail no_forbidden"
            and attributes(span)["turnstore.guardrail.triggered"]
        ]
        assert trip.trace_id == roots[1].trace_id
        chats = [span for span in spans if span.name == "chat"]
        assert all(span.kind == 3 for span in chats)  # SPAN_KIND_CLIENT
    finally:
        await store.aclose()


async def test_a_session_without_tracing_exports_its_tool_calls(store: Store) -> None:
    await store.add_items(
        "plain",
        [
            user("q \x00 \ud800"),
            call("c1", "f", '{"a": 1}'),
            output("c1", "An error occurred while running the tool. Please try again."),
            assistant("a"),
        ],
    )
    request = await otel.otlp_traces(store, "plain")
    spans = spans_of(parse(request))
    assert [span.name for span in spans] == ["invoke_agent", "execute_tool f"]
    root, tool = spans
    assert tool.parent_span_id == root.span_id
    assert tool.status.code == 2
    assert attributes(tool)["gen_ai.tool.call.id"] == "c1"
    assert attributes(root)["turnstore.run.user_message"] == "q \ufffd \ufffd"
    with pytest.raises(SessionNotFoundError):
        await otel.otlp_traces(store, "nobody")


def _evaluations(span: Any) -> list[dict[str, Any]]:
    """The evaluation result events of a protobuf span, as their attributes."""
    return [attributes(e) for e in span.events if e.name == otel.EVALUATION_EVENT]


async def test_annotations_export_as_evaluation_results(store: Store) -> None:
    first = await store.add_items("s", [user("q"), call("c1", "f"), output("c1", "ok")])
    await store.add_items("s", [assistant("a")])
    second = await store.add_items("s", [user("q2"), assistant("a2", item_id="m2")])
    assert first is not None
    assert second is not None
    down = await store.annotate(second, "thumbs", value=0, comment="wrong", source="user")
    label = await store.annotate(second, "review", label="hallucinated", author="dana")
    [call_row] = await store.tool_calls(run_id=first)
    await store.annotate(first, "tool_ok", value=1, tool_call_id=call_row.id, source="code")
    request = await otel.otlp_traces(store, "s")
    roots = {
        attributes(span)["turnstore.run.id"]: span
        for span in spans_of(parse(request))
        if not span.parent_span_id
    }
    assert _evaluations(roots[second]) == [
        {
            "gen_ai.evaluation.name": "thumbs",
            "gen_ai.evaluation.score.value": 0.0,
            "gen_ai.evaluation.explanation": "wrong",
            "turnstore.annotation.id": down.id,
            "turnstore.annotation.source": "user",
        },
        {
            "gen_ai.evaluation.name": "review",
            "gen_ai.evaluation.score.label": "hallucinated",
            "turnstore.annotation.id": label.id,
            "turnstore.annotation.source": "human",
            "turnstore.annotation.author": "dana",
        },
    ]
    [tool_note] = _evaluations(roots[first])
    assert tool_note["turnstore.annotation.tool_call_id"] == call_row.id
    assert roots[second].events[0].time_unix_nano == round(down.created_at.timestamp() * 1e6) * 1000
    # The spans send hands the OpenTelemetry SDK's exporters carry the same events.
    require_module("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    exporter.export(otel._readable_spans(request))
    exported = {
        span.attributes["turnstore.run.id"]: span
        for span in exporter.get_finished_spans()
        if span.parent is None and span.attributes is not None
    }
    events = exported[second].events
    assert [event.name for event in events] == [otel.EVALUATION_EVENT] * 2
    assert dict(events[0].attributes or {})["gen_ai.evaluation.score.value"] == 0.0
    assert dict(events[1].attributes or {})["gen_ai.evaluation.score.label"] == "hallucinated"


class Collector(BaseHTTPRequestHandler):
    """A loopback OTLP/HTTP collector: keeps what it is sent."""

    received: ClassVar[list[bytes]] = []
    status: ClassVar[int] = 200

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append(body)
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    require_module("opentelemetry.exporter.otlp.proto.http")
    Collector.received = []
    Collector.status = 200
    server = HTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    server.shutdown()
    server.server_close()


async def test_send_posts_the_same_spans(store: Store, collector: str) -> None:
    await store.add_items("s", [user("q"), call("c1", "f"), output("c1", "ok"), assistant("a")])
    answered = await store.add_items("s", [user("q2"), assistant("a2")])
    await store.annotate(answered, "thumbs", value=1, comment="good")
    sent = await otel.send(store, "s", collector)
    assert sent == 3
    [body] = Collector.received
    got = spans_of(trace_service.ExportTraceServiceRequest.FromString(body))
    want = spans_of(parse(await otel.otlp_traces(store, "s")))
    key = lambda s: (s.trace_id, s.span_id, s.parent_span_id, s.name, s.start_time_unix_nano)  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want))
    assert {span.name: attributes(span) for span in got} == {
        span.name: attributes(span) for span in want
    }
    assert sorted(map(str, map(_evaluations, got))) == sorted(map(str, map(_evaluations, want)))
    assert any(_evaluations(span) for span in got)
    Collector.status = 400
    with pytest.raises(ConfigurationError, match="refused"):
        await otel.send(store, "s", collector, timeout=2)


def test_the_cli_writes_and_sends(cli_target: str, tmp_path: Path, collector: str) -> None:
    import asyncio

    async def seed() -> None:
        async with Store.open(cli_target) as store:
            await store.add_items("s", [user("q"), assistant("a")])

    asyncio.run(seed())
    out = tmp_path / "s.otlp.json"
    result = CliRunner().invoke(app, ["otel", "s", "--db", cli_target, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "Wrote 1 spans" in result.stdout
    [span] = spans_of(parse(json.loads(out.read_text())))
    assert span.name == "invoke_agent"
    printed = CliRunner().invoke(app, ["otel", "s", "--db", cli_target])
    assert printed.exit_code == 0
    assert json.loads(printed.stdout) == json.loads(out.read_text())
    result = CliRunner().invoke(
        app, ["otel", "s", "--db", cli_target, "--endpoint", collector, "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"session": "s", "spans": 1, "endpoint": collector}
    missing = CliRunner().invoke(app, ["otel", "nobody", "--db", cli_target])
    assert missing.exit_code == 1
    assert "no session 'nobody'" in missing.stderr

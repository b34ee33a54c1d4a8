"""The SDK tracing processor that stores each run's spans beside its conversation.

The SDK calls the processor synchronously on the Runner's own path, so it only notes what it
needs: at a span's start, which session it works for (``binding``); at its end, the span.
Finished spans wait in memory and are written in batches — when a trace ends, when a
top-level span ends, on ``flush`` and when a session closes — by a thread of their own with
its own event loop: the Runner never waits for them, ``Runner.run_sync`` included, and a
write that fails is logged, never raised into the Runner. Spans of code that works for no
turnstore session are ignored.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import Future
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agents.tracing import TracingProcessor

from ..core.spans import SpanRecord, ToolOutcome, encode_data
from ..domain.toolcalls import span_error_text, span_outcome
from . import binding
from .binding import Binding

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["SpanStore"]

logger = logging.getLogger("turnstore.tracing")

# Model calls whose input copies the conversation (stored already as items, and growing with
# every turn): it is left out of their stored spans.
_MODEL_CALLS = ("generation", "response")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _name(kind: str, data: Any) -> str | None:
    if kind == "handoff":
        return f"{getattr(data, 'from_agent', None)} -> {getattr(data, 'to_agent', None)}"
    if kind == "turn":
        return f"turn {getattr(data, 'turn', '?')} of {getattr(data, 'agent_name', None)}"
    if kind == "response":
        response = getattr(data, "response", None)
        return getattr(response, "model", None)
    if kind == "mcp_tools":
        return getattr(data, "server", None)
    name = getattr(data, "name", None)
    if name is None:
        name = getattr(data, "model", None)
    return None if name is None else str(name)


def _fields(kind: str, data: Any) -> dict[str, Any]:
    exported = data.export()
    fields = dict(exported) if isinstance(exported, dict) else {}
    if fields.get("type") == "custom" and kind != "custom" and isinstance(fields.get("data"), dict):
        fields = dict(fields["data"])  # task and turn spans export as custom ones
    if kind in _MODEL_CALLS:
        fields.pop("input", None)
    fields.pop("type", None)
    fields.pop("sdk_span_type", None)
    if kind == "response":
        response = getattr(data, "response", None)
        if response is not None:
            fields["model"] = getattr(response, "model", None)
            usage = getattr(response, "usage", None)
            dump = getattr(usage, "model_dump", None)
            if fields.get("usage") is None and callable(dump):
                fields["usage"] = dump()
    return fields


class _Finished:
    """A span that ended, with the binding of the session it worked for."""

    __slots__ = ("binding", "span")

    def __init__(self, span: Any, found: Binding) -> None:
        self.span = span
        self.binding = found


def _records(
    batch: list[tuple[_Finished, int]],
) -> dict[tuple[int, str], tuple[Any, list[SpanRecord]]]:
    """The batch, each entry with its run, as records by (store, session)."""
    grouped: dict[tuple[int, str], tuple[Any, list[SpanRecord]]] = {}
    seen: dict[tuple[int, str, str | None], int] = defaultdict(int)
    for entry, run_id in sorted(batch, key=lambda e: e[0].span.started_at or ""):
        try:
            record = _record(entry.span, run_id, entry.binding.store, seen)
        except Exception:  # this span alone is lost, not the batch
            logger.exception("turnstore.tracing: a span could not be read")
            continue
        key = (id(entry.binding.store), entry.binding.session_id)
        grouped.setdefault(key, (entry.binding.store, []))[1].append(record)
    return grouped


def _record(
    span: Any, run_id: int, store: Store, seen: dict[tuple[int, str, str | None], int]
) -> SpanRecord:
    data = span.span_data
    kind = str(data.type)
    fields = _fields(kind, data)
    error = span.error
    text = span_error_text(error)
    if error is not None:
        fields["error"] = error
    started, ended = _time(span.started_at), _time(span.ended_at)
    outcome = None
    if kind == "function":
        name = _text(getattr(data, "name", "")) or ""
        given = getattr(data, "input", None)
        arguments = _text(given) if isinstance(given, str) else None
        key = (run_id, name, arguments)
        nth, seen[key] = seen[key], seen[key] + 1
        if error is not None:
            status, call_error = span_outcome(error)
            outcome = ToolOutcome(name, arguments, nth, status, call_error)
    return SpanRecord(
        run_id=run_id,
        trace_id=_text(span.trace_id) or "",
        span_id=_text(span.span_id) or "",
        parent_span_id=_text(span.parent_id),
        kind=_text(kind) or "",
        name=_text(_name(kind, data)),
        started_at=store._bind_time(started),
        ended_at=store._bind_time(ended),
        duration_ms=(ended - started).total_seconds() * 1000 if started and ended else None,
        error=_text(text),
        data=encode_data(fields),
        outcome=outcome,
    )


class SpanStore(TracingProcessor):
    """Stores the spans of runs that use a ``StructuredSession`` (``turnstore.tracing``)."""

    def __init__(self) -> None:
        """A processor with nothing pending; its writer thread starts with the first write."""
        self._lock = threading.Lock()
        self._open: dict[str, Binding] = {}
        self._unbound: set[str] = set()
        self._inherited: dict[str, Binding] = {}
        self._finished: list[_Finished] = []
        self._traces: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writing: set[Future[None]] = set()
        _PROCESSORS.add(self)

    def _forked(self) -> None:
        """In the child of a fork: the writer thread was not copied (its loop would never run
        what is handed to it, and a flush would wait forever), and a lock may have been taken
        by a thread that is not here. Spans pending at the fork are the parent's to write."""
        self._lock = threading.Lock()
        self._loop = None
        self._writing = set()
        self._finished = []

    # -- the SDK's calls: quick, and never raising -------------------------------------------

    def on_trace_start(self, trace: Any) -> None:
        """Note that the trace is under way."""
        self._traces.add(trace.trace_id)

    def on_trace_end(self, trace: Any) -> None:
        """Write what the trace's spans left pending."""
        self._traces.discard(trace.trace_id)
        self._guard(self._write_soon)

    def on_span_start(self, span: Any) -> None:
        """Note which session the span works for."""
        self._guard(self._started, span)

    def on_span_end(self, span: Any) -> None:
        """Keep the span for the next batch, if it works for a session."""
        self._guard(self._ended, span)

    def shutdown(self) -> None:
        """Write what is pending (the SDK calls this at exit)."""
        self.flush()

    def force_flush(self) -> None:
        """Write what is pending, and wait for it."""
        self.flush()

    @staticmethod
    def _guard(method: Any, *args: Any) -> None:
        try:
            method(*args)
        except Exception:  # tracing never fails a run
            logger.exception("turnstore.tracing: a span could not be recorded")

    def _started(self, span: Any) -> None:
        # A span works for the session of the code that starts it, else for its parent's (a
        # task the SDK created before the Runner call bound its session: streamed guardrails).
        found = binding.current(span.trace_id) or self._open.get(span.parent_id)
        if found is None:
            self._unbound.add(span.span_id)
        else:
            self._open[span.span_id] = found

    def _ended(self, span: Any) -> None:
        span_id = span.span_id
        self._unbound.discard(span_id)
        # A span started before its Runner call bound a session (the SDK's task span) works
        # for the session its children found.
        found = (
            self._open.pop(span_id, None)
            or binding.current(span.trace_id)
            or self._inherited.pop(span_id, None)
            or self._open.get(span.parent_id)
        )
        self._inherited.pop(span_id, None)
        if found is None:
            return
        parent = span.parent_id
        if parent is not None and parent in self._unbound:
            self._inherited.setdefault(parent, found)
        with self._lock:
            self._finished.append(_Finished(span, found))
        if parent is None:
            self._write_soon()

    # -- writing: on the writer thread ---------------------------------------------------------

    def _writer(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="turnstore-tracing", daemon=True
                ).start()
                self._loop = loop
            return self._loop

    def _write_soon(self) -> None:
        """Start writing what is pending."""
        with self._lock:
            if not self._finished:
                return
        future = asyncio.run_coroutine_threadsafe(self._write(), self._writer())
        with self._lock:
            self._writing.add(future)
        future.add_done_callback(self._written)

    def _written(self, future: Future[None]) -> None:
        with self._lock:
            self._writing.discard(future)

    def _outstanding(self) -> list[Future[None]]:
        """Start writing what is pending; every write under way."""
        self._write_soon()
        with self._lock:
            return list(self._writing)

    async def _write(self) -> None:
        with self._lock:
            taken, self._finished = self._finished, []
            # A span whose Runner call has not written its run yet (a streamed guardrail can
            # end first) waits while its trace is under way; after that there is no run to
            # show it under.
            waiting = [
                e for e in taken if e.binding.run_id is None and e.span.trace_id in self._traces
            ]
            self._finished.extend(waiting)
        batch = [(e, run_id) for e in taken if (run_id := e.binding.run_id) is not None]
        if len(batch) + len(waiting) < len(taken):
            logger.debug(
                "%d spans of Runner calls that stored no run: dropped",
                len(taken) - len(batch) - len(waiting),
            )
        try:
            grouped = _records(batch)
        except Exception:
            logger.exception("turnstore.tracing: %d spans could not be read", len(batch))
            return
        for (_, session_id), (store, records) in grouped.items():
            try:
                await store._record_spans(session_id, records)
            except Exception:
                logger.exception(
                    "turnstore.tracing: %d spans of session %r could not be written",
                    len(records),
                    session_id,
                )

    def flush(self) -> None:
        """Write every pending span now, waiting until they are written."""
        if threading.current_thread().name == "turnstore-tracing":
            return  # never wait for the writer from the writer
        for future in self._outstanding():
            future.result()

    async def aflush(self) -> None:
        """``flush`` without blocking the event loop."""
        for future in self._outstanding():
            await asyncio.wrap_future(future)

    def pending(self) -> Iterable[Any]:
        """The spans waiting to be written (for tests and diagnostics)."""
        with self._lock:
            return [entry.span for entry in self._finished]


# Every processor, told when this process is the child of a fork (SpanStore._forked).
_PROCESSORS: weakref.WeakSet[SpanStore] = weakref.WeakSet()


def _after_fork() -> None:
    for processor in list(_PROCESSORS):
        processor._forked()


os.register_at_fork(after_in_child=_after_fork)

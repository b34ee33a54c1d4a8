"""The SDK's trace spans of each run (``turnstore.tracing``): stored in batches, queried."""

from __future__ import annotations

from collections.abc import Sequence

from ..core import spans
from ..core.reads import get_run
from ..core.spans import SpanRecord
from ..domain import validate
from ..domain.model import TraceSpan
from ..errors import InvalidOperationError
from .base import NO_LIMIT, StoreBase, limit_arg, run_id_arg

__all__ = ["SpansMixin"]


class SpansMixin(StoreBase):
    """Trace spans: what happened inside each turn (see docs/debugging.md)."""

    async def _record_spans(self, session_id: str, records: Sequence[SpanRecord]) -> None:
        """Store finished spans of ``session_id`` in one transaction (``turnstore.tracing``
        calls this; spans of runs no longer stored are dropped)."""
        sid = validate.key(session_id, "session_id")
        batch = [
            spans.cleaned(validate.instance(record, "a span", SpanRecord)) for record in records
        ]
        if batch:
            await self.backend.run(lambda: spans.record_spans(sid, batch), write=True)

    async def spans(
        self,
        *,
        session_id: str | None = None,
        run_id: int | None = None,
        limit: int | None = None,
    ) -> list[TraceSpan]:
        """The stored spans of one run (``run_id``) or of every run of a session, in the order
        they started (by run first). Give ``session_id``, ``run_id`` or both; an unknown run
        alone raises ``RunNotFoundError``."""
        sid = validate.optional_key(session_id, "session_id")
        run = None if run_id is None else run_id_arg(run_id)
        size = limit_arg(limit) if limit is not None else NO_LIMIT
        if sid is None:
            if run is None:
                raise InvalidOperationError("spans needs a session_id or a run_id")
            sid = (await self.backend.run(lambda: get_run(run), write=False)).session_id
        return await self.backend.run(
            lambda: spans.spans(session_id=sid, run_id=run, limit=size), write=False
        )

    async def slowest_spans(
        self, *, kind: str | None = None, session_id: str | None = None, limit: int = 20
    ) -> list[TraceSpan]:
        """The ``limit`` longest spans, slowest first: of one ``kind`` (``"function"``,
        ``"generation"``, ``"response"``, …) and of one session when given."""
        sid = validate.optional_key(session_id, "session_id")
        kind = validate.optional_text(kind, "kind")
        size = limit_arg(limit)
        return await self.backend.run(
            lambda: spans.slowest_spans(session_id=sid, kind=kind, limit=size), write=False
        )

    async def error_spans(
        self, *, kind: str | None = None, session_id: str | None = None, limit: int = 100
    ) -> list[TraceSpan]:
        """The newest ``limit`` spans that ended with an error, newest first (of one ``kind``
        and one session when given); ``error`` holds the error's text."""
        sid = validate.optional_key(session_id, "session_id")
        kind = validate.optional_text(kind, "kind")
        size = limit_arg(limit)
        return await self.backend.run(
            lambda: spans.error_spans(session_id=sid, kind=kind, limit=size), write=False
        )

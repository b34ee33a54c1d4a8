"""Datasets for evaluation and fine-tuning: runs selected by filters, one record each
(``core.dataset``), written as JSONL (``formats.dataset``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Collection
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import IO, Any

from ..core import dataset as ops
from ..domain import validate
from ..domain.model import AnnotationSource, DatasetRecord
from ..errors import InvalidOperationError
from ..formats.dataset import DATASET_FORMATS, DatasetFormat, dataset_line
from .analytics import AnalyticsMixin
from .annotations import AnnotationsMixin
from .base import NO_LIMIT, limit_arg

__all__ = ["MAX_PAGE_SIZE", "DatasetMixin"]

MAX_PAGE_SIZE = 10_000
"""The most runs ``Store.dataset`` reads in one transaction."""


class DatasetMixin(AnalyticsMixin, AnnotationsMixin):
    """Runs as evaluation and fine-tuning records: selected, read page by page, written."""

    def dataset(
        self,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        failed: bool = False,
        annotation: str | None = None,
        label: str | None = None,
        min_value: float | None = None,
        max_value: float | None = None,
        source: AnnotationSource | None = None,
        search: str | None = None,
        limit: int | None = None,
        page_size: int = 200,
    ) -> AsyncIterator[DatasetRecord]:
        """The runs that match every filter given, one ``DatasetRecord`` each, in (session,
        run) order: ``async for record in store.dataset(annotation="thumbs", max_value=0)``.

        Every branch's runs count (a compaction run is none). ``since`` (inclusive) and
        ``until`` (exclusive) are on when the run began; ``failed``: runs with a failed tool
        call; ``annotation``, ``label``, ``min_value``, ``max_value``, ``source``: runs with an
        annotation of that name, label, value range and source (all that are given, on one
        annotation); ``search``: runs with an item that ``Store.search`` finds (its query
        language). At most ``limit`` records. Streamed: ``page_size`` runs are read at a time,
        each page in one transaction, so memory holds a page whatever the dataset's size.
        Arguments are checked on the call, before anything is read.
        """
        notes: dict[str, Any] | None = None
        if (annotation, label, min_value, max_value, source) != (None,) * 5:
            notes = self._annotation_filters(
                annotation, source, label, min_value, max_value, None, None, name_arg="annotation"
            )
        filters = ops.run_filters(
            **self._run_filters(session_id, user_id, agent, model, since, until),
            failed=validate.flag(failed, "failed"),
            annotation=notes,
            now=self.backend.now(),
        )
        query = None if search is None else validate.text(search, "search")
        most = NO_LIMIT if limit is None else limit_arg(limit)
        size = validate.count(page_size, "page_size", minimum=1)
        if size > MAX_PAGE_SIZE:
            raise InvalidOperationError(f"page_size must be at most {MAX_PAGE_SIZE}, got {size}")
        return self._dataset(filters, query, session_id, user_id, most, size)

    async def _dataset(
        self,
        filters: dict[str, Any],
        query: str | None,
        session_id: str | None,
        user_id: str | None,
        most: int,
        size: int,
    ) -> AsyncIterator[DatasetRecord]:
        keep: Collection[ops.Cursor] | None = None
        if query is not None:
            hits = await self.search(
                query, session_id=session_id, user_id=user_id, limit=NO_LIMIT, order="recent"
            )
            keep = frozenset((hit.session_id, hit.run_id) for hit in hits)
        after: ops.Cursor | None = ops.FIRST
        left = most
        while after is not None and left > 0:
            page = partial(ops.dataset_page, filters, after, min(size, left), keep)
            records, after = await self.backend.run(page, write=False)
            for record in records:
                yield record
            left -= len(records)

    async def write_dataset(
        self,
        target: str | os.PathLike[str] | IO[str],
        format: DatasetFormat = "turnstore",
        **filters: Any,
    ) -> int:
        """Write the records ``dataset(**filters)`` selects to ``target`` as JSONL in
        ``format`` (``"turnstore"``, ``"openai-chat"`` or ``"plain"``: docs/datasets.md);
        returns how many. ``target`` is a path (written whole or not at all: a file beside it,
        renamed over it at the end) or an open text file."""
        fmt = validate.choice(format, "format", DATASET_FORMATS)
        records = self.dataset(**filters)
        if not isinstance(target, (str, os.PathLike)):
            return await _write(records, fmt, target)
        path = Path(target)
        with tempfile.NamedTemporaryFile(
            "w",
            encoding="utf-8",
            newline="\n",
            dir=path.parent,
            prefix=f".{path.name}.",
            delete=False,
        ) as handle:
            try:
                count = await _write(records, fmt, handle)
            except BaseException:
                os.unlink(handle.name)
                raise
        os.replace(handle.name, path)
        return count


async def _write(records: AsyncIterator[DatasetRecord], fmt: DatasetFormat, out: IO[str]) -> int:
    count = 0
    async for record in records:
        out.write(dataset_line(record, fmt))
        count += 1
    return count

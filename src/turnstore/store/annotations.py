"""Annotations: feedback, scores, labels and notes on runs (``core.annotations``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..core import annotation_checks
from ..core import annotations as ops
from ..core.annotations import AnnotationGroup
from ..domain import validate
from ..domain.model import Annotation, AnnotationSource, AnnotationStats
from ..errors import InvalidOperationError, RunNotFoundError
from .base import NO_LIMIT, StoreBase, limit_arg, run_id_arg

__all__ = ["AnnotationsMixin"]


class AnnotationsMixin(StoreBase):
    """Judgements of runs: write, correct, delete, list and sum them."""

    async def annotate(
        self,
        run_id: int | None,
        name: str,
        *,
        value: float | None = None,
        label: str | None = None,
        comment: str | None = None,
        source: AnnotationSource = "human",
        author: str | None = None,
        tool_call_id: int | None = None,
        session_id: str | None = None,
        operation_id: str | None = None,
    ) -> Annotation:
        """Annotate the run ``run_id`` (with ``tool_call_id``: one tool call of it); returns
        the annotation stored.

        ``name`` says what is judged (``"thumbs"``, ``"correctness"``); ``value`` is a finite
        number (thumbs: 1 up, 0 down), ``label`` a short text, ``comment`` a note of at most
        ``annotation_checks.MAX_COMMENT`` characters; ``source`` is ``"user"``, ``"human"`` (a
        reviewer), ``"model"`` (a judge) or ``"code"`` (a check). Each call adds one: several
        of one name on a run are kept (correct one with ``update_annotation``). With
        ``session_id`` the run must be of that session, and ``run_id=None`` names the
        session's head run. ``RunNotFoundError`` for an unknown run (or a session without
        runs); ``NotFoundError`` for a tool call that is not the run's.
        """
        sid = validate.optional_key(session_id, "session_id")
        run = None if run_id is None else run_id_arg(run_id)
        fields = annotation_checks.annotation_fields(
            name=name, value=value, label=label, comment=comment, source=source, author=author
        )
        call = None if tool_call_id is None else validate.lookup_id(tool_call_id, "tool call")
        if sid is None:
            if run is None:
                raise InvalidOperationError("annotate needs a run_id, or a session_id for its head")
            found = await self.backend.run(lambda: ops.session_of_run(run), write=False)
            if found is None:
                raise RunNotFoundError(f"no run {run}")
            sid = found
        session = sid
        now = self.backend.now()
        return await self._write(
            session,
            lambda: ops.annotate(session, run, call, fields, now),
            operation_id,
            lambda stored: stored.id,  # a repeat returns the annotation as it is then
            lambda annotation_id: ops.annotation(session, annotation_id),
        )

    async def update_annotation(
        self,
        annotation_id: int,
        *,
        name: str | None = None,
        value: float | None = None,
        label: str | None = None,
        comment: str | None = None,
        source: AnnotationSource | None = None,
        author: str | None = None,
        operation_id: str | None = None,
    ) -> Annotation:
        """Correct an annotation: set the fields given (None leaves a field as it is; checked
        as ``annotate`` checks them) and its ``updated_at``; returns it. ``NotFoundError`` for
        an unknown id."""
        annotation_id = validate.lookup_id(annotation_id, "annotation")
        given = {
            "name": name,
            "value": value,
            "label": label,
            "comment": comment,
            "source": source,
            "author": author,
        }
        # Checked as annotate checks them: each given field in place of a valid stand-in.
        stand_in = {"name": "x", "source": "human"}
        checked = annotation_checks.annotation_fields(
            **{key: given[key] if given[key] is not None else stand_in.get(key) for key in given}
        )
        changes = {key: checked[key] for key, value in given.items() if value is not None}
        sid = await self._annotation_session(annotation_id)
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: ops.update_annotation(sid, annotation_id, changes, now),
            operation_id,
            lambda stored: stored.id,
            lambda kept: ops.annotation(sid, kept),
        )

    async def delete_annotation(
        self, annotation_id: int, *, operation_id: str | None = None
    ) -> None:
        """Delete an annotation. ``NotFoundError`` for an unknown id."""
        annotation_id = validate.lookup_id(annotation_id, "annotation")
        sid = await self._annotation_session(annotation_id)
        await self._write(sid, lambda: ops.delete_annotation(sid, annotation_id), operation_id)

    async def _annotation_session(self, annotation_id: int) -> str:
        return await self.backend.run(lambda: ops.session_of_annotation(annotation_id), write=False)

    async def annotations(
        self,
        *,
        session_id: str | None = None,
        run_id: int | None = None,
        name: str | None = None,
        source: AnnotationSource | None = None,
        label: str | None = None,
        min_value: float | None = None,
        max_value: float | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = 100,
    ) -> list[Annotation]:
        """The newest ``limit`` annotations that match every filter given, oldest first.

        Per run, per session or across sessions; ``min_value`` and ``max_value`` are
        inclusive (an annotation without a value matches neither), ``since`` inclusive and
        ``until`` exclusive on when it was made; ``limit=None`` returns every match.
        """
        sid = validate.optional_key(session_id, "session_id")
        run = validate.filter_id(run_id, "run_id")
        filters = self._annotation_filters(name, source, label, min_value, max_value, since, until)
        size = limit_arg(limit) if limit is not None else NO_LIMIT
        return await self.backend.run(
            lambda: ops.list_annotations(session_id=sid, run_id=run, filters=filters, limit=size),
            write=False,
        )

    async def annotations_of_runs(
        self, session_id: str, run_ids: Sequence[int]
    ) -> dict[int, list[Annotation]]:
        """Each of ``run_ids``' annotations (runs of ``session_id``), in the order they were
        made; a run without any is left out. One query for a page of runs (the range of their
        ids), whatever their number, as ``runs --json`` reads them."""
        sid = validate.key(session_id, "session_id")
        if not isinstance(run_ids, (list, tuple)):
            raise InvalidOperationError(
                f"run_ids must be a list of run ids, got {type(run_ids).__name__}"
            )
        ids = {run_id_arg(run_id) for run_id in run_ids}
        if not ids:
            return {}
        first, last = min(ids), max(ids)
        notes = await self.backend.run(lambda: ops.of_runs(sid, first, last), write=False)
        return {run_id: found for run_id, found in notes.items() if run_id in ids}

    async def annotation_stats(
        self,
        group_by: AnnotationGroup = "agent",
        *,
        session_id: str | None = None,
        name: str | None = None,
        source: AnnotationSource | None = None,
        label: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[AnnotationStats]:
        """Annotations counted, and their values averaged, per name and per the runs' agent
        or model, the annotated tool call's tool (None: the run itself), the UTC day they
        were made on, the session or its user, or (of one session: ``session_id``) the branch
        of each run. (``Store.usage(annotation=NAME)`` gives one name's beside the tokens and
        cost of the same runs.)

        Filters as in ``annotations``. Thumbs (1 up, 0 down) average to the approval rate.
        """
        group_by = validate.choice(group_by, "group_by", ops.STATS_GROUPS)
        sid = validate.optional_key(session_id, "session_id")
        if group_by == "branch" and sid is None:
            raise InvalidOperationError("annotation statistics by branch need a session_id")
        filters = self._annotation_filters(name, source, label, None, None, since, until)
        return await self.backend.run(
            lambda: ops.stats(group_by, session_id=sid, filters=filters), write=False
        )

    def _annotation_filters(
        self,
        name: Any,
        source: Any,
        label: Any,
        min_value: Any,
        max_value: Any,
        since: Any,
        until: Any,
        *,
        name_arg: str = "name",
    ) -> dict[str, Any]:
        """The annotation filters, checked and bound (``name_arg``: what the caller calls the
        name, in an error)."""
        return ops.filter_params(
            name=validate.optional_text(name, name_arg),
            source=None if source is None else validate.text(source, "source"),
            label=validate.optional_text(label, "label"),
            min_value=annotation_checks.annotation_value(min_value, "min_value"),
            max_value=annotation_checks.annotation_value(max_value, "max_value"),
            since=self._bind_time(validate.optional_time(since, "since")),
            until=self._bind_time(validate.optional_time(until, "until")),
            now=self.backend.now(),
        )

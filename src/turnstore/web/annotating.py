"""Annotations in the viewer: each run's shown on it, and (writable) the forms that add and
delete them: thumbs up or down, a label, a note.

The forms post the fields ``Store.annotate`` takes; the store checks them (a NUL, a label
over its length, a note over ``MAX_COMMENT``) and refuses what it cannot keep with its own
errors, which the viewer shows as a 400 page. Annotations made here are a reviewer's:
``source="human"``.
"""

from __future__ import annotations

import re
from collections import defaultdict

from starlette.exceptions import HTTPException

from .. import Store
from ..domain.model import Annotation, AnnotationSource, PathView
from .params import whole_number

__all__ = ["Form", "annotate", "delete", "run_annotations"]

Form = dict[str, list[str]]
"""A posted form: each field's values (``parse_qs``)."""

# A value as a form sends one: decimal, so that "nan", "inf" and "1e999" are refused here.
_NUMBER = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,15})?")
# Whoever uses the viewer reviews the conversations: they are not the app's user.
SOURCE: AnnotationSource = "human"


def _field(form: Form, name: str) -> str | None:
    """The form's field ``name``, None if absent or blank (the store checks the rest)."""
    value = form.get(name, [""])[0]
    return value if value.strip() else None


def _value(text: str | None) -> float | None:
    if text is None:
        return None
    if _NUMBER.fullmatch(text) is None:
        raise HTTPException(400, "value must be a decimal number, such as 1 or 0.5")
    return float(text)


async def run_annotations(
    store: Store, session_id: str, view: PathView
) -> dict[int, list[Annotation]]:
    """The annotations of the runs ``view`` shows, by run id, oldest first."""
    shown = {run.id for run in view.runs}
    notes: dict[int, list[Annotation]] = defaultdict(list)
    if shown:
        for note in await store.annotations(session_id=session_id, limit=None):
            if note.run_id in shown:
                notes[note.run_id].append(note)
    return notes


async def annotate(store: Store, session_id: str, form: Form) -> int:
    """Add the annotation the form describes to a run of the session; returns the run's id.

    A form must say something: a value, a label or a note (else a 400)."""
    run_id = whole_number("run", form.get("run", [""])[0])
    name = _field(form, "name")
    if name is None:
        raise HTTPException(400, "an annotation needs a name")
    value, label, comment = (
        _value(_field(form, "value")),
        _field(form, "label"),
        _field(form, "comment"),
    )
    if value is None and label is None and comment is None:
        raise HTTPException(400, "nothing to add: give a value, a label or a note")
    await store.annotate(
        run_id,
        name,
        value=value,
        label=label,
        comment=comment,
        source=SOURCE,
        session_id=session_id,
    )
    return run_id


async def delete(store: Store, session_id: str, form: Form) -> int:
    """Delete the annotation the form names, of a run of the session; returns the run's id.

    The annotation must be the session's (else a 404, and nothing is deleted)."""
    annotation_id = whole_number("annotation", form.get("annotation", [""])[0])
    mine = await store.annotations(session_id=session_id, limit=None)
    note = next((note for note in mine if note.id == annotation_id), None)
    if note is None:
        raise HTTPException(404, f"no annotation {annotation_id} in this session")
    await store.delete_annotation(annotation_id)
    return note.run_id

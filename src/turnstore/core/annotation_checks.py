"""The checks of an annotation's fields: ``turnstore.domain.validate``'s rules (text, labels, keys,
finite numbers, choices) applied to each, with the limits of annotations, declared once for
``Store.annotate``, ``Store.update_annotation``, their filters and an import's rows."""

from __future__ import annotations

from typing import Any

from ..domain import validate
from ..domain.model import ANNOTATION_SOURCES
from ..errors import InvalidOperationError

__all__ = [
    "MAX_ANNOTATION_NAME",
    "MAX_COMMENT",
    "annotation_fields",
    "annotation_name",
    "annotation_value",
]

MAX_ANNOTATION_NAME = 200
"""The longest annotation name or label, in characters: a label to read, type and group by."""

MAX_COMMENT = 65_536
"""The longest annotation comment, in characters: a reviewer's note, not a document."""


def annotation_name(value: Any) -> str:
    """An annotation's name: a label (``validate.label_text``) of at most
    ``MAX_ANNOTATION_NAME`` characters; what ``annotate`` stores and ``usage`` looks up."""
    return validate.label_text(value, "an annotation's name", MAX_ANNOTATION_NAME)


def annotation_value(value: Any, name: str = "an annotation's value") -> float | None:
    """An annotation's ``value``: a finite number (an int or float, not a bool), or None."""
    number = validate.finite(value)
    if number is None and value is not None:
        raise InvalidOperationError(
            f"{name} must be a finite number (an int or float), got {validate.shown(value)}"
        )
    return number


def annotation_fields(
    *, name: Any, value: Any, label: Any, comment: Any, source: Any, author: Any
) -> dict[str, Any]:
    """An annotation's fields, checked (None: absent), as the statements bind them: a name and
    label are labels (``validate.label_text``) of at most ``MAX_ANNOTATION_NAME`` characters,
    a comment text of at most ``MAX_COMMENT``, a source one of ``ANNOTATION_SOURCES``, an
    author a key (``validate.key``)."""
    if comment is not None and len(validate.text(comment, "comment")) > MAX_COMMENT:
        raise InvalidOperationError(
            f"an annotation's comment must be at most {MAX_COMMENT} characters, got {len(comment)}"
        )
    return {
        "name": annotation_name(name),
        "value": annotation_value(value),
        "label": None
        if label is None
        else validate.label_text(label, "an annotation's label", MAX_ANNOTATION_NAME),
        "comment": comment,
        "source": validate.choice(source, "source", ANNOTATION_SOURCES),
        "author": validate.optional_key(author, "author"),
    }

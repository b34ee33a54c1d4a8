"""Opening a source of conversations by kind, or by what its file holds."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

from ..errors import ConfigurationError, ConnectionFailedError, SchemaError
from . import adk, langchain, pydantic_ai
from .base import Source
from .exports import ExportSource
from .histories import HistorySource
from .sdk_sqlalchemy import SQLAlchemySource
from .sdk_sqlite import SQLiteSource

__all__ = ["SOURCE_KINDS", "open_source"]


SOURCE_KINDS = ("auto", "sqlite", "sqlalchemy", "jsonl", "json", "langchain", "pydantic-ai", "adk")
"""What ``--from`` accepts: ``sqlite`` covers both SQLiteSession and AdvancedSQLiteSession;
the last three read other frameworks' histories (``importers.histories``), never guessed."""

# Each framework's reading of its file and turning of one message into items.
_FRAMEWORKS = {
    "langchain": (langchain.read, langchain.convert),
    "pydantic-ai": (pydantic_ai.read, pydantic_ai.convert),
    "adk": (adk.read, adk.convert),
}


def open_source(location: str, kind: str = "auto", *, messages_table: str | None = None) -> Source:
    """Open ``location`` as a source of conversations; ``kind`` one of ``SOURCE_KINDS``.

    ``auto`` picks ``sqlalchemy`` for a URL, ``sqlite`` for a SQLite file (SQLiteSession or
    AdvancedSQLiteSession), ``jsonl`` for a text file whose first line is a JSON object (an
    export record), and ``json`` for a JSON document (on one line or many, or an array of
    them). A UTF-8 byte order mark before the text is read past.
    """
    if kind not in SOURCE_KINDS:
        raise ConfigurationError(f"unknown source kind {kind!r}: use one of {SOURCE_KINDS}")
    if kind == "auto":
        kind = _sniff(location)
    if kind == "sqlalchemy":
        return SQLAlchemySource(location, messages_table)
    if kind in ("jsonl", "json"):
        return ExportSource(location, kind)
    if kind in _FRAMEWORKS:
        return HistorySource(location, kind, *_FRAMEWORKS[kind])
    return SQLiteSource(location, messages_table)


def _sniff(location: str) -> str:
    if "://" in location:
        return "sqlalchemy"
    path = Path(location)
    if not path.is_file():
        raise ConnectionFailedError(f"no such file: {location}")
    try:
        with path.open("rb") as file:
            head = file.read(16)
            file.seek(0)
            first_line = file.readline()
    except OSError as exc:
        raise ConnectionFailedError(f"cannot read {location}: {exc}") from exc
    if head.startswith(b"SQLite format 3\0"):
        return "sqlite"
    head, first_line = head.removeprefix(codecs.BOM_UTF8), first_line.removeprefix(codecs.BOM_UTF8)
    if head.lstrip()[:1] == b"[":
        return "json"  # an array of session documents (an export of several sessions)
    if head.lstrip()[:1] == b"{":
        try:
            first = json.loads(first_line)
        except json.JSONDecodeError:
            return "json"  # a document spread over lines
        except (ValueError, RecursionError):
            return "jsonl"  # a whole line, but one that cannot be read: the reader says so
        # A whole document on one line names its format; an export record never does.
        return "json" if type(first) is dict and "format" in first else "jsonl"
    raise SchemaError(f"{location} is neither a SQLite database nor a turnstore export")

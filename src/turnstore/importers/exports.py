"""The source of turnstore's own exports: JSONL (any number of sessions) or one session's JSON
document.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any, TypeVar

from ..domain import validate
from ..errors import (
    ConnectionFailedError,
    InvalidItemError,
    InvalidOperationError,
    SchemaError,
    TurnstoreError,
)
from ..formats.export import VERSION, is_run_key, read_jsonl
from ..formats.rows import ExportedRun, exact_session
from .base import ReadSource, SourceRun, SourceSession, as_datetime

__all__ = ["ExportSource"]

log = logging.getLogger("turnstore")


class ExportSource(ReadSource):
    """turnstore's own exports (``turnstore export`` / ``Store.export``).

    ``jsonl``: one line per item (see ``turnstore.formats.export``), any number of sessions,
    parsed by ``export.read_jsonl``, with each run's usage; the last run of a session becomes
    its head, unless its ``session`` record names another. ``json``: one session's document, or
    an array of them, with the head, each run's usage and the catalogue fields (user, title,
    metadata).
    Both, when written by a turnstore that exports every row (JSON version 2, JSONL lines
    with ``run``), give each session ``exact``: its rows, checked (``turnstore.formats.rows``).
    """

    def __init__(self, path: str, kind: str) -> None:
        super().__init__()
        self.location = path
        self.kind = kind
        try:
            # utf-8-sig: a byte order mark that an editor put first is read past.
            with open(path, encoding="utf-8-sig") as file:
                if kind == "jsonl":
                    self._read_jsonl(file)
                else:
                    self._read_json(file.read())
        except FileNotFoundError as exc:
            raise ConnectionFailedError(f"no such file: {path}") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise ConnectionFailedError(f"cannot read {path}: {exc}") from exc

    def _read_jsonl(self, lines: Iterable[str]) -> None:
        """Group the lines by session; a line that is not an export record is skipped and
        counted (the file is refused only when no line is one)."""
        groups: dict[str, list[str]] = {}
        first_error = ""
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as exc:  # not JSON, or nested past the parser
                record, first_error = None, first_error or f"line {number} is not JSON ({exc})"
            sid = record.get("session_id") if type(record) is dict else None
            if isinstance(sid, str):
                groups.setdefault(sid, []).append(line)
            else:
                self.skipped += 1
                first_error = first_error or f"line {number} has no session_id"
        for sid, group in groups.items():
            read = read_jsonl(group, strict=False)
            if not read.runs and read.session is None:
                self.skipped += read.skipped
                first_error = first_error or f"session {sid!r} has no run whose parent is there"
                continue
            session = self._sessions[sid] = SourceSession(sid, skipped=read.skipped)
            made: list[SourceRun] = []
            for index, new in enumerate(read.runs):
                run = SourceRun(
                    list(new.items), key=index, usage=new.usage, created_at=new.created_at
                )
                siblings = made[new.parent].children if new.parent is not None else session.roots
                siblings.append(run)
                made.append(run)
                self._total += len(run.items)
            # Runs come in creation order, so the last one is a leaf: the newest branch.
            session.head = made[-1] if made else None
            if read.session is not None and None not in read.records:  # a version 2 export
                exported = [
                    ExportedRun(key, new.parent, record, made[index].items)
                    for index, (key, new, record) in enumerate(
                        zip(read.keys, read.runs, read.records, strict=True)
                    )
                ]
                _take_rows(session, read.session, exported, made)
        if not self._sessions:
            why = f" ({first_error})" if first_error else ""
            raise SchemaError(f"{self.location} holds no importable turnstore export record{why}")

    def _read_json(self, text: str) -> None:
        """One session's document, or an array of them (an export of several sessions); the
        file is refused naming the first document that is not one, and what is wrong."""
        try:
            parsed = json.loads(text)
        except RecursionError:
            raise SchemaError(
                f"{self.location} is not a turnstore JSON export: it nests lists and objects "
                "deeper than a JSON parser reads"
            ) from None
        except ValueError as exc:
            raise SchemaError(f"{self.location} is not a turnstore JSON export: {exc}") from None
        documents = parsed if isinstance(parsed, list) else [parsed]
        for index, document in enumerate(documents, 1):
            try:
                self._read_document(document)
            except (ValueError, TurnstoreError) as exc:
                where = f"document {index} of {len(documents)}: " if len(documents) > 1 else ""
                raise SchemaError(
                    f"{self.location} is not a turnstore JSON export: {where}{exc}"
                ) from None

    def _read_document(self, document: Any) -> None:
        """One session's document; ValueError says what in it is not as an export has it."""
        if not isinstance(document, dict):
            raise ValueError(f"a document must be an object, not {_kind(document)}")
        if document.get("format") != "turnstore-export":
            raise ValueError('no "format": "turnstore-export"')
        version = _version(document.get("version", 1))
        info = _field(document, "session", dict, "an object")
        sid = _field(info, "session_id", str, "a string", '"session"\'s ')
        session = self._sessions[sid] = SourceSession(sid)
        session.catalogue = {name: info.get(name) for name in ("user_id", "title", "metadata")}
        made: dict[Any, SourceRun] = {}
        exported: list[ExportedRun] = []
        places: dict[Any, int] = {}  # a run's id -> its place in the document
        for number, record in enumerate(_field(document, "runs", list, "an array"), 1):
            if not isinstance(record, dict):
                raise ValueError(f'run {number} of "runs" is {_kind(record)}, not an object')
            key = record.get("id")
            if not is_run_key(key):
                raise ValueError(f'run {number} of "runs" has no "id" (a number or a string)')
            if key in made:
                raise ValueError(f'run {number} of "runs" has the "id" of an earlier run')
            counts = record.get("usage") or {}
            usage = validate.checked_usage(counts) if isinstance(counts, dict) else None
            session.skipped += usage is None  # the run is imported without its usage
            run = SourceRun(
                _items(record.get("items"), key),
                key=key,
                usage=usage,
                created_at=as_datetime(record.get("created_at")),
            )
            parent = record.get("parent_id")
            if parent is not None and not (is_run_key(parent) and parent in made):
                raise ValueError(
                    f"run {validate.shown(key)}'s parent {validate.shown(parent)} is not a run "
                    "before it"
                )
            (made[parent].children if parent is not None else session.roots).append(run)
            place = places[parent] if parent is not None else None
            exported.append(ExportedRun(key, place, record, run.items))
            places[key] = len(places)
            made[key] = run
            self._total += len(run.items)
        head = info.get("head_run_id")
        session.head = (made.get(head) if is_run_key(head) else None) or _last(made)
        if version >= 2:
            _take_rows(session, info, exported, list(made.values()))


def _take_rows(
    session: SourceSession, info: Any, runs: list[ExportedRun], made: list[SourceRun]
) -> None:
    """Give ``session`` the rows a version 2 export carries, and the head its catalogue entry
    names; rows that are not what the database stores leave the session to be imported from
    its items (and are counted as skipped)."""
    try:
        session.exact = exact_session(session.session_id, info, runs)
    except (InvalidOperationError, InvalidItemError) as exc:
        log.warning("session %r is imported from its items alone: %s", session.session_id, exc)
        session.skipped += 1
        return
    session.skipped += session.exact.dropped
    head = session.exact.session.head_run_id
    session.head = made[head] if head is not None else session.head


def _items(value: Any, key: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(type(item) is dict for item in value):
        raise ValueError(f'run {validate.shown(key)}\'s "items" must be an array of objects')
    return value


def _version(value: Any) -> int:
    """A document's ``version``: 1 to ``export.VERSION``, the versions this reads."""
    if type(value) is not int:
        raise ValueError(f'"version" must be a whole number, not {_kind(value)}')
    if not 1 <= value <= VERSION:
        newer = (
            ": a newer turnstore wrote it, so import it with that one" if value > VERSION else ""
        )
        raise ValueError(
            f'"version" {validate.shown(value)} is not one this turnstore reads (1 to {VERSION})'
            + newer
        )
    return value


T = TypeVar("T")


def _field(record: dict[str, Any], name: str, kind: type[T], what: str, owner: str = "") -> T:
    """``record[name]`` if it is a ``kind`` (``what``, as JSON names it)."""
    if name not in record:
        raise ValueError(f'{owner}"{name}" is missing')
    value = record[name]
    if not isinstance(value, kind):
        raise ValueError(f'{owner}"{name}" must be {what}, not {_kind(value)}')
    return value


def _kind(value: Any) -> str:
    """What ``value`` is in JSON's words (for a message)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {validate.shown(value)}"
    return _KINDS.get(type(value), "a value")


_KINDS: dict[type, str] = {str: "a string", list: "an array", dict: "an object"}


def _last(runs: dict[Any, SourceRun]) -> SourceRun | None:
    return next(reversed(runs.values()), None)

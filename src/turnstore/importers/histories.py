"""The source of other frameworks' stored histories: a JSON file of LangChain messages,
Pydantic AI messages or ADK sessions, each message turned into the items turnstore stores by
its framework's module (``langchain``, ``pydantic_ai``, ``adk``).

A file holds one session's history (a list: the session is named after the file), several
(an object of session id → history), or for ADK a session object or a list of them (each
named by its ``id``). A session's runs are cut at user messages, as the store cuts them; a
run's key is the places of its messages in the file, so importing the file again adds nothing
and an interrupted import is simply run again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..domain.items import classify
from ..domain.model import Usage
from ..domain.tokens import usage_sum
from ..errors import ConnectionFailedError, SchemaError
from .base import ReadSource, SourceRun, SourceSession, as_datetime

__all__ = ["Converted", "History", "HistorySource", "Reader", "add_usage", "keyed_histories"]


@dataclass
class Converted:
    """One message of a framework, as turnstore stores it."""

    items: list[dict[str, Any]]
    usage: Usage | None = None
    created_at: Any = None  # the framework's time, checked by ``as_datetime``


@dataclass
class History:
    """One session as a file holds it: its messages and catalogue fields."""

    messages: Sequence[Any]
    catalogue: dict[str, Any] = field(default_factory=dict)


Reader = Callable[[Any, str], list[tuple[str, History]]]
"""A framework's reading of a parsed file (and its stem): its sessions' histories."""
Converter = Callable[[Any], Converted]
"""A framework's turning of one message into items."""


def add_usage(a: Usage | None, b: Usage | None) -> Usage | None:
    """The sum of two usages (None: none known)."""
    if a is None or b is None:
        return a or b
    return usage_sum((a, b))


class HistorySource(ReadSource):
    """A JSON file of one framework's histories (``kind``: ``langchain``, ``pydantic-ai``,
    ``adk``), read whole on open."""

    def __init__(self, path: str, kind: str, read: Reader, convert: Converter) -> None:
        super().__init__()
        self.location = path
        self.kind = kind
        try:
            with open(path, encoding="utf-8-sig") as file:
                parsed = json.load(file)
        except FileNotFoundError as exc:
            raise ConnectionFailedError(f"no such file: {path}") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise ConnectionFailedError(f"cannot read {path}: {exc}") from exc
        except (ValueError, RecursionError) as exc:
            raise SchemaError(f"{path} is not a JSON file of {kind} histories: {exc}") from None
        try:
            histories = read(parsed, Path(path).stem)
        except (TypeError, ValueError, KeyError) as exc:
            raise SchemaError(f"{path} is not a JSON file of {kind} histories: {exc}") from None
        for session_id, history in histories:
            self._sessions[session_id] = self._session(session_id, history, convert)

    def _session(self, session_id: str, history: History, convert: Converter) -> SourceSession:
        session = SourceSession(session_id, catalogue=history.catalogue or None)
        runs: list[SourceRun] = []
        places: list[list[int]] = []
        for place, message in enumerate(history.messages):
            try:
                converted = convert(message)
            except (TypeError, ValueError, KeyError, AttributeError):
                session.skipped += 1  # not a message of this framework: counted, not fatal
                continue
            for item in converted.items:
                if not runs or _starts_run(item):
                    runs.append(SourceRun([], created_at=_time(converted.created_at)))
                    places.append([])
                runs[-1].items.append(item)
                if not places[-1] or places[-1][-1] != place:
                    places[-1].append(place)
            if runs:
                runs[-1].usage = add_usage(runs[-1].usage, converted.usage)
        parent: SourceRun | None = None
        for run, run_places in zip(runs, places, strict=True):
            run.key = tuple(run_places)
            (parent.children if parent is not None else session.roots).append(run)
            parent = run
            self._total += len(run.items)
        session.head = parent
        return session


def _starts_run(item: dict[str, Any]) -> bool:
    return item.get("role") == "user" and classify(item).starts_run  # the store's rule


def _time(value: Any) -> datetime | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value).astimezone()
        except (OverflowError, OSError, ValueError):
            return None
    return as_datetime(value)


def keyed_histories(parsed: Any, stem: str) -> list[tuple[str, History]]:
    """A list of messages (one session, named ``stem``) or an object of id → messages."""
    if isinstance(parsed, list):
        return [(stem, History(parsed))]
    if isinstance(parsed, dict) and all(isinstance(v, list) for v in parsed.values()):
        return [(str(sid), History(messages)) for sid, messages in parsed.items()]
    raise ValueError("it holds neither a list of messages nor an object of session id → messages")

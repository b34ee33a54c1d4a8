"""Import conversations into a ``Store`` from the Agents SDK's sessions and turnstore exports.

Sources: the SDK's ``SQLiteSession`` tables (any table names), ``AdvancedSQLiteSession``
databases (their branches and per-turn usage), ``SQLAlchemySession`` tables (any SQLAlchemy
URL), and turnstore's own exports (JSONL, or the JSON document of one session).

Each source session is read into a tree of ``SourceRun`` (runs split at user messages, the
rule the store itself applies) and then *merged* into the store's session of the same id: a
run already stored at the same place with the same items is reused, a stored leaf run whose
items are a prefix of the source run's is extended, anything else is added as a new run. So a
second import adds nothing, a source that grew since adds only what is new, and an interrupted
import resumes where it stopped — without a marker table, and whatever was done to the store
session since (its own new runs are left alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from . import validate
from .core.append import GraftRun
from .core.codec import dumps_item, loads_item, prepare_items
from .errors import (
    ConfigurationError,
    ConnectionFailedError,
    InvalidItemError,
    InvalidOperationError,
    SchemaError,
    SessionNotFoundError,
    TurnstoreError,
)
from .items import classify
from .model import NewRun, Run, Usage
from .sqlite import connect_read_only
from .store import Store

__all__ = [
    "ImportSummary",
    "MergePlan",
    "MergeResult",
    "Source",
    "SourceRun",
    "SourceSession",
    "import_source",
    "merge_session",
    "open_source",
    "plan_merge",
]

SOURCE_KINDS = ("auto", "sqlite", "sqlalchemy", "jsonl", "json")
"""What ``--from`` accepts: ``sqlite`` covers both SQLiteSession and AdvancedSQLiteSession."""


@dataclass(eq=False)
class SourceRun:
    """One run read from a source: a user message (except at a root) and what followed it."""

    items: list[dict[str, Any]]
    key: Hashable = None  # the run's identity in its source, to merge branches that share it
    usage: Usage | None = None
    created_at: datetime | None = None
    children: list[SourceRun] = field(default_factory=list)


@dataclass(eq=False)
class SourceSession:
    """One conversation read from a source, as a tree of runs."""

    session_id: str
    roots: list[SourceRun] = field(default_factory=list)
    head: SourceRun | None = None
    skipped: int = 0  # source rows that cannot be imported (corrupt JSON or usage, not objects)

    def walk(self) -> Iterator[tuple[SourceRun, SourceRun | None]]:
        """Every run with its parent, parents first and siblings in order (no recursion)."""
        stack: list[tuple[SourceRun, SourceRun | None]] = [(r, None) for r in reversed(self.roots)]
        while stack:
            run, parent = stack.pop()
            yield run, parent
            stack.extend((child, run) for child in reversed(run.children))


class _TreeBuilder:
    """Builds a ``SourceSession`` from root-to-leaf paths, merging runs with equal keys."""

    def __init__(self, session: SourceSession) -> None:
        self.session = session
        self._index: dict[tuple[int, Hashable], SourceRun] = {}

    def add_path(self, runs: Iterable[SourceRun]) -> SourceRun | None:
        """Add a path of runs (root first); return its leaf as stored in the tree."""
        parent: SourceRun | None = None
        for run in runs:
            slot = (id(parent), run.key)
            existing = self._index.get(slot)
            if existing is None:
                (parent.children if parent is not None else self.session.roots).append(run)
                self._index[slot] = existing = run
            elif existing.usage is None:
                existing.usage = run.usage
            parent = existing
        return parent


# ---------------------------------------------------------------------------------------------
# Sources


class Source(ABC):
    """A place conversations are read from, one session at a time."""

    kind: str
    location: str
    skipped: int = 0  # rows of no readable session (a session id that is not text, …)

    @abstractmethod
    async def session_ids(self) -> list[str]:
        """The ids of the sessions the source holds, oldest first."""

    @abstractmethod
    async def total_items(self) -> int:
        """About how many items the source holds (for progress)."""

    @abstractmethod
    async def load(self, session_id: str) -> SourceSession:
        """Read one session."""

    async def aclose(self) -> None:  # noqa: B027 - most sources have nothing to release
        """Release the source."""


def _decode(data: Any) -> dict[str, Any] | None:
    """A stored item; None for corrupt JSON (the SDK skips it too), text that is not UTF-8, or
    JSON that is no object."""
    try:
        if isinstance(data, bytes):
            data = data.decode("utf-8", "surrogatepass")
        item = loads_item(data)
    except (TypeError, ValueError, RecursionError):
        return None
    return item if type(item) is dict else None


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


_Row = tuple[Any, Any, Any]  # (source key of the item, stored JSON, created_at)


def _runs_of(rows: Iterable[_Row], session: SourceSession) -> list[tuple[SourceRun, list[Any]]]:
    """Split one branch's rows into runs at user messages; returns (run, keys of its items)."""
    keys: list[Any] = []
    times: list[Any] = []
    items: list[dict[str, Any]] = []
    for key, data, created_at in rows:
        item = _decode(data)
        if item is None:
            session.skipped += 1
            continue
        keys.append(key)
        times.append(created_at)
        items.append(item)
    return _split(items, keys, times)


def _starts_run(item: dict[str, Any]) -> bool:
    # The store's rule (``classify``), asked only of items that can be user messages: it is
    # most of the cost of reading, and is paid once more while writing.
    return item.get("role") == "user" and classify(item).starts_run


def _split(
    items: Sequence[dict[str, Any]], keys: Sequence[Any], times: Sequence[Any]
) -> list[tuple[SourceRun, list[Any]]]:
    """Cut a path of items into runs where the store would: at each user message."""
    runs: list[tuple[SourceRun, list[Any]]] = []
    for item, key, created_at in zip(items, keys, times, strict=True):
        if not runs or _starts_run(item):
            runs.append((SourceRun([], created_at=_as_datetime(created_at)), []))
        runs[-1][0].items.append(item)
        runs[-1][1].append(key)
    for run, run_keys in runs:
        run.key = tuple(run_keys)
    return runs


def _linear(session_id: str, rows: Iterable[_Row]) -> SourceSession:
    session = SourceSession(session_id)
    builder = _TreeBuilder(session)
    session.head = builder.add_path(run for run, _ in _runs_of(rows, session))
    return session


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to the SQLite file ``path`` (which must exist), also in a
    directory it cannot write."""
    conn = connect_read_only(path)
    conn.text_factory = _text
    return conn


def _text(value: bytes) -> str | bytes:
    # TEXT that is not UTF-8 comes back as bytes (sqlite3 would fail the whole query): the
    # readers skip and count what holds it, and go on.
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


def sqlite_tables(conn: sqlite3.Connection, name: str | Path) -> list[str]:
    """The tables of a SQLite database; ``ConnectionFailedError`` if it is not one."""
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ConnectionFailedError(f"{name} is not a SQLite database ({exc})") from exc
    # A name that is not UTF-8 (see _text) is shown, never matched.
    return [t if isinstance(t, str) else t.decode("utf-8", "replace") for (t,) in rows]


class _SQLiteSource(Source):
    """A SQLite file written by the SDK's ``SQLiteSession`` or ``AdvancedSQLiteSession``."""

    kind = "sqlite"

    def __init__(self, path: str, messages_table: str | None) -> None:
        self.location = path
        if not Path(path).is_file():
            raise ConnectionFailedError(f"no such file: {path}")
        self._conn = connect_readonly(Path(path))  # importing never changes the source
        tables = {name.lower(): name for name in sqlite_tables(self._conn, path)}
        self.advanced = "message_structure" in tables
        if messages_table is None and self.advanced:
            # The structure table's foreign key names the messages table it belongs to.
            for row in self._conn.execute("PRAGMA foreign_key_list(message_structure)"):
                if row[3] == "message_id":
                    messages_table = row[2]
        messages_table = messages_table or "agent_messages"
        if messages_table.lower() not in tables:
            hint = (
                " (it is a turnstore database: use `turnstore export` and import the JSONL)"
                if "turnstore_schema" in tables
                else f"; it has {', '.join(sorted(tables.values())) or 'no tables'}"
            )
            raise SchemaError(
                f"{path} holds no {messages_table!r} table of Agents SDK session messages{hint}"
            )
        self.kind = "advanced-sqlite" if self.advanced else "sqlite"
        self._messages = _quote(tables[messages_table.lower()])
        self._usage = "turn_usage" in tables

    def _query(self, sql: str, *params: Any) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise SchemaError(f"cannot read {self.location}: {exc}") from exc

    async def session_ids(self) -> list[str]:
        """Sessions in order of their first message (the rows of an id that is not UTF-8
        text are counted as skipped)."""
        rows = self._query(
            f"SELECT session_id, count(*) FROM {self._messages} "
            "GROUP BY session_id ORDER BY min(id)"
        )
        self.skipped = sum(count for sid, count in rows if isinstance(sid, bytes))
        return [str(sid) for sid, _ in rows if not isinstance(sid, bytes)]

    async def aclose(self) -> None:
        """Close the read-only connection."""
        self._conn.close()

    async def total_items(self) -> int:
        """Rows of the messages table."""
        return int(self._query(f"SELECT count(*) FROM {self._messages}")[0][0])

    async def load(self, session_id: str) -> SourceSession:
        """One session: linear, or its branches when it has AdvancedSQLiteSession structure."""
        if self.advanced and self._query(
            "SELECT 1 FROM message_structure WHERE session_id = ? LIMIT 1", session_id
        ):
            return self._load_branches(session_id)
        rows = self._query(
            f"SELECT id, message_data, created_at FROM {self._messages} "
            "WHERE session_id = ? ORDER BY id",
            session_id,
        )
        return _linear(session_id, rows)

    def _load_branches(self, session_id: str) -> SourceSession:
        # Only messages with structure rows: the ones AdvancedSQLiteSession itself returns.
        rows = self._query(
            f"""SELECT s.branch_id, s.message_id, m.message_data, m.created_at,
                       s.user_turn_number
                FROM message_structure s JOIN {self._messages} m ON m.id = s.message_id
                WHERE s.session_id = ?
                ORDER BY s.sequence_number, s.id""",
            session_id,
        )
        session = SourceSession(session_id)
        branches: dict[str, list[tuple[Any, ...]]] = {}  # in order of first appearance
        for row in rows:
            branches.setdefault(row[0], []).append(row[1:])
        usage_rows = (
            self._query(
                """SELECT branch_id, user_turn_number, requests, input_tokens, output_tokens,
                      total_tokens, input_tokens_details, output_tokens_details
               FROM turn_usage WHERE session_id = ?""",
                session_id,
            )
            if self._usage
            else []
        )
        usage = {}
        for branch, turn, *row in usage_rows:
            counted = _turn_usage(row)
            if counted is None:
                session.skipped += 1
            else:
                usage[(branch, turn)] = counted
        builder = _TreeBuilder(session)
        # "main" first (the branch a new AdvancedSQLiteSession is on), then in creation order:
        # branches that share runs with it become siblings at their fork point.
        for branch in sorted(branches, key=lambda b: b != "main"):
            turns = {message_id: turn for message_id, _, _, turn in branches[branch]}
            runs = _runs_of(((m, data, at) for m, data, at, _ in branches[branch]), session)
            for run, keys in runs:
                run.usage = usage.get((branch, turns[keys[0]]))
            leaf = builder.add_path(run for run, _ in runs)
            if session.head is None:
                session.head = leaf
        return session


def _count(value: Any) -> int | None:
    """A token or request count (None and 0 are 0; digits and whole floats count), or None
    when ``value`` is not one: text, a fraction, a bool, negative, beyond 64 bits."""
    if value is None:
        return 0
    if (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and value.isascii() and value.isdigit()
    ):
        value = int(value)
    if type(value) is not int or not 0 <= value < 2**63:
        return None
    return value


def _usage(counts: dict[str, Any]) -> Usage | None:
    """A ``Usage`` of the counts named by its fields, or None if any is not a count the
    database stores (``validate.optional_usage``: requests fit PostgreSQL's INTEGER)."""
    checked = {name: _count(counts.get(name)) for name in _USAGE_FIELDS}
    if any(count is None for count in checked.values()):
        return None
    try:
        return validate.optional_usage(Usage(**checked))  # type: ignore[arg-type]
    except InvalidOperationError:
        return None


def _turn_usage(row: Sequence[Any]) -> Usage | None:
    """A ``turn_usage`` row's usage; None if it holds something that is not a count."""
    requests, input_tokens, output_tokens, total_tokens, input_details, output_details = row

    def detail(data: Any, key: str) -> Any:
        parsed = _decode(data) if data is not None else None
        return (parsed or {}).get(key)

    return _usage(
        {
            "requests": requests,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": total_tokens,
            "cached_tokens": detail(input_details, "cached_tokens"),
            "reasoning_tokens": detail(output_details, "reasoning_tokens"),
        }
    )


class _SQLAlchemySource(Source):
    """Tables written by the SDK's ``SQLAlchemySession``, on any SQLAlchemy URL."""

    kind = "sqlalchemy"

    def __init__(self, url: str, messages_table: str | None) -> None:
        try:
            import sqlalchemy as sa
            from sqlalchemy.ext.asyncio import create_async_engine
        except ImportError as exc:
            raise ConfigurationError(
                "importing from a SQLAlchemy URL needs SQLAlchemy: "
                "pip install 'sqlalchemy[asyncio]'"
            ) from exc
        try:
            parsed = sa.make_url(url)
            self.location = parsed.render_as_string(hide_password=True)  # it gets printed
            self._async = parsed.get_dialect().is_async
            engine_factory = create_async_engine if self._async else sa.create_engine
            self._engine: Any = engine_factory(url)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
            raise ConfigurationError(f"cannot use the SQLAlchemy URL {url!r}: {exc}") from exc
        self._sa = sa
        self._table = sa.table(
            messages_table or "agent_messages",
            sa.column("id"),
            sa.column("session_id"),
            sa.column("message_data"),
            sa.column("created_at"),
        )

    async def _fetch(self, statement: Any) -> list[Any]:
        try:
            if self._async:
                async with self._engine.connect() as conn:
                    return list((await conn.execute(statement)).all())
            with self._engine.connect() as conn:
                return list(conn.execute(statement).all())
        except self._sa.exc.SQLAlchemyError as exc:
            message = str(exc).splitlines()[0]
            raise SchemaError(f"cannot read {self.location}: {message}") from exc

    async def session_ids(self) -> list[str]:
        """Sessions in order of their first message."""
        t, sa = self._table, self._sa
        rows = await self._fetch(
            sa.select(t.c.session_id).group_by(t.c.session_id).order_by(sa.func.min(t.c.id))
        )
        return [str(sid) for (sid,) in rows]

    async def total_items(self) -> int:
        """Rows of the messages table."""
        rows = await self._fetch(self._sa.select(self._sa.func.count()).select_from(self._table))
        return int(rows[0][0])

    async def load(self, session_id: str) -> SourceSession:
        """One session's messages, in order."""
        t = self._table
        rows = await self._fetch(
            self._sa.select(t.c.id, t.c.message_data, t.c.created_at)
            .where(t.c.session_id == session_id)
            .order_by(t.c.id)
        )
        return _linear(session_id, [tuple(row) for row in rows])

    async def aclose(self) -> None:
        """Dispose of the engine."""
        if self._async:
            await self._engine.dispose()
        else:
            self._engine.dispose()


class _ExportSource(Source):
    """turnstore's own exports (``turnstore export`` / ``Store.export``).

    ``jsonl``: one line per item (see ``turnstore.export``), any number of sessions, parsed by
    ``export.runs_from_jsonl``; the last run of a session becomes its head. ``json``: one
    session's document, with its head and each run's usage.
    """

    def __init__(self, path: str, kind: str) -> None:
        self.location = path
        self.kind = kind
        self._sessions: dict[str, SourceSession] = {}
        self._total = 0
        try:
            with open(path, encoding="utf-8") as file:
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
        from .export import read_jsonl

        groups: dict[str, list[str]] = {}
        first_error = ""
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                record, first_error = None, first_error or f"line {number} is not JSON ({exc})"
            sid = record.get("session_id") if type(record) is dict else None
            if isinstance(sid, str):
                groups.setdefault(sid, []).append(line)
            else:
                self.skipped += 1
                first_error = first_error or f"line {number} has no session_id"
        for sid, group in groups.items():
            new_runs, skipped = read_jsonl(group, strict=False)
            if not new_runs:
                self.skipped += skipped
                first_error = first_error or f"session {sid!r} has no run whose parent is there"
                continue
            session = self._sessions[sid] = SourceSession(sid, skipped=skipped)
            made: list[SourceRun] = []
            for index, new in enumerate(new_runs):
                run = SourceRun(
                    list(new.items), key=index, usage=new.usage, created_at=new.created_at
                )
                siblings = made[new.parent].children if new.parent is not None else session.roots
                siblings.append(run)
                made.append(run)
                self._total += len(run.items)
            # Runs come in creation order, so the last one is a leaf: the newest branch.
            session.head = made[-1] if made else None
        if not self._sessions:
            why = f" ({first_error})" if first_error else ""
            raise SchemaError(f"{self.location} holds no importable turnstore export record{why}")

    def _read_json(self, text: str) -> None:
        try:
            document = json.loads(text)
            if document.get("format") != "turnstore-export":
                raise ValueError('no "format": "turnstore-export"')
            info = document["session"]
            session = self._sessions[info["session_id"]] = SourceSession(info["session_id"])
            made: dict[Any, SourceRun] = {}
            for record in document["runs"]:
                counts = record.get("usage") or {}
                usage = _usage(counts) if isinstance(counts, dict) else None
                session.skipped += usage is None  # the run is imported without its usage
                run = SourceRun(
                    _items(record["items"]),
                    key=record["id"],
                    usage=usage,
                    created_at=_as_datetime(record.get("created_at")),
                )
                parent = record.get("parent_id")
                if parent is not None and parent not in made:
                    raise ValueError(f"run {record['id']}'s parent {parent} comes after it")
                (made[parent].children if parent is not None else session.roots).append(run)
                made[record["id"]] = run
                self._total += len(run.items)
            session.head = made.get(info.get("head_run_id")) or _last(made)
        except (ValueError, TypeError, KeyError, AttributeError, TurnstoreError) as exc:
            raise SchemaError(f"{self.location} is not a turnstore JSON export: {exc}") from None

    async def session_ids(self) -> list[str]:
        """Sessions in order of their first line."""
        return list(self._sessions)

    async def total_items(self) -> int:
        """Items read."""
        return self._total

    async def load(self, session_id: str) -> SourceSession:
        """One session, already read."""
        return self._sessions[session_id]


def _items(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(type(item) is dict for item in value):
        raise ValueError("a run's items are a list of objects")
    return value


_USAGE_FIELDS = frozenset(f.name for f in dataclasses.fields(Usage))


def _last(runs: dict[Any, SourceRun]) -> SourceRun | None:
    return next(reversed(runs.values()), None)


def open_source(location: str, kind: str = "auto", *, messages_table: str | None = None) -> Source:
    """Open ``location`` as a source of conversations; ``kind`` one of ``SOURCE_KINDS``.

    ``auto`` picks ``sqlalchemy`` for a URL, ``sqlite`` for a SQLite file (SQLiteSession or
    AdvancedSQLiteSession), ``jsonl`` for a text file whose first line is a JSON object, and
    ``json`` for a JSON document.
    """
    if kind not in SOURCE_KINDS:
        raise ConfigurationError(f"unknown source kind {kind!r}: use one of {SOURCE_KINDS}")
    if kind == "auto":
        kind = _sniff(location)
    if kind == "sqlalchemy":
        return _SQLAlchemySource(location, messages_table)
    if kind in ("jsonl", "json"):
        return _ExportSource(location, kind)
    return _SQLiteSource(location, messages_table)


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
    if head.lstrip()[:1] == b"{":
        try:
            json.loads(first_line)
        except ValueError:
            return "json"  # a document spread over lines
        return "jsonl"
    raise SchemaError(f"{location} is neither a SQLite database nor a turnstore export")


# ---------------------------------------------------------------------------------------------
# Merging a source session into the store


@dataclass
class ImportSummary:
    """What an import did."""

    source: str = ""
    kind: str = ""
    sessions: int = 0  # sessions read from the source
    new_sessions: int = 0  # of which the store did not have before
    updated_sessions: int = 0  # of which the store had, and that gained runs or items
    runs: int = 0  # runs added (extensions of stored runs count too)
    items: int = 0  # items added
    unchanged_items: int = 0  # items the store already held
    skipped: int = 0  # source rows that cannot be imported (corrupt JSON or usage, not objects)
    skipped_sessions: int = 0  # sessions the store refused (e.g. an id it cannot store)


@dataclass(eq=False)
class _Stored:
    """A run already in the store, as the merge compares it."""

    run_id: int
    items: list[Any]
    has_children: bool = False
    _texts: list[str] | None = None

    @property
    def texts(self) -> list[str]:
        # The store's own serialisation, so that equal items compare equal as text (and the
        # order of keys, which the store keeps, counts).
        if self._texts is None:
            self._texts = [dumps_item(item) for item in self.items]
        return self._texts


async def merge_session(
    store: Store,
    source: SourceSession,
    *,
    chunk_items: int = 5000,
    on_items: Callable[[int], None] | None = None,
) -> MergeResult:
    """Merge ``source`` into the store's session of the same id.

    Writes go in transactions of about ``chunk_items`` items; ``on_items(n)`` reports
    progress. The head follows the source's when anything was added (or the session had
    none); otherwise it stays where it is.
    """
    sid = source.session_id
    info = await store.session(sid)
    plan = plan_merge(source, await store.tree(sid) if info is not None else ())
    if on_items is not None and plan.present:
        on_items(plan.present)
    follow = bool(plan.runs) or info is None or info.head_run_id is None
    await _write(store, sid, plan.runs, chunk_items, on_items, head=plan.head if follow else None)
    if follow and plan.stored_head is not None:
        await store.move_head(sid, plan.stored_head, to_parent=False)
    return MergeResult(
        existed=info is not None,
        runs=len(plan.runs),
        items=sum(len(r.items) for r in plan.runs),
        present=plan.present,
    )


@dataclass(frozen=True)
class MergePlan:
    """What merging a source session into a stored one adds (``plan_merge``)."""

    runs: list[NewRun]  # the runs to add, parents first
    head: int | None  # the index in ``runs`` of the source's head, if it is a new run
    stored_head: int | None  # else the stored run that holds it
    present: int  # items the store already holds


def plan_merge(source: SourceSession, tree: Iterable[tuple[Run, list[Any]]]) -> MergePlan:
    """The runs of ``source`` that the stored session ``tree`` (``Store.tree``) lacks.

    A run already stored at the same place with the same items is reused, a stored leaf run
    whose items are a prefix of the source run's is extended, anything else is new.
    """
    children: dict[int | None, list[_Stored]] = {}
    for stored_run, items in tree:
        children.setdefault(stored_run.parent_id, []).append(_Stored(stored_run.id, items))
    for stored_list in children.values():
        for stored in stored_list:
            stored.has_children = stored.run_id in children

    new_runs: list[NewRun] = []
    at_stored: dict[int, int] = {}  # id(source run) -> stored run id
    at_new: dict[int, int] = {}  # id(source run) -> index in new_runs
    consumed: set[int] = set()
    present = 0
    for run, parent in source.walk():
        if parent is not None and id(parent) in at_new:
            at_new[id(run)] = len(new_runs)
            new_runs.append(
                NewRun(
                    run.items, parent=at_new[id(parent)], usage=run.usage, created_at=run.created_at
                )
            )
            continue
        parent_id = at_stored[id(parent)] if parent is not None else None
        match, extend = _match(children.get(parent_id, ()), run, consumed)
        if match is not None and not extend:
            at_stored[id(run)] = match.run_id
            present += len(run.items)
            continue
        at_new[id(run)] = len(new_runs)
        if match is not None:  # a stored leaf holding the start of this run: extend it
            present += len(match.items)
            new_runs.append(
                NewRun(
                    run.items[len(match.items) :],
                    parent_id=match.run_id,
                    usage=run.usage,
                    created_at=run.created_at,
                )
            )
        else:
            new_runs.append(
                NewRun(run.items, parent_id=parent_id, usage=run.usage, created_at=run.created_at)
            )
    head = id(source.head) if source.head is not None else None
    return MergePlan(
        new_runs,
        at_new.get(head) if head is not None else None,
        at_stored.get(head) if head is not None else None,
        present,
    )


@dataclass(frozen=True)
class MergeResult:
    """What ``merge_session`` did to one session."""

    existed: bool  # the store had the session before
    runs: int  # runs added (an extension of a stored run counts as one)
    items: int  # items added
    present: int  # items the store already held


def _match(
    candidates: Iterable[_Stored], run: SourceRun, consumed: set[int]
) -> tuple[_Stored | None, bool]:
    """The stored sibling that holds ``run`` (exact), or a leaf holding its start (extend).

    Each stored run matches one source run at most, so equal siblings stay two runs.
    """
    texts: list[str] | None = None
    prefix: _Stored | None = None
    for stored in candidates:
        if stored.run_id in consumed or len(stored.items) > len(run.items):
            continue
        if texts is None:
            texts = [dumps_item(item) for item in run.items]
        if stored.texts == texts:
            consumed.add(stored.run_id)
            return stored, False
        if (
            prefix is None
            and not stored.has_children
            and stored.texts == texts[: len(stored.items)]
        ):
            prefix = stored
    if prefix is not None:
        consumed.add(prefix.run_id)
        return prefix, True
    return None, False


async def _write(
    store: Store,
    session_id: str,
    runs: Sequence[NewRun],
    chunk_items: int,
    on_items: Callable[[int], None] | None,
    *,
    head: int | None = None,
) -> list[int]:
    """Add ``runs`` in transactions of about ``chunk_items`` items; their ids in order.

    The head moves to ``runs[head]`` (with the chunk that writes it), or stays.

    Chunks keep each transaction (and the write lock) short and let progress show; an import
    interrupted between chunks resumes by merging again. Each chunk's items are checked and
    classified here while the store's thread writes the previous chunk.
    """
    chunks: list[tuple[int, int]] = []
    start = 0
    while start < len(runs):
        stop, size = start, 0
        while stop < len(runs) and (stop == start or size + len(runs[stop].items) <= chunk_items):
            size += len(runs[stop].items)
            stop += 1
        chunks.append((start, stop))
        start = stop
    ids: list[int] = []
    writing: asyncio.Future[list[int]] | None = None
    written = 0
    for start, stop in chunks:
        try:
            prepared = [prepare_items(run.items) for run in runs[start:stop]]
        except BaseException:
            if writing is not None:  # let the chunk in flight land before giving up
                with contextlib.suppress(Exception):
                    await writing
            raise
        if writing is not None:
            ids.extend(await writing)
            if on_items is not None:
                on_items(written)
        grafts = []
        for run, batch in zip(runs[start:stop], prepared, strict=True):
            parent, parent_id = run.parent, run.parent_id
            if parent is not None:
                # A parent written by an earlier chunk is a stored run by now.
                parent, parent_id = (
                    (None, ids[parent]) if parent < start else (parent - start, None)
                )
            grafts.append(GraftRun(batch, parent_id, parent, run.usage, run.created_at))
        local_head = head - start if head is not None and start <= head < stop else None
        writing = asyncio.ensure_future(store._graft(session_id, grafts, local_head))
        # Let the task hand the chunk to the store's thread before this one prepares the next.
        await asyncio.sleep(0)
        written = sum(len(batch) for batch in prepared)
    if writing is not None:
        ids.extend(await writing)
        if on_items is not None:
            on_items(written)
    return ids


async def import_source(
    store: Store,
    source: Source,
    *,
    session_ids: Sequence[str] | None = None,
    on_items: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Merge every session of ``source`` (or only ``session_ids``) into ``store``."""
    summary = ImportSummary(source=source.location, kind=source.kind)
    available = await source.session_ids()
    if session_ids:
        missing = [sid for sid in session_ids if sid not in set(available)]
        if missing:
            raise SessionNotFoundError(
                f"{source.location} holds no session {', '.join(map(repr, missing))}"
            )
        available = [sid for sid in available if sid in set(session_ids)]
    summary.skipped += source.skipped
    for sid in available:
        session = await source.load(sid)
        try:
            merged = await merge_session(store, session, on_items=on_items)
        except (ConfigurationError, InvalidOperationError, InvalidItemError):
            # What the store refuses in this session's data; the rest of the import goes on.
            summary.skipped_sessions += 1
            summary.skipped += session.skipped + sum(len(run.items) for run, _ in session.walk())
            continue
        summary.sessions += 1
        summary.new_sessions += not merged.existed
        summary.updated_sessions += merged.existed and merged.runs > 0
        summary.runs += merged.runs
        summary.items += merged.items
        summary.unchanged_items += merged.present
        summary.skipped += session.skipped
    return summary

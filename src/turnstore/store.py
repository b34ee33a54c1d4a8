"""``Store``: the async facade over one database, shared by sessions and queries."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from . import validate
from .core import append, compaction, history, queries, reads
from .core.codec import prepare_items
from .core.history import ANY_HEAD, ExpectedHead
from .core.once import check_operation_id, new_operation_id, once
from .core.ops import Backend, Op
from .core.queries import SearchOrder, SessionOrder, UsageGroup
from .errors import (
    ConfigurationError,
    InvalidOperationError,
    OutcomeUnknownError,
    RunNotFoundError,
    SessionNotFoundError,
)

if TYPE_CHECKING:
    from .export import ExportFormat
    from .inspection import DatabaseInfo
from .model import (
    Branch,
    HistoryTail,
    ModelResponse,
    NewRun,
    PathView,
    Run,
    SearchResult,
    SessionInfo,
    SessionPage,
    ToolCall,
    ToolStats,
    Usage,
    UsageRow,
)

__all__ = ["Store", "migrate"]

T = TypeVar("T")


def sqlite_path(target: str) -> str:
    """The SQLite path a target names: ``sqlite:///relative.db``, ``sqlite:////absolute.db``,
    ``sqlite://`` (``:memory:``), or a plain path as it is."""
    if not target.lower().startswith("sqlite://"):
        return target
    path = target[len("sqlite://") :]
    return (path[1:] if path.startswith("/") else path) or ":memory:"


def _open_backend(target: str | os.PathLike[str], options: Mapping[str, Any]) -> Backend:
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise ConfigurationError(
            f"a database is a path, ':memory:' or a URL, not {type(target).__name__}"
        )
    validate.open_target(target)
    # Not urlsplit: it raises ValueError on some malformed URLs, which the backend reports.
    scheme = target.split("://", 1)[0].lower() if "://" in target else ""
    if scheme in ("postgresql", "postgres"):
        try:
            from .postgres import PostgresBackend
        except ImportError as exc:
            raise ConfigurationError(
                "PostgreSQL needs the postgres extra: pip install 'turnstore[postgres]'"
            ) from exc
        validate.open_options(PostgresBackend, "PostgreSQL", options)
        return PostgresBackend(target, **options)
    from .sqlite import SQLiteBackend

    validate.open_options(SQLiteBackend, "SQLite", options)
    if scheme == "sqlite":
        return SQLiteBackend(sqlite_path(target), **options)
    if scheme:
        raise ConfigurationError(
            f"unknown database URL scheme {scheme!r} in {target!r}: "
            "use a file path, ':memory:', sqlite:///path or postgresql://…"
        )
    if not target:
        raise ConfigurationError("the database path is empty")
    return SQLiteBackend(target, **options)


# ``LIMIT`` for "no limit", bindable on every backend with room for the one more row some
# reads ask for.
_NO_LIMIT = 2**62


def _limit(limit: Any) -> int:
    """A limit argument (1 to 2**63 - 1; as large as that means no limit) as bound."""
    return min(validate.count(limit, "limit", minimum=1), _NO_LIMIT)


def _run_id(run_id: Any) -> int:
    return validate.lookup_id(run_id, "run", RunNotFoundError)


def _expected_head(expected_head: Any) -> ExpectedHead:
    """``expected_head`` if it is a run id, None (an empty session) or ``ANY_HEAD``."""
    if expected_head is ANY_HEAD or expected_head is None:
        return expected_head
    # Compared with the head, never bound: an id that names nothing is simply not the head
    # (the write is refused with ConflictError).
    if isinstance(expected_head, bool) or not isinstance(expected_head, int):
        raise InvalidOperationError(
            f"expected_head must be a run id, None or ANY_HEAD, got {expected_head!r}"
        )
    return expected_head


def _session_entry(session_id: str) -> Op[SessionInfo]:
    info = yield from reads.session_info(session_id)
    if info is None:
        raise SessionNotFoundError(f"session {session_id!r} was deleted since")
    return info


def session_patch(
    *, user_id: Any = None, title: Any = None, metadata: Any = None
) -> append.SessionPatch:
    """Check catalogue fields and make the ``SessionPatch`` that writes them."""
    return append.SessionPatch(
        user_id=validate.optional_key(user_id, "user_id"),
        title=validate.optional_text(title, "title"),
        metadata=None if metadata is None else validate.metadata(metadata),
    )


class Store:
    """One database of conversations: open it once, share it between sessions and queries.

    ``Store.open(":memory:")``, ``Store.open("conversations.db")`` or
    ``Store.open("postgresql://host/db")``. Close it with ``close()`` / ``aclose()`` or use it
    as a (async) context manager.
    """

    def __init__(self, backend: Backend) -> None:
        """Wrap an open backend; most callers want ``Store.open``."""
        self.backend = backend

    @property
    def read_only(self) -> bool:
        """Whether the store was opened with ``read_only=True`` (writes raise)."""
        return self.backend.read_only

    @classmethod
    def open(cls, target: str | os.PathLike[str] = ":memory:", **options: Any) -> Store:
        """Open (creating or upgrading its schema) the database named by a path or URL.

        Keyword options go to the backend (SQLite: ``busy_timeout``, ``durable``; Postgres:
        see ``PostgresBackend``). ``read_only=True`` opens an existing turnstore database
        without ever writing to it, on both backends: no schema is created or migrated (a
        schema older than this turnstore is refused with ``SchemaError``, naming ``turnstore
        migrate``), searches leave the search index as it is, and every write method raises
        ``ReadOnlyError``. A SQLite file is opened with ``mode=ro`` (``immutable`` in a
        directory it cannot write; see docs/reliability.md). A SQLite file of another
        application is refused (``SchemaError``) and left as it was found.
        """
        return cls(_open_backend(target, options))

    @staticmethod
    def inspect(target: str | os.PathLike[str], *, schema: str | None = None) -> DatabaseInfo:
        """What the database ``target`` (as ``open`` takes it) holds, found without creating or
        changing anything: missing, empty, turnstore's (at which schema version), the Agents
        SDK's session tables, or another application's. See ``turnstore.inspection``."""
        from .inspection import inspect_database

        return inspect_database(target, schema=schema)

    # -- per-session operations (StructuredSession is a thin layer over these) ---------------

    async def add_items(
        self,
        session_id: str,
        items: Sequence[Any],
        usage: Usage | None = None,
        *,
        info: append.SessionPatch | None = None,
        telemetry: append.Telemetry | None = None,
        owner: int | None = None,
        operation_id: str | None = None,
    ) -> int | None:
        """Append a batch to ``session_id``'s active path in one transaction.

        ``usage`` is added to the tokens of the run the batch counts for, and that run's id is
        returned (None when nothing was written): the run the batch's first user message
        starts, else ``owner`` (the run of the writer's earlier batches, e.g. one Runner call:
        see ``append.append``), else the head. ``info`` (catalogue fields) and ``telemetry``
        (what ``session.hooks`` recorded) are written in the same transaction;
        ``StructuredSession`` passes them.

        Every write method takes ``operation_id``, the write's key (made afresh when None):
        a write is applied at most once per key, and a repeat returns the first one's result.
        Pass the key of an ``OutcomeUnknownError`` to retry its write safely.
        """
        sid = validate.key(session_id, "session_id")
        usage = validate.optional_usage(usage)
        owner = validate.filter_id(owner, "owner")
        if info is not None and not isinstance(info, append.SessionPatch):
            raise InvalidOperationError(f"info must be a SessionPatch, got {type(info).__name__}")
        if telemetry is not None and not isinstance(telemetry, append.Telemetry):
            raise InvalidOperationError(
                f"telemetry must be a Telemetry, got {type(telemetry).__name__}"
            )
        batch = prepare_items(items)
        if not batch and usage is None and info is None and not telemetry:
            return None
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: append.append(
                sid, batch, now, usage, info=info, telemetry=telemetry, owner=owner
            ),
            operation_id,
        )

    async def _write(
        self,
        sid: str,
        op: Callable[[], Op[T]],
        operation_id: str | None,
        keep: Callable[[T], Any] | None = None,
        replay: Callable[[Any], Op[T]] | None = None,
        *,
        ends_session: bool = False,
    ) -> T:
        """Run the write ``op()`` exactly once under its key (see ``core.once.once``)."""
        key = new_operation_id() if operation_id is None else check_operation_id(operation_id)
        try:
            return await self.backend.run(
                lambda: once(sid, key, op(), keep, replay, ends_session=ends_session), write=True
            )
        except OutcomeUnknownError as exc:
            raise OutcomeUnknownError(
                f"{exc}. Retrying with operation_id={key!r} is safe: the write is applied at "
                "most once",
                key,
            ) from exc

    async def get_items(self, session_id: str, limit: int | None = None) -> list[Any]:
        """The newest ``limit`` items the model sees (all when None), oldest first.

        That is the active path's items, except that a compaction run's items stand in for the
        runs it replaced.
        """
        sid = validate.key(session_id, "session_id")
        if limit is not None:
            if validate.count(limit, "limit") == 0:
                return []
            limit = min(limit, _NO_LIMIT)
        return await self.backend.run(lambda: reads.get_items(sid, limit), write=False)

    async def pop_item(self, session_id: str, *, operation_id: str | None = None) -> Any:
        """Remove and return the newest item of the active path, or None."""
        sid = validate.key(session_id, "session_id")
        now = self.backend.now()
        return await self._write(sid, lambda: history.pop_item(sid, now), operation_id)

    async def clear_session(self, session_id: str, *, operation_id: str | None = None) -> None:
        """Delete the session with every branch and derived row."""
        sid = validate.key(session_id, "session_id")
        await self._adopt_before_ending(sid)
        await self._write(sid, lambda: history.clear_session(sid), operation_id, ends_session=True)

    async def history_tail(self, session_id: str, limit: int) -> HistoryTail | None:
        """The newest ``limit`` items the model sees, for ``compact``; None if one is corrupt."""
        sid = validate.key(session_id, "session_id")
        size = _limit(limit)
        return await self.backend.run(lambda: compaction.history_tail(sid, size), write=False)

    async def compact(
        self,
        session_id: str,
        items: Sequence[Any],
        *,
        tail: HistoryTail | None = None,
        start: int = 0,
        operation_id: str | None = None,
    ) -> bool:
        """Replace what the model sees from ``tail.items[start]`` on by ``items``: a compaction.

        Without ``tail`` the whole history the model sees is replaced. One transaction, and
        nothing is deleted: the compacted items become a compaction run below the head, the
        replaced runs stay in the transcript marked ``compacted`` (see README, "Compaction").
        Returns False, changing nothing, when the newest items are no longer ``tail``'s or
        ``start`` leaves none of them to replace (as the SDK's ``SQLiteSession`` does).
        """
        sid = validate.key(session_id, "session_id")
        batch = prepare_items(items)
        replaced = None
        if tail is not None:
            if not isinstance(tail, HistoryTail):
                raise InvalidOperationError(f"tail must be a HistoryTail, got {tail!r}")
            replaced = tail.rows[validate.count(start, "start") :]
        elif start != 0:
            raise InvalidOperationError("start needs a tail")
        now = self.backend.now()
        return await self._write(
            sid, lambda: compaction.compact(sid, batch, now, replaced), operation_id
        )

    async def session(self, session_id: str) -> SessionInfo | None:
        """The session's catalogue entry, or None if it has never been written."""
        sid = validate.key(session_id, "session_id")
        return await self.backend.run(lambda: reads.session_info(sid), write=False)

    async def runs(self, session_id: str) -> list[Run]:
        """The active path's runs, root first: its transcript, compacted runs included."""
        sid = validate.key(session_id, "session_id")
        return await self.backend.run(lambda: reads.path_runs(sid), write=False)

    async def fork(
        self,
        session_id: str,
        run_id: int,
        new_input: str | Mapping[str, Any] | None,
        *,
        expected_head: ExpectedHead = ANY_HEAD,
        operation_id: str | None = None,
    ) -> Run:
        """A new sibling of ``run_id`` with its user message (or ``new_input``); it is the head."""
        sid = validate.key(session_id, "session_id")
        run_id = _run_id(run_id)
        expected_head = _expected_head(expected_head)
        if isinstance(new_input, str):
            validate.text(new_input, "new input")
        elif new_input is not None and not isinstance(new_input, Mapping):
            raise InvalidOperationError(
                f"new input must be a str or a user message item, got {type(new_input).__name__}"
            )
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: history.fork(sid, run_id, new_input, now, expected_head),
            operation_id,
            lambda run: run.id,  # a repeat returns the run as it is then
            lambda kept: reads.find_run(sid, kept),
        )

    async def move_head(
        self,
        session_id: str,
        run_id: int,
        *,
        to_parent: bool,
        expected_head: ExpectedHead = ANY_HEAD,
        operation_id: str | None = None,
    ) -> int | None:
        """Point the head at ``run_id`` (``to_parent``: at its parent); returns the new head."""
        sid = validate.key(session_id, "session_id")
        run_id = _run_id(run_id)
        to_parent = validate.flag(to_parent, "to_parent")
        expected_head = _expected_head(expected_head)
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: history.move_head(
                sid, run_id, to_parent=to_parent, now=now, expected_head=expected_head
            ),
            operation_id,
        )

    async def branches(self, session_id: str) -> list[Branch]:
        """Every leaf of the session's tree, oldest first."""
        sid = validate.key(session_id, "session_id")
        return await self.backend.run(lambda: reads.branches(sid), write=False)

    async def siblings(self, session_id: str, run_id: int) -> list[Run]:
        """``run_id`` and its alternatives (same parent), in creation order."""
        sid = validate.key(session_id, "session_id")
        run_id = _run_id(run_id)
        return await self.backend.run(lambda: reads.siblings(sid, run_id), write=False)

    async def tree(self, session_id: str) -> list[tuple[Run, list[Any]]]:
        """Every run of the session, on every branch, in creation order, with its items."""
        sid = validate.key(session_id, "session_id")
        return await self.backend.run(lambda: reads.session_tree(sid), write=False)

    async def add_runs(
        self,
        session_id: str,
        runs: Sequence[NewRun],
        *,
        head: int | None = None,
        operation_id: str | None = None,
    ) -> list[int]:
        """Add many runs anywhere in the session's tree in one transaction (the bulk path).

        Returns the id of each run in order (for an extension, the run it extended). The head
        moves to ``runs[head]``; with ``head=None`` it stays where it was.
        """
        if not isinstance(runs, (list, tuple)):
            raise InvalidOperationError(f"runs must be a list of NewRun, got {type(runs).__name__}")
        grafts = []
        for index, run in enumerate(runs):
            if not isinstance(run, NewRun):
                raise InvalidOperationError(f"run {index} is a {type(run).__name__}, not a NewRun")
            grafts.append(
                append.GraftRun(
                    prepare_items(run.items),
                    None if run.parent_id is None else _run_id(run.parent_id),
                    run.parent,
                    validate.optional_usage(run.usage, f"run {index}'s usage"),
                    validate.optional_time(run.created_at, f"run {index}'s created_at"),
                )
            )
        return await self._graft(session_id, grafts, head, operation_id)

    async def _graft(
        self,
        session_id: str,
        runs: Sequence[append.GraftRun],
        head: int | None = None,
        operation_id: str | None = None,
    ) -> list[int]:
        """``add_runs`` of items already prepared (importers prepare them while reading).

        A ``GraftRun.now`` that is a ``datetime`` is converted to the backend's timestamps.
        """
        sid = validate.key(session_id, "session_id")
        if head is not None and not (validate.count(head, "head") < len(runs)):
            raise InvalidOperationError(f"head must index one of the {len(runs)} runs")
        grafts = []
        for index, run in enumerate(runs):
            if not run.batch:
                raise InvalidOperationError(f"run {index} has no items")
            if run.parent is not None and not (
                validate.count(run.parent, f"run {index}'s parent") < index
            ):
                raise InvalidOperationError(f"run {index}'s parent must be an earlier run")
            if isinstance(run.now, datetime):
                run = dataclasses.replace(run, now=self._bind_time(run.now))
            grafts.append(run)
        now = self.backend.now()
        return await self._write(sid, lambda: append.graft(sid, grafts, head, now), operation_id)

    @overload
    def _bind_time(self, when: datetime) -> Any: ...
    @overload
    def _bind_time(self, when: None) -> None: ...
    def _bind_time(self, when: datetime | None) -> Any:
        """``when`` as this backend binds timestamps (SQLite: sortable UTC text)."""
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)  # naive times are UTC, as SQLite's are
        when = when.astimezone(timezone.utc)
        if isinstance(self.backend.now(), str):
            return when.isoformat(sep=" ", timespec="microseconds")
        return when

    async def delete_branch(
        self,
        session_id: str,
        run_id: int,
        *,
        expected_head: ExpectedHead = ANY_HEAD,
        operation_id: str | None = None,
    ) -> int | None:
        """Remove ``run_id``'s subtree and the ancestors only it reaches; returns the head."""
        sid = validate.key(session_id, "session_id")
        run_id = _run_id(run_id)
        expected_head = _expected_head(expected_head)
        now = self.backend.now()
        return await self._write(
            sid, lambda: history.delete_branch(sid, run_id, now, expected_head), operation_id
        )

    # -- viewing: a branch a window at a time, runs and tool calls by id ----------------------

    async def path_view(
        self,
        session_id: str,
        *,
        through: int | None = None,
        start: int | None = None,
        stop: int | None = None,
        limit: int = 50,
    ) -> PathView:
        """At most ``limit`` consecutive runs of a branch, with their tool calls and forks.

        The branch is the active path, or the one through the run ``through`` (down to the
        head if the head lies below it, else to its newest run). The window holds the runs at
        depth ``start`` and after, or at depth ``stop`` and before, or else the branch's last
        runs (with ``through``: the runs from just above it). Raises ``SessionNotFoundError``
        or ``RunNotFoundError``.
        """
        sid = validate.key(session_id, "session_id")
        if through is not None:
            through = _run_id(through)
        for name, value in (("start", start), ("stop", stop)):
            if value is not None:
                validate.count(value, name)
        limit = _limit(limit)
        return await self.backend.run(
            lambda: reads.path_view(sid, through, start, stop, limit), write=False
        )

    async def run(self, run_id: int) -> Run:
        """The run ``run_id``, in whichever session it is. Raises ``RunNotFoundError``."""
        run_id = _run_id(run_id)
        return await self.backend.run(lambda: reads.get_run(run_id), write=False)

    async def run_items(self, run_id: int) -> list[Any]:
        """The items of the run ``run_id``, verbatim and in order."""
        run_id = _run_id(run_id)
        return await self.backend.run(lambda: reads.run_items(run_id), write=False)

    async def tool_call(self, call_id: int) -> ToolCall:
        """The tool call whose row id is ``call_id``. Raises ``NotFoundError``."""
        call_id = validate.lookup_id(call_id, "tool call")
        return await self.backend.run(lambda: reads.get_tool_call(call_id), write=False)

    # -- query and analytics: the session catalogue, tool calls, usage, search, export --------

    async def sessions(
        self,
        *,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        order_by: SessionOrder = "created_at",
        limit: int = 50,
        after: str | None = None,
    ) -> SessionPage:
        """One page of the session catalogue, newest first.

        ``metadata`` keeps sessions whose metadata holds every given key with an equal
        (scalar) value. Times are exclusive bounds; naive datetimes are UTC. Pass the page's
        ``next_cursor`` as ``after`` for the next page: keyset pagination, so any page costs
        what the first does. ``order_by="created_at"`` (the default) lists each session once
        even while sessions are written; ``"updated_at"`` lists the most recently active
        first, and a session written between two pages moves ahead of the cursor (it is not
        repeated, and it is not on the later pages).
        """
        order_by = validate.choice(order_by, "order_by", queries.ORDERS)
        user_id = validate.optional_text(user_id, "user_id")
        after = validate.optional_text(after, "after")
        size = _limit(limit)
        meta = validate.metadata_filter(metadata)
        times = {
            name: self._bind_time(validate.optional_time(value, name))
            for name, value in (
                ("created_after", created_after),
                ("created_before", created_before),
                ("updated_after", updated_after),
                ("updated_before", updated_before),
            )
        }
        return await self.backend.run(
            lambda: queries.list_sessions(
                user_id=user_id,
                metadata=meta,
                order_by=order_by,
                limit=size,
                after=after,
                **times,
            ),
            write=False,
        )

    async def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        operation_id: str | None = None,
    ) -> SessionInfo:
        """Set the session's user, title or metadata (None leaves a field unchanged).

        ``metadata`` replaces the stored metadata (a JSON-serialisable mapping). A session
        that does not exist yet is created, with no runs. Returns the updated entry.
        """
        patch = session_patch(user_id=user_id, title=title, metadata=metadata)
        return await self.patch_session(session_id, patch, operation_id=operation_id)

    async def patch_session(
        self, session_id: str, patch: append.SessionPatch, *, operation_id: str | None = None
    ) -> SessionInfo:
        """Like ``update_session``, with fields already checked by ``session_patch``."""
        sid = validate.key(session_id, "session_id")
        if not isinstance(patch, append.SessionPatch):
            raise InvalidOperationError(f"patch must be a SessionPatch, got {type(patch).__name__}")
        now = self.backend.now()
        return await self._write(
            sid,
            lambda: append.update_session(sid, patch, now),
            operation_id,
            lambda info: True,  # a repeat returns the entry as it is then
            lambda kept: _session_entry(sid),
        )

    async def delete_session(self, session_id: str, *, operation_id: str | None = None) -> None:
        """Delete the session with every run, item, tool call and index entry.

        Unlike ``clear_session`` (the SDK's, which ignores unknown sessions) this raises
        ``SessionNotFoundError`` when there is no such session.
        """
        sid = validate.key(session_id, "session_id")
        await self._adopt_before_ending(sid)
        await self._write(sid, lambda: queries.delete_session(sid), operation_id, ends_session=True)

    async def _adopt_before_ending(self, sid: str) -> None:
        """Adopt ``sid``'s unadopted history in the SDK's tables of this file (see _adopt.py)
        before the session is cleared or deleted: adopted later, it would come back."""
        if self.read_only:
            return  # the write that follows is refused
        from . import _adopt  # imported here: _adopt imports this module

        await _adopt.adopt(self, sid)

    async def tool_calls(
        self,
        *,
        session_id: str | None = None,
        run_id: int | None = None,
        tool_name: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = 100,
    ) -> list[ToolCall]:
        """The newest ``limit`` tool calls that match every filter given, oldest first.

        ``status="failed"`` matches every failed call: status ``failed`` or ``incomplete``,
        an MCP call's error, or an output that reports an error (the SDK's messages for a
        tool that raised or timed out, see ``turnstore.core.append.reports_error``). Other
        statuses (``completed``, ``pending`` for a call with no output yet, …) match exactly.
        ``since`` is inclusive, ``until`` exclusive; ``limit=None`` returns every match.
        """
        filters = self._call_filters(session_id, run_id, tool_name, since, until)
        status = validate.optional_text(status, "status")
        size = _limit(limit) if limit is not None else _NO_LIMIT
        return await self.backend.run(
            lambda: queries.tool_calls(**filters, status=status, limit=size), write=False
        )

    async def slowest_tool_calls(
        self,
        *,
        session_id: str | None = None,
        run_id: int | None = None,
        tool_name: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 10,
    ) -> list[ToolCall]:
        """The ``limit`` longest-running tool calls whose duration is known, longest first.

        Filters as in ``tool_calls``.
        """
        filters = self._call_filters(session_id, run_id, tool_name, since, until)
        status = validate.optional_text(status, "status")
        size = _limit(limit)
        return await self.backend.run(
            lambda: queries.tool_calls(**filters, status=status, limit=size, slowest=True),
            write=False,
        )

    async def tool_stats(
        self,
        *,
        session_id: str | None = None,
        run_id: int | None = None,
        tool_name: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[ToolStats]:
        """Per-tool calls, errors, error rate and p50/p95 duration; the most used tool first.

        Errors count as in ``tool_calls(status="failed")``. Durations are known for calls
        run under ``session.hooks``; the statistics ignore the others.
        """
        filters = self._call_filters(session_id, run_id, tool_name, since, until)
        return await self.backend.run(lambda: queries.tool_stats(**filters), write=False)

    def _call_filters(
        self,
        session_id: str | None,
        run_id: int | None,
        tool_name: str | None,
        since: datetime | None,
        until: datetime | None,
    ) -> dict[str, Any]:
        return {
            "session_id": validate.optional_key(session_id, "session_id"),
            "run_id": validate.filter_id(run_id, "run_id"),
            "tool_name": validate.optional_text(tool_name, "tool_name"),
            "since": self._bind_time(validate.optional_time(since, "since")),
            "until": self._bind_time(validate.optional_time(until, "until")),
        }

    async def model_responses(
        self, *, session_id: str | None = None, run_id: int | None = None, limit: int = 100
    ) -> list[ModelResponse]:
        """The newest ``limit`` model calls recorded by ``session.hooks``, oldest first."""
        session_id = validate.optional_key(session_id, "session_id")
        run_id = validate.filter_id(run_id, "run_id")
        size = _limit(limit)
        return await self.backend.run(
            lambda: queries.model_responses(session_id=session_id, run_id=run_id, limit=size),
            write=False,
        )

    async def usage(
        self,
        group_by: UsageGroup = "session",
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[UsageRow]:
        """Requests and tokens summed per session, user, model, agent or UTC day.

        Filters select runs (``since`` inclusive, ``until`` exclusive, on the run's start).
        Without ``session.hooks`` runs carry no model or agent, and count under ``None``.
        """
        group_by = validate.choice(group_by, "group_by", queries.GROUPS)
        session_id = validate.optional_key(session_id, "session_id")
        user_id = validate.optional_text(user_id, "user_id")
        start = self._bind_time(validate.optional_time(since, "since"))
        end = self._bind_time(validate.optional_time(until, "until"))
        return await self.backend.run(
            lambda: queries.usage(
                group_by, session_id=session_id, user_id=user_id, since=start, until=end
            ),
            write=False,
        )

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        roles: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        limit: int = 20,
        order: SearchOrder = "relevance",
    ) -> list[SearchResult]:
        """Full-text search over user and assistant text, tool arguments and tool outputs.

        The query is web-search style: words (all must occur), ``"an exact phrase"``,
        ``this OR that``, ``-excluded``, ``prefix*``; anything else is plain text, so no
        input is a syntax error. Items holding the query's words as one exact phrase come
        first, then the rest by relevance. ``roles`` (``"user"``, ``"assistant"``) and
        ``types`` (``"message"``, ``"function_call"``, ``"function_call_output"``, …) filter
        the items; every branch of every session is searched unless ``session_id`` is given.
        ``order="recent"`` returns the newest matches instead of the most relevant: ranking
        costs a few microseconds per matching item, so prefer it for words that occur in many
        thousands of items.
        """
        order = validate.choice(order, "order", queries.SEARCH_ORDERS)
        query = validate.text(query, "a search query")
        session_id = validate.optional_key(session_id, "session_id")
        role_list = validate.text_list(roles, "roles")
        type_list = validate.text_list(types, "types")
        size = _limit(limit)
        return await self.backend.run(
            lambda: queries.search(
                query,
                session_id=session_id,
                roles=role_list,
                types=type_list,
                limit=size,
                order=order,
                feed=not self.backend.read_only,
            ),
            write=False,
        )

    async def export(
        self, session_id: str, format: ExportFormat = "jsonl", *, all_branches: bool = False
    ) -> str:
        """The session as ``"jsonl"`` (one item a line), ``"json"`` (the tree) or ``"markdown"``.

        The active path by default; ``all_branches=True`` exports every run of the tree. See
        ``turnstore.export`` for the formats; ``runs_from_jsonl`` reads JSONL back for
        ``add_runs``. Raises ``SessionNotFoundError`` for an unknown session.
        """
        from . import export

        sid = validate.key(session_id, "session_id")
        fmt = validate.choice(format, "format", export.FORMATS)
        every = validate.flag(all_branches, "all_branches")
        data = await self.backend.run(lambda: queries.export_data(sid, every), write=False)
        # On a thread of its own: a long session's rendering does not hold up the event loop,
        # and the deepest item JSON can hold (see export._dumps) has the whole stack to render.
        return await asyncio.to_thread(export.render, data, fmt)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database. Idempotent."""
        self.backend.close()

    async def aclose(self) -> None:
        """Close the database without blocking the event loop."""
        await self.backend.aclose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def migrate(target: str | os.PathLike[str], **options: Any) -> int | None:
    """Create the database at ``target``, or bring its schema up to this turnstore's version;
    return the version it was at (None: it held no turnstore schema).

    Opening a store does the same; this is the step for deployments (where the stores that
    serve traffic open with ``migrate=False``, on Postgres) and for scripts. Each migration and
    its version row land in one transaction; concurrent callers on Postgres take turns on an
    advisory lock, on SQLite on the write lock. Options are ``Store.open``'s.
    """
    with Store.open(target, **options) as store:
        return store.backend.found_version

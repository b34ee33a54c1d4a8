"""``StructuredSession``: the Agents SDK ``Session`` protocol on a turnstore ``Store``."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ..core.history import ANY_HEAD, ExpectedHead
from ..core.ops import finish_write, noting_stored, stored_cancellation
from ..domain import validate
from ..domain.model import (
    Annotation,
    AnnotationSource,
    Branch,
    Run,
    SessionInfo,
    SessionPatch,
)
from ..domain.tokens import usage_sum
from ..domain.turns import BranchRef, RunRef
from ..errors import ClosedError, InvalidOperationError
from ..importers import adopt
from ..store import Store, session_patch, shared
from ..tracing import binding
from . import options
from .branching import PendingBranch
from .calls import accrued, call_of
from .pinning import PinningMixin
from .usage import usage_of

if TYPE_CHECKING:
    from agents.memory.session_settings import SessionSettings

    from .hooks import Recorder, SessionHooks

__all__ = ["StructuredSession"]

P = ParamSpec("P")
R = TypeVar("R")


def _sdk_snapshot_type() -> Any:
    """The SDK's compaction snapshot class, if it has the shape the hooks below were written
    for (``items``, ``complete``, ``replace_suffix``); else None. It is private to the SDK, so
    it is recognised by its fields, and an SDK without it simply never calls the hooks."""
    try:
        from agents.memory.session import _CompactionSnapshot
    except ImportError:
        return None
    try:
        names = [field.name for field in dataclasses.fields(_CompactionSnapshot)]
    except TypeError:  # no longer a dataclass
        return None
    return _CompactionSnapshot if names == ["items", "complete", "replace_suffix"] else None


def _write(
    method: Callable[Concatenate[StructuredSession, P], Awaitable[R]],
) -> Callable[Concatenate[StructuredSession, P], Coroutine[Any, Any, R]]:
    """A session's write: adopted first, with a cancellation that arrives during the adoption
    raised only once the write has ended (``StructuredSession._ready_to_write``)."""

    @functools.wraps(method)
    async def write(self: StructuredSession, /, *args: P.args, **kwargs: P.kwargs) -> R:
        held = await self._ready_to_write()
        result = await method(self, *args, **kwargs)
        if held is not None:
            raise held
        return result

    return write


class StructuredSession(PinningMixin):
    """A drop-in for the SDK's ``SQLiteSession`` that stores conversations as a tree of runs.

    ``StructuredSession("user_123", "conversations.db")`` (or ``":memory:"``, the default, or a
    ``postgresql://`` URL, or an open ``Store`` to share). Pass it to ``Runner.run(...,
    session=...)``. Besides the SDK protocol it offers the conversation tree: ``runs``,
    ``edit``, ``regenerate``, ``rewind``, ``checkout``, ``branches``, ``siblings``,
    ``delete_branch``; the catalogue entry (``user_id``, ``metadata``, ``title``: ``info``,
    ``set_info``); and ``hooks``, SDK run hooks that record timing and attribution.
    """

    session_settings: SessionSettings | None
    db_path: str | os.PathLike[str] | Store
    sessions_table = options.SESSIONS_TABLE
    messages_table = options.MESSAGES_TABLE

    def __init__(
        self,
        session_id: str | int,
        db: str | os.PathLike[str] | Store | None = None,
        sessions_table: str | None = None,
        messages_table: str | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        *,
        db_path: str | os.PathLike[str] | None = None,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        title: str | None = None,
        branch: str | None = None,
    ) -> None:
        """Open ``db`` (a path, URL or shared ``Store``) for the conversation ``session_id``.

        The first five parameters are ``SQLiteSession``'s, in its order; ``db_path=`` is its
        keyword for ``db`` (and ``.db_path`` the database given: path, URL or ``Store``). An int
        session id is stored as its decimal text, as ``SQLiteSession`` stores it (``1`` and
        ``"1"`` are one session); other non-str ids raise ``ArgumentTypeError``.
        ``sessions_table`` and ``messages_table`` (``SQLiteSession``'s table names) only accept
        the SDK's defaults: turnstore keeps conversations in its own tables, see
        ``ConfigurationError``'s text. Wrong types raise ``ArgumentTypeError`` (a ``TypeError``,
        as the SDK's sessions raise). With the SDK installed, a ``StructuredSession`` is an
        SDK ``SessionABC`` for ``isinstance``.

        ``user_id``, ``metadata`` and ``title`` go into the session catalogue with this
        object's first write (given values replace stored ones; a title given here wins over
        the default one, the start of the first user message). ``set_info`` changes them later.

        ``branch`` (a branch name) pins this object to that branch, as each
        AdvancedSQLiteSession object has its own current branch: its reads and writes follow
        that branch's end, not the session's head, which this object's writes move only when
        it is there (docs/design.md, "The current branch belongs to the database"). A session
        without runs yet gets the branch with its first write. ``switch_to_branch`` and
        ``create_branch_from_turn`` then move this object's pin, not the head.
        """
        if isinstance(session_id, int) and not isinstance(session_id, bool):
            session_id = str(session_id)
        # Checked first, so that a bad id fails here (not at the first write) and opens nothing.
        self.session_id = validate.key(session_id, "session_id")
        db = options.database(db, db_path, sessions_table, messages_table)
        self.db_path = db
        self.session_settings = options.coerce_settings(session_settings)
        options.register_session_abc(StructuredSession)
        info = session_patch(user_id=user_id, title=title, metadata=metadata)
        self._info: SessionPatch | None = info if info != SessionPatch() else None
        self._pending_info = self._info
        self._recorder: Recorder | None = None
        self._hooks: SessionHooks | None = None
        self._closed = False
        self._adopted = False
        self._lease: shared.Lease | None = None
        self._branch = None if branch is None else validate.branch_name(branch)
        if isinstance(db, Store):
            self._store = db
        else:
            # Sessions opened from one path or URL share the process's store for it (a
            # session per request must not cost a connection and a thread): see store/shared.py.
            self._target = db
            self._lease = self._lease_store()

    def _lease_store(self) -> shared.Lease:
        lease = shared.acquire(self._target)
        self._store = lease.store
        # Not at exit: the shared stores are closed then anyway.
        weakref.finalize(self, lease.release_later).atexit = False
        return lease

    @property
    def store(self) -> Store:
        """The store this session uses; a closed session raises ``ClosedError`` instead."""
        if self._closed:
            raise ClosedError(f"session {self.session_id!r} is closed")
        if self._lease is not None and (self._lease.inherited or shared.closed(self._store)):
            # A forked child's copy of the session (multiprocessing's fork start method: the
            # parent's store waits on a thread that is not in this process), or a shared store
            # someone closed by hand (session.store.close(), as when sessions owned theirs).
            self._lease.release()
            self._lease = self._lease_store()
        return self._store

    async def _ready(self) -> Store:
        """The store, once this session's history in the SDK's own tables of the same file
        (a ``SQLiteSession`` file) is adopted, and what the SDK wrote there since taken up:
        see the README, "Switching from SQLiteSession"."""
        store = self.store
        if not self._adopted:
            await adopt.adopt(store, self.session_id)
            self._adopted = True
        if not adopt.is_plain(store):
            await adopt.take_up(store, self.session_id)  # one indexed lookup when none
        return store

    async def _ready_to_write(self) -> asyncio.CancelledError | None:
        """Adopt as ``_ready`` does, before a write; a cancellation that arrives meanwhile is
        returned, to be raised once the write has ended: a ``CancelledError`` from a write
        means the write is stored (``finish_write``), even on a session's first call."""
        if self._adopted and adopt.is_plain(self.store):
            return None
        adoption = asyncio.ensure_future(self._ready())
        try:
            await finish_write(adoption)
        except asyncio.CancelledError as cancelled:
            if adoption.cancelled():  # the adoption itself (its loop is ending)
                raise
            return cancelled
        return None

    # -- the SDK Session protocol ------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, *, wrapper: Any = None, branch: BranchRef | None = None
    ) -> list[Any]:
        """The newest ``limit`` items of the active path as the model sees it, oldest first.

        After a compaction that is its compacted items, not the runs they replaced.
        ``branch`` (a branch name, or a run id: the path to it) reads another branch without
        moving the head, as AdvancedSQLiteSession's ``get_items(branch_id=)``.

        ``limit=None`` falls back to ``session_settings.limit``, and then to everything. As
        with ``SQLiteSession``, 0 returns nothing and a negative limit everything.
        """
        store = await self._ready()
        call_of(wrapper, self.session_id, reading=True)
        binding.bind(store, self.session_id, fresh=True)  # a Runner call starts here
        if limit is None:
            limit = options.settings_limit(self.session_settings)
        if isinstance(limit, int) and not isinstance(limit, bool) and limit < 0:
            limit = None
        async with self._at_end(store, branch is None):
            end = self._pinned_end() if branch is None else branch
            return await store.get_items(self.session_id, limit, branch=end)

    @_write
    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        """Append ``items`` in one transaction; a user message starts a new run.

        With the SDK's ``wrapper`` (one object per Runner call, carrying the call's cumulative
        usage) each call's tokens are added to its run: a call whose input has no user message
        (a nudge, ``[]`` after ``edit``) adds its own to the run it continues. Items the call
        writes before any user message count for the call's run (its answer, tool calls and
        tokens) even when another call has started a run since; see the README's "Runner
        calls" for what stays ambiguous. What ``hooks`` recorded since the last write, and the
        constructor's catalogue fields on the first write, are written in the same transaction,
        and so is the name of the branch items start after ``create_branch_from_turn`` (or a
        pinned object's ``rewind`` or ``checkout``): stored with it or not at all.
        """
        store = await self._ready()
        call = call_of(wrapper, self.session_id, reading=False)
        binding.bind(store, self.session_id, fresh=False)
        usage = usage_of(wrapper)
        delta = usage if usage is None or call is None else accrued(usage, call.counted)
        end = self._pinned_end()
        telemetry = self._recorder.drain() if self._recorder is not None else None
        if delta is None and telemetry is not None and telemetry.responses:
            # No run context (a wrapper such as the SDK's compaction session passes none):
            # the run's tokens are those of the model calls ``hooks`` saw since the last write.
            delta = usage_sum(record.usage for record in telemetry.responses)
        # Items start the branch create_branch_from_turn (or a pinned rewind) left pending,
        # named in the write's own transaction; usage alone starts none.
        info, pending = self._pending_info, self._pending_branch if items else None
        stored = False

        def note_stored() -> None:
            nonlocal stored
            stored = True
            self._written(info, pending)

        # A task of its own, shielded by finish_write: a cancellation of this caller while it
        # waits is held until it is stored. What it carried is marked written exactly when it
        # is stored (noting_stored): a loop shutting down cancels this task too, and then may
        # store nothing, and the fields and telemetry go with the next write.
        write = asyncio.ensure_future(
            noting_stored(
                lambda: store.add_items(
                    self.session_id,
                    items,
                    delta,
                    info=info,
                    telemetry=telemetry,
                    owner=call.run_id if call is not None else None,
                    branch=end,
                    name=None if pending is None else pending.name,
                    take=pending is not None and pending.take,
                    name_below=ANY_HEAD if pending is None else pending.parent_id,
                ),
                note_stored,
            )
        )
        try:
            async with self._at_end(store):
                run_id = await finish_write(write)
        except BaseException:
            if not stored and telemetry is not None and self._recorder is not None:
                self._recorder.restore(telemetry)
            raise
        if call is not None:
            if usage is not None:
                call.counted = usage
            if run_id is not None:
                call.run_id = run_id
        binding.note_run(self.session_id, run_id)

    def _written(self, info: SessionPatch | None, pending: PendingBranch | None = None) -> None:
        """A write stored: the catalogue fields ``info`` and the branch ``pending`` it named."""
        if info is self._pending_info:
            self._pending_info = None
        self._started(pending)

    @_write
    async def pop_item(self, *, wrapper: Any = None) -> Any:
        """Remove and return the newest item of the active path, or None.

        On an object pinned to a branch, that branch's newest item (``Store.pop_item(branch=)``
        says when that is refused). A branch this object has started (``rewind``,
        ``checkout``, ``create_branch_from_turn``) but not written yet holds no item of its
        own: ``InvalidOperationError``."""
        store = await self._ready()
        if self._branch is None:
            return await store.pop_item(self.session_id)
        pending = self._pending_branch
        if pending is not None:
            raise InvalidOperationError(
                f"branch {pending.name!r} of this object has no run of its own yet (its next "
                f"write starts it below run {pending.parent_id}): nothing was popped; the "
                "items above belong to the branches it forks from"
            )
        return await store.pop_item(self.session_id, branch=self._branch)

    @_write
    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Delete this conversation: every branch, run, item and tool call."""
        store = await self._ready()  # adopted first: a cleared history is not adopted later
        try:
            await store.clear_session(self.session_id)
        except asyncio.CancelledError:  # raised only once the clear is stored (finish_write)
            self._pending_info = self._info
            raise
        self._pending_info = self._info  # a conversation started afresh is catalogued again

    # -- compaction: the SDK's private hooks (README, "Compaction") ---------------------------

    def _stores_verbatim(self) -> bool:
        # A subclass that changes items on the way in or out must not be bypassed by the
        # hooks (the SDK's own sessions refuse for theirs alike): it gets the SDK's fallback.
        cls = type(self)
        return (
            cls.get_items is StructuredSession.get_items
            and cls.add_items is StructuredSession.add_items
        )

    async def _get_compaction_snapshot(self, limit: int, *, prune_prefix: Any = None) -> Any:
        """The newest ``limit`` items, with an atomic replacement of a suffix of them.

        ``OpenAIResponsesCompactionSession`` calls this for automatic compaction and then
        ``replace_suffix(start, items)``, which returns False (changing nothing) when the
        history changed in between. None (the SDK then needs the whole history to match, or
        skips) when the SDK's snapshot type has another shape, a subclass transforms items or
        one is corrupt. ``prune_prefix`` (expired items an ``EncryptedSession`` would delete)
        is ignored: the transcript keeps them, and ``EncryptedSession`` hides them on reading.
        """
        # Compaction replaces the head's path: on an object pinned elsewhere it would replace
        # another branch's model view, so it is refused (before the SDK's fallback clears all).
        self._uncompacted()
        snapshot_type = _sdk_snapshot_type()
        if snapshot_type is None or not self._stores_verbatim():
            return None
        store = await self._ready()
        tail = await store.history_tail(self.session_id, limit)
        if tail is None:
            return None

        async def replace_suffix(start: int, items: list[Any]) -> bool:
            return await store.compact(self.session_id, items, tail=tail, start=start)

        return snapshot_type(tail.items, tail.complete, replace_suffix)

    @_write
    async def _atomic_replace_items(self, items: list[Any]) -> bool:
        """Replace the whole history the model sees by ``items`` (manual compaction).

        One transaction, and the transcript is kept; False (the SDK then clears and adds)
        for a subclass that transforms items.
        """
        self._uncompacted()
        if not self._stores_verbatim():
            return False
        store = await self._ready()
        return await store.compact(self.session_id, items)

    # -- the catalogue and run hooks -----------------------------------------------------------

    async def info(self) -> SessionInfo | None:
        """This session's catalogue entry (user, title, metadata, times), or None if unwritten."""
        store = await self._ready()
        return await store.session(self.session_id)

    @_write
    async def set_info(
        self,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        """Set the session's user, title or metadata now (None leaves a field unchanged).

        Constructor values not yet written are written too; the values given here win.
        ``metadata`` replaces the stored metadata.
        """
        given = session_patch(user_id=user_id, title=title, metadata=metadata)
        pending = self._pending_info or SessionPatch()
        merged = SessionPatch(
            user_id=given.user_id if given.user_id is not None else pending.user_id,
            title=given.title if given.title is not None else pending.title,
            metadata=given.metadata if given.metadata is not None else pending.metadata,
        )
        store = await self._ready()
        try:
            result = await store.patch_session(self.session_id, merged)
        except asyncio.CancelledError as cancelled:
            if stored_cancellation(cancelled):  # stored: else the next write puts them back
                self._pending_info = None
            raise
        self._pending_info = None
        return result

    @property
    def hooks(self) -> SessionHooks:
        """SDK run hooks that record timing and attribution: ``Runner.run(..., hooks=...)``.

        They record each model call (agent, model, response id, usage, latency) and each
        function tool call's start, end and duration, written with the session's next write.
        Needs the Agents SDK. See ``turnstore.agents.hooks``.
        """
        if self._hooks is None:
            from .hooks import Recorder, SessionHooks

            self._recorder = Recorder()
            self._hooks = SessionHooks(self._recorder)
        return self._hooks

    # -- the conversation tree ---------------------------------------------------------------

    async def runs(self) -> list[Run]:
        """The runs of the active path, oldest first: its whole transcript, with the runs a
        compaction replaced (``status`` ``"compacted"``) and the compaction runs."""
        store = await self._ready()
        return await store.runs(self.session_id)

    @_write
    async def edit(
        self,
        run_id: RunRef,
        new_input: str | Mapping[str, Any],
        *,
        expected_head: ExpectedHead = ANY_HEAD,
    ) -> Run:
        """Start a sibling of ``run_id`` whose user message is ``new_input``; it becomes the head.

        A str replaces the message's content and keeps its role, type and other keys. Continue
        with ``Runner.run(agent, [], session=session)``. Every tree operation takes
        ``expected_head``, the head run id you last saw (None: an empty path): when another
        writer has moved the head since, it raises ``ConflictError`` and changes nothing.

        On an object pinned to a branch the tree operations (``edit``, ``regenerate``,
        ``rewind``, ``checkout``) act on that branch as they act on the head elsewhere: the
        run must lie on its course (a ``Turn`` counts along it), ``expected_head`` is its end,
        and the branch moves, not the head. Here the new run takes the branch's name, its
        older course staying unnamed (as an edit leaves the head's older course).
        """
        if new_input is None:  # the store reads None as "regenerate"; an edit needs a value
            raise InvalidOperationError("edit needs a new input: a str or a user message item")
        return await self._fork(run_id, new_input, expected_head)

    @_write
    async def regenerate(self, run_id: RunRef, *, expected_head: ExpectedHead = ANY_HEAD) -> Run:
        """Start a sibling of ``run_id`` with the same user message; it becomes the head (on
        an object pinned to a branch: the branch's, as for ``edit``).

        It holds the question, not an answer: ``Runner.run(agent, [], session=session)``
        then answers it anew.
        """
        return await self._fork(run_id, None, expected_head)

    @_write
    async def rewind(self, run_id: RunRef, *, expected_head: ExpectedHead = ANY_HEAD) -> None:
        """Move the head to ``run_id``'s parent: the next user message starts a sibling.

        On an object pinned to a branch, the branch's end moves there instead (``run_id`` on
        its course, not its first turn): the object's next write starts a sibling of
        ``run_id``, which takes the branch's name. Until then the branch is where it was for
        every other object."""
        if self._branch is not None:
            await self._move_pin(self._branch, run_id, expected_head, to_parent=True)
            return
        store = await self._ready()
        await store.move_head(self.session_id, run_id, to_parent=True, expected_head=expected_head)

    @_write
    async def checkout(self, run_id: RunRef, *, expected_head: ExpectedHead = ANY_HEAD) -> None:
        """Move the head to ``run_id`` (any run, on any branch).

        On an object pinned to a branch, ``run_id`` must lie on the branch's course: its end
        moves back there as ``rewind`` moves it (``switch_to_branch`` moves the object to
        another named branch)."""
        if self._branch is not None:
            await self._move_pin(self._branch, run_id, expected_head, to_parent=False)
            return
        store = await self._ready()
        await store.move_head(self.session_id, run_id, to_parent=False, expected_head=expected_head)

    async def branches(self) -> list[Branch]:
        """Every branch (a leaf of the tree), oldest first: its last user message, where it
        forks and how, its handle and name; ``active`` if the head is on it."""
        store = await self._ready()
        return await store.branches(self.session_id)

    @_write
    async def name_branch(self, name: str | None, run_id: RunRef | None = None) -> Branch:
        """Name the branch ``run_id`` is on (default: the head's) as AdvancedSQLiteSession's
        ``create_branch_from_turn`` names one; ``None`` unnames it. See ``Store.name_branch``."""
        store = await self._ready()
        if run_id is None:
            info = await store.session(self.session_id)
            if info is None or info.head_run_id is None:
                raise InvalidOperationError(
                    f"session {self.session_id!r} has no head run: name a branch by one of its runs"
                )
            run_id = info.head_run_id
        return await store.name_branch(self.session_id, run_id, name)

    @_write
    async def annotate(
        self,
        name: str,
        *,
        value: float | None = None,
        label: str | None = None,
        comment: str | None = None,
        source: AnnotationSource = "user",
        author: str | None = None,
        tool_call_id: int | None = None,
        run_id: int | None = None,
    ) -> Annotation:
        """Annotate the session's head run (on an object pinned to a branch: that branch's
        end), or ``run_id``, a run of this session: a web app's thumbs endpoint knows the
        session, not the run. ``source`` is ``"user"`` by default here (the conversation's
        user); see ``Store.annotate``. ``RunNotFoundError`` when the session has no run yet."""
        store = await self._ready()
        async with self._at_end(store, run_id is None):
            return await store.annotate(
                await self._pinned_run(store) if run_id is None else run_id,
                name,
                value=value,
                label=label,
                comment=comment,
                source=source,
                author=author,
                tool_call_id=tool_call_id,
                session_id=self.session_id,
            )

    def _give_up_pending(self) -> None:
        self._pending_branch = None

    @_write
    async def switch_to_branch(self, name: str, *, expected_head: ExpectedHead = ANY_HEAD) -> int:
        """Move the head to the newest run of the branch called ``name`` (as
        AdvancedSQLiteSession's ``switch_to_branch``); the next message continues it. On an
        object pinned to a branch, the pin moves instead and the head stays. A branch
        ``create_branch_from_turn`` left unwritten is given up."""
        store = await self._ready()
        if self._branch is None:
            # Given up once the switch is stored (a cancellation raised after it too): else a
            # later move back there (a rewind) would name its question so.
            return await noting_stored(
                lambda: store.switch_to_branch(self.session_id, name, expected_head=expected_head),
                self._give_up_pending,
            )
        name = validate.branch_name(name)
        runs = await store.runs(self.session_id, branch=name)  # NotFoundError: no such branch
        self._branch, self._pending_branch = name, None
        return runs[-1].id

    async def siblings(self, run_id: RunRef) -> list[Run]:
        """``run_id`` and its alternatives, in creation order."""
        store = await self._ready()
        return await store.siblings(self.session_id, run_id)

    @_write
    async def delete_branch(
        self,
        run_id: RunRef | str,
        force: bool = False,
        *,
        expected_head: ExpectedHead = ANY_HEAD,
    ) -> None:
        """Remove ``run_id``, its descendants and the ancestors no other branch reaches; a
        branch name removes what only that branch reaches. The active branch (the head on
        what goes) needs ``force=True``, as AdvancedSQLiteSession's ``delete_branch``."""
        store = await self._ready()
        await store.delete_branch(self.session_id, run_id, force=force, expected_head=expected_head)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the session. The store it leased (sessions of one path or URL share one)
        stays open for the next session for 10 seconds once no session uses it, then closes
        (or at exit): a session closed per request costs what an unclosed one does. A
        ``:memory:`` session's database closes now.

        A ``Store`` passed in stays open. Closing is optional: a session dropped unclosed
        gives its store back when it is garbage-collected. Idempotent; any later use raises
        ``ClosedError``.
        """
        binding.on_close()  # the spans of its runs are written while its store is open
        self._closed = True
        if self._lease is not None and (store := self._lease.release(close_now=True)):
            store.close()

    async def aclose(self) -> None:
        """Like ``close``, without blocking the event loop."""
        await binding.on_aclose()
        self._closed = True
        if self._lease is not None and (store := self._lease.release(close_now=True)):
            await store.aclose()

    async def __aenter__(self) -> StructuredSession:
        """``async with StructuredSession(...) as session:``, closed (``aclose``) at the end."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

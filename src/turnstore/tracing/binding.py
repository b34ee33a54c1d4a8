"""Which session and run the code running now works for: what attributes a span to a run.

``StructuredSession`` binds itself here (a context variable) when a Runner call reads or
writes it, so every span the SDK starts afterwards in that call (its task and the tasks it
spawns inherit the context) finds its session; concurrent Runner calls run in tasks of their
own, each with its own binding. The run is the one the call's latest write went to. A
binding belongs to the first trace a span of it shows: a later Runner call in the same task
that uses no turnstore session runs in a new trace, and its spans are not attributed. SDK-free:
``session.py`` imports it whether or not tracing is installed, and binds only once it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store import Store

__all__ = [
    "Binding",
    "active",
    "bind",
    "current",
    "note_run",
    "on_aclose",
    "on_close",
    "set_active",
]


class Binding:
    """One Runner call's use of one session: the store, the session, its run so far."""

    __slots__ = ("run_id", "session_id", "store", "trace_id")

    def __init__(self, store: Store, session_id: str) -> None:
        """Bind ``session_id`` of ``store``; the run is known once the call writes."""
        self.store = store
        self.session_id = session_id
        self.run_id: int | None = None
        self.trace_id: str | None = None


_CURRENT: ContextVar[Binding | None] = ContextVar("turnstore_tracing_binding", default=None)
# Set by turnstore.tracing.install(): until then sessions bind nothing (no cost).
_active = False
_flush: Callable[[], None] | None = None
_aflush: Callable[[], Awaitable[None]] | None = None


def set_active(
    flush: Callable[[], None] | None, aflush: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Start (``flush``, ``aflush``: what a closing session calls first) or stop binding."""
    global _active, _flush, _aflush
    _active = flush is not None
    _flush, _aflush = flush, aflush


def active() -> bool:
    """Whether sessions bind themselves (tracing is installed)."""
    return _active


def bind(store: Store, session_id: str, *, fresh: bool) -> None:
    """The code running now works for ``session_id``; ``fresh``: a Runner call starts (it
    reads the history first), else keep the binding it already has for this session."""
    if not _active:
        return
    present = _CURRENT.get()
    if fresh or present is None or present.session_id != session_id or present.store is not store:
        _CURRENT.set(Binding(store, session_id))


def note_run(session_id: str, run_id: int | None) -> None:
    """The current Runner call's write to ``session_id`` went to ``run_id``."""
    present = _CURRENT.get() if _active else None
    if present is not None and run_id is not None and present.session_id == session_id:
        present.run_id = run_id


def current(trace_id: str) -> Binding | None:
    """The binding of the code running now, if it belongs to the trace ``trace_id``."""
    present = _CURRENT.get()
    if present is None:
        return None
    if present.trace_id is None:
        present.trace_id = trace_id
    return present if present.trace_id == trace_id else None


def on_close() -> None:
    """A session closes: what tracing holds is written first."""
    if _flush is not None:
        _flush()


async def on_aclose() -> None:
    """``on_close`` without blocking the event loop."""
    if _aflush is not None:
        await _aflush()

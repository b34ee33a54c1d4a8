"""What one Runner call has written to one session, kept on the SDK's ``RunContextWrapper``
(one object per call, passed to each of its reads and writes): the run it writes and the usage
it has counted, so that each write adds what the call accrued since its last one.

SDK-free (it reads and sets attributes), as ``usage.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..domain.model import DETAIL_FIELDS, TOKEN_FIELDS, Usage
from ..domain.tokens import usage_with
from .usage import usage_of

__all__ = ["RunnerCall", "accrued", "call_of"]


@dataclass(slots=True)
class RunnerCall:
    """What one Runner call has written to one session: its run and the usage counted."""

    counted: Usage
    run_id: int | None = None


# The attribute of the SDK's RunContextWrapper that holds, per session id, the ``RunnerCall``
# of the Runner call it belongs to: the SDK passes one wrapper to every read and write of a call.
_KEY = "_turnstore_calls"


def call_of(wrapper: Any, session_id: str, *, reading: bool) -> RunnerCall | None:
    """The ``RunnerCall`` of ``wrapper`` (None: no wrapper, or one that cannot carry it)."""
    if wrapper is None:
        return None
    calls = getattr(wrapper, _KEY, None)
    if not isinstance(calls, dict):
        calls = {}
        try:
            setattr(wrapper, _KEY, calls)
        except (AttributeError, TypeError):
            return None
    call: RunnerCall | None = calls.get(session_id)
    if call is None:
        # A Runner call reads the history before its first model request, so the usage its
        # wrapper carries then is not its own: it resumes an interrupted call (a RunState,
        # possibly from another process) whose writes counted that usage already.
        baseline = usage_of(wrapper) if reading else None
        call = calls[session_id] = RunnerCall(baseline or Usage())
    return call


def accrued(usage: Usage, counted: Usage) -> Usage:
    """The usage accrued since ``counted``; all of it when the wrapper's count went back."""
    counts = [getattr(usage, name) - getattr(counted, name) for name in TOKEN_FIELDS]
    inputs, outputs = (
        {key: n - getattr(counted, name).get(key, 0) for key, n in getattr(usage, name).items()}
        for name in DETAIL_FIELDS
    )
    if min([*counts, *inputs.values(), *outputs.values()]) < 0:
        return usage
    return usage_with(
        counts, {k: n for k, n in inputs.items() if n}, {k: n for k, n in outputs.items() if n}
    )

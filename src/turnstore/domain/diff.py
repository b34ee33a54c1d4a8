"""Two courses of a conversation compared: pure, on the runs and tool calls already read.

A course is a path of runs from a root, each with its tool calls. Two courses share a prefix
(the same runs: the same run ids within one session, the same content across two sessions),
fork after its last run, and are then aligned run by run: the first run after the fork on one
side with the first on the other, and so on, a side that ends sooner padded with None.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest

from .model import Run, ToolCall

__all__ = [
    "CALL_FIELDS",
    "BranchDiff",
    "RunDiff",
    "ToolCallDiff",
    "compare",
    "word_changes",
]

# What of a tool call a diff compares, in the order it shows them.
CALL_FIELDS = ("tool_name", "arguments", "output", "status", "duration_ms")


@dataclass(frozen=True, slots=True)
class ToolCallDiff:
    """The ``index``-th tool call of a run on each side (None: that side has fewer), and the
    names of the fields (``CALL_FIELDS``) whose values differ."""

    index: int
    a: ToolCall | None
    b: ToolCall | None
    changed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunDiff:
    """The ``index``-th run after the fork on each side (None: that side's course is shorter),
    what differs between them, and each side's tokens."""

    index: int
    a: Run | None
    b: Run | None
    user_message_changed: bool
    answer_changed: bool
    tool_calls: list[ToolCallDiff]
    tokens_a: int
    tokens_b: int

    @property
    def changed(self) -> bool:
        """Anything differs: a side missing, the user message, the answer or a tool call."""
        return (
            self.a is None
            or self.b is None
            or self.user_message_changed
            or self.answer_changed
            or any(call.changed for call in self.tool_calls)
        )


@dataclass(frozen=True, slots=True)
class BranchDiff:
    """Two courses compared: the runs they share (``common``, root first), the last of them
    (``fork_run_id``; None when they share none), and the runs after it, aligned."""

    session_a: str
    session_b: str
    head_a: int | None
    head_b: int | None
    common: list[Run]
    fork_run_id: int | None
    runs: list[RunDiff]

    @property
    def identical(self) -> bool:
        """Neither course has a run the other lacks."""
        return not self.runs


def _tokens(run: Run | None) -> int:
    return 0 if run is None else run.usage.total_tokens


def _call_changes(a: ToolCall | None, b: ToolCall | None) -> tuple[str, ...]:
    if a is None or b is None:
        return CALL_FIELDS
    return tuple(name for name in CALL_FIELDS if getattr(a, name) != getattr(b, name))


def _calls(a: Sequence[ToolCall], b: Sequence[ToolCall]) -> list[ToolCallDiff]:
    return [
        ToolCallDiff(index, x, y, _call_changes(x, y))
        for index, (x, y) in enumerate(zip_longest(a, b))
    ]


def _same_content(a: Run, b: Run, calls_a: Sequence[ToolCall], calls_b: Sequence[ToolCall]) -> bool:
    """Two runs of different sessions say the same: message, answer and tool calls (timing
    aside, which no two runs share)."""
    if (a.user_message, a.assistant_message) != (b.user_message, b.assistant_message):
        return False
    return len(calls_a) == len(calls_b) and all(
        set(_call_changes(x, y)) <= {"duration_ms"} for x, y in zip(calls_a, calls_b, strict=True)
    )


def compare(
    a: Sequence[Run],
    b: Sequence[Run],
    calls: Mapping[int, Sequence[ToolCall]],
    *,
    by_id: bool,
) -> BranchDiff:
    """Compare the courses ``a`` and ``b`` (root first), whose tool calls ``calls`` holds by
    run id. ``by_id``: the courses are of one session, and share the runs they have in common
    (else runs are matched by what they say)."""

    def of(run: Run) -> Sequence[ToolCall]:
        return calls.get(run.id, ())

    shared = 0
    for x, y in zip(a, b, strict=False):
        same = x.id == y.id if by_id else _same_content(x, y, of(x), of(y))
        if not same:
            break
        shared += 1
    rest = [
        RunDiff(
            index,
            x,
            y,
            x is None or y is None or x.user_message != y.user_message,
            x is None or y is None or x.assistant_message != y.assistant_message,
            _calls(of(x) if x else (), of(y) if y else ()),
            _tokens(x),
            _tokens(y),
        )
        for index, (x, y) in enumerate(zip_longest(a[shared:], b[shared:]))
    ]
    return BranchDiff(
        session_a=a[0].session_id if a else "",
        session_b=b[0].session_id if b else "",
        head_a=a[-1].id if a else None,
        head_b=b[-1].id if b else None,
        common=list(a[:shared]),
        fork_run_id=a[shared - 1].id if shared else None,
        runs=rest,
    )


_WORD = re.compile(r"\s+|\w+|[^\w\s]")


def word_changes(a: str, b: str) -> list[tuple[str, str]]:
    """``a`` → ``b`` as (tag, text) pieces, word by word: ``equal`` (in both), ``delete``
    (only in ``a``), ``insert`` (only in ``b``); a replaced span is its delete then its
    insert. Joined, the equal and delete pieces give ``a``; the equal and insert ones ``b``."""
    x, y = _WORD.findall(a), _WORD.findall(b)
    pieces: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, x, y, autojunk=False).get_opcodes():
        if tag == "equal":
            pieces.append(("equal", "".join(x[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(("delete", "".join(x[i1:i2])))
        if j2 > j1:
            pieces.append(("insert", "".join(y[j1:j2])))
    return pieces

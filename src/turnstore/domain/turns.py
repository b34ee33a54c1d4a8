"""Turn numbers: runs addressed by their place along a branch, as AdvancedSQLiteSession does.

A branch's turns are its runs from the root down, numbered 1, 2, 3 …: a run's turn number is
``depth + 1`` on every branch through it, so it never changes as branches grow, fork or are
deleted below it. ``Turn(3)`` is the third run of the active path; ``Turn(3, "Lyon")`` of the
branch named ``Lyon``; ``Turn(3, 41)`` of the path from the root to run 41. Wherever a session's
run id is taken (``edit``, ``regenerate``, ``rewind``, ``checkout``, ``siblings``,
``name_branch``, ``delete_branch``, ``path_view``'s ``through``) a ``Turn`` may stand instead,
resolved in the operation's own transaction. On the command line ``turn:3`` and
``turn:3@Lyon`` are the same two addresses (``parse_run``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ArgumentTypeError, InvalidOperationError, RunNotFoundError
from . import validate

__all__ = ["BranchRef", "RunRef", "Turn", "branch_ref", "parse_run", "run_ref", "turn_number"]

BranchRef = str | int
"""A branch: its name, or a run id (the path from the root to that run: a leaf id is its whole
branch)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """Turn ``number`` (1 is the root run) of ``branch`` (None: the active path)."""

    number: int
    branch: BranchRef | None = None

    def __post_init__(self) -> None:
        validate.count(self.number, "a turn number", minimum=1)
        if self.branch is not None:
            branch_ref(self.branch)

    def __str__(self) -> str:
        where = "" if self.branch is None else f"@{self.branch}"
        return f"turn:{self.number}{where}"


RunRef = int | Turn
"""A run of one session: its id, or its ``Turn``."""


def turn_number(depth: int) -> int:
    """The turn number of a run at ``depth`` (0 is a root)."""
    return depth + 1


def branch_ref(value: object) -> BranchRef:
    """``value`` if it names a branch: a branch name, or a run id."""
    if isinstance(value, str):
        return validate.branch_name(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return validate.lookup_id(value, "run", RunNotFoundError)
    raise ArgumentTypeError(f"a branch is a branch name or a run id, got {validate.shown(value)}")


def run_ref(value: object) -> RunRef:
    """``value`` if it is a run id or a ``Turn``."""
    if isinstance(value, Turn):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return validate.lookup_id(value, "run", RunNotFoundError)
    raise ArgumentTypeError(f"a run is a run id or a Turn, got {validate.shown(value)}")


def parse_run(text: str) -> RunRef:
    """A run as written on the command line: ``41`` (an id), ``turn:3`` or ``turn:3@NAME``
    (``NAME`` a branch name, or a run id for the path to that run)."""
    spec = text.strip()
    if spec.isdigit():
        return validate.lookup_id(int(spec), "run", RunNotFoundError)
    prefix, _, rest = spec.partition(":")
    number, _, branch = rest.partition("@")
    if prefix != "turn" or not number.isdigit():
        raise InvalidOperationError(
            f"a run is a run id, turn:N or turn:N@BRANCH, got {validate.shown(text)}"
        )
    if not branch:
        return Turn(int(number))
    return Turn(int(number), int(branch) if branch.isdigit() else branch)

"""Which runs of a long session ``show`` and ``runs`` print: ``--last N``, ``--from RUN``,
``--limit N``, and a page's worth by default on a terminal (a pipe gets every run)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import typer

from ..domain.model import Run
from ..errors import InvalidOperationError

__all__ = [
    "TERMINAL_PAGE",
    "FromOption",
    "LastOption",
    "PageLimitOption",
    "Window",
    "on_terminal",
    "window",
]

TERMINAL_PAGE = 50
"""The newest runs a terminal gets when no window is asked for: a screenful or two, where a
session imported whole (1,250 runs) printed 7,500 lines."""

LastOption = Annotated[
    int | None,
    typer.Option(
        "--last",
        metavar="N",
        min=0,
        show_default=False,
        help=f"Only the newest N runs (0: all). Default on a terminal: {TERMINAL_PAGE}.",
    ),
]
FromOption = Annotated[
    int | None,
    typer.Option(
        "--from", metavar="RUN", show_default=False, help="Start at the run RUN (its id)."
    ),
]
PageLimitOption = Annotated[
    int | None,
    typer.Option(
        "--limit",
        metavar="N",
        min=1,
        show_default=False,
        help=f"With --from: at most N runs (default on a terminal: {TERMINAL_PAGE}).",
    ),
]


def on_terminal() -> bool:
    """Whether people read the output (a terminal), not a script (a pipe or a file)."""
    return sys.stdout.isatty()


@dataclass(frozen=True)
class Window:
    """The runs to print: ``runs``, from index ``start`` of the ids ``ids`` of every run."""

    runs: list[Run]
    start: int
    ids: list[int]

    @property
    def whole(self) -> bool:
        return len(self.runs) == len(self.ids)

    def footer(self, what: str) -> str:
        """A line that says which runs these are and the options that show the others."""
        if self.whole:
            return ""
        total, first, last = len(self.ids), self.start + 1, self.start + len(self.runs)
        hints = []
        if self.start > 0:
            earlier = max(self.start - TERMINAL_PAGE, 0)
            hints.append(f"earlier: --from {self.ids[earlier]} --limit {TERMINAL_PAGE}")
        if last < total:
            hints.append(f"later: --from {self.ids[last]}")
        hints.append("all: --last 0")
        return f"runs {first:,}–{last:,} of {total:,} ({what}) · " + " · ".join(hints)


def window(
    runs: Sequence[Run],
    *,
    last: int | None,
    start_at: int | None,
    limit: int | None,
    default_page: bool,
    what: str,
) -> Window:
    """The runs of ``runs`` (in order) that the options choose; ``default_page``: a terminal
    page of the newest when no option says otherwise."""
    if last is not None and start_at is not None:
        raise InvalidOperationError("--last and --from choose different windows: give one")
    if limit is not None and start_at is None:
        raise InvalidOperationError("--limit counts runs from --from RUN: give --from too")
    ids = [run.id for run in runs]
    if start_at is not None:
        try:
            begin = ids.index(start_at)
        except ValueError:
            raise InvalidOperationError(f"run {start_at} is not in {what}") from None
        size = limit if limit is not None else (TERMINAL_PAGE if default_page else len(runs))
        return Window(list(runs[begin : begin + size]), begin, ids)
    size = last if last is not None else (TERMINAL_PAGE if default_page else 0)
    begin = max(len(runs) - size, 0) if size else 0
    return Window(list(runs[begin:]), begin, ids)

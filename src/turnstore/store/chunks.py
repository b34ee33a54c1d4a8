"""Bulk writes in chunks: transactions of bounded size, each chunk read (or prepared) while
the one before it is written. The shared shape of ``turnstore import`` and ``turnstore copy``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Container, Iterable, Sequence
from typing import TypeVar

__all__ = ["overlapped", "ranges"]

C = TypeVar("C")
P = TypeVar("P")


def ranges(
    sizes: Sequence[int], limit: int, cuts: Container[int] | None = None
) -> list[tuple[int, int]]:
    """Consecutive ``(start, stop)`` slices of ``sizes`` that hold at most ``limit`` in all,
    but for a single element bigger than that, which is a slice alone; with ``cuts``, a slice
    starts only at an index in it (and so grows past ``limit`` until it reaches one)."""
    slices: list[tuple[int, int]] = []
    start = 0
    while start < len(sizes):
        stop, size = start, 0
        while stop < len(sizes) and (
            stop == start or size + sizes[stop] <= limit or (cuts is not None and stop not in cuts)
        ):
            size += sizes[stop]
            stop += 1
        slices.append((start, stop))
        start = stop
    return slices


async def overlapped(
    chunks: Iterable[C],
    read: Callable[[C], Awaitable[P]],
    write: Callable[[P], Awaitable[None]],
) -> None:
    """``write(await read(chunk))`` for each chunk in order, one write at a time (each may
    depend on the one before), the next chunk read while the last one is written."""
    writing: asyncio.Future[None] | None = None
    try:
        for chunk in chunks:
            value = await read(chunk)
            if writing is not None:
                await writing
            writing = asyncio.ensure_future(write(value))
            # Let the write reach its backend before the next chunk is read.
            await asyncio.sleep(0)
    except BaseException:
        # Let the chunk in flight land before giving up (a cancellation included, even one in
        # the step that lets it start): a write is never left running behind its caller.
        if writing is not None:
            with contextlib.suppress(Exception):
                await writing
        raise
    if writing is not None:
        await writing

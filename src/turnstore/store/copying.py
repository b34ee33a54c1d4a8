"""The store's side of ``turnstore copy``: a range of a session's rows written exactly once
(an internal API for ``turnstore.transfer``, which reads them from the source)."""

from __future__ import annotations

from typing import Any

from ..core import transfer
from ..core.ops import Op
from ..core.rows import SessionRow
from ..core.transfer import Chunk, IdMap, Time
from .base import StoreBase

__all__ = ["write_rows"]


async def write_rows(
    store: StoreBase,
    session: SessionRow,
    metadata: str,
    chunk: Chunk | None,
    ids: IdMap,
    time: Time,
    *,
    first: bool,
    last: bool,
) -> IdMap:
    """``core.transfer.write_chunk`` in one transaction, under a write key: a commit whose
    reply was lost is not written twice when the backend runs it again."""

    def keep(result: IdMap) -> Any:
        # What this chunk added to the map (the map itself grows with the session).
        added = [
            [source, target] for source, target in result.runs.items() if source not in ids.runs
        ]
        return {"added": added, "waiting": [[k, v] for k, v in result.waiting.items()]}

    def replay(kept: Any) -> Op[IdMap]:
        yield from ()  # nothing to read: the map is rebuilt from what was kept
        runs = {**ids.runs, **{source: target for source, target in kept["added"]}}
        return IdMap(runs, {source: list(targets) for source, targets in kept["waiting"]})

    return await store._write(
        session.session_id,
        lambda: transfer.write_chunk(session, metadata, chunk, ids, time, first=first, last=last),
        None,
        keep,
        replay,
    )

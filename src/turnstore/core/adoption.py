"""Adopting the SDK's ``SQLiteSession`` tables of the same SQLite file: the operations.

What to adopt and when, and reading the SDK's rows, is ``turnstore.importers.adopt``'s; these
run in the store's transactions (``Store``'s adoption methods, ``store/adoption.py``).
A clear or delete supersedes a history not adopted yet (``supersede``) in its own transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..domain.model import Run
from ..errors import SchemaError
from . import statements as S
from .append import GraftRun, append, graft
from .branches import branch_tree
from .codec import PreparedItem
from .lock import lock_session, set_head
from .ops import Capability, Op, supports
from .reads import session_info, session_tree

__all__ = [
    "AdoptionPlan",
    "adopt",
    "adopted_ids",
    "behind",
    "keep_names",
    "sdk_tables_held",
    "supersede",
    "take_up",
    "unadopted",
]


@dataclass(frozen=True)
class AdoptionPlan:
    """What adopting a session adds to what the store holds of it (``plan_merge``'s runs)."""

    runs: Sequence[GraftRun]
    head: int | None  # the index in ``runs`` of the SDK's head, if it is a new run
    stored_head: int | None  # else the stored run that holds it
    # The SDK's branch names (AdvancedSQLiteSession's), given the new runs' ids.
    names: Callable[[Sequence[int]], list[tuple[int, str]]] = lambda ids: []


def sdk_tables_held() -> Op[bool]:
    """Whether the database holds the SDK's messages table (only a SQLite file can)."""
    if not supports(Capability.SDK_ADOPTION):
        return False
    return bool((yield S.SDK_MESSAGES_TABLE()))


def unadopted(session_id: str) -> Op[bool]:
    """Whether the SDK's table holds rows of ``session_id`` and no process adopted it yet."""
    return bool((yield S.SDK_UNADOPTED({"sid": session_id})))


def supersede(session_id: str, now: Any) -> Op[bool]:
    """Mark the session adopted without taking its SDK history over, in the transaction that
    clears or deletes it: adopted later, that history would come back. Whether the SDK's
    table held an unadopted history of it (then the session counts as existing)."""
    if not (yield from sdk_tables_held()) or not (yield from unadopted(session_id)):
        return False
    claim = {"sid": session_id, "now": now, "through": None}
    return (yield S.CLAIM_SDK_ADOPTION(claim)) is not None


def adopted_ids() -> Op[set[str]]:
    """The adopted session ids."""
    return set((yield S.SDK_ADOPTED_IDS()))


def adopt(
    session_id: str,
    plan: Callable[[Sequence[tuple[Run, list[Any]]]], AdoptionPlan],
    through: int | None,
    now: Any,
) -> Op[bool]:
    """Claim the session's adoption and add what ``plan`` makes of the stored tree; False
    (adding nothing) if it was adopted before.

    A session that turnstore already holds (written before adoption existed, or brought in by
    ``turnstore import``) gains the SDK runs it lacks as runs of its tree, and keeps its head
    unless it has none. ``through`` is the SDK's last row the plan read: rows after it are
    taken up later (``take_up``).
    """
    sid = session_id
    claim = {"sid": sid, "now": now, "through": through}
    claimed: int | None = yield S.CLAIM_SDK_ADOPTION(claim)
    if claimed is None:
        return False
    info = yield from session_info(sid)
    planned = plan((yield from session_tree(sid)) if info is not None else ())
    follow = info is None or info.head_run_id is None
    ids: list[int] = []
    if planned.runs:
        ids = yield from graft(sid, planned.runs, planned.head if follow else None, now)
    if follow and planned.stored_head is not None:
        yield from set_head(sid, planned.stored_head, now)
    yield from keep_names(sid, planned.names(ids), now)
    return True


def behind(session_id: str) -> Op[int | None]:
    """The SDK's last row taken over for ``session_id``, if the SDK wrote rows after it."""
    through: int | None = yield S.SDK_BEHIND({"sid": session_id})
    return through


def take_up(
    session_id: str,
    seen: int,
    through: int,
    batch: Sequence[PreparedItem],
    branch: str | None,
    now: Any,
) -> Op[bool]:
    """Append the SDK's rows after ``seen`` up to ``through`` (``batch``) at the head, as
    ``add_items`` would; False (adding nothing) if another process took them up first.

    ``branch``: the AdvancedSQLiteSession branch they were written to. They go on only if the
    head is on the turnstore branch of that name; anything else raises ``SchemaError`` (and
    changes nothing): where they belong is not known, and they must not go unseen.
    """
    advanced = yield S.ADVANCE_SDK_ADOPTION({"sid": session_id, "through": through, "seen": seen})
    if advanced is None:
        return False
    if branch is not None:
        head = yield from lock_session(session_id, now)
        tree = yield from branch_tree(session_id)
        name = tree.names.get(tree.fork_of[head.id]) if head.id is not None else None
        if name != branch:
            raise SchemaError(
                f"AdvancedSQLiteSession wrote to branch {branch!r} of session {session_id!r} "
                f"after turnstore adopted it, and turnstore's head is on "
                f"{'branch ' + repr(name) if name else 'an unnamed branch'}: switch to the "
                f"branch named {branch!r} (switch_to_branch) to take those items up there, and "
                "write through StructuredSession only"
            )
    yield from append(session_id, batch, now)
    return True


def keep_names(session_id: str, names: Sequence[tuple[int, str]], now: Any) -> Op[None]:
    """Name the branch each run of ``names`` is on as its source named it (an
    AdvancedSQLiteSession's ``branch_id``), where that branch has no name yet and no other
    branch of the session has the name: bringing history in never renames a branch."""
    if not names:
        return
    yield from lock_session(session_id, now)  # names are unique: one writer at a time
    tree = yield from branch_tree(session_id)
    held = dict(tree.names)  # fork run → name
    used = set(held.values())
    for run_id, name in names:
        fork = tree.fork_of.get(run_id)
        if fork is None or fork in held or name in used:
            continue
        yield S.NAME_BRANCH({"sid": session_id, "id": fork, "name": name})
        held[fork] = name
        used.add(name)

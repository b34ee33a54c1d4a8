"""Branches as users know them: each with a stable handle, where it forks, and a name.

A branch is a path from a root to a leaf. Its handle is its **fork run**: the first run that
is on no older branch. At every fork the oldest child (the smallest id) continues the older
branch and each younger child starts a branch of its own, so a branch's fork run is the
lowest run of its path that is a younger child (or, for the first branch, its root). It never
changes as the branch grows: a new run below the leaf is the leaf's first child.

A name is kept beside the fork run (``branch_names``), unique in its session, and deleted
with it. ``delete_branch`` of the branch that continued a fork (its oldest child) hands the
fork run over to the next branch there, which keeps its own name; the deleted branch's name
goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..domain.model import Branch, BranchOrigin
from ..errors import InvalidOperationError, NotFoundError
from . import results as R
from . import statements as S
from .lock import lock_session
from .ops import Op
from .reads import find_run
from .tables import as_datetime

__all__ = [
    "BranchTree",
    "branch",
    "branch_tree",
    "branches",
    "hand_over_name",
    "name_branch",
    "name_new_branch",
    "name_run_branch",
]


@dataclass(frozen=True, slots=True)
class BranchTree:
    """A session's runs as links: each run's parent, children, fork run, and the names."""

    parents: dict[int, int | None]
    children: dict[int | None, list[int]]  # each run's children (None: the roots), oldest first
    fork_of: dict[int, int]
    messages: dict[int, str | None]
    kinds: dict[int, str | None]
    names: dict[int, str]  # fork run → name
    # Each run's path from the root: its items, and its runs holding a user message.
    path_items: dict[int, int]
    path_turns: dict[int, int]

    def leaf_of(self, fork_run_id: int) -> int:
        """The leaf of the branch whose fork run is ``fork_run_id``: its oldest children down."""
        run_id = fork_run_id
        while below := self.children.get(run_id):
            run_id = below[0]
        return run_id

    def origin(self, fork_run_id: int) -> BranchOrigin | None:
        """How the branch starting at ``fork_run_id`` was made (None: the first branch)."""
        siblings = self.children[self.parents[fork_run_id]]
        if siblings[0] == fork_run_id:
            return None
        if self.kinds[fork_run_id] == "compaction":
            return "compaction"
        same = self.messages[fork_run_id] == self.messages[siblings[0]]
        return "regenerate" if same else "edit"

    def fork_named(self, session_id: str, name: str) -> int:
        """The fork run of the branch called ``name``. Raises ``NotFoundError``."""
        for run_id, held in self.names.items():
            if held == name:
                return run_id
        raise NotFoundError(f"session {session_id!r} has no branch named {name!r}")

    def end_named(self, session_id: str, name: str) -> int | None:
        """The leaf of the branch called ``name``; None while the session has no runs: a
        pinned writer's branch before its first write makes it (``append``), an empty path.
        Raises ``NotFoundError``."""
        return self.leaf_of(self.fork_named(session_id, name)) if self.parents else None


def branch_tree(session_id: str) -> Op[BranchTree]:
    """The session's runs as a ``BranchTree``: two reads, one pass."""
    rows: list[R.RunLinkRow] = yield S.RUN_LINKS({"sid": session_id})
    names: list[R.BranchNameRow] = yield S.BRANCH_NAMES({"sid": session_id})
    parents: dict[int, int | None] = {}
    children: dict[int | None, list[int]] = {}
    fork_of: dict[int, int] = {}
    path_items: dict[int, int] = {}
    path_turns: dict[int, int] = {}
    for row in rows:  # id order: a parent comes before its children
        parents[row.id] = row.parent_id
        above = row.parent_id
        path_items[row.id] = row.item_count + (path_items[above] if above is not None else 0)
        path_turns[row.id] = (row.user_message is not None) + (
            path_turns[above] if above is not None else 0
        )
        siblings = children.setdefault(row.parent_id, [])
        siblings.append(row.id)
        parent = row.parent_id
        if parent is not None and siblings[0] == row.id:  # the oldest child continues
            fork_of[row.id] = fork_of[parent]
        else:
            fork_of[row.id] = row.id
    return BranchTree(
        parents,
        children,
        fork_of,
        {row.id: row.user_message for row in rows},
        {row.id: row.kind for row in rows},
        {row.run_id: row.name for row in names},
        path_items,
        path_turns,
    )


def branches(session_id: str) -> Op[list[Branch]]:
    """Every leaf of the session's tree, the oldest branch (by its fork run) first;
    ``active`` where the head lies on it."""
    rows: list[R.LeafRow] = yield S.LEAVES({"sid": session_id})
    active_ids = set((yield S.HEAD_LEAVES({"sid": session_id})))
    tree = yield from branch_tree(session_id)
    result = []
    for row in rows:
        fork = tree.fork_of[row.id]
        result.append(
            Branch(
                leaf_run_id=row.id,
                depth=row.depth,
                last_user_message=row.user_message,
                active=row.id in active_ids,
                created_at=as_datetime(row.created_at),
                fork_run_id=fork,
                forks_from=tree.parents[fork],
                origin=tree.origin(fork),
                name=tree.names.get(fork),
                message_count=tree.path_items[row.id],
                user_turns=tree.path_turns[row.id],
            )
        )
    return sorted(result, key=lambda found: found.fork_run_id)


def branch(session_id: str, fork_run_id: int) -> Op[Branch]:
    """The branch whose fork run is ``fork_run_id``."""
    every = yield from branches(session_id)
    return next(found for found in every if found.fork_run_id == fork_run_id)


def name_branch(
    session_id: str, run_id: int, name: str | None, now: Any, *, take: bool = False
) -> Op[Branch]:
    """Name the branch that ``run_id`` is on (None: unname it); returns the branch.

    ``run_id`` may be any run of the branch that is on no older branch: its fork run, its
    leaf, or any run between.
    """
    yield from lock_session(session_id, now)  # names are unique: one writer at a time
    fork = yield from name_run_branch(session_id, run_id, name, take=take)
    return (yield from branch(session_id, fork))


def name_run_branch(
    session_id: str, run_id: int, name: str | None, *, take: bool = False
) -> Op[int]:
    """``name_branch`` in the caller's transaction (the session locked); returns the
    branch's fork run."""
    run = yield from find_run(session_id, run_id)
    tree = yield from branch_tree(session_id)
    fork = tree.fork_of[run.id]
    yield from _set_name(session_id, fork, name, tree.names, take=take)
    return fork


def name_new_branch(session_id: str, fork: int, name: str, *, take: bool = False) -> Op[None]:
    """Name ``name`` the branch a write has just started at run ``fork``, in that write's
    transaction (the session locked), by ``name_branch``'s rule and without reading the tree:
    a new run that is a root or a younger child is its branch's fork run."""
    rows: list[R.BranchNameRow] = yield S.BRANCH_NAMES({"sid": session_id})
    names = {row.run_id: row.name for row in rows}
    yield from _set_name(session_id, fork, name, names, take=take)


def _set_name(
    session_id: str, fork: int, name: str | None, names: dict[int, str], *, take: bool
) -> Op[None]:
    """The naming rule: ``name`` is unique in its session; another branch's is refused, or
    with ``take`` moves from that branch (``names``: fork run → name) to ``fork``'s."""
    holder = next((held for held, found in names.items() if found == name), None)
    if holder is not None and holder != fork:
        if not take:
            raise InvalidOperationError(
                f"session {session_id!r} already has a branch named {name!r}: rename or "
                "unname that one first (nothing was changed)"
            )
        yield S.UNNAME_BRANCH({"sid": session_id, "id": holder})
    if fork in names:
        yield S.UNNAME_BRANCH({"sid": session_id, "id": fork})
    if name is not None:
        yield S.NAME_BRANCH({"sid": session_id, "id": fork, "name": name})


def hand_over_name(session_id: str, top: int, parent_id: int | None) -> Op[None]:
    """Before ``delete_branch`` removes ``top``: if it continued its parent's branch, the next
    child takes over that branch's fork run (with its own name; the deleted one's goes)."""
    names: list[R.BranchNameRow] = yield S.BRANCH_NAMES({"sid": session_id})
    if not names:
        return  # the common case: one indexed read
    tree = yield from branch_tree(session_id)
    siblings = tree.children[parent_id]
    if siblings[0] != top or len(siblings) < 2 or parent_id is None:
        return  # a younger child's fork run is itself, deleted with it; a root's is itself
    fork, heir = tree.fork_of[top], siblings[1]
    yield S.UNNAME_BRANCH({"sid": session_id, "id": fork})
    yield S.MOVE_BRANCH_NAME({"sid": session_id, "id": heir, "to": fork})

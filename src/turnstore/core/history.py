"""Changing history: clear, pop, fork (edit or regenerate), move the head, delete a branch.

``expected_head`` is the optimistic check of ``fork``, ``move_head`` and ``delete_branch``:
they refuse when another writer moved the head first (``ANY_HEAD``, the default: no check).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..domain.items import classify
from ..domain.model import Run
from ..domain.turns import BranchRef
from ..errors import ConflictError, InvalidOperationError, StorageError
from . import results as R
from . import statements as S
from .adoption import supersede
from .append import apply_append, parent_head
from .branches import BranchTree, branch_tree, hand_over_name, name_new_branch
from .codec import decode_items, prepare_items
from .lock import ANY_HEAD, ExpectedHead, Head, Tally, count_rows, lock_session, set_head
from .ops import Op
from .reads import find_run
from .tables import PathWindowRow
from .turns import branch_leaf

__all__ = [
    "ANY_HEAD",
    "ExpectedHead",
    "clear_session",
    "delete_branch",
    "fork",
    "move_head",
    "pop_item",
    "switch_to_branch",
]


def clear_session(session_id: str, now: Any) -> Op[None]:
    """Remove the session with every branch and derived row (and supersede its SDK history
    not adopted yet)."""
    yield from supersede(session_id, now)
    yield S.DELETE_SESSION({"sid": session_id})


def pop_item(session_id: str, now: Any, branch: str | None = None) -> Op[Any]:
    """Remove and return the newest item of the active path (None when empty).

    A run left empty is removed and the head moves to its parent. When the head run is shared
    with other branches (it has children), its items are not touched: a sibling holding all
    but the last of them becomes the head instead.

    ``branch`` (a name) pops that branch's newest item instead, the head staying unless it
    was on the run removed; refused (``InvalidOperationError``, nothing changed) where the
    branch would not keep its name for the runs left (``_removable``).
    """
    while True:
        head = yield from lock_session(session_id, now, create=False)
        shared: int | None = None
        if branch is None:
            if head.id is None:
                return None
            end, parent_id = head.id, head.parent_id
        else:  # a branch's end is a leaf: shared with no other branch
            tree = yield from branch_tree(session_id)
            leaf = tree.end_named(session_id, branch)
            if leaf is None:
                return None
            end, parent_id = leaf, tree.parents[leaf]
        last: R.LastItemRow | None = yield S.LAST_ITEM({"sid": session_id, "run_id": end})
        if last is None:  # every run holds an item: not one written by turnstore
            where = "the head" if branch is None else f"the end of branch {branch!r}"
            raise StorageError(
                f"run {end}, {where} of session {session_id!r}, holds no items; nothing was popped"
            )
        item_id, position = last.id, last.position
        if branch is None:
            shared = yield S.FIRST_CHILD({"sid": session_id, "id": end})
        elif position == 0:
            _removable(session_id, tree, branch, end)
        if shared is not None:
            rows: list[R.ItemRow] = yield S.RUN_ITEMS_BEFORE(
                {"sid": session_id, "run_id": head.id, "position": position}
            )
            keep = decode_items(rows, session_id)
            parent = yield from parent_head(session_id, head.parent_id)
            new_head: int | None = parent.id
            tally = Tally()
            if keep:
                new_head = yield from apply_append(
                    session_id, parent, prepare_items(keep), {}, now, None, tally
                )
            yield from set_head(session_id, new_head, now, tally)
        else:
            if last.call_id is not None:
                params = {"sid": session_id, "call_id": last.call_id, "item": item_id}
                yield S.DROP_CALL_OF_ITEM(params)
                yield S.REOPEN_CALL_OF_OUTPUT(params)
            yield S.DELETE_ITEM({"sid": session_id, "id": item_id})
            deleted = Tally(recount=True)  # a call, a run and its tokens may have gone
            if position == 0:
                yield S.DELETE_RUN({"sid": session_id, "id": end})
                new_head = parent_id if head.id == end else head.id
                yield from set_head(session_id, new_head, now, deleted)
            else:
                yield S.SHRINK_RUN(
                    {"sid": session_id, "id": end, "item_count": position, "now": now}
                )
                yield from count_rows(session_id, deleted)
        popped = decode_items([last], session_id)
        if popped:
            return popped[0]
        # A corrupt row is dropped and the next one tried, as the SDK's SQLiteSession does.


def _removable(session_id: str, tree: BranchTree, name: str, end: int) -> None:
    """Refuse popping the only item of ``end``, the leaf of branch ``name``, where removing
    the run would not leave ``name`` on the runs above it: the branch's only run of its own
    (the name goes with it), or a run whose younger siblings would take over the branch."""
    parent = tree.parents[end]
    if tree.fork_of[end] == end:
        raise InvalidOperationError(
            f"run {end} is branch {name!r}'s only run of its own and holds one item: popping "
            f"it would delete the branch; nothing was popped (delete_branch({name!r}) removes "
            "it)"
        )
    if len(tree.children[parent]) > 1:
        raise InvalidOperationError(
            f"popping the only item of run {end} would remove the run, and branch {name!r} "
            f"would then continue through run {tree.children[parent][1]}, another branch's; "
            f"nothing was popped (rewind({end}) lets the next message replace it)"
        )


def _edited(original: Mapping[str, Any], new_input: str | Mapping[str, Any]) -> Any:
    """The user item ``original`` with its content replaced: same role, type and extra keys.

    String content stays a string; a list of parts becomes one ``input_text`` part.
    """
    if not isinstance(new_input, str):
        return new_input
    item = dict(original)
    content = item.get("content")
    item["content"] = (
        [{"type": "input_text", "text": new_input}] if isinstance(content, list) else new_input
    )
    return item


def _lock_expected(session_id: str, now: Any, expected_head: ExpectedHead) -> Op[Head]:
    """Lock the session; refuse when its head is not ``expected_head`` (optimistic check)."""
    head = yield from lock_session(session_id, now)
    _expect(f"the head of session {session_id!r}", head.id, expected_head)
    return head


def _expect(what: str, found: int | None, expected_head: ExpectedHead) -> None:
    if expected_head is not ANY_HEAD and found != expected_head:
        raise ConflictError(
            f"{what} is run {found}, not run {expected_head}: another writer moved it first; "
            "nothing was changed"
        )


def fork(
    session_id: str,
    run_id: int,
    new_input: str | Mapping[str, Any] | None,
    now: Any,
    expected_head: ExpectedHead = ANY_HEAD,
    at: BranchRef | None = None,
    name: str | None = None,
    *,
    take: bool = False,
) -> Op[Run]:
    """Start a sibling of ``run_id`` with its user message, or with that message edited; it
    becomes the head. ``at`` (a branch name, or a run id) forks on that branch's course
    instead: ``run_id`` must lie on it, ``expected_head`` is checked against its end, and the
    head stays where it is (a pinned session's edit). ``name`` names the branch the new run
    starts, in this transaction (``take``: taken from the branch that holds it); a name
    refused leaves nothing written."""
    head = yield from _lock_expected(session_id, now, ANY_HEAD if at is not None else expected_head)
    run = yield from find_run(session_id, run_id)
    if at is not None:
        end = yield from branch_leaf(session_id, at)
        _expect(f"the end of branch {at!r} of session {session_id!r}", end, expected_head)
        params = {"sid": session_id, "leaf": end, "lo": run.depth, "hi": run.depth}
        on_course: list[PathWindowRow] = yield S.PATH_WINDOW(params)
        if [row.id for row in on_course] != [run.id]:
            raise InvalidOperationError(
                f"run {run.id} is not on branch {at!r} of session {session_id!r}; nothing was "
                "changed"
            )
    if run.kind is not None:
        raise InvalidOperationError(
            f"run {run_id} is a compaction: edit or regenerate one of the runs it replaced"
        )
    row: R.ItemRow | None = yield S.FIRST_ITEM({"sid": session_id, "run_id": run.id})
    original = decode_items([row], session_id) if row is not None else []
    if not original or not classify(original[0]).starts_run:
        raise InvalidOperationError(f"run {run_id} has no user message to edit or regenerate")
    item = original[0] if new_input is None else _edited(original[0], new_input)
    batch = prepare_items([item])
    if not batch[0].info.starts_run:
        raise InvalidOperationError("the new input must be a user message")
    parent = yield from parent_head(session_id, run.parent_id)
    tally = Tally()
    new_id = yield from apply_append(session_id, parent, batch, {}, now, None, tally)
    yield from set_head(session_id, new_id if at is None else head.id, now, tally)
    if name is not None:  # a younger sibling, or a root: the fork run of its own branch
        yield from name_new_branch(session_id, new_id, name, take=take)
    return (yield from find_run(session_id, new_id))


def move_head(
    session_id: str,
    run_id: int,
    *,
    to_parent: bool,
    now: Any,
    expected_head: ExpectedHead = ANY_HEAD,
) -> Op[int | None]:
    """Point the head at ``run_id`` (or at its parent: None, the empty path, for a root)."""
    yield from _lock_expected(session_id, now, expected_head)
    run = yield from find_run(session_id, run_id)
    target = run.parent_id if to_parent else run.id
    yield from set_head(session_id, target, now)
    return target


def switch_to_branch(
    session_id: str, name: str, now: Any, expected_head: ExpectedHead = ANY_HEAD
) -> Op[int]:
    """Move the head to the leaf of the branch called ``name``; returns that leaf."""
    yield from _lock_expected(session_id, now, expected_head)
    tree = yield from branch_tree(session_id)
    leaf = tree.leaf_of(tree.fork_named(session_id, name))
    yield from set_head(session_id, leaf, now)
    return leaf


def delete_branch(
    session_id: str,
    run_id: int,
    now: Any,
    expected_head: ExpectedHead = ANY_HEAD,
    *,
    force: bool = True,
) -> Op[int | None]:
    """Remove ``run_id``, its descendants, and the ancestors that only they reach.

    The active path (root to head) is never removed unless the head is below ``run_id``, and
    then only with ``force`` (else ``InvalidOperationError``, nothing changed).
    Returns the new head: unchanged unless it was removed, else the nearest surviving ancestor.
    """
    head = yield from _lock_expected(session_id, now, expected_head)
    run = yield from find_run(session_id, run_id)
    ancestors: list[R.AncestorRow] = yield S.ANCESTORS_CHILD_COUNTS(
        {"sid": session_id, "id": run.id, "head": head.id}
    )
    top, parent_id, depth = run.id, run.parent_id, run.depth
    for ancestor in ancestors:
        # The climb stops at a fork, and at the head: a head checked out above the branch
        # (its only child leads there) stays, with the path to it.
        if ancestor.children != 1 or ancestor.id == head.id:
            break
        top, parent_id, depth = ancestor.id, ancestor.parent_id, depth - 1
    head_id = head.id
    if head_id is not None:
        # Whether ``top`` is on the head's path: walked from the head up to top's depth only.
        params = {"sid": session_id, "id": top, "depth": depth}
        on_path: int | None = yield S.IS_ANCESTOR(params)
        if on_path is not None:
            if not force:
                raise InvalidOperationError(
                    f"run {run_id} is on the active branch of session {session_id!r} (the "
                    "head is on the runs it would remove): pass force=True to delete it, the "
                    "head moving up to the nearest run left"
                )
            head_id = parent_id
    yield from hand_over_name(session_id, top, parent_id)
    # The whole subtree in one statement, whatever its depth (no cascade from run to run).
    yield S.DELETE_SUBTREE({"sid": session_id, "id": top})
    yield from set_head(session_id, head_id, now, Tally(recount=True))
    return head_id

"""Conformance tests of the conversation tree (issue 3): edit, regenerate, rewind, checkout,
branches, siblings, delete_branch and pop across a fork, on every backend.

Each test checks what the session returns (``get_items``, ``runs``) and the rows a user
would query by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from builders import (
    assistant,
    call,
    converse,
    head,
    history,
    output,
    path,
    run_items,
    snapshot,
    user,
)
from support import sql
from turnstore import (
    ConflictError,
    InvalidOperationError,
    NewRun,
    NotFoundError,
    RunNotFoundError,
    Store,
    StructuredSession,
    TurnstoreError,
    Usage,
)


async def rows_of_runs(store: Store, run_ids: list[int]) -> dict[str, Any]:
    """The rows that belong to some runs, for 'this run was never modified' checks."""
    snap = await snapshot(store)
    return {
        "runs": [row for row in snap["runs"] if row[0] in run_ids],
        "items": [row for row in snap["items"] if row[1] in run_ids],
        "tool_calls": [row for row in snap["tool_calls"] if row[1] in run_ids],
    }


async def leaves(session: StructuredSession) -> list[tuple[str | None, bool]]:
    return [(b.last_user_message, b.active) for b in await session.branches()]


# ---------------------------------------------------------------------------------------------
# edit


async def test_edit_starts_a_sibling_and_keeps_the_old_course(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    before = await session.get_items()
    old_rows = await rows_of_runs(store, [r1, r2, r3])

    edited = await session.edit(r2, "q2 edited")

    assert edited.user_message == "q2 edited"
    assert (edited.parent_id, edited.depth, edited.item_count) == (r1, 1, 1)
    assert edited.assistant_message is None
    assert await session.get_items() == [*history("q1"), user("q2 edited")]
    assert await path(session) == ["q1", "q2 edited"]
    assert await head(store) == edited.id
    assert [run.id for run in await session.siblings(r2)] == [r2, edited.id]
    assert [run.id for run in await session.siblings(edited.id)] == [r2, edited.id]
    assert await leaves(session) == [("q3", False), ("q2 edited", True)]
    # Nothing of the old course was copied or changed.
    assert await rows_of_runs(store, [r1, r2, r3]) == old_rows
    assert await sql(store, "SELECT count(*) FROM runs") == [(4,)]
    assert await sql(
        store, "SELECT count(*), max(position) FROM items WHERE run_id = {id}", id=edited.id
    ) == [(1, 0)]

    await session.add_items([assistant("answer edited", item_id="m-e")])
    assert await sql(store, "SELECT assistant_message FROM runs WHERE id = {id}", id=edited.id) == [
        ("answer edited",)
    ]
    await session.checkout(r3)
    assert await session.get_items() == before
    assert await path(session) == ["q1", "q2", "q3"]


async def test_edit_keeps_the_user_item_shape(store: Store) -> None:
    session = StructuredSession("s", store)
    original = {"id": "u1", "type": "message", "role": "user", "content": "old", "x": [1]}
    await session.add_items([original, assistant("a")])
    (r1,) = [run.id for run in await session.runs()]
    await session.edit(r1, "new")
    (item,) = await session.get_items()
    assert item == {"id": "u1", "type": "message", "role": "user", "content": "new", "x": [1]}
    assert list(item) == list(original)


async def test_edit_of_list_content_gives_one_text_part(store: Store) -> None:
    session = StructuredSession("s", store)
    original = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "what is"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
        ],
    }
    await session.add_items([original])
    (r1,) = [run.id for run in await session.runs()]
    edited = await session.edit(r1, "describe it")
    assert await session.get_items() == [
        {"role": "user", "content": [{"type": "input_text", "text": "describe it"}]}
    ]
    assert edited.user_message == "describe it"


async def test_edit_with_a_full_item(store: Store) -> None:
    session = StructuredSession("s", store)
    _, r2 = await converse(session, "q1", "q2")
    new_item = {"type": "message", "role": "user", "content": "whole", "metadata": {"k": 1}}
    edited = await session.edit(r2, new_item)
    assert await session.get_items() == [*history("q1"), new_item]
    assert edited.user_message == "whole"


@pytest.mark.parametrize(
    "new_input",
    [assistant("not a user"), {"type": "function_call_output", "call_id": "x", "output": ""}],
)
async def test_edit_with_a_non_user_item_is_refused(store: Store, new_input: Any) -> None:
    session = StructuredSession("s", store)
    _, r2 = await converse(session, "q1", "q2")
    before = await snapshot(store)
    with pytest.raises(InvalidOperationError, match="user message"):
        await session.edit(r2, new_input)
    assert await snapshot(store) == before


@pytest.mark.parametrize("new_input", [42, None, ["a"], b"x"])
async def test_edit_with_bad_input_type_is_refused(store: Store, new_input: Any) -> None:
    session = StructuredSession("s", store)
    (r1,) = await converse(session, "q1")
    before = await snapshot(store)
    with pytest.raises(TurnstoreError):
        await session.edit(r1, new_input)
    assert await snapshot(store) == before


async def test_edit_of_the_first_run(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2 = await converse(session, "q1", "q2")
    edited = await session.edit(r1, "q1 edited")
    assert (edited.parent_id, edited.depth) == (None, 0)
    assert await session.get_items() == [user("q1 edited")]
    assert await path(session) == ["q1 edited"]
    assert [run.id for run in await session.siblings(r1)] == [r1, edited.id]
    await session.checkout(r2)
    assert await session.get_items() == history("q1", "q2")


async def test_edit_of_the_last_run(store: Store) -> None:
    session = StructuredSession("s", store)
    _, r2, r3 = await converse(session, "q1", "q2", "q3")
    edited = await session.edit(r3, "q3 edited")
    assert edited.parent_id == r2
    assert await session.get_items() == [*history("q1", "q2"), user("q3 edited")]
    assert await path(session) == ["q1", "q2", "q3 edited"]
    assert [run.id for run in await session.siblings(r3)] == [r3, edited.id]
    assert await leaves(session) == [("q3", False), ("q3 edited", True)]


async def test_edits_of_edits_three_levels_deep(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3, r4 = await converse(session, "q1", "q2", "q3", "q4")
    level0 = await session.get_items()

    e1 = await session.edit(r2, "e1")  # level 1: a new course from run 2
    await session.add_items(run_items("e1")[1:])
    await converse(session, "e1-q3", "e1-q4")
    level1 = await session.get_items()
    e1_runs = [run.id for run in await session.runs()]

    e2 = await session.edit(e1_runs[2], "e2")  # level 2: inside the edited course
    await session.add_items(run_items("e2")[1:])
    await converse(session, "e2-q4")
    level2 = await session.get_items()
    e2_runs = [run.id for run in await session.runs()]

    e3 = await session.edit(e2_runs[3], "e3")  # level 3: inside that one
    assert await session.get_items() == [
        *history("q1", "e1", "e2"),
        user("e3"),
    ]
    assert await path(session) == ["q1", "e1", "e2", "e3"]
    assert [run.depth for run in await session.runs()] == [0, 1, 2, 3]
    assert (e1.parent_id, e2.parent_id, e3.parent_id) == (r1, e1.id, e2.id)
    assert await leaves(session) == [
        ("q4", False),
        ("e1-q4", False),
        ("e2-q4", False),
        ("e3", True),
    ]
    # Every earlier course is still there, whole.
    await session.checkout(r4)
    assert await session.get_items() == level0
    await session.checkout(e1_runs[-1])
    assert await session.get_items() == level1
    await session.checkout(e2_runs[-1])
    assert await session.get_items() == level2
    assert [run.id for run in await session.siblings(r2)] == [r2, e1.id]
    assert [run.id for run in await session.siblings(r3)] == [r3]
    assert await sql(store, "SELECT count(*) FROM runs") == [(4 + 3 + 2 + 1,)]
    assert await sql(store, "SELECT count(*) FROM items") == [(4 * 4 + 3 * 4 + 2 * 4 + 1,)]


async def test_siblings_are_in_creation_order(store: Store) -> None:
    session = StructuredSession("s", store)
    _, r2, _ = await converse(session, "q1", "q2", "q3")
    edits = [await session.edit(r2, f"v{n}") for n in range(3)]
    # Edit an edit: still a sibling of the original, added last.
    last = await session.edit(edits[0].id, "v3")
    siblings = await session.siblings(edits[1].id)
    assert [run.id for run in siblings] == [r2, *(e.id for e in edits), last.id]
    assert [run.user_message for run in siblings] == ["q2", "v0", "v1", "v2", "v3"]
    assert await path(session) == ["q1", "v3"]


async def test_siblings_of_a_lone_root(store: Store) -> None:
    session = StructuredSession("s", store)
    (r1,) = await converse(session, "q1")
    assert [run.id for run in await session.siblings(r1)] == [r1]


# ---------------------------------------------------------------------------------------------
# regenerate, rewind, checkout


async def test_regenerate_repeats_the_user_message(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    before = await session.get_items()
    regen = await session.regenerate(r2)
    assert (regen.parent_id, regen.user_message, regen.item_count) == (r1, "q2", 1)
    assert await session.get_items() == [*history("q1"), user("q2")]
    assert [run.id for run in await session.siblings(r2)] == [r2, regen.id]
    await session.add_items([assistant("another answer", item_id="m-x")])
    assert (await session.runs())[-1].assistant_message == "another answer"
    await session.checkout(r3)
    assert await session.get_items() == before


async def test_rewind_then_a_new_message_starts_a_sibling(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    old_rows = await rows_of_runs(store, [r1, r2, r3])
    await session.rewind(r3)
    assert await head(store) == r2
    assert await session.get_items() == history("q1", "q2")
    assert await path(session) == ["q1", "q2"]
    assert await session.get_items(2) == history("q1", "q2")[-2:]

    await converse(session, "q3 again")
    assert await session.get_items() == history("q1", "q2", "q3 again")
    new = (await session.runs())[-1]
    assert new.parent_id == r2
    assert [run.id for run in await session.siblings(r3)] == [r3, new.id]
    assert await rows_of_runs(store, [r1, r2, r3]) == old_rows


async def test_rewind_to_the_root(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2 = await converse(session, "q1", "q2")
    await session.rewind(r1)
    assert await head(store) is None
    assert await session.get_items() == []
    assert await session.get_items(3) == []
    assert await session.runs() == []
    assert await session.pop_item() is None  # nothing on the active path to pop
    assert await sql(store, "SELECT count(*) FROM runs") == [(2,)]

    await converse(session, "fresh start")
    assert await session.get_items() == history("fresh start")
    new = (await session.runs())[0]
    assert (new.parent_id, new.depth) == (None, 0)
    assert [run.id for run in await session.siblings(r1)] == [r1, new.id]
    assert await leaves(session) == [("q2", False), ("fresh start", True)]
    await session.checkout(r2)
    assert await session.get_items() == history("q1", "q2")


async def test_checkout_moves_the_head_anywhere(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    other = await session.edit(r2, "other")
    await session.checkout(r1)
    assert await session.get_items() == history("q1")
    assert await leaves(session) == [("q3", True), ("other", True)]  # both continue the head
    await session.checkout(r3)
    assert await session.get_items() == history("q1", "q2", "q3")
    assert await leaves(session) == [("q3", True), ("other", False)]
    await session.checkout(other.id)
    assert await session.get_items() == [*history("q1"), user("other")]
    assert await head(store) == other.id
    assert await session.get_items(limit=2) == [run_items("q1")[-1], user("other")]


async def test_a_new_message_while_the_head_has_children_starts_a_sibling(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    old_rows = await rows_of_runs(store, [r1, r2, r3])
    await session.checkout(r2)
    await session.add_items([user("alt")])
    new = (await session.runs())[-1]
    assert (new.parent_id, new.user_message) == (r2, "alt")
    assert [run.id for run in await session.siblings(r3)] == [r3, new.id]
    await session.add_items([assistant("alt answer", item_id="m-alt")])
    assert await session.get_items() == [
        *history("q1", "q2"),
        user("alt"),
        assistant("alt answer", item_id="m-alt"),
    ]
    assert await rows_of_runs(store, [r1, r2, r3]) == old_rows
    await session.checkout(r3)
    assert await session.get_items() == history("q1", "q2", "q3")


async def test_other_items_at_a_shared_head_start_a_run_below_it(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    old_rows = await rows_of_runs(store, [r1, r2, r3])
    await session.checkout(r2)
    await session.add_items([assistant("more on q2", item_id="m-more")])
    new = (await session.runs())[-1]
    # r2 is shared with the branch through r3: it is not changed, the item goes below it.
    assert (new.parent_id, new.user_message, new.item_count) == (r2, None, 1)
    assert new.assistant_message == "more on q2"
    assert await rows_of_runs(store, [r1, r2, r3]) == old_rows
    assert await session.get_items() == [
        *history("q1", "q2"),
        assistant("more on q2", item_id="m-more"),
    ]
    await session.add_items([assistant("and more", item_id="m-more2")])  # joins the new leaf
    assert [run.id for run in await session.runs()][-1] == new.id
    await session.checkout(r3)
    assert await session.get_items() == history("q1", "q2", "q3")


# ---------------------------------------------------------------------------------------------
# delete_branch


async def test_delete_a_side_branch(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    edited = await session.edit(r2, "q2 edited")
    await session.add_items([assistant("edited answer", item_id="m-e")])
    current = await session.get_items()
    kept_rows = await rows_of_runs(store, [r1, edited.id])

    await session.delete_branch(r3)  # the old course: runs 2 and 3 go, run 1 is shared

    assert await session.get_items() == current
    assert await head(store) == edited.id
    assert await sql(store, "SELECT id FROM runs ORDER BY id") == [(r1,), (edited.id,)]
    assert await sql(
        store, "SELECT count(*) FROM items WHERE run_id IN ({a}, {b})", a=r2, b=r3
    ) == [(0,)]
    assert await sql(store, "SELECT call_id FROM tool_calls ORDER BY id") == [("c-q1",)]
    assert await rows_of_runs(store, [r1, edited.id]) == kept_rows
    assert await leaves(session) == [("q2 edited", True)]
    assert [run.id for run in await session.siblings(edited.id)] == [edited.id]
    with pytest.raises(RunNotFoundError):
        await session.checkout(r3)


async def test_delete_the_active_branch(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    edited = await session.edit(r2, "q2 edited")
    await converse(session, "after edit")

    await session.delete_branch(edited.id, force=True)

    # The head falls back to the nearest surviving ancestor; the other course stays whole.
    assert await head(store) == r1
    assert await session.get_items() == history("q1")
    assert await path(session) == ["q1"]
    assert await sql(store, "SELECT id FROM runs ORDER BY id") == [(r1,), (r2,), (r3,)]
    assert await sql(store, "SELECT count(*) FROM items") == [(12,)]
    assert await sql(store, "SELECT count(*) FROM tool_calls") == [(3,)]
    assert await leaves(session) == [("q3", True)]
    await session.checkout(r3)
    assert await session.get_items() == history("q1", "q2", "q3")


async def test_delete_the_only_branch(store: Store) -> None:
    session = StructuredSession("s", store)
    other = StructuredSession("other", store)
    await converse(other, "keep")
    _, _, r3 = await converse(session, "q1", "q2", "q3")
    await session.delete_branch(r3, force=True)
    assert await session.get_items() == []
    assert await session.runs() == []
    assert await session.branches() == []
    assert await head(store) is None
    rows = await sql(
        store,
        "SELECT (SELECT count(*) FROM runs WHERE session_id = 's'),"
        " (SELECT count(*) FROM items WHERE session_id = 's'),"
        " (SELECT count(*) FROM tool_calls WHERE session_id = 's')",
    )
    assert rows == [(0, 0, 0)]
    assert await other.get_items() == history("keep")
    await converse(session, "new")
    assert await session.get_items() == history("new")


async def test_delete_a_fork_point_removes_its_subtree(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, _ = await converse(session, "q1", "q2", "q3")
    await session.edit(r2, "q2 edited")
    await converse(session, "after")
    await session.rewind(r2)
    await converse(session, "q2 third")  # three children of run 1 now
    third = (await session.runs())[-1].id
    await session.delete_branch(r2)  # only the subtree of run 2 goes
    assert await head(store) == third
    assert await path(session) == ["q1", "q2 third"]
    assert [run.user_message for run in await session.siblings(third)] == [
        "q2 edited",
        "q2 third",
    ]
    assert await sql(store, "SELECT user_message FROM runs ORDER BY id") == [
        ("q1",),
        ("q2 edited",),
        ("after",),
        ("q2 third",),
    ]
    assert await sql(store, "SELECT count(*) FROM runs WHERE parent_id = {r1}", r1=r1) == [(2,)]


# ---------------------------------------------------------------------------------------------
# pop across a fork point


async def test_pop_across_a_fork_point_never_touches_the_shared_run(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    old_course = await session.get_items()
    await session.edit(r2, "q2 edited")
    shared = await rows_of_runs(store, [r1, r2, r3])

    assert await session.pop_item() == user("q2 edited")  # the edit's run is now empty: gone
    assert await head(store) == r1
    assert await session.get_items() == history("q1")

    # Run 1 is shared with the old course: popping past the fork copies, never deletes.
    assert await session.pop_item() == run_items("q1")[-1]
    assert await session.get_items() == history("q1")[:-1]
    assert await session.pop_item() == run_items("q1")[-2]
    assert await session.get_items() == history("q1")[:-2]
    assert await sql(store, "SELECT output, status FROM tool_calls WHERE run_id = {r1}", r1=r1) == [
        ("out q1", "completed")
    ]
    assert await rows_of_runs(store, [r1, r2, r3]) == shared
    assert await sql(store, "SELECT count(*) FROM runs WHERE session_id = 's'") == [(4,)]

    await session.checkout(r3)
    assert await session.get_items() == old_course
    assert await path(session) == ["q1", "q2", "q3"]


async def test_pop_to_empty_across_a_fork_point(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2 = await converse(session, "q1", "q2")
    await session.checkout(r1)
    shared = await rows_of_runs(store, [r1, r2])
    popped = [await session.pop_item() for _ in range(4)]
    assert popped == list(reversed(history("q1")))
    assert await session.pop_item() is None
    assert await session.get_items() == []
    assert await rows_of_runs(store, [r1, r2]) == shared
    await session.checkout(r2)
    assert await session.get_items() == history("q1", "q2")


async def test_pop_across_a_shared_run_below_the_root_keeps_the_history_above_it(
    store: Store,
) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    await session.checkout(r2)  # run 2 is shared with the course through run 3
    shared = await rows_of_runs(store, [r1, r2, r3])

    assert await session.pop_item() == run_items("q2")[-1]
    # Run 2's other items are copied into a sibling of it, below run 1: the active path still
    # begins with run 1, and the branch through run 3 keeps all of its history.
    assert await session.get_items() == history("q1") + run_items("q2")[:-1]
    assert await path(session) == ["q1", "q2"]
    runs = await session.runs()
    assert [run.parent_id for run in runs] == [None, r1]
    assert runs[-1].id not in (r1, r2, r3)
    assert await rows_of_runs(store, [r1, r2, r3]) == shared
    await session.checkout(r3)
    assert await session.get_items() == history("q1", "q2", "q3")


# ---------------------------------------------------------------------------------------------
# Errors change nothing

OPERATIONS = ["edit", "regenerate", "rewind", "checkout", "siblings", "delete_branch"]


async def _operate(session: StructuredSession, operation: str, run_id: Any) -> Any:
    if operation == "edit":
        return await session.edit(run_id, "changed")
    return await getattr(session, operation)(run_id)


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize(
    ("run_id", "error"),
    [
        (987654, RunNotFoundError),
        (0, RunNotFoundError),
        (2**63, RunNotFoundError),  # an int no database stores names no run
        (-(2**63) - 1, RunNotFoundError),
        # Not an id at all: a wrong argument (delete_branch takes a branch name: unknown).
        ("1", (InvalidOperationError, NotFoundError)),
        (None, InvalidOperationError),
        (True, InvalidOperationError),
        (1.0, InvalidOperationError),
    ],
)
async def test_unknown_run_is_refused(
    store: Store,
    operation: str,
    run_id: Any,
    error: type[Exception] | tuple[type[Exception], ...],
) -> None:
    session = StructuredSession("s", store)
    await converse(session, "q1", "q2")
    before = await snapshot(store)
    items = await session.get_items()
    with pytest.raises(error) as caught:
        await _operate(session, operation, run_id)
    assert str(run_id) in str(caught.value)
    assert await snapshot(store) == before
    assert await session.get_items() == items


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_run_of_another_session_is_refused(store: Store, operation: str) -> None:
    mine, theirs = StructuredSession("mine", store), StructuredSession("theirs", store)
    await converse(mine, "m1", "m2")
    foreign = await converse(theirs, "t1", "t2")
    before = await snapshot(store)
    with pytest.raises(RunNotFoundError, match="another session"):
        await _operate(mine, operation, foreign[1])
    assert await snapshot(store) == before
    assert await mine.get_items() == history("m1", "m2")
    assert await theirs.get_items() == history("t1", "t2")


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_run_of_an_unwritten_session_is_refused(store: Store, operation: str) -> None:
    foreign = await converse(StructuredSession("theirs", store), "t1")
    before = await snapshot(store)
    with pytest.raises(RunNotFoundError):
        await _operate(StructuredSession("nobody", store), operation, foreign[0])
    assert await snapshot(store) == before
    assert await store.session("nobody") is None


@pytest.mark.parametrize("operation", ["edit", "regenerate"])
async def test_run_without_a_user_message_cannot_be_edited(store: Store, operation: str) -> None:
    session = StructuredSession("s", store)
    await session.add_items([assistant("Welcome! Ask me anything.", item_id="m-w")])
    await converse(session, "q1")
    first = (await session.runs())[0]
    assert first.user_message is None
    before = await snapshot(store)
    with pytest.raises(InvalidOperationError, match="no user message"):
        await _operate(session, operation, first.id)
    assert await snapshot(store) == before
    # The other operations do apply to it.
    await session.checkout(first.id)
    assert await session.get_items() == [assistant("Welcome! Ask me anything.", item_id="m-w")]


# ---------------------------------------------------------------------------------------------
# Two writers moving one head


@pytest.mark.parametrize("operation", ["edit", "regenerate", "rewind", "checkout", "delete"])
async def test_a_stale_expected_head_is_a_conflict(
    backend_name: str, open_store: Callable[[], Store], operation: str
) -> None:
    if backend_name == "sqlite-memory":
        pytest.skip("one :memory: database cannot be opened twice")
    # Two stores on one database: two processes, each with its own connection.
    mine, theirs = StructuredSession("s", open_store()), StructuredSession("s", open_store())
    r1, r2, r3 = await converse(mine, "q1", "q2", "q3")
    seen = r3  # what both writers last saw
    await theirs.edit(r2, "their edit", expected_head=seen)  # they win the race
    before = await snapshot(theirs.store)
    moves: dict[str, Any] = {
        "edit": lambda: mine.edit(r2, "my edit", expected_head=seen),
        "regenerate": lambda: mine.regenerate(r2, expected_head=seen),
        "rewind": lambda: mine.rewind(r2, expected_head=seen),
        "checkout": lambda: mine.checkout(r1, expected_head=seen),
        "delete": lambda: mine.delete_branch(r3, expected_head=seen),
    }
    with pytest.raises(ConflictError, match="another writer moved it first"):
        await moves[operation]()
    assert await snapshot(theirs.store) == before
    assert await path(mine) == ["q1", "their edit"]
    # With the head it sees now, the same operation goes through.
    current = (await mine.runs())[-1].id
    await mine.checkout(r3, expected_head=current)
    assert await path(mine) == ["q1", "q2", "q3"]


@pytest.mark.parametrize("operation", ["edit", "regenerate", "rewind", "checkout", "delete"])
async def test_expected_head_none_is_the_empty_path(store: Store, operation: str) -> None:
    session = StructuredSession("s", store)
    r1, r2 = await converse(session, "q1", "q2")
    moves: dict[str, Any] = {
        "edit": lambda: session.edit(r1, "edited", expected_head=None),
        "regenerate": lambda: session.regenerate(r1, expected_head=None),
        "rewind": lambda: session.rewind(r2, expected_head=None),
        "checkout": lambda: session.checkout(r2, expected_head=None),
        "delete": lambda: session.delete_branch(r2, expected_head=None),
    }
    # None is a head like any other: here the path is not empty, so it is stale.
    before = await snapshot(store)
    with pytest.raises(ConflictError, match="another writer moved it first"):
        await moves[operation]()
    assert await snapshot(store) == before
    # Once the path is empty (the head rewound past the root), None is the head seen.
    await session.rewind(r1, expected_head=r2)
    assert await head(store) is None
    await moves[operation]()
    expected = {
        "edit": ["edited"],
        "regenerate": ["q1"],
        "rewind": ["q1"],
        "checkout": ["q1", "q2"],
        "delete": [],
    }
    assert await path(session) == expected[operation]


async def test_run_ids_rise_along_every_branch(store: Store) -> None:
    # SQLite reads a path in run-id order (sqlite.SQL[PATH_ITEMS]): that must be depth order.
    session = StructuredSession("s", store)
    r1, r2, r3, _ = await converse(session, "q1", "q2", "q3", "q4")
    await session.checkout(r2)
    await session.add_items([assistant("more on q2", item_id="m-more")])
    await session.edit(r3, "q3 again")
    await session.add_items([assistant("answer to q3 again", item_id="m-a3")])
    await session.checkout(r1)
    assert await session.pop_item() is not None  # r1 is shared: a copy without its last item
    await converse(session, "q5")
    await store.add_runs(
        "s", [NewRun([user("grafted")], parent_id=r1), NewRun([user("below")], parent=0)]
    )
    for branch in await session.branches():
        await session.checkout(branch.leaf_run_id)
        runs = await session.runs()
        assert [run.depth for run in runs] == list(range(len(runs))), branch
        ids = [run.id for run in runs]
        assert ids == sorted(ids), branch
        items = await session.get_items()
        assert len(items) == sum(run.item_count for run in runs)
        assert await session.get_items(limit=3) == items[-3:]


async def test_add_runs_grafts_below_stored_and_new_runs(store: Store) -> None:
    session = StructuredSession("g", store)
    r1, r2 = await converse(session, "q1", "q2")
    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
    usage = Usage(requests=1, input_tokens=3, output_tokens=4, total_tokens=7)
    ids = await store.add_runs(
        "g",
        [
            NewRun([user("below q1"), call("c9", "fetch")], r1, usage=usage, created_at=when),
            NewRun([output("c9", "found"), assistant("done")], parent=0),  # extends run 0
            NewRun([user("deeper")], parent=0),  # a child of the extended run
        ],
        head=2,
    )
    assert ids[1] == ids[0]
    runs = {run.id: run for run, _ in await store.tree("g")}
    grafted, deeper = runs[ids[0]], runs[ids[2]]
    assert (grafted.parent_id, grafted.depth, grafted.item_count) == (r1, 1, 4)
    assert (grafted.usage, grafted.created_at) == (usage, when)
    assert (deeper.parent_id, deeper.depth, deeper.item_count) == (ids[0], 2, 1)
    assert await session.get_items() == [
        *history("q1"),
        user("below q1"),
        call("c9", "fetch"),
        output("c9", "found"),
        assistant("done"),
        user("deeper"),
    ]
    leaves = {b.leaf_run_id: (b.depth, b.active, b.created_at) for b in await session.branches()}
    assert leaves == {r2: (1, False, runs[r2].created_at), ids[2]: (2, True, deeper.created_at)}
    [fetch] = await store.tool_calls(session_id="g", tool_name="fetch")
    assert (fetch.run_id, fetch.output, fetch.status) == (ids[0], "found", "completed")


async def test_add_runs_titles_a_new_session_by_its_first_question(store: Store) -> None:
    await store.add_runs(
        "fresh", [NewRun([assistant("no question yet")]), NewRun([user("the  question")], parent=0)]
    )
    info = await store.session("fresh")
    assert info is not None
    assert info.title == "the question"
    await store.add_runs("untitled", [NewRun([assistant("no question at all")])])
    untitled = await store.session("untitled")
    assert untitled is not None
    assert untitled.title is None


async def test_add_runs_extends_a_stored_leaf_but_never_a_shared_run(store: Store) -> None:
    session = StructuredSession("x", store)
    r1, r2 = await converse(session, "q1", "q2")
    [extended] = await store.add_runs("x", [NewRun([assistant("more on q2")], parent_id=r2)])
    assert extended == r2  # a leaf: the items join it
    # r1 has a child: what would join it starts a run below it, with no user message.
    [below] = await store.add_runs("x", [NewRun([assistant("more on q1")], parent_id=r1)])
    runs = {run.id: run for run, _ in await store.tree("x")}
    assert (runs[r2].item_count, runs[r2].parent_id) == (5, r1)
    assert (runs[below].parent_id, runs[below].depth, runs[below].user_message) == (r1, 1, None)
    assert runs[r1].item_count == 4
    assert await session.get_items() == [*history("q1", "q2"), assistant("more on q2")]
    await session.checkout(below)
    assert await session.get_items() == [*history("q1"), assistant("more on q1")]

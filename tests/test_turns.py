"""Conformance tests of AdvancedSQLiteSession's branch capabilities on every backend (issue
30): another branch read without switching, turn numbers as addresses (``Turn``, ``turn:N``),
branches made by turn and by content, per-branch counts, and the active branch deleted only
with ``force``."""

from __future__ import annotations

import pytest

from builders import converse, head, history, path
from turnstore import (
    ArgumentTypeError,
    InvalidOperationError,
    NotFoundError,
    RunNotFoundError,
    Store,
    StructuredSession,
    Turn,
    parse_run,
)


async def two_branches(session: StructuredSession) -> tuple[list[int], int]:
    """q1 → q2 → q3 ("main"), and q2 edited as "alt" (the head, answered by q2x)."""
    runs = await converse(session, "q1", "q2", "q3")
    await session.name_branch("main")
    await session.rewind(runs[1])
    await converse(session, "q2x")
    alt = (await session.runs())[-1].id
    await session.name_branch("alt")
    return runs, alt


async def test_get_items_of_another_branch_leaves_the_head(store: Store) -> None:
    session = StructuredSession("s", store)
    runs, alt = await two_branches(session)
    assert await session.get_items(branch="main") == history("q1", "q2", "q3")
    assert await session.get_items(2, branch="main") == history("q3")[-2:]
    assert await session.get_items(branch=runs[1]) == history("q1", "q2")  # the path to it
    assert await session.get_items(branch="alt") == await session.get_items()
    assert await session.get_items(0, branch="main") == []
    assert await head(store) == alt  # nothing moved
    assert await store.get_items("s", branch="main") == history("q1", "q2", "q3")
    with pytest.raises(NotFoundError):
        await session.get_items(branch="nope")
    with pytest.raises(RunNotFoundError):
        await session.get_items(branch=10**9)
    for bad in (1.5, True, ["main"], "\x00", " padded "):
        with pytest.raises(InvalidOperationError):
            await session.get_items(branch=bad)  # type: ignore[arg-type]


async def test_turn_numbers_address_runs_everywhere(store: Store) -> None:
    session = StructuredSession("s", store)
    runs, alt = await two_branches(session)
    assert [run.depth + 1 for run in await session.runs()] == [1, 2]
    assert [r.id for r in await session.siblings(Turn(2))] == [runs[1], alt]
    assert [r.id for r in await session.siblings(Turn(3, "main"))] == [runs[2]]
    assert [r.id for r in await store.runs("s", branch="main")] == runs
    await session.checkout(Turn(3, "main"))
    assert await head(store) == runs[2]
    await session.checkout(Turn(1, alt))  # a run id names the path to it
    assert await head(store) == runs[0]
    edited = await session.edit(Turn(1), "q1 again")
    assert edited.parent_id is None
    assert await path(session) == ["q1 again"]
    view = await store.path_view("s", through=Turn(2, "main"), start=0)
    assert [r.id for r in view.runs] == runs
    for missing in (Turn(9), Turn(2, "nope"), Turn(1, 10**9)):
        with pytest.raises(NotFoundError):
            await session.checkout(missing)
    assert await head(store) == edited.id  # a refused address changes nothing


def test_turn_and_its_text_form() -> None:
    assert parse_run("41") == 41
    assert parse_run("turn:3") == Turn(3)
    assert parse_run(" turn:3@Lyon ") == Turn(3, "Lyon")
    assert parse_run("turn:2@41") == Turn(2, 41)
    assert str(Turn(3, "Lyon")) == "turn:3@Lyon"
    for bad in ("turn:", "turn:0", "turn:x", "run:3", "", "turn:1@\x00", "3.5"):
        with pytest.raises(InvalidOperationError):
            parse_run(bad)
    for number in (0, -1, 2**64):
        with pytest.raises(InvalidOperationError):
            Turn(number)
    with pytest.raises(ArgumentTypeError):
        Turn(1.0)  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError):
        Turn(1, 2.5)  # type: ignore[arg-type]


async def test_create_branch_from_turn_asks_that_turn_again(store: Store) -> None:
    session = StructuredSession("s", store)
    runs = await converse(session, "q1", "q2", "q3")
    name = await session.create_branch_from_turn(2, "retry")
    assert name == "retry"
    assert await session.get_items() == history("q1")  # before turn 2: it can be re-asked
    await converse(session, "q2 asked again")
    branches = {b.name: b for b in await session.list_branches()}
    assert branches["retry"].active
    assert branches["retry"].forks_from == runs[0]
    assert await session.get_items(branch="retry") == history("q1", "q2 asked again")
    auto = await session.create_branch_from_turn(1)
    assert auto.startswith("branch_from_turn_1_")
    await converse(session, "fresh start")
    assert {b.name for b in await session.list_branches()} >= {"retry", auto}
    with pytest.raises(InvalidOperationError):
        await session.create_branch_from_turn(1, "retry")  # a name is used once
    with pytest.raises(RunNotFoundError):
        await session.create_branch_from_turn(7, "far")
    with pytest.raises(InvalidOperationError):
        await session.create_branch_from_turn(0, "zero")
    assert await path(session) == ["fresh start"]  # refusals moved nothing


async def test_create_branch_from_content(store: Store) -> None:
    session = StructuredSession("s", store)
    runs = await converse(session, "about Paris", "about Lyon", "about LYON again")
    assert [t["turn"] for t in await session.find_turns_by_content("lyon")] == [2, 3]
    await session.create_branch_from_content("Lyon", "lyon")
    await converse(session, "about Nice")
    assert await path(session) == ["about Paris", "about Nice"]
    assert [b.name for b in await session.list_branches() if b.active] == ["lyon"]
    assert await session.get_items(branch=runs[2]) == history(
        "about Paris", "about Lyon", "about LYON again"
    )
    with pytest.raises(NotFoundError):
        await session.create_branch_from_content("Marseille")


async def test_list_branches_counts_messages_and_user_turns(store: Store) -> None:
    session = StructuredSession("s", store)
    await two_branches(session)
    counts = {b.name: (b.message_count, b.user_turns) for b in await session.list_branches()}
    assert counts == {"main": (12, 3), "alt": (8, 2)}  # four items a run


async def test_deleting_the_active_branch_needs_force(store: Store) -> None:
    session = StructuredSession("s", store)
    runs, alt = await two_branches(session)
    with pytest.raises(InvalidOperationError, match="force=True"):
        await session.delete_branch("alt")
    with pytest.raises(InvalidOperationError, match="force=True"):
        await session.delete_branch(Turn(2))
    assert await head(store) == alt  # refused: nothing changed
    await session.delete_branch("alt", force=True)
    assert await head(store) == runs[0]  # the nearest run left above it
    await session.delete_branch("main")  # the head is above what goes: no force needed
    assert await path(session) == ["q1"]
    with pytest.raises(NotFoundError):
        await session.delete_branch("alt", force=True)
    with pytest.raises(ArgumentTypeError):
        await store.delete_branch("s", runs[0], force="yes")  # type: ignore[arg-type]

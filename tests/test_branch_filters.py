"""``branch=`` on ``Store.usage`` and ``Store.search`` (issue 30): a branch by name or by run
id keeps the runs of its path, read in the query's own transaction, the head left where it
is; as ``get_items(branch=)`` and the per-branch analytics of ``agents/branching.py``."""

from __future__ import annotations

import pytest

from builders import assistant, user
from turnstore import NotFoundError, Store, Usage
from turnstore.errors import ArgumentTypeError, InvalidOperationError


def _usage(n: int) -> Usage:
    return Usage(1, 10 * n, n, 11 * n, 0, 0)


async def _forked(store: Store) -> tuple[int, int, int]:
    """q1 → q2 (branch "main") and q1 → q2 edited (branch "alt", the head); the run ids."""
    first = await store.add_items("s", [user("q1 apples"), assistant("a1")], _usage(1))
    second = await store.add_items("s", [user("q2 pears"), assistant("a2 pears")], _usage(2))
    assert first is not None
    assert second is not None
    await store.name_branch("s", second, "main")
    edited = await store.fork("s", second, "q2 plums")
    await store.add_items("s", [assistant("a2 plums")], _usage(4))
    await store.name_branch("s", edited.id, "alt")
    await store.add_items("t", [user("q1 pears")], _usage(8))  # another session
    return first, second, edited.id


async def test_usage_of_a_branch(store: Store) -> None:
    first, second, edited = await _forked(store)
    every = await store.usage("session", session_id="s")
    assert [row.usage.total_tokens for row in every] == [11 * 7]

    async def total(branch: str | int, group: str = "session") -> list[tuple[str | None, int]]:
        rows = await store.usage(group, session_id="s", branch=branch)  # type: ignore[arg-type]
        return [(row.key, row.usage.total_tokens) for row in rows]

    assert await total("main") == [("s", 11 * 3)]
    assert await total("alt") == [("s", 11 * 5)]
    assert await total(second) == [("s", 11 * 3)]  # the path to that run
    assert await total(first) == [("s", 11)]
    assert await total("alt", "run") == [(str(first), 11), (str(edited), 44)]
    cost = await store.usage("model", session_id="s", branch="main")
    assert [(row.runs, row.usage.total_tokens) for row in cost] == [(2, 33)]
    assert (await store.session("s")).head_run_id == edited  # type: ignore[union-attr]


async def test_search_of_a_branch(store: Store) -> None:
    first, second, edited = await _forked(store)

    async def found(query: str, **filters: object) -> list[int]:
        return sorted(hit.run_id for hit in await store.search(query, **filters))  # type: ignore[arg-type]

    assert await found("pears") == sorted([second, second, (await store.runs("t"))[0].id])
    assert await found("pears", session_id="s", branch="main") == [second, second]
    assert await found("pears", session_id="s", branch="alt") == []
    assert await found("plums", session_id="s", branch="alt") == [edited, edited]
    assert await found("apples", session_id="s", branch=edited) == [first]
    count = await store.search_count("pears", session_id="s", branch="alt")
    assert (count.matches, count.exact) == (0, True)


async def test_a_wrong_branch_is_refused(store: Store) -> None:
    await _forked(store)
    with pytest.raises(InvalidOperationError, match="session_id"):
        await store.usage("session", branch="main")
    with pytest.raises(InvalidOperationError, match="session_id"):
        await store.search("pears", branch="main")
    with pytest.raises(NotFoundError):
        await store.usage("session", session_id="s", branch="nowhere")
    with pytest.raises(NotFoundError):
        await store.search("pears", session_id="s", branch=10**9)
    with pytest.raises(ArgumentTypeError):
        await store.search("pears", session_id="s", branch=1.5)  # type: ignore[arg-type]
    assert isinstance(ArgumentTypeError("x"), TypeError)

"""``Store.diff``: two courses of a conversation compared, on every backend (issue 29)."""

from __future__ import annotations

import asyncio
import json

import pytest

from builders import assistant, call, converse, output, user
from support import cli
from turnstore import (
    InvalidOperationError,
    NotFoundError,
    RunNotFoundError,
    SessionNotFoundError,
    Store,
    StructuredSession,
)
from turnstore.domain.diff import word_changes


async def _answer(session: StructuredSession, tag: str, tool_output: str = "") -> None:
    """The rest of a run the way the Runner writes it: a tool call, its output, the answer."""
    await session.add_items(
        [
            call(f"c-{tag}", "lookup", f'{{"q": "{tag}"}}'),
            output(f"c-{tag}", tool_output or f"out {tag}"),
            assistant(f"answer {tag}", item_id=f"m-{tag}"),
        ]
    )


async def test_an_edit_against_the_course_it_left(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2, r3 = await converse(session, "q1", "q2", "q3")
    edited = await session.edit(r2, "q2 edited")
    await _answer(session, "q2 edited", tool_output="other output")
    await store.name_branch("s", r3, "first")

    diff = await store.diff("first", None, session_id="s")

    assert [run.id for run in diff.common] == [r1]
    assert diff.fork_run_id == r1
    assert (diff.head_a, diff.head_b) == (r3, edited.id)
    assert [(d.a and d.a.id, d.b and d.b.id) for d in diff.runs] == [(r2, edited.id), (r3, None)]
    first, second = diff.runs
    assert first.user_message_changed
    assert first.answer_changed
    assert first.changed
    [calls] = [first.tool_calls]
    assert [(c.a and c.a.tool_name, c.b and c.b.tool_name) for c in calls] == [("lookup", "lookup")]
    assert set(calls[0].changed) >= {"arguments", "output"}
    assert "tool_name" not in calls[0].changed
    assert second.b is None
    assert second.changed
    assert second.tokens_b == 0
    assert not diff.identical
    # By run ids, the same courses; the other way round, the sides swap.
    by_ids = await store.diff(r3, edited.id)
    assert [run.id for run in by_ids.common] == [r1]
    swapped = await store.diff(edited.id, r3, session_id="s")
    assert [(d.a and d.a.id, d.b and d.b.id) for d in swapped.runs] == [
        (edited.id, r2),
        (None, r3),
    ]


async def test_a_course_against_itself_and_its_own_prefix(store: Store) -> None:
    session = StructuredSession("s", store)
    r1, r2 = await converse(session, "q1", "q2")
    same = await store.diff(None, None, session_id="s")
    assert same.identical
    assert [run.id for run in same.common] == [r1, r2]
    assert same.fork_run_id == r2
    prefix = await store.diff(r1, r2)
    assert [run.id for run in prefix.common] == [r1]
    assert [(d.a, d.b and d.b.id) for d in prefix.runs] == [(None, r2)]


async def test_two_sessions_are_matched_by_what_their_runs_say(store: Store) -> None:
    one, other = StructuredSession("one", store), StructuredSession("other", store)
    await converse(one, "q1", "q2")
    await converse(other, "q1")
    await other.add_items([user("something else")])
    await other.add_items([assistant("a different answer", item_id="m-x")])

    diff = await store.diff("one", "other")

    assert (diff.session_a, diff.session_b) == ("one", "other")
    assert [run.user_message for run in diff.common] == ["q1"]
    [only] = diff.runs
    assert only.a is not None
    assert only.b is not None
    assert (only.a.user_message, only.b.user_message) == ("q2", "something else")
    assert [c.b for c in only.tool_calls] == [None]  # the other session's run called no tool


async def test_wrong_sides_are_refused(store: Store) -> None:
    session = StructuredSession("s", store)
    [r1] = await converse(session, "q1")
    await converse(StructuredSession("t", store), "q1")
    [other] = [run.id for run in await store.runs("t")]
    with pytest.raises(SessionNotFoundError):
        await store.diff("s", "nobody")
    with pytest.raises(SessionNotFoundError):
        await store.diff(None, None, session_id="nobody")
    with pytest.raises(RunNotFoundError):
        await store.diff(r1, 10**9)
    with pytest.raises(NotFoundError, match="no branch named 'x'"):
        await store.diff("x", None, session_id="s")
    with pytest.raises(NotFoundError, match="another session"):
        await store.diff(r1, other, session_id="s")
    for side in (True, 1.5, b"s", ["s"]):
        with pytest.raises(InvalidOperationError, match="a side of a diff"):
            await store.diff(side, None, session_id="s")  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="needs session_id"):
        await store.diff(None, r1)
    with pytest.raises(InvalidOperationError):
        await store.diff("s\x00", "s")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("the cat sat", "the dog sat"),
        ("", "new"),
        ("gone", ""),
        ("same words here", "same words here"),
        ("a\ud800b, c", "a\ud800b c!"),  # a lone surrogate is a character like any other
    ],
)
def test_word_changes_rebuild_both_texts(a: str, b: str) -> None:
    pieces = word_changes(a, b)
    assert "".join(text for tag, text in pieces if tag != "insert") == a
    assert "".join(text for tag, text in pieces if tag != "delete") == b
    assert all(tag in ("equal", "delete", "insert") for tag, _ in pieces)


def test_word_changes_mark_only_the_changed_word() -> None:
    assert word_changes("the cat sat", "the dog sat") == [
        ("equal", "the "),
        ("delete", "cat"),
        ("insert", "dog"),
        ("equal", " sat"),
    ]


# ---------------------------------------------------------------------------------------------
# turnstore diff, on every backend


async def _branched(target: str) -> tuple[int, int, int]:
    """A session 's' of three runs whose second was edited; the old course named 'first'."""
    async with Store.open(target) as store:
        session = StructuredSession("s", store)
        r1, r2, r3 = await converse(session, "q1", "weather in Lyon", "q3")
        edited = await session.edit(r2, "weather in Marseille")
        await _answer(session, "Marseille", tool_output="sunny")
        await store.name_branch("s", r3, "first")
        return r1, r3, edited.id


def test_cli_diff_names_the_fork_and_marks_both_courses(cli_target: str) -> None:
    r1, r3, edited = asyncio.run(_branched(cli_target))
    text = cli("--db", cli_target, "diff", "first", "--session", "s").stdout
    assert f"1 run in common, the fork after run {r1}; 2 aligned after it." in text
    assert "- user: weather in Lyon" in text
    assert "+ user: weather in Marseille" in text
    assert "+ tool 1 output: sunny" in text
    assert "+ tool 1 name" not in text  # the same tool on both sides is shown once
    assert "  tool 1 name: lookup" in text
    data = json.loads(cli("--db", cli_target, "diff", str(r3), str(edited), "--json").stdout)
    assert (data["fork_run_id"], data["head_a"], data["head_b"]) == (r1, r3, edited)
    assert [run["id"] for run in data["common"]] == [r1]
    assert [pair["a"]["user_message"] for pair in data["runs"]] == ["weather in Lyon", "q3"]
    assert data["runs"][1]["b"] is None
    same = cli("--db", cli_target, "diff", "s", "s").stdout
    assert "The two courses are the same." in same


def test_cli_diff_refuses_what_names_nothing(cli_target: str) -> None:
    asyncio.run(_branched(cli_target))
    for args, message in [
        (("diff", "nobody", "s"), "no session 'nobody'"),
        (("diff", "nope", "-s", "s"), "no branch named 'nope'"),
        (("diff", "999999", "-s", "s"), "999999"),
        (("diff", "s"), "needs session_id"),
    ]:
        result = cli("--db", cli_target, *args, code=1)
        assert message in result.output

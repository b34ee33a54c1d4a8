"""Compaction keeps the transcript (issue 12).

The SDK's ``OpenAIResponsesCompactionSession`` over a ``StructuredSession`` leaves exactly
what it leaves over ``SQLiteSession`` for the model to see, on every backend, for automatic
and manual compaction, with full and bounded history; every original run, tool call and token
is still counted, other branches are untouched, and ``clear_session`` still erases. The SDK's
hooks are private, so their shape and use are pinned here against the installed SDK.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
from collections.abc import Callable
from importlib.metadata import version
from types import SimpleNamespace
from typing import Any

import agents.memory.session
import pytest
from agents import Agent, Runner, SQLiteSession, function_tool
from agents.memory import OpenAIResponsesCompactionSession, SessionSettings
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage as SDKUsage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from builders import assistant, call, output, user
from turnstore import HistoryTail, InvalidOperationError, NotFoundError, Store, StructuredSession
from turnstore.agents.session import _sdk_snapshot_type
from turnstore.web import create_app

TOKENS_PER_CALL = 12  # the usage of every scripted model call: 10 in, 2 out

# The SDK's private compaction hooks came with openai-agents 0.23: its compaction session calls
# them and SQLiteSession has them. An older SDK compacts through the public protocol
# (clear_session, then add_items), so the tests of the hooks and of a kept transcript do not
# apply to it (CI runs this module against the lowest supported SDK too: scripts/test.sh).
SDK_HAS_HOOKS = hasattr(agents.memory.session, "_CompactionSnapshot")
needs_hooks = pytest.mark.skipif(
    not SDK_HAS_HOOKS,
    reason=f"openai-agents {version('openai-agents')} has no private compaction hooks "
    "(_get_compaction_snapshot, _atomic_replace_items): it compacts through clear_session "
    "and add_items",
)

_ids = itertools.count()


def new_id() -> str:
    return f"compaction-{next(_ids)}"


# ---------------------------------------------------------------------------------------------
# The SDK's private hooks, pinned


@needs_hooks
def test_the_sdk_snapshot_type_has_the_pinned_shape() -> None:
    snapshot_type = agents.memory.session._CompactionSnapshot
    assert _sdk_snapshot_type() is snapshot_type
    fields = inspect.signature(snapshot_type).parameters
    assert list(fields) == ["items", "complete", "replace_suffix"]


@needs_hooks
def test_the_hooks_take_the_calls_sqlite_session_takes() -> None:
    def shape(function: Any) -> list[tuple[str, Any]]:
        return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]

    assert shape(StructuredSession._get_compaction_snapshot) == shape(
        SQLiteSession._get_compaction_snapshot
    )
    # Whole-history replacement: looked up on the session's type, called with the items.
    source = inspect.getsource(OpenAIResponsesCompactionSession)
    assert 'getattr(type(self.underlying_session), "_atomic_replace_items", None)' in source
    assert "atomic_replace(self.underlying_session, output_items)" in source
    assert 'getattr(self.underlying_session, "_get_compaction_snapshot", None)' in source
    assert "snapshot.replace_suffix(suffix_start, output_items)" in source


def test_without_the_sdk_snapshot_type_there_is_no_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(agents.memory.session, "_CompactionSnapshot", raising=False)
    assert _sdk_snapshot_type() is None

    async def check() -> None:
        session = StructuredSession("s")
        await session.add_items([user("hi")])
        assert await session._get_compaction_snapshot(3) is None
        session.close()

    asyncio.run(check())


# ---------------------------------------------------------------------------------------------
# End to end: the real Runner, ScriptedModel and a fake compaction client


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Rain in {city}"


class FakeCompactionClient:
    """Stands in for ``AsyncOpenAI`` in ``responses.compact``: like the API, it keeps the user
    messages of its input and adds one opaque summary item."""

    def __init__(self) -> None:
        self.responses = self
        self.calls: list[dict[str, Any]] = []

    async def compact(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        kept = [item for item in kwargs.get("input") or [] if item.get("role") == "user"]
        summary = {"type": "compaction", "encrypted_content": f"summary {len(self.calls)}"}
        return SimpleNamespace(output=[*kept, summary], usage=None)


class BilledCompactionClient(FakeCompactionClient):
    """As ``FakeCompactionClient``, and each compaction request bills ``COMPACT_TOKENS``."""

    async def compact(self, **kwargs: Any) -> Any:
        compacted = await super().compact(**kwargs)
        compacted.usage = SimpleNamespace(
            input_tokens=COMPACT_TOKENS - 1,
            output_tokens=1,
            total_tokens=COMPACT_TOKENS,
            input_tokens_details=None,
            output_tokens_details=None,
        )
        return compacted


COMPACT_TOKENS = 1000
TURNS = 5


def scripted_agent() -> Agent[Any]:
    steps = []
    for turn in range(TURNS):
        usage = SDKUsage(requests=1, input_tokens=10, output_tokens=2, total_tokens=12)
        steps.append(
            ModelStep(
                output=[function_call("get_weather", {"city": f"C{turn}"}, call_id=f"c{turn}")],
                response_id=f"resp-{turn}-call",
                usage=usage,
            )
        )
        steps.append(
            ModelStep(
                output=[assistant_message(f"answer {turn}")],
                response_id=f"resp-{turn}-answer",
                usage=usage,
            )
        )
    return Agent("assistant", model=ScriptedModel(steps), tools=[get_weather])


def compacting(inner: Any, threshold: int = 5) -> OpenAIResponsesCompactionSession:
    return OpenAIResponsesCompactionSession(
        inner.session_id,
        inner,
        client=FakeCompactionClient(),  # type: ignore[arg-type]
        compaction_mode="input",
        should_trigger_compaction=lambda context: (
            len(context["compaction_candidate_items"]) >= threshold
        ),
    )


async def play(inner: Any, hooks: Any = None, check: Callable[[int], Any] | None = None) -> Any:
    """Four turns with automatic compaction, a manual compaction, a fifth turn.

    Returns what ``inner`` holds after each step; ``check(model_calls)`` runs after each.
    """
    agent = scripted_agent()
    session = compacting(inner)
    held = []
    calls = 0
    for turn in range(TURNS):
        if turn == TURNS - 1:
            await session.run_compaction({"force": True, "compaction_mode": "input"})
            held.append(await inner.get_items(limit=10**6))
            if check is not None:
                await check(calls)
        await Runner.run(agent, f"question {turn}", session=session, hooks=hooks)
        calls += 2
        held.append(await inner.get_items(limit=10**6))
        if check is not None:
            await check(calls)
    return held


@needs_hooks
@pytest.mark.e2e
@pytest.mark.parametrize("limit", [None, 4], ids=["full-history", "bounded-history"])
async def test_compaction_keeps_the_transcript_and_the_models_view(
    store: Store, limit: int | None
) -> None:
    settings_ = SessionSettings(limit=limit)
    expected = await play(SQLiteSession("reference", session_settings=settings_))
    session = StructuredSession(new_id(), store, session_settings=settings_)
    sid = session.session_id
    seen_tokens: list[int] = []

    async def check(model_calls: int) -> None:
        runs = await session.runs()
        turns = [run for run in runs if run.kind is None]
        # Every original run is still there, in order, with its answer and its tool call.
        assert [run.user_message for run in turns] == [
            f"question {turn}" for turn in range(model_calls // 2)
        ]
        assert [run.assistant_message for run in turns] == [
            f"answer {turn}" for turn in range(model_calls // 2)
        ]
        calls = await store.tool_calls(session_id=sid, limit=None)
        assert [(c.call_id, c.output) for c in calls] == [
            (f"c{turn}", f"Rain in C{turn}") for turn in range(model_calls // 2)
        ]
        stats = await store.tool_stats(session_id=sid)
        assert [(s.tool_name, s.calls) for s in stats] == (
            [("get_weather", model_calls // 2)] if model_calls else []
        )
        # The wrapper passes no run context: the runs' tokens come through session.hooks, so
        # usage by session (the runs'), model and agent (the model calls') agree.
        by = {
            group: sum(row.usage.total_tokens for row in await store.usage(group, session_id=sid))
            for group in ("session", "model", "agent")
        }
        assert by == dict.fromkeys(by, TOKENS_PER_CALL * model_calls)
        seen_tokens.append(by["model"])

    held = await play(session, session.hooks, check)
    assert held == expected
    assert seen_tokens == sorted(seen_tokens)  # usage never dropped
    runs = await session.runs()
    compactions = [run for run in runs if run.kind == "compaction"]
    assert len(compactions) >= 2  # automatic ones, and the manual one
    # Each replaced run names the compaction that replaced it, further down its own path.
    position = {run.id: index for index, run in enumerate(runs)}
    for run in runs:
        if run.compacted_by is not None:
            assert run.status == "compacted"
            assert position[run.compacted_by] > position[run.id]
    # the last turn is what the model sees after the summary
    assert runs[-1].status == "completed"
    # Search and export keep the original conversation.
    assert [r.run_id for r in await store.search("answer 0", session_id=sid)] == [
        next(run.id for run in runs if run.user_message == "question 0")
    ]
    exported = [json.loads(line) for line in (await store.export(sid)).splitlines()]
    assert [line["item"] for line in exported if line["run_id"] == runs[0].id] == expected[0]


@pytest.mark.e2e
async def test_encrypted_session_around_turnstore_as_the_readme_says(store: Store) -> None:
    """README, "EncryptedSession around turnstore": opaque items in one run with its usage;
    under compaction, a manual one goes through clear_session and add_items and erases."""
    from agents.extensions.memory.encrypt_session import EncryptedSession

    inner = StructuredSession(new_id(), store)
    encrypted = EncryptedSession(inner.session_id, inner, encryption_key="k" * 32)
    session = compacting(encrypted, threshold=10**6)
    agent = scripted_agent()
    for turn in range(2):
        await Runner.run(agent, f"question {turn}", session=session, hooks=inner.hooks)
    [run] = await inner.runs()
    assert run.user_message is None
    assert run.usage.total_tokens == TOKENS_PER_CALL * 4
    assert all("__enc__" in item for item in await inner.get_items())
    assert await store.tool_calls(session_id=inner.session_id, limit=None) == []
    assert len(await encrypted.get_items()) == 8
    await session.run_compaction({"force": True, "compaction_mode": "input"})
    [(after, items)] = await store.tree(inner.session_id)
    assert after.id != run.id  # the run was cleared away; the compacted items stand alone
    assert len(items) == len(await encrypted.get_items()) < 8


@needs_hooks
@pytest.mark.e2e
async def test_a_second_branch_survives_a_compaction_of_the_active_one(store: Store) -> None:
    agent = scripted_agent()
    session = StructuredSession(new_id(), store)
    compactor = compacting(session, threshold=10**6)  # only the manual compaction below
    await Runner.run(agent, "question 0", session=compactor)
    await Runner.run(agent, "question 1", session=compactor)
    first_branch = await session.runs()
    first_items = await session.get_items()
    await session.edit(first_branch[-1].id, "question 1, edited")
    await Runner.run(agent, [], session=compactor)
    # The wrapper caches the history it wrote through it; after an edit it needs a new one.
    await compacting(session).run_compaction({"force": True, "compaction_mode": "input"})

    assert await session.get_items() == [
        user("question 0"),
        user("question 1, edited"),
        {"type": "compaction", "encrypted_content": "summary 1"},
    ]
    leaves = {branch.leaf_run_id: branch for branch in await session.branches()}
    assert first_branch[-1].id in leaves
    assert not leaves[first_branch[-1].id].active
    # The other branch: its history whole, its own run unmarked; the run both branches share
    # carries the mark of the compaction on the edited branch.
    await session.checkout(first_branch[-1].id)
    assert await session.get_items() == first_items
    runs = await session.runs()
    assert [(run.id, run.user_message, run.item_count) for run in runs] == [
        (run.id, run.user_message, run.item_count) for run in first_branch
    ]
    assert runs[-1] == first_branch[-1]
    assert (runs[0].status, runs[0].updated_at) == ("compacted", first_branch[0].updated_at)


@pytest.mark.e2e
async def test_clear_session_still_erases_a_compacted_conversation(store: Store) -> None:
    session = StructuredSession(new_id(), store)
    await play(session)
    await session.clear_session()
    assert await store.session(session.session_id) is None
    assert await store.tree(session.session_id) == []
    assert await store.tool_calls(session_id=session.session_id) == []


class _PublicOnlyStructured(StructuredSession):
    """Its hooks decline (a subclass that overrides add_items), as on an SDK without them."""

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        await super().add_items(items, wrapper=wrapper)


class _PublicOnlySQLite(SQLiteSession):
    async def _get_compaction_snapshot(self, limit: int, *, prune_prefix: Any = None) -> Any:
        return None


@pytest.mark.e2e
@pytest.mark.parametrize("limit", [None, 4], ids=["full-history", "bounded-history"])
async def test_compaction_through_the_public_protocol_leaves_what_sqlite_session_does(
    store: Store, limit: int | None
) -> None:
    # What every SDK does without the hooks (an older SDK has none; here they decline): the
    # compaction session clears and re-adds, and the model sees what SQLiteSession holds.
    settings_ = SessionSettings(limit=limit)
    expected = await play(_PublicOnlySQLite("reference", session_settings=settings_))
    session = _PublicOnlyStructured(new_id(), store, session_settings=settings_)
    assert await play(session) == expected


@needs_hooks
@pytest.mark.e2e
async def test_without_the_sdk_snapshot_type_compaction_still_keeps_the_transcript(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = await play(SQLiteSession("reference"))
    monkeypatch.delattr(agents.memory.session, "_CompactionSnapshot")
    session = StructuredSession(new_id(), store)
    assert await play(session) == expected  # whole-history replacement only
    assert [run.user_message for run in await session.runs() if run.kind is None] == [
        f"question {turn}" for turn in range(TURNS)
    ]


# ---------------------------------------------------------------------------------------------
# Store.history_tail and Store.compact


async def three_runs(store: Store) -> str:
    sid = new_id()
    await store.add_items(sid, [user("u1"), assistant("a1")])
    await store.add_items(sid, [user("u2"), call("k", "tool"), output("k", "out"), assistant("a2")])
    await store.add_items(sid, [user("u3"), assistant("a3")])
    return sid


SUMMARY = {"type": "compaction", "encrypted_content": "s"}


async def test_compact_from_a_run_boundary(store: Store) -> None:
    sid = await three_runs(store)
    before = await store.runs(sid)
    tail = await store.history_tail(sid, 6)
    assert tail is not None
    assert not tail.complete
    assert tail.items[0] == user("u2")
    assert await store.compact(sid, [user("u2"), SUMMARY], tail=tail, start=0)
    assert await store.get_items(sid) == [user("u1"), assistant("a1"), user("u2"), SUMMARY]
    runs = await store.runs(sid)
    assert [run.id for run in runs[:3]] == [run.id for run in before]
    compaction = runs[3]
    assert (compaction.kind, compaction.prior_run_id, compaction.parent_id) == (
        "compaction",
        before[0].id,
        before[2].id,
    )
    assert [(run.status, run.compacted_by) for run in runs] == [
        ("completed", None),
        ("compacted", compaction.id),
        ("compacted", compaction.id),
        (None, None),  # a compaction run has no status
    ]
    assert len(await store.tool_calls(session_id=sid)) == 1  # the summary adds no calls
    # The next turn follows the compaction, in the transcript and in the model's view.
    await store.add_items(sid, [user("u4")])
    assert (await store.get_items(sid))[-2:] == [SUMMARY, user("u4")]
    assert (await store.runs(sid))[-1].parent_id == compaction.id


async def test_compact_from_inside_a_run_keeps_its_start(store: Store) -> None:
    sid = await three_runs(store)
    tail = await store.history_tail(sid, 4)
    assert tail is not None
    assert tail.items[0] == output("k", "out")
    assert await store.compact(sid, [SUMMARY], tail=tail, start=0)
    assert await store.get_items(sid) == [
        user("u1"),
        assistant("a1"),
        user("u2"),
        call("k", "tool"),
        SUMMARY,
    ]
    assert await store.get_items(sid, 2) == [call("k", "tool"), SUMMARY]


async def test_compact_refuses_a_changed_history(store: Store) -> None:
    sid = await three_runs(store)
    tail = await store.history_tail(sid, 2)
    assert tail is not None
    await store.add_items(sid, [assistant("later")])
    before = (await store.get_items(sid), await store.runs(sid))
    assert not await store.compact(sid, [SUMMARY], tail=tail, start=0)
    assert (await store.get_items(sid), await store.runs(sid)) == before
    # A start past the end replaces nothing, as SQLiteSession's replace_suffix does.
    tail = await store.history_tail(sid, 2)
    assert tail is not None
    assert not await store.compact(sid, [SUMMARY], tail=tail, start=2)
    assert (await store.get_items(sid), await store.runs(sid)) == before


async def test_compact_refuses_bad_arguments(store: Store) -> None:
    sid = await three_runs(store)
    tail = await store.history_tail(sid, 2)
    assert tail is not None
    before = await store.runs(sid)
    for kwargs in (
        {"tail": "rows"},
        {"tail": tail, "start": -1},
        {"tail": tail, "start": True},
        {"start": 1},
    ):
        with pytest.raises(InvalidOperationError):
            await store.compact(sid, [SUMMARY], **kwargs)
    for limit in (0, -1, 1.5, None):
        with pytest.raises(InvalidOperationError):
            await store.history_tail(sid, limit)  # type: ignore[arg-type]
    assert await store.runs(sid) == before


async def test_compact_with_nothing_and_of_nothing(store: Store) -> None:
    sid = await three_runs(store)
    tail = await store.history_tail(sid, 2)
    assert tail is not None
    assert await store.compact(sid, [], tail=tail, start=0)
    assert await store.get_items(sid) == [
        user("u1"),
        assistant("a1"),
        user("u2"),
        call("k", "tool"),
        output("k", "out"),
        assistant("a2"),
    ]
    assert [run.status for run in await store.runs(sid)] == ["completed", "completed"]
    empty = new_id()
    assert await store.compact(empty, [SUMMARY])
    assert await store.get_items(empty) == [SUMMARY]
    assert await store.compact(new_id(), [])
    assert await store.history_tail(new_id(), 3) == HistoryTail([], True, ())


async def test_a_compaction_is_not_edited(store: Store) -> None:
    session = StructuredSession(new_id(), store)
    await session.add_items([user("u1"), assistant("a1")])
    assert await session._atomic_replace_items([user("u1"), SUMMARY])
    compaction = (await session.runs())[-1]
    with pytest.raises(InvalidOperationError, match="compaction"):
        await session.regenerate(compaction.id)


async def test_a_subclass_that_transforms_items_gets_the_sdk_fallback(store: Store) -> None:
    class Upper(StructuredSession):
        async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
            await super().add_items(items, wrapper=wrapper)

    session = Upper(new_id(), store)
    await session.add_items([user("u1")])
    assert await session._get_compaction_snapshot(2) is None
    assert not await session._atomic_replace_items([SUMMARY])
    assert await session.get_items() == [user("u1")]


# ---------------------------------------------------------------------------------------------
# Property: any mix of appends, pops, suffix and whole replacements leaves the model the
# history SQLiteSession holds after the same calls of the same hooks.

operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.sampled_from(["u", "a", "c", "o"]), max_size=3)),
        st.tuples(st.just("pop"), st.just(0)),
        st.tuples(st.just("suffix"), st.integers(1, 6), st.integers(0, 5)),
        st.tuples(st.just("replace"), st.integers(0, 2)),
    ),
    max_size=12,
)


def _item(kind: str, n: int) -> dict[str, Any]:
    return {
        "u": lambda: user(f"u{n}"),
        "a": lambda: assistant(f"a{n}"),
        "c": lambda: call(f"k{n}", "tool"),
        "o": lambda: output(f"k{n - 1}", f"o{n}"),
    }[kind]()


@needs_hooks
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations)
def test_the_model_sees_what_sqlite_session_holds(
    shared_loop_store: tuple[asyncio.AbstractEventLoop, Store], ops: list[Any]
) -> None:
    loop, store = shared_loop_store

    async def check() -> None:
        ours = StructuredSession(new_id(), store)
        reference = SQLiteSession("reference")
        written = 0
        for op in ops:
            await _step_both(op, ours, reference, written)
            written += 10
        reference.close()

    loop.run_until_complete(check())


async def _step_both(op: Any, ours: StructuredSession, reference: SQLiteSession, n: int) -> None:
    """Apply one add, pop, suffix or whole replacement to both sessions; they answer alike."""
    results: list[Any] = []
    for session in (ours, reference):
        if op[0] == "add":
            items = [_item(kind, n + i) for i, kind in enumerate(op[1])]
            results.append(await session.add_items(items))
        elif op[0] == "pop":
            results.append(await session.pop_item())
        elif op[0] == "suffix":
            snapshot = await session._get_compaction_snapshot(op[1])
            assert snapshot is not None
            results.append((snapshot.items, snapshot.complete))
            summary = {"type": "compaction", "encrypted_content": f"s{n}"}
            results.append(await snapshot.replace_suffix(op[2], [summary]))
        else:
            replacement = [{"type": "compaction", "encrypted_content": f"r{n}"}]
            await (
                ours._atomic_replace_items(replacement * op[1])
                if session is ours
                else _sqlite_replace(reference, replacement * op[1])
            )
        results.append(await session.get_items())
    half = len(results) // 2
    assert results[:half] == results[half:], op


async def _sqlite_replace(session: SQLiteSession, items: list[Any]) -> None:
    """What the SDK does with a session that has no whole-history hook (SQLiteSession)."""
    await session.clear_session()
    await session.add_items(items)


# ---------------------------------------------------------------------------------------------
# The viewer


@needs_hooks
def test_the_viewer_folds_the_replaced_turns_behind_the_boundary(tmp_path: Any) -> None:
    db = str(tmp_path / "compacted.db")

    async def build() -> None:
        session = StructuredSession("compacted", db)
        await play(session)
        session.close()

    asyncio.run(build())
    with Store.open(db) as store:
        page = TestClient(create_app(store), base_url="http://127.0.0.1").get("/sessions/compacted")
    assert page.status_code == 200
    turns = page.text.split('id="runs"')[1].split('class="side"')[0]
    # The manual compaction replaced every turn before the last: they are all folded behind a
    # "compacted here" boundary, above the compaction the model sees now.
    above, _, folded = turns[: turns.rindex(">Compaction</a>")].partition(
        '<details class="compacted"><summary>Compacted here'
    )
    assert "question" not in above
    for turn in range(TURNS - 1):
        assert f"question {turn}" in folded
        assert f"answer {turn}" in folded
    after = turns[turns.rindex(">Compaction</a>") :]
    assert f"question {TURNS - 1}" in after
    assert "question 0" not in after


# ---------------------------------------------------------------------------------------------
# Property: compaction mixed with the tree. A run that is not the head never changes, so the
# model sees at a run what it saw when that run was last the head (after the write); from any
# place in the tree, pops and compactions go on as SQLiteSession's would from the same history.

tree_operations = st.lists(
    st.one_of(
        operations.filter(bool).map(lambda ops: ops[0]),
        st.tuples(
            st.sampled_from(["checkout", "rewind", "regenerate", "delete"]), st.integers(0, 9)
        ),
    ),
    max_size=16,
)


@needs_hooks
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=tree_operations)
def test_the_model_sees_the_same_through_tree_moves_and_compactions(
    shared_loop_store: tuple[asyncio.AbstractEventLoop, Store], ops: list[Any]
) -> None:
    loop, store = shared_loop_store

    async def check() -> None:
        ours = StructuredSession(new_id(), store)
        reference = SQLiteSession("reference")
        seen: dict[int, list[Any]] = {}  # run id -> what the model saw when it was the head
        written = 0

        async def head() -> int | None:
            info = await ours.info()
            return info.head_run_id if info is not None else None

        async def forget_deleted() -> None:
            for run_id in list(seen):
                try:
                    await ours.siblings(run_id)
                except NotFoundError:
                    del seen[run_id]

        for op in ops:
            seen.pop(await head(), None)  # the head run may change (an add joins it)
            if op[0] in ("checkout", "rewind", "regenerate", "delete"):
                if not seen:
                    continue
                run_id = sorted(seen)[op[1] % len(seen)]
                run = next(r for r in await ours.siblings(run_id) if r.id == run_id)
                if op[0] == "checkout":
                    await ours.checkout(run_id)
                    assert await ours.get_items() == seen[run_id], op
                elif op[0] == "rewind":
                    await ours.rewind(run_id)
                    if run.parent_id in seen:
                        assert await ours.get_items() == seen[run.parent_id], op
                elif op[0] == "regenerate":
                    if run.kind is not None or run.user_message is None:
                        continue
                    new = await ours.regenerate(run_id)
                    first = (await store.run_items(run_id))[0]
                    before = seen.get(run.parent_id) if run.parent_id is not None else []
                    if before is not None:
                        assert await ours.get_items() == [*before, first], op
                    assert (await head()) == new.id
                else:
                    await ours.delete_branch(run_id, force=True)
                    await forget_deleted()
                    now = await head()
                    if now in seen:
                        assert await ours.get_items() == seen[now], op
                # The reference carries on from the history the model now sees.
                await reference.clear_session()
                await reference.add_items(await ours.get_items())
            else:
                await _step_both(op, ours, reference, written)
                await forget_deleted()
            now = await head()
            if now is not None:
                seen[now] = await ours.get_items()
            written += 10
        reference.close()

    loop.run_until_complete(check())


@needs_hooks
@pytest.mark.e2e
async def test_the_compaction_request_s_tokens_never_reach_the_session(store: Store) -> None:
    """Issue 30 asked that the compaction request's own tokens be recorded. The SDK (0.24)
    adds them to the Runner's ``RunContextWrapper.usage`` alone, after the session's last
    write of the run (``OpenAIResponsesCompactionSession._run_compaction``:
    ``wrapper.usage.add(_response_usage_to_usage(compacted.usage))``); the wrapped session's
    ``add_items`` is called without the wrapper, the snapshot's ``replace_suffix(start,
    items)`` carries no usage, no ``RunHooks`` method sees the request (it is not a model
    call of the Runner) and no trace span records it. So turnstore cannot see them: they are
    in ``result.context_wrapper.usage`` and nowhere in the store (README, "Compaction")."""
    session = StructuredSession(new_id(), store)
    compacting = OpenAIResponsesCompactionSession(
        session.session_id,
        session,
        client=BilledCompactionClient(),  # type: ignore[arg-type]
        compaction_mode="input",
        should_trigger_compaction=lambda context: True,
    )
    agent = scripted_agent()
    result = await Runner.run(agent, "question 0", session=compacting, hooks=session.hooks)
    compactions = [run for run in await session.runs() if run.kind == "compaction"]
    assert compactions  # the compaction ran, and billed its request
    assert result.context_wrapper.usage.total_tokens == 2 * TOKENS_PER_CALL + COMPACT_TOKENS
    stored = await store.usage("session", session_id=session.session_id)
    assert [row.usage.total_tokens for row in stored] == [2 * TOKENS_PER_CALL]

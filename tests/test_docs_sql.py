"""Every SQL example in docs/queries.md runs, on every backend, and returns the rows written
out here; the README's run and find rows; and every SQL block of the README and docs/*.md
joins turnstore's tables on session_id, as Citus requires (tests/sqlscope.py).

The examples name the session ``'user_123'``; here that is the conversation ``build`` writes
with the real ``Runner`` (alice's, with hooks, a failing tool and a handoff), with one edit so
that the tree has a fork.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from querydata import build
from scripted import tracing_on
from sqlscope import uncolocated
from turnstore import Store, tracing
from turnstore.core.ops import Fetch, Op, Query

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "queries.md"
README = ROOT / "README.md"


def sql_blocks(path: Path) -> list[str]:
    """The ```sql blocks of a Markdown file."""
    return re.findall(r"```sql\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


BLOCKS = sql_blocks(DOC)
DOCUMENTED = [
    pytest.param(statement, id=f"{path.name}-{number}-{index}")
    for path in [README, *sorted((ROOT / "docs").glob("*.md"))]
    for number, block in enumerate(sql_blocks(path))
    for index, statement in enumerate(s for s in block.split(";") if s.strip())
]


# What may differ between runs and backends is compared by kind: a timestamp is TIME, a
# duration or latency (a float) is MS; PostgreSQL's numeric sums compare as ints.
TIME, MS = "<time>", "<ms>"
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d")
WEATHER, POLICY, EDITED = (
    "What is the weather in Oslo?",
    "Which policy applies to my refund?",
    "Which refund rules apply?",
)
SUNNY, RETURNS = (
    "Sunny in Oslo, and your refund was approved.",
    "Your refund policy allows returns in 30 days.",
)
SDK_ERROR = "An error occurred while running the tool. Please try again."
FIRST_RUN_ITEMS = [
    (0, "message", "user", None, WEATHER, json.dumps({"content": WEATHER, "role": "user"})),
    *(
        (
            position,
            "function_call",
            None,
            name,
            arguments,
            json.dumps(
                {
                    "arguments": arguments,
                    "call_id": call_id,
                    "name": name,
                    "type": "function_call",
                    "id": call_id,
                }
            ),
        )
        for position, call_id, name, arguments in (
            (1, "c1", "get_weather", '{"city":"Oslo"}'),
            (2, "c2", "lookup_order", '{"order_id":"A-17"}'),
            (5, "c3", "transfer_to_billing", "{}"),
        )
    ),
    *(
        (
            position,
            "function_call_output",
            None,
            None,
            text,
            json.dumps({"call_id": call_id, "output": text, "type": "function_call_output"}),
        )
        for position, call_id, text in (
            (3, "c1", "Sunny in Oslo, 21 degrees"),
            (4, "c2", SDK_ERROR),
            (6, "c3", '{"assistant": "billing"}'),
        )
    ),
    (
        7,
        "message",
        "assistant",
        None,
        SUNNY,
        json.dumps(
            {
                "id": "scripted-message",
                "content": [
                    {"annotations": [], "text": SUNNY, "type": "output_text", "logprobs": []}
                ],
                "role": "assistant",
                "status": "completed",
                "type": "message",
            }
        ),
    ),
]


def _search_hits(open_mark: str, close_mark: str) -> list[tuple[Any, ...]]:
    marked = f"{open_mark}refund{close_mark}"
    return [
        ("s1", 1, "message", "assistant", SUNNY.replace("refund", marked)),
        ("s1", 2, "message", "user", POLICY.replace("refund", marked)),
        ("s1", 2, "message", "assistant", RETURNS.replace("refund", marked)),
        ("s1", 4, "message", "user", EDITED.replace("refund", marked)),
        ("s2", 3, "message", "user", f"Tell me about {marked} policy"),
        ("s2", 3, "message", "assistant", f"The {marked} policy is generous."),
    ]


# Example number -> its rows (for 'user_123', alice's conversation 's1'); None: the rows per
# UTC day, which ``expected_rows`` reads from Store.usage. Runs 1, 2 and 4 are alice's (4 the
# edit of 2), run 3 is bob's.
# Bob's run has no agent (no hooks): its thumbs-down counts under none.
THUMBS_BY_AGENT = [("(none)", 1, 1, 100), ("triage", 1, 1, 100), ("billing", 1, 0, 0)]
EXPECTED: dict[int, list[tuple[Any, ...]] | None] = {
    0: [
        (1, WEATHER, SUNNY, "get_weather, lookup_order, transfer_to_billing", 3, 1, 75),
        (2, POLICY, RETURNS, None, 0, 0, 48),
        (4, EDITED, None, None, 0, 0, 0),
    ],
    1: [(1, None, WEATHER, SUNNY), (2, 1, POLICY, RETURNS), (4, 1, EDITED, None)],
    2: [(0, WEATHER, SUNNY), (1, EDITED, None)],
    3: [(0, WEATHER), (1, EDITED)],
    4: [
        (1, WEATHER, "completed", None),
        (2, POLICY, "completed", None),
        (4, EDITED, "in_progress", None),
    ],
    5: sorted(FIRST_RUN_ITEMS),
    6: [("s1", 1, WEATHER, '{"city":"Oslo"}', "Sunny in Oslo, 21 degrees", "completed", MS)],
    7: [("s1", 1, "lookup_order", '{"order_id":"A-17"}', "failed", SDK_ERROR)],
    8: [
        ("get_weather", 1, 0, MS, MS),
        ("lookup_order", 1, 1, MS, MS),
        ("transfer_to_billing", 1, 0, None, None),
    ],
    9: [
        ("s1", "alice", WEATHER, 3, 4, 100, 23, 123),
        ("s2", "bob", "Bob's refunds", 1, 1, 7, 3, 10),
    ],
    10: [("model-a", "triage", 3, 88, MS), ("model-b", "billing", 1, 35, MS)],
    11: None,
    12: None,
    13: None,  # cost per user per day: COST_EXAMPLES
    14: None,
    15: [(2, 1, POLICY, TIME), (4, 1, EDITED, TIME)],
    16: [(1, 2, POLICY)],
    17: _search_hits("[", "]"),
    18: _search_hits("<b>", "</b>"),
    # Tool errors: this conversation's one failing call has the SDK's bare message as
    # output and error alike (its span redacts the exception), so none is indexed apart.
    19: [],
    20: [],
    21: [("s1", WEATHER, TIME, TIME)],
    22: [("s1",)],
    23: [("s1",)],
    24: [("s1", 4, EDITED, "in_progress")],  # the edit, not yet answered
    # Spans (build runs with turnstore.tracing on): alice's first run has the triage and
    # billing agents, two tools and the handoff; bob's run has no tool.
    25: [(1, "agent", 2), (1, "function", 2), (1, "handoff", 1), (2, "agent", 1)],
    # openai-agents keeps the default error handler's exception out of traces since 0.23.
    26: [(1, WEATHER, "function", "lookup_order", "Error running tool (non-fatal)")],
    27: [("s1", 1, "get_weather", MS), ("s1", 1, "lookup_order", MS)],
    28: [
        (1, "thumbs", MS, None, "billing", WEATHER),  # 1: thumbs up (a positive float: MS)
        (2, "thumbs", 0, None, "triage", POLICY),
        (2, "label", None, "wrong-policy", "triage", POLICY),
    ],
    29: THUMBS_BY_AGENT,
    30: THUMBS_BY_AGENT,
    31: [("s1", 1), ("s2", 1)],
    32: [("alice", 3, 123, 2, 1), ("bob", 1, 10, 1, 1)],
}
# Examples whose ORDER BY leaves ties, or ranks differently on each engine: compared sorted
# (29, 30: the engines' collations may order "(none)" differently).
UNORDERED = {8, 17, 18, 27, 29, 30}
# The cost per user per day: alice's tokens are all priced (a positive sum: MS); bob's run
# has no model (no hooks), so his cost is unknown.
COST_EXAMPLES = {13, 14}


def comparable(value: Any) -> Any:
    """``value`` as EXPECTED writes it (see TIME and MS)."""
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, datetime):
        # A day (date_trunc) stays a day; a moment is TIME.
        return value.date().isoformat() if value.time() == time() else TIME
    if isinstance(value, str) and TIMESTAMP.match(value):
        return TIME
    if isinstance(value, float | Decimal) and value > 0:
        return MS
    return value


async def run_example(store: Store, block: str) -> list[tuple[object, ...]]:
    """The rows an example returns, run as typed (no placeholders) for alice's 's1'."""
    statement = block.replace("'user_123'", "'s1'").strip().rstrip(";")

    def op() -> Op[list[tuple[object, ...]]]:
        rows = yield Query(statement, fetch=Fetch.ALL, raw=True)
        return list(rows)

    return await store.backend.run(op, write=False)


async def expected_rows(store: Store, number: int) -> list[tuple[Any, ...]]:
    rows = EXPECTED[number]
    if number in COST_EXAMPLES:
        return [
            (user, row.key, MS if user == "alice" else None)
            for user in ("alice", "bob")
            for row in await store.usage("day", user_id=user, cost=False)
        ]
    if rows is None:  # tokens per day
        return [(row.key, row.usage.total_tokens) for row in await store.usage("day")]
    return rows


def test_the_doc_has_examples() -> None:
    # A new example needs its rows in EXPECTED.
    assert len(BLOCKS) == len(EXPECTED)


@pytest.mark.parametrize("number", range(len(BLOCKS)))
async def test_sql_example_runs(store: Store, backend_name: str, number: int) -> None:
    block = BLOCKS[number]
    first = block.splitlines()[0].strip()
    if first.startswith("-- SQLite") and not backend_name.startswith("sqlite"):
        pytest.skip("a SQLite example")
    if first.startswith("-- PostgreSQL") and backend_name != "postgres":
        pytest.skip("a PostgreSQL example")
    with tracing_on():
        built = await build(store)
        await tracing.aflush()
    await built["alice"].edit(built["runs1"][1].id, "Which refund rules apply?")
    # The docs' search examples read the index as Store.search leaves it: up to date.
    await store.search("refund")
    found = await run_example(store, block)
    rows = [tuple(comparable(value) for value in row) for row in found]
    expected = await expected_rows(store, number)
    if number in UNORDERED:
        rows, expected = sorted(rows), sorted(expected)
    assert rows == expected, f"example {number}:\n{block}"


@pytest.mark.parametrize("statement", DOCUMENTED)
def test_documented_sql_joins_on_session_id(statement: str) -> None:
    # Citus plans joins of distributed tables on session_id only, and recursive queries on
    # one node only (named by session): what the docs show must run on a cluster too.
    assert uncolocated(statement) == []


@pytest.mark.parametrize("number", range(len(sql_blocks(README))))
async def test_readme_sql_runs(store: Store, number: int) -> None:
    built = await build(store)
    await built["alice"].edit(built["runs1"][1].id, "Which refund rules apply?")
    block = sql_blocks(README)[number]
    assert await run_example(store, block) != [], block


FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")


@pytest.mark.parametrize(
    "path", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda path: path.name
)
def test_every_code_fence_of_the_docs_closes(path: Path) -> None:
    """Fences pair up: a fence that names a language opens a block, never closes one, and no
    block runs to the end of the page (a stray fence in docs/scaling.md turned the prose after
    it into code, and the code into prose)."""
    opened = 0  # the line of the open block's fence; 0: outside any block
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line)
        if fence is None:
            continue
        if opened:
            assert not fence.group(2).strip(), f"line {number} opens a block inside another"
        opened = 0 if opened else number
    assert not opened, f"the block of line {opened} never closes"

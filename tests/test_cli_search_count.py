"""``turnstore search --count`` past its bound ("more than 1,000") on every backend, for a
word common lately and for one found only below the newest items (PostgreSQL reads them by
different routes: backwards through the items, or through the word's index)."""

from __future__ import annotations

import json

import pytest

from builders import run_in_new_loop, user
from support import cli
from turnstore import Store
from turnstore.core.search import COUNT_BOUND, PROBE

# Every item says "plenty"; the oldest COUNT_BOUND + 5 say "ancient" too, and none of the
# newest PROBE does.
OLD = COUNT_BOUND + 5
ITEMS = OLD + PROBE + 45


@pytest.fixture
def counted(cli_target: str) -> str:
    """A store of ITEMS runs of one user message each, as the CLI's --db takes it."""

    async def fill() -> None:
        async with Store.open(cli_target) as store:
            texts = [f"plenty number{n}" + (" ancient" if n < OLD else "") for n in range(ITEMS)]
            await store.add_items("s", [user(text) for text in texts])

    run_in_new_loop(fill)
    return cli_target


def test_a_count_past_its_bound_says_more_than(counted: str) -> None:
    bound = f"more than {COUNT_BOUND:,} matches\n"
    for word in ("plenty", "ancient"):
        assert cli("--db", counted, "search", word, "--count").stdout == bound, word
        assert json.loads(cli("--db", counted, "search", word, "--count", "--json").stdout) == [
            {"matches": COUNT_BOUND, "exact": False}
        ]
        # Within one session: that session's items read backwards, to the same bound.
        assert cli("--db", counted, "search", word, "--count", "--session", "s").stdout == bound
    # Within the bound, exact.
    assert cli("--db", counted, "search", f"number{OLD - 1}", "--count").stdout == "1 match\n"
    assert cli("--db", counted, "search", "ancient -plenty", "--count").stdout == "0 matches\n"

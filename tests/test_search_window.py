"""Search ranks the newest matches in blocks (issue 31): a search costs what its page does,
however many items match. Within each block of ``WINDOW`` newest matches, exact phrases come
first, then by rank (or newest first); blocks follow newest first; pages are consecutive
slices of that one order; tool calls' errors take their place in it. On every backend."""

from __future__ import annotations

import pytest

from builders import failed_call_with_span_error, user
from support import sql
from turnstore import Store
from turnstore.core import search
from turnstore.core.search import WINDOW


async def texts(store: Store) -> dict[int, str]:
    return {row[0]: row[1] for row in await sql(store, "SELECT id, text FROM items")}


async def test_the_best_match_ranks_first_in_its_own_block(store: Store) -> None:
    # The best match is the oldest: the newest WINDOW matches are ranked before it.
    await store.add_items(
        "s",
        [
            user("kiwi kiwi kiwi kiwi"),
            *[user(f"a kiwi among other words {n}") for n in range(WINDOW + 2)],
        ],
    )
    text = await texts(store)
    newest = sorted(text, reverse=True)
    hits = await store.search("kiwi", limit=WINDOW + 3)
    assert len(hits) == WINDOW + 3
    assert {hit.item_id for hit in hits[:WINDOW]} == set(newest[:WINDOW])
    assert text[hits[WINDOW].item_id] == "kiwi kiwi kiwi kiwi"  # first of the next block
    assert {hit.item_id for hit in hits[WINDOW:]} == set(newest[WINDOW:])
    # Within the first block, ties of rank: the older first.
    assert [hit.item_id for hit in hits[:WINDOW]] == sorted(newest[:WINDOW])
    # Pages are slices of the same order, across the blocks' edge too.
    paged = [
        hit
        for offset in range(0, WINDOW + 3, 30)
        for hit in await store.search("kiwi", limit=30, offset=offset)
    ]
    assert [hit.item_id for hit in paged] == [hit.item_id for hit in hits]
    assert await store.search("kiwi", offset=WINDOW + 3) == []
    # A page smaller than its block keeps the ranks its block was ranked by.
    top = await store.search("kiwi", limit=5)
    assert [(hit.item_id, hit.rank) for hit in top] == [(hit.item_id, hit.rank) for hit in hits[:5]]
    assert all(hit.rank > 0 for hit in top)


async def test_an_exact_phrase_comes_first_within_its_block(store: Store) -> None:
    await store.add_items(
        "s",
        [
            user("apple pie"),
            *[user(f"pie with apple {n}") for n in range(WINDOW)],
            user("apple pie"),
        ],
    )
    text = await texts(store)
    hits = await store.search("apple pie", limit=WINDOW + 2)
    # The newest exact phrase leads the first block; the oldest one leads the second.
    assert [(hits[n].exact, text[hits[n].item_id]) for n in (0, 1, WINDOW)] == [
        (True, "apple pie"),
        (False, text[hits[1].item_id]),
        (True, "apple pie"),
    ]
    assert [hit.exact for hit in hits].count(True) == 2
    recent = await store.search("apple pie", limit=WINDOW + 2, order="recent")
    assert [hit.item_id for hit in recent[1:WINDOW]] == sorted(text, reverse=True)[1:WINDOW]
    assert (recent[0].exact, recent[WINDOW].exact, recent[WINDOW].item_id) == (
        True,
        True,
        min(text),
    )


async def test_recent_without_a_phrase_is_newest_first(store: Store) -> None:
    await store.add_items("s", [user(f"plum number {n}") for n in range(WINDOW + 5)])
    newest = sorted(await texts(store), reverse=True)
    hits = await store.search("plum", limit=WINDOW + 5, order="recent")
    assert [hit.item_id for hit in hits] == newest
    assert all(hit.rank == 0.0 and not hit.exact for hit in hits)
    page = await store.search("plum", limit=10, offset=WINDOW - 5, order="recent")
    assert [hit.item_id for hit in page] == newest[WINDOW - 5 : WINDOW + 5]


async def test_a_tool_error_takes_its_place_among_the_newest(store: Store) -> None:
    await store.add_items("s", [user(f"timeout number {n}") for n in range(WINDOW)])
    error_item = await failed_call_with_span_error(store, "t", "TimeoutError: timeout reached")
    await store.add_items("u", [user("timeout again")])
    hits = await store.search("timeout", limit=3, order="recent")
    assert [hit.tool_error for hit in hits] == [False, True, False]
    assert hits[1].item_id == error_item
    ranked = await store.search("timeout", limit=WINDOW + 2)
    assert sum(hit.tool_error for hit in ranked) == 1
    assert len({hit.item_id for hit in ranked}) == WINDOW + 2


async def test_the_newest_matches_are_found_however_they_are_spread(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small blocks and probe, so that every way of finding the newest matches runs at this
    # size (PostgreSQL: a backward scan for a common word; for a rare one the word's index,
    # over the range the probe's rate points to, then below it when that was too hopeful).
    monkeypatch.setattr(search, "WINDOW", 4)
    monkeypatch.setattr(search, "PROBE", 10)
    monkeypatch.setattr(search, "SCAN_MATCHES", 5)
    words = [
        *[f"walrus old {n}" for n in range(5)],
        *[f"common filler {n}" for n in range(200)],
        *[f"common filler {n}" for n in range(9)],
        "walrus newest",
    ]
    await store.add_items("s", [user(text) for text in words])
    text = await texts(store)
    by_age = sorted(text, reverse=True)
    walrus = [item_id for item_id in by_age if "walrus" in text[item_id]]
    hits = await store.search("walrus", limit=6, order="recent")
    assert [hit.item_id for hit in hits] == walrus
    ranked = await store.search("walrus", limit=6)
    assert [{hit.item_id for hit in ranked[:4]}, {hit.item_id for hit in ranked[4:]}] == [
        set(walrus[:4]),
        set(walrus[4:]),
    ]
    common = await store.search("common", limit=9, order="recent")
    assert [hit.item_id for hit in common] == [i for i in by_age if "common" in text[i]][:9]
    assert await store.search("absent", order="recent") == []

"""The viewer's search in headless Chromium (issue 29): the count of matches, the next page
(kept in the URL), the filters, and a tool call's error found. As tests/test_web_browser.py:
skips without Chromium or Playwright, fails under ``CI=true``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from browsing import Watch, live_viewer, screenshot
from builders import failed_call_with_span_error, run_in_new_loop, user
from support import sql
from turnstore import Store

pytestmark = pytest.mark.browser
PAGE_SIZE = 30  # the viewer's default
MATCHES = PAGE_SIZE + 5
DETAIL = "ZeroDivisionError: division by zero in ledger"


async def _build(db: str) -> None:
    async with Store.open(db) as store:
        for n in range(MATCHES):
            await store.add_items(f"s{n:02}", [user(f"invoice number {n} is late")])
        await sql(
            store, "UPDATE runs SET agent_name = 'billing' WHERE session_id = 's07'", write=True
        )
        await failed_call_with_span_error(store, "failing", DETAIL)


def _search(page: Any, query: str) -> None:
    page.get_by_label("search text").fill(query)
    page.get_by_label("search text").press("Enter")
    page.wait_for_load_state()


def test_search_counts_pages_filters_and_finds_a_tool_error(
    page: Any, new_target: Callable[[], str]
) -> None:
    db = new_target()
    run_in_new_loop(lambda: _build(db))
    watch = Watch(page)
    with live_viewer(db) as base:
        page.goto(base + "/sessions")
        _search(page, "invoice")
        count = page.locator("#match-count")
        assert count.inner_text() == f"{MATCHES} matches, showing 1–{PAGE_SIZE}"
        assert page.locator("table.hits tbody tr").count() == PAGE_SIZE
        first = set(page.locator("td.snippet").all_inner_texts())

        page.get_by_role("link", name="Next →").click()
        page.wait_for_url(re.compile(r"page=2"))
        assert count.inner_text() == f"{MATCHES} matches, showing {PAGE_SIZE + 1}–{MATCHES}"
        rest = set(page.locator("td.snippet").all_inner_texts())
        assert len(rest) == MATCHES - PAGE_SIZE
        assert not rest & first
        assert page.get_by_role("link", name="Next →").count() == 0
        page.reload()  # the page is in the URL
        assert count.inner_text().endswith(f"{PAGE_SIZE + 1}–{MATCHES}")
        page.get_by_role("link", name="← Previous").click()
        page.wait_for_url(re.compile(r"q=invoice(?!.*page=)"))
        assert set(page.locator("td.snippet").all_inner_texts()) == first

        # A filter narrows the matches and their count.
        page.get_by_label("agent").fill("billing")
        page.get_by_label("agent").press("Enter")
        page.wait_for_url(re.compile(r"agent=billing"))
        assert count.inner_text() == "1 match, showing 1–1"
        assert "invoice number 7 is late" in page.locator("td.snippet").inner_text()
        page.get_by_label("agent").fill("")

        # The exception's text, which only the tool call's trace span gave.
        _search(page, "ZeroDivisionError")
        assert count.inner_text() == "1 match, showing 1–1"
        assert page.locator("td.where").inner_text().strip() == "tool error"
        assert page.locator("td.snippet mark").inner_text() == "ZeroDivisionError"
        screenshot(page, "web-search-tool-error.png")
        page.locator("td.snippet a").click()
        page.wait_for_url(re.compile(r"/sessions/failing"))
    assert watch.errors == [], watch.errors
    assert watch.dialogs == []

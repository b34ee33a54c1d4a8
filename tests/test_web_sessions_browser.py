"""The viewer's sessions list in headless Chromium (issue 29): sorted across the whole store,
each filter narrowing it, its count, and pages that keep the filters and the sort; then the
debugging loop of docs/web.md (find the bad sessions, open one, look at the failed tool call,
compare two courses), whose screenshots ``TURNSTORE_DOCS_SCREENSHOT=1`` saves in docs/.

The catalogue is ``catalogue.py``'s: 4 sessions that differ, then 35 newer ones of one small
run each, so that the session with the most tokens is the oldest, off the first page.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from browsing import ROOT, Watch, live_viewer, screenshot
from builders import run_in_new_loop
from catalogue import BIG_TOKENS, build_catalogue
from support import database_target
from turnstore import Store

pytestmark = pytest.mark.browser
FILLERS = 35
TOTAL = 4 + FILLERS
PAGE_SIZE = 30  # the viewer's default


async def _build(db: str) -> None:
    async with Store.open(db) as store:
        await build_catalogue(store, fillers=FILLERS)


@pytest.fixture(scope="module")
def viewer(target_backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a live read-only viewer over the catalogue, on each backend."""
    with database_target(target_backend, tmp_path_factory.mktemp("sessions")) as db:
        run_in_new_loop(lambda: _build(db))  # Playwright may own this thread's loop
        with live_viewer(db) as base:
            yield base


def _docs(name: str) -> list[Path]:
    """``docs/NAME`` when the docs' screenshots are being refreshed, else nowhere."""
    return [ROOT / "docs" / name] if os.environ.get("TURNSTORE_DOCS_SCREENSHOT") else []


def _listed(page: Any) -> list[str]:
    return [text.strip() for text in page.locator("table.sessions .sid").all_inner_texts()]


def _count(page: Any) -> str:
    return " ".join(page.locator("#session-count").inner_text().split())


def _query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def _filter(page: Any) -> None:
    page.get_by_role("button", name="Filter").click()
    page.wait_for_load_state()


def test_sort_by_tokens_covers_the_whole_store(page: Any, viewer: str) -> None:
    watch = Watch(page)
    page.goto(viewer + "/sessions")
    assert len(_listed(page)) == PAGE_SIZE
    assert "old-big" not in _listed(page)  # the oldest: not among the newest 30
    assert _count(page) == f"{TOTAL} sessions · 1–{PAGE_SIZE} shown"
    headers = [text.strip() for text in page.locator("table.sessions th").all_text_contents()]
    assert headers == ["Session", "User", "Runs", "Branches", "Tokens", "Tool calls", "Failed",
                       "Created", "Updated"]  # fmt: skip
    page.get_by_role("link", name="Tokens", exact=True).click()
    page.wait_for_url(re.compile(r"sort=tokens"))
    assert _listed(page)[:3] == ["old-big", "refund", "weather"]
    tokens = page.locator("table.sessions tbody tr").first.locator("td.num").nth(2)
    assert tokens.inner_text() == f"{BIG_TOKENS:,}"
    page.get_by_role("link", name="Tool calls", exact=True).click()
    page.wait_for_url(re.compile(r"sort=tools"))
    assert _listed(page)[:2] == ["old-big", "weather"]
    page.get_by_role("link", name="Failed", exact=True).click()
    page.wait_for_url(re.compile(r"sort=failed"))
    assert _listed(page)[:2] == ["weather", "refund"]
    assert watch.errors == [], watch.errors


@pytest.mark.parametrize(
    ("fill", "expected"),
    [
        ({"title contains": "paris"}, ["weather"]),
        ({"agent": "planner"}, ["old-big"]),
        ({"model": "gpt-small", "user id": "bob"}, ["refund"]),
        ({"metadata key=value": "tier=gold"}, ["refund"]),
        ({"user id": "bob"}, ["idle", "refund"]),
        ({"active since (a date, a time or 7d, 12h)": "7d", "user id": "carol"}, ["old-big"]),
        ({"created before (a date, a time or 7d)": "2000-01-01"}, []),
    ],
)
def test_each_filter_narrows_the_list(
    page: Any, viewer: str, fill: dict[str, str], expected: list[str]
) -> None:
    page.goto(viewer + "/sessions")
    for label, value in fill.items():
        page.get_by_label(label, exact=True).fill(value)
    _filter(page)
    assert _listed(page) == expected
    if expected:
        noun = "session matches" if len(expected) == 1 else "sessions match"
        assert _count(page).startswith(f"{len(expected)} {noun} the filters")
    else:
        assert page.locator(".empty").inner_text() == "No sessions match the filters."


def test_status_and_failed_tool_call_filters(page: Any, viewer: str) -> None:
    page.goto(viewer + "/sessions")
    page.get_by_label("run status").select_option("failed")
    _filter(page)
    assert _listed(page) == ["refund"]
    page.get_by_label("run status").select_option("")
    page.get_by_label("with a failed tool call").check()
    _filter(page)
    assert _listed(page) == ["weather"]
    assert _query(page)["failed"] == ["1"]
    page.get_by_role("link", name="clear the filters").click()
    page.wait_for_load_state()
    assert _count(page).startswith(f"{TOTAL} sessions")


def test_the_next_page_keeps_the_filters_and_the_sort(page: Any, viewer: str) -> None:
    watch = Watch(page)
    page.goto(viewer + "/sessions?sort=tokens")
    page.get_by_label("model", exact=True).fill("gpt-small")
    _filter(page)
    kept = 2 + FILLERS  # weather, refund and the fillers
    assert _query(page)["sort"] == ["tokens"]  # the form carries the sort
    assert _listed(page)[:2] == ["refund", "weather"]
    clear = " · clear the filters"
    assert _count(page) == f"{kept} sessions match the filters · 1–{PAGE_SIZE} shown{clear}"
    first = _listed(page)
    page.get_by_role("link", name="Next page →").click()
    page.wait_for_url(re.compile(r"after="))
    query = _query(page)
    assert (query["model"], query["sort"]) == (["gpt-small"], ["tokens"])
    second = _listed(page)
    assert len(second) == kept - PAGE_SIZE
    assert not set(first) & set(second)
    shown = f"{PAGE_SIZE + 1}–{kept} shown"
    assert _count(page) == f"{kept} sessions match the filters · {shown}{clear}"
    assert page.get_by_label("model", exact=True).input_value() == "gpt-small"
    assert page.get_by_role("link", name="Next page →").count() == 0
    page.get_by_role("link", name="← First page").click()
    page.wait_for_load_state()
    assert _listed(page) == first
    assert watch.errors == [], watch.errors


def test_the_debugging_loop(page: Any, viewer: str) -> None:
    """docs/web.md's loop, with its screenshots: the sessions with a failed tool call, most
    tokens first; one of them open at its failed call; a session's two courses compared."""
    watch = Watch(page)
    page.goto(viewer + "/sessions?sort=tokens")
    page.get_by_label("with a failed tool call").check()
    _filter(page)
    assert _listed(page) == ["weather"]
    screenshot(page, "web-sessions-filtered.png", *_docs("sessions-filtered.png"))
    page.get_by_role("link", name="Weather in Paris").click()
    call = page.locator("details.call").first
    call.locator("summary").click()
    assert "An error occurred while running the tool" in call.inner_text()
    screenshot(page, "web-failed-call.png", *_docs("failed-call.png"))
    page.goto(viewer + "/sessions?status=failed")
    page.get_by_role("link", name="Refund for order 42").click()
    page.locator(".branches").get_by_role("link", name=re.compile(r"^Compare the branch")).click()
    page.locator("table.compare").first.wait_for()
    assert "to my card" in page.locator("table.compare ins").first.inner_text()
    screenshot(page, "web-compare-refund.png")
    assert watch.errors == [], watch.errors

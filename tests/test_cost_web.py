"""Cost in the web viewer (issue 28), on every backend: the session's total and the usage
page's cards and tables, "—" with a tooltip naming the unpriced models where a cost is
unknown; and in headless Chromium, the session page reached by clicking through."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from browsing import Watch, live_viewer
from builders import run_in_new_loop
from costdata import ALICE, PRICE_ENTRIES, PRICES, build
from support import cli, database_target
from turnstore import Store
from turnstore.domain.prices import cost_text
from turnstore.web import create_app

BASE = "http://127.0.0.1"


@pytest.fixture
def store(cli_target: str) -> Iterator[Store]:
    async def fill() -> None:
        async with Store.open(cli_target) as opened:
            await build(opened)

    run_in_new_loop(fill)
    with Store.open(cli_target) as opened:
        yield opened


def unknown_titles(body: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'class="cost-unknown" title="([^"]*)"', body)]


def test_session_cost(store: Store) -> None:
    client = TestClient(create_app(store, prices=PRICES), base_url=BASE)
    body = client.get("/sessions/a").text
    assert re.search(r'class="session-cost">\$15\.10<', body), body
    body = client.get("/sessions/b").text
    assert unknown_titles(body) == ["Unknown cost: no price for 'mystery-model'"]
    body = client.get("/sessions/c").text
    assert unknown_titles(body) == ["Unknown cost: tokens with no model recorded"]
    body = client.get("/sessions/d").text  # a run with no tokens costs nothing
    assert 'class="session-cost">$0<' in body


def test_usage_page_costs(store: Store) -> None:
    priced = TestClient(create_app(store, prices=PRICES), base_url=BASE)
    body = priced.get("/usage?user=alice").text
    assert f'class="value usage-cost">{cost_text(ALICE)}<' in body
    assert unknown_titles(body) == []
    body = priced.get("/usage").text
    # The total is unknown; so are the day's and the unpriced models' rows.
    titles = unknown_titles(body)
    assert titles[0] == (
        "Unknown cost: no price for 'mystery-model'; tokens with no model recorded"
    )
    assert "Unknown cost: no price for 'mystery-model'" in titles
    # The shipped table prices none of these models: unknown, never $0.
    default = TestClient(create_app(store), base_url=BASE)
    body = default.get("/usage?user=alice").text
    assert unknown_titles(body)[0] == "Unknown cost: no price for 'm-new', 'm-old'"
    assert 'usage-cost">$' not in body


@pytest.fixture(scope="module")
def viewer(target_backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A live viewer over the cost conversations, with the test's prices."""
    with database_target(target_backend, tmp_path_factory.mktemp("cost")) as db:

        async def fill() -> None:
            async with Store.open(db) as opened:
                await build(opened)

        run_in_new_loop(fill)  # Playwright may own this thread's loop
        with live_viewer(db, prices=PRICES) as base:
            yield base


def open_session(page: Any, session_id: str) -> None:
    """Click the session's title in the sessions list."""
    sid = page.locator("span.sid", has_text=re.compile(f"^{session_id}$"))
    page.locator("tr", has=sid).locator("a.title").click()


@pytest.mark.browser
def test_session_page_shows_the_cost_total(page: Any, viewer: str) -> None:
    watch = Watch(page)
    page.goto(viewer + "/sessions")
    open_session(page, "a")
    page.wait_for_url(re.compile(r"/sessions/a"))
    assert page.locator("dd.session-cost").inner_text() == cost_text(ALICE)
    page.goto(viewer + "/sessions")
    open_session(page, "b")
    page.wait_for_url(re.compile(r"/sessions/b"))
    unknown = page.locator("dd.session-cost .cost-unknown")
    assert unknown.inner_text() == "—"
    assert unknown.get_attribute("title") == "Unknown cost: no price for 'mystery-model'"
    page.get_by_role("link", name="Usage").click()
    page.wait_for_url(re.compile(r"/usage"))
    page.get_by_label("user id").fill("alice")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"user=alice"))
    assert page.locator(".usage-cost").inner_text() == cost_text(ALICE)
    assert watch.errors == [], watch.errors


def test_serve_prices_option(
    cli_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import turnstore.web

    served: list[dict[str, Any]] = []
    monkeypatch.setattr(turnstore.web, "serve", lambda *args, **kwargs: served.append(kwargs))
    Store.open(cli_target).close()
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PRICE_ENTRIES))
    cli("serve", "--db", cli_target, "--prices", str(path))
    price = served[-1]["prices"].price("m-old", date(2025, 1, 1))
    assert price is not None
    assert price.reasoning == 4
    path.write_text('[{"model": "x", "input": -1, "output": 1}]')
    assert "from 0" in cli("serve", "--db", cli_target, "--prices", str(path), code=1).stderr
    assert len(served) == 1

"""The web viewer in headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright).

A live server (uvicorn on a thread, 127.0.0.1, a free port) serves the conversations of
``webdata.py``, written by the real ``Runner`` with ``ScriptedModel``. Without Chromium or
Playwright these tests skip; under ``CI=true`` they fail. Screenshots go to
``test-artifacts/``; with ``TURNSTORE_DOCS_SCREENSHOT=1`` the session page's is also saved
as ``docs/session-page.png``.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import uvicorn

from builders import run_in_new_loop
from conftest import require_module, unavailable
from turnstore import Store
from turnstore.web import create_app
from webdata import HOSTILE_ID, HOSTILE_OUTPUT, LONG_TURNS, Ids, build

# One launch configuration serves these tests and the viewer's benchmark.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_web import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
PAGE_SIZE = 30  # the viewer's default


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium, launched once for the module."""
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_playwright = require_module("playwright.sync_api").sync_playwright
    with sync_playwright() as playwright:
        # Never a downloaded browser: Debian's, by path.
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@contextmanager
def live_viewer(db: str) -> Iterator[str]:
    """The base URL of a live viewer over the database ``db``."""
    store = Store.open(db)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(store), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "the server stopped"
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)
    sock.close()
    store.close()


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Ids]]:
    """(base URL, ids) of a live viewer over the test conversations."""
    db = str(tmp_path_factory.mktemp("browser") / "viewer.db")
    ids = run_in_new_loop(lambda: build(db))  # Playwright may own this thread's loop
    with live_viewer(db) as base:
        yield base, ids


class Watch:
    """What a page did besides rendering: dialogs it opened, errors it logged."""

    def __init__(self, page: Any) -> None:
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(10_000)
    yield tab
    context.close()


def _screenshot(page: Any, name: str, *also: Path) -> Path:
    """A full-page screenshot in test-artifacts/ (and at ``also``), scrolled to the top."""
    # At the top, so that the sticky bar is where it belongs; no deep-link highlight.
    page.evaluate(
        "window.scrollTo(0, 0);"
        "document.querySelectorAll('.flash').forEach((e) => e.classList.remove('flash'))"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    for target in (path, *also):
        page.screenshot(path=str(target), full_page=True)
    return path


def test_browse_switch_branch_and_expand_a_call(
    page: Any, viewer: tuple[str, Ids], request: pytest.FixtureRequest
) -> None:
    base, ids = viewer
    watch = Watch(page)
    page.goto(base + "/sessions")
    page.get_by_role("link", name="What's the weather in Paris?").click()
    page.wait_for_url(re.compile(r"/sessions/demo$"))

    # The active branch: turn 2 is the edited version, 2 of 2.
    osaka = page.locator(f"#run-{ids.osaka_run}")
    assert "I have no weather data for Osaka." in osaka.inner_text()
    assert osaka.locator(".fork .pos").inner_text() == "2/2"
    assert page.get_by_text("Tokyo is 22°C").count() == 0

    # Flip to the other version at the fork: its messages, and the turn after it.
    osaka.locator(".fork a.prev").click()
    page.wait_for_url(re.compile(rf"run={ids.tokyo_run}#run-{ids.tokyo_run}$"))
    tokyo = page.locator(f"#run-{ids.tokyo_run}")
    assert tokyo.locator(".fork .pos").inner_text() == "1/2"
    assert tokyo.get_by_text("Tokyo is 22°C, which is 71.6°F.").is_visible()
    assert page.get_by_text("Refund for order 1234 is on its way.").is_visible()
    assert page.locator(".runs").get_by_text("Osaka").count() == 0

    # Expand a tool call and read its arguments.
    call = page.locator(f"#call-{ids.tokyo_call}")
    args = call.locator("pre.args")
    assert not args.is_visible()
    call.locator("summary").click()
    assert args.is_visible()
    assert args.inner_text() == '{\n  "city": "Tokyo"\n}'
    assert call.locator("pre.output").inner_text() == "22°C, cloudy"

    docs = (
        [ROOT / "docs" / "session-page.png"] if os.environ.get("TURNSTORE_DOCS_SCREENSHOT") else []
    )
    path = _screenshot(page, "web-session.png", *docs)
    assert path.stat().st_size > 10_000
    assert watch.errors == [], watch.errors  # CSP violations would show here
    assert watch.dialogs == []


def test_stored_markup_is_text_and_never_runs(page: Any, viewer: tuple[str, Ids]) -> None:
    base, ids = viewer
    watch = Watch(page)
    page.goto(base + "/sessions/" + quote(HOSTILE_ID, safe=""))
    page.get_by_role("button", name="Expand all tool calls").click()
    output = page.locator(f"#call-{ids.hostile_call} pre.output")
    assert output.is_visible()
    assert output.inner_text() == HOSTILE_OUTPUT  # the markup, shown as text
    assert page.locator(".runs img").count() == 0
    assert page.locator("script").count() == 1  # only the viewer's own
    for url in (
        f"/calls/{ids.hostile_call}",
        f"/runs/{ids.hostile_run}/items",
        "/sessions?q=pwned",
        "/tools",
    ):
        page.goto(base + url)
        assert page.locator("main img").count() == 0, url
        assert page.evaluate("typeof window.__pwned") == "undefined", url
    _screenshot(page, "web-hostile-tools.png")
    assert watch.dialogs == []
    assert page.evaluate("typeof window.__pwned") == "undefined"


def test_earlier_turns_load_in_place(page: Any, viewer: tuple[str, Ids]) -> None:
    base, _ = viewer
    page.goto(base + "/sessions/long")
    turns = page.locator(".runs .msg.user .text")
    assert turns.count() == PAGE_SIZE
    page.evaluate("window.__same_page = true")  # gone if the browser navigated
    page.get_by_role("link", name=re.compile("Show earlier runs")).click()
    # Waits by locator: a string predicate would be eval'd, which the page's CSP forbids.
    page.locator(".runs").get_by_text("Question 0?", exact=True).wait_for()
    shown = [text.strip() for text in turns.all_inner_texts()]
    assert shown == [f"Question {i}?" for i in range(LONG_TURNS)]
    assert page.get_by_role("link", name=re.compile("Show earlier runs")).count() == 0
    assert page.evaluate("window.__same_page") is True


def test_deep_link_opens_the_tool_call(page: Any, viewer: tuple[str, Ids]) -> None:
    base, ids = viewer
    page.goto(f"{base}/calls/{ids.paris_call}")
    page.get_by_role("link", name="Show in the conversation").click()
    page.wait_for_url(re.compile(rf"#call-{ids.paris_call}$"))
    call = page.locator(f"#call-{ids.paris_call}")
    assert call.get_attribute("open") is not None
    assert call.locator("pre.args").inner_text() == '{\n  "city": "Paris"\n}'


def _docs(name: str) -> list[Path]:
    """``docs/NAME`` when the docs' screenshots are being refreshed, else nowhere."""
    return [ROOT / "docs" / name] if os.environ.get("TURNSTORE_DOCS_SCREENSHOT") else []


def test_jump_to_the_first_run_and_to_a_run_by_id(page: Any, viewer: tuple[str, Ids]) -> None:
    base, _ = viewer
    watch = Watch(page)
    page.goto(base + "/sessions/long")
    questions = page.locator(".runs .msg.user .text")
    assert questions.count() == PAGE_SIZE  # the newest runs
    assert page.locator(".runs").get_by_text("Question 0?", exact=True).count() == 0
    page.get_by_role("link", name="First run").click()
    page.locator(".runs").get_by_text("Question 0?", exact=True).wait_for()
    first = [text.strip() for text in questions.all_inner_texts()]
    assert first == [f"Question {i}?" for i in range(PAGE_SIZE)]
    # The id of the 6th run, read from the page; then back to the newest and there by id.
    sixth = int(page.locator(".runs article.run").nth(5).get_attribute("id").split("-")[1])
    assert page.locator(".run-head a.turn").nth(5).inner_text() == f"Run {sixth}"
    page.get_by_role("link", name="Newest runs").click()
    page.locator(".runs").get_by_text(f"Question {LONG_TURNS - 1}?", exact=True).wait_for()
    page.get_by_label("run id").fill(str(sixth))
    page.get_by_role("button", name="Go").click()
    page.locator(f"#run-{sixth}").wait_for()
    assert page.locator(f"#run-{sixth} .msg.user .text").inner_text().strip() == "Question 5?"
    assert watch.errors == [], watch.errors


def test_the_catalogue_shows_and_sorts_what_sessions_hold(
    page: Any, viewer: tuple[str, Ids]
) -> None:
    base, _ = viewer
    watch = Watch(page)
    page.goto(base + "/sessions")
    headers = [text.strip() for text in page.locator("table.sessions th").all_text_contents()]
    assert headers == ["Session", "User", "Runs", "Branches", "Tokens", "Failed", "Created",
                       "Updated"]  # fmt: skip
    page.get_by_role("link", name="Runs", exact=True).click()
    page.wait_for_url(re.compile(r"sort=runs"))
    cells = page.locator("table.sessions td.num:nth-child(3)").all_inner_texts()
    runs = [int(text.replace(",", "")) for text in cells]
    assert runs == sorted(runs, reverse=True)
    assert runs[0] == LONG_TURNS
    _screenshot(page, "web-sessions.png", *_docs("sessions-page.png"))
    assert watch.errors == [], watch.errors

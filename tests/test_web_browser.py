"""The web viewer in headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright).

A live server (uvicorn on a thread, 127.0.0.1, a free port) serves the conversations of
``webdata.py``, written by the real ``Runner`` with ``ScriptedModel``. Without Chromium or
Playwright these tests skip; under ``CI=true`` they fail. Screenshots go to
``test-artifacts/``; with ``TURNSTORE_DOCS_SCREENSHOT=1`` the session page's is also saved
as ``docs/session-page.png``.
"""

from __future__ import annotations

import html
import itertools
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from browsing import ROOT, Watch, live_viewer, screenshot
from builders import run_in_new_loop
from chains import build_chain
from support import database_target
from turnstore import Store
from webdata import (
    FORKED_ID,
    FORKED_TURNS,
    HOSTILE_ID,
    HOSTILE_OUTPUT,
    IMG,
    LONG_TURNS,
    MARKUP,
    MARKUP_WORD,
    Forked,
    Ids,
    build,
    build_forked,
    build_markup,
)

pytestmark = pytest.mark.browser
PAGE_SIZE = 30  # the viewer's default


@pytest.fixture(scope="module")
def viewer(
    target_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Ids]]:
    """(base URL, ids) of a live read-only viewer over the test conversations, on each of the
    backends a viewer serves."""
    with database_target(target_backend, tmp_path_factory.mktemp("browser")) as db:
        ids = run_in_new_loop(lambda: build(db))  # Playwright may own this thread's loop
        with live_viewer(db) as base:
            yield base, ids


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
    assert osaka.locator(".turn-number").inner_text() == "turn 2"  # its place on the branch
    assert page.get_by_text("Tokyo is 22°C").count() == 0

    # Flip to the other version at the fork: its messages, and the turn after it.
    osaka.locator(".fork a.prev").click()
    page.wait_for_url(re.compile(rf"run={ids.tokyo_run}#run-{ids.tokyo_run}$"))
    tokyo = page.locator(f"#run-{ids.tokyo_run}")
    assert tokyo.locator(".fork .pos").inner_text() == "1/2"
    assert [turn.inner_text() for turn in page.locator(".run .turn-number").all()] == [
        "turn 1",
        "turn 2",
        "turn 3",
    ]
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
    path = screenshot(page, "web-session.png", *docs)
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
    screenshot(page, "web-hostile-tools.png")
    assert watch.dialogs == []
    assert page.evaluate("typeof window.__pwned") == "undefined"


# Elements stored markup would make (see webdata.MARKUP), were it ever put in as HTML.
MADE_BY_MARKUP = (
    "main img, main svg, main iframe, main math, main style, main [onerror], main [onload],"
    " main [onfocus], main [autofocus], main a[href^='javascript' i]"
)


def test_search_snippets_make_no_element(page: Any, new_target: Callable[[], str]) -> None:
    """Snippets holding markup (PostgreSQL's ts_headline keeps <img onerror>) show as the
    text the store returned, and make no element; nor do the conversations they are from."""
    db = new_target()

    async def build_and_search() -> dict[str, list[str]]:
        await build_markup(db)
        async with Store.open(db) as store:
            return {
                query: [" ".join(hit.snippet.split()) for hit in await store.search(query)]
                for query in (MARKUP_WORD, "pwned", "onerror")
            }

    snippets = run_in_new_loop(build_and_search)
    assert len(snippets[MARKUP_WORD]) == 2 * len(MARKUP)
    watch = Watch(page)
    wheres: set[str] = set()
    with live_viewer(db) as base:
        for query, expected in snippets.items():
            page.goto(f"{base}/sessions?q={query}")
            shown = page.locator("td.snippet").all_inner_texts()
            assert [" ".join(text.split()) for text in shown] == expected, query
            assert page.locator(MADE_BY_MARKUP).count() == 0, query
            # Where each match lies, in words, each on one line (not split mid-word).
            wheres.update(" ".join(w.split()) for w in page.locator("td.where").all_inner_texts())
            assert all("\n" not in w.strip() for w in page.locator("td.where").all_inner_texts())
        assert wheres
        assert wheres <= {"user message", "assistant message", "tool call", "tool output"}
        for n in range(len(MARKUP)):
            page.goto(f"{base}/sessions/markup-{n}")
            assert MARKUP[n] in page.locator(".runs").inner_text()
            assert page.locator(MADE_BY_MARKUP).count() == 0, MARKUP[n]
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert watch.dialogs == []
    assert watch.errors == [], watch.errors


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
    assert headers == ["Session", "User", "Runs", "Branches", "Tokens", "Tool calls", "Failed",
                       "Created", "Updated"]  # fmt: skip
    page.get_by_role("link", name="Runs", exact=True).click()
    page.wait_for_url(re.compile(r"sort=runs"))
    cells = page.locator("table.sessions td.num:nth-child(3)").all_inner_texts()
    runs = [int(text.replace(",", "")) for text in cells]
    assert runs == sorted(runs, reverse=True)
    assert runs[0] == LONG_TURNS
    screenshot(page, "web-sessions.png", *_docs("sessions-page.png"))
    assert watch.errors == [], watch.errors


# ---------------------------------------------------------------------------------------------
# The writable viewer (`turnstore serve --writable`): every form, clicked as a user clicks it


@pytest.fixture(scope="module")
def writable_viewer(
    target_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """(base URL, database) of a live writable viewer, shared by the module's tests."""
    directory = tmp_path_factory.mktemp("writable")
    with database_target(target_backend, directory) as db, live_viewer(db, read_only=False) as base:
        yield base, db


_forks = itertools.count()


@pytest.fixture
def writable(writable_viewer: tuple[str, str]) -> tuple[str, Forked]:
    """(base URL, its session) of the writable viewer over a forked session of the test's own."""
    base, db = writable_viewer
    session_id = f"{FORKED_ID} {next(_forks)}"
    return base, run_in_new_loop(lambda: build_forked(db, session_id))


def _submit(page: Any, button: Any, status: int = 200) -> None:
    """Click a form's button as a user does; the page it leads to must answer ``status``
    (after the viewer's redirect)."""
    with page.expect_navigation() as navigation:
        button.click()
    response = navigation.value
    assert response.status == status, (response.status, page.locator("body").inner_text())


def _session(base: str, session_id: str) -> str:
    return f"{base}/sessions/{quote(session_id, safe='')}"


def _conversation(page: Any) -> list[str]:
    """The user messages of the branch shown, oldest first."""
    return [text.strip() for text in page.locator(".runs .msg.user .text").all_inner_texts()]


def _current_branch(page: Any) -> str:
    """What the branch list says of the branch shown."""
    return " ".join(page.locator(".branches li.current").inner_text().split())


# A branch name that would make an element (and run script) if the page ever put it in as HTML.
BRANCH_NAME = f"first {IMG}"
FIRST_VERSION = [f"Question {n}?" for n in range(FORKED_TURNS)]
EDITED = ["Question 0?", "Question 1?", "Question 2, edited?"]


def test_make_this_branch_active(page: Any, writable: tuple[str, Forked]) -> None:
    base, forked = writable
    watch = Watch(page)
    page.goto(_session(base, forked.session_id))
    assert _conversation(page) == EDITED
    assert page.locator(".notice").count() == 0  # the active branch: nothing to make active
    page.locator(".branches").get_by_role("link", name="Question 3?").click()
    page.locator(".notice").wait_for()
    assert _conversation(page) == FIRST_VERSION
    _submit(page, page.get_by_role("button", name="Make this branch active"))
    assert page.url.endswith(f"#run-{forked.first_leaf}")
    assert page.locator(".notice").count() == 0  # it is the active one now
    assert _conversation(page) == FIRST_VERSION
    assert "· active" in _current_branch(page)
    # The session's own page shows it: the head moved.
    page.goto(_session(base, forked.session_id))
    assert _conversation(page) == FIRST_VERSION
    assert watch.errors == [], watch.errors


def _name(page: Any, name: str, status: int = 200) -> None:
    """Fill in "Name this branch" and save."""
    page.get_by_role("textbox", name="branch name").fill(name)
    _submit(page, page.get_by_role("button", name="Save"), status)


def test_name_this_branch(page: Any, writable: tuple[str, Forked]) -> None:
    base, forked = writable
    watch = Watch(page)
    page.goto(_session(base, forked.session_id))
    assert page.get_by_role("textbox", name="branch name").input_value() == ""
    _name(page, BRANCH_NAME)
    name = page.locator(".branches li.current .branch-name")
    assert name.inner_text() == BRANCH_NAME  # the markup, shown as text
    assert page.get_by_role("textbox", name="branch name").input_value() == BRANCH_NAME
    assert page.locator(".branches img").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert _conversation(page) == EDITED  # naming moves nothing
    _name(page, "edited")  # renamed
    assert name.inner_text() == "edited"
    # The other branch cannot take the name: the page says why.
    page.locator(".branches").get_by_role("link", name="Question 3?").click()
    page.locator(".notice").wait_for()
    _name(page, "edited", 400)
    assert page.locator(".error-box h1").inner_text() == "400 · Bad request"
    assert "edited" in page.locator(".error-box .detail").inner_text()
    page.goto(_session(base, forked.session_id))
    assert name.inner_text() == "edited"
    assert page.locator(".branches .branch-name").count() == 1
    _name(page, "")  # unnamed
    assert page.locator(".branches .branch-name").count() == 0
    assert page.locator(".branches").get_by_role("link", name="Question 2, edited?").count() == 1
    assert watch.dialogs == []
    assert [e for e in watch.errors if "status of 400" not in e] == [], watch.errors


def test_make_a_named_branch_active(page: Any, writable: tuple[str, Forked]) -> None:
    base, forked = writable
    watch = Watch(page)
    page.goto(_session(base, forked.session_id))
    _name(page, "edit")
    page.locator(".branches").get_by_role("link", name="Question 3?").click()
    page.locator(".notice").wait_for()
    _name(page, BRANCH_NAME)
    # One "Make active" button (named for its branch): on the named branch not active.
    page.goto(_session(base, forked.session_id))
    assert page.get_by_role("button", name="Make active", exact=True).count() == 0
    assert page.locator(".branches button").all_inner_texts() == ["Make active"]
    _submit(page, page.get_by_role("button", name=f"Make the branch {BRANCH_NAME} active"))
    assert page.url == _session(base, forked.session_id)
    assert _conversation(page) == FIRST_VERSION
    assert page.locator(".notice").count() == 0
    assert _current_branch(page).startswith(BRANCH_NAME)
    assert "· active" in _current_branch(page)
    # And back, by the button now on the other one.
    _submit(page, page.get_by_role("button", name="Make the branch edit active"))
    assert _conversation(page) == EDITED
    assert _current_branch(page).startswith("edit ")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert watch.errors == [], watch.errors
    assert watch.dialogs == []


def _attack(base: str, action: str, fields: dict[str, str]) -> dict[str, str]:
    """Pages of other origins that post ``fields`` to the viewer's ``action`` when their button
    is clicked, by where they post from."""
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in fields.items()
    )
    target = html.escape(base + action)
    form = f'<form method="post" action="{target}">{inputs}<button>Win</button></form>'
    framed = html.escape(f"<!doctype html>{form}")
    return {
        "another site": form,
        "another site without referrers": f'<meta name="referrer" content="no-referrer">{form}',
        "a sandboxed frame": f'<iframe sandbox="allow-forms" srcdoc="{framed}"></iframe>',
        "a data: URL frame": f'<iframe src="data:text/html,{quote(form)}"></iframe>',
    }


def _serving(body: str) -> Callable[[Any], None]:
    """A route handler that answers with the page ``body``."""
    return lambda route: route.fulfill(status=200, content_type="text/html", body=body)


def test_forms_of_other_origins_are_refused(page: Any, writable: tuple[str, Forked]) -> None:
    """Pages of other origins posting the viewer's form, with its token even (as if they had
    it): every origin a browser sends for them (another site, port or name for the viewer;
    ``null`` from a sandboxed or data: frame, or from a page that sends no referrers) is
    refused, and nothing changes."""
    base, forked = writable
    page.goto(_session(base, forked.session_id))
    token = page.locator("form.name-branch input[name=token]").get_attribute("value")
    fields = {"token": token, "run": str(forked.first_leaf)}
    action = "/checkout/" + quote(forked.session_id, safe="")
    pages = _attack(base, action, fields)
    # Every page from another site; from another port or name, the plain one (a frame's or
    # a page's without referrers is "null" wherever it is).
    attacks = [("http://attacker.test", source) for source in pages] + [
        ("http://127.0.0.1:1", "another site"),
        (base.replace("127.0.0.1", "localhost"), "another site"),  # the viewer answers there too
    ]
    for origin, source in attacks:
        page.route(f"{origin}/", _serving(pages[source]))
        page.goto(f"{origin}/")
        frame = page.frame_locator("iframe") if "frame" in source else page
        with page.expect_response(lambda r: r.request.method == "POST") as posted:
            frame.get_by_role("button", name="Win").click()
        assert posted.value.status == 403, (origin, source)
        page.unroute(f"{origin}/")
    page.goto(_session(base, forked.session_id))
    assert _conversation(page) == EDITED  # still the active branch


# ---------------------------------------------------------------------------------------------
# The forms at the length users reach: a session of 100,000 runs

LONG_RUNS = 100_000


@pytest.fixture
def long_writable(new_target: Callable[[], str]) -> Iterator[tuple[str, int]]:
    """(base URL, the edit's run) of a live writable viewer over a session of
    ``LONG_RUNS`` runs in a chain (the branch "long", written set-based: tests/chains.py) whose
    second-to-last turn was then edited: the edit, 99,999 runs deep, is the active branch."""
    db = new_target()

    async def build_long() -> int:
        async with Store.open(db) as store:
            chain = await build_chain(store, "long", LONG_RUNS)
            edited = await store.fork("long", chain.run_id(LONG_RUNS - 2), "question edited")
        return edited.id

    edited = run_in_new_loop(build_long)
    with live_viewer(db, read_only=False) as base:
        yield base, edited


def test_every_form_on_a_session_of_100000_runs(page: Any, long_writable: tuple[str, int]) -> None:
    """Each form of ``--writable`` (the viewer's only writes: it offers no delete), clicked on a
    branch 100,000 runs long and one 99,999 deep."""
    base, edited = long_writable
    watch = Watch(page)
    page.set_default_timeout(60_000)  # what is tested is that each works, not how fast
    last, before_last = f"question {LONG_RUNS - 1}", f"question {LONG_RUNS - 2}"
    page.goto(_session(base, "long"))
    assert _conversation(page)[-2:] == [f"question {LONG_RUNS - 3}", "question edited"]
    assert page.locator(".notice").count() == 0
    # "Make active" on the named branch: the 100,000 runs are the conversation again.
    _submit(page, page.get_by_role("button", name="Make the branch long active"))
    assert _conversation(page)[-2:] == [before_last, last]
    assert "· active" in _current_branch(page)
    assert f"{LONG_RUNS:,} on this branch" in page.locator(".side").inner_text()
    # "Make this branch active" on the edit, reached from the branch list.
    page.locator(".branches").get_by_role("link", name="question edited").click()
    page.locator(".notice").wait_for()
    _submit(page, page.get_by_role("button", name="Make this branch active"))
    assert page.url.endswith(f"#run-{edited}")
    assert page.locator(".notice").count() == 0
    assert "· active" in _current_branch(page)
    assert f"{LONG_RUNS - 1:,} on this branch" in page.locator(".side").inner_text()
    # "Name this branch" on it, 99,999 runs deep.
    _name(page, "edited")
    assert page.locator(".branches li.current .branch-name").inner_text() == "edited"
    assert _conversation(page)[-1] == "question edited"
    assert page.get_by_role("button", name="Make the branch long active").count() == 1
    assert watch.errors == [], watch.errors


def test_compare_a_branch_with_the_active_one(page: Any, writable: tuple[str, Forked]) -> None:
    """Each way to the compare page (the branch list, the notice of another branch, the
    version switcher) shows the old course against the active one, the changed words marked."""
    base, forked = writable
    watch = Watch(page)

    def check_compare_page() -> None:
        page.locator("table.compare").first.wait_for()
        summary = " ".join(page.locator(".compare-summary").inner_text().split())
        assert "2 runs in common" in summary
        assert "2 runs after the fork" in summary
        assert page.locator("table.compare").count() == 2
        # "Question 2?" became "Question 2, edited?": only the new words are marked.
        assert page.locator("#pair-0 .field-user del").count() == 0
        assert "edited" in page.locator("#pair-0 .field-user ins").inner_text()
        assert "Question 3?" in page.locator("#pair-1 .field-user del").inner_text()
        assert "no run on this side" in page.locator("#pair-1 caption").inner_text()

    page.goto(_session(base, forked.session_id))
    name = f"Compare the branch of run {forked.first_leaf} with the active branch"
    page.get_by_role("link", name=name).click()
    check_compare_page()
    # From the other branch's page: its notice, then its version switcher.
    page.goto(_session(base, forked.session_id))
    page.locator(".branches").get_by_role("link", name="Question 3?").click()
    page.locator(".notice").wait_for()
    page.get_by_role("link", name="Compare with the active branch").click()
    check_compare_page()
    page.go_back()
    page.locator(".notice").wait_for()
    page.get_by_role("link", name="Compare this version with the active branch").click()
    check_compare_page()
    screenshot(page, "web-compare.png", *_docs("compare-page.png"))
    # A run that names no branch of the session is a page that says so.
    response = page.goto(f"{base}/compare/{quote(forked.session_id, safe='')}?a=999999999")
    assert response is not None
    assert response.status == 404
    assert watch.dialogs == []
    assert [e for e in watch.errors if "status of 404" not in e] == [], watch.errors


def test_the_session_page_sums_up_the_whole_session(
    page: Any, writable: tuple[str, Forked]
) -> None:
    """Beside the branch shown, the session's totals: runs on every branch, branches and the
    active one's name, tokens, failures, how long it has been going."""
    base, forked = writable
    page.goto(_session(base, forked.session_id))
    facts = dict(
        zip(
            page.locator(".side .facts-list dt").all_inner_texts(),
            page.locator(".side .facts-list dd").all_inner_texts(),
            strict=True,
        )
    )
    assert facts["runs"] == f"3 on this branch, {FORKED_TURNS + 1} in all"
    assert facts["branches"] == "2"
    assert facts["failed"] == "0 runs, 0 tool calls"
    assert "from the first write to the last" in facts["duration"]
    _name(page, "edited")
    facts_after = page.locator(".side .facts-list").inner_text()
    assert "the active one edited" in " ".join(facts_after.split())

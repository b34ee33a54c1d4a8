"""Annotating runs in the viewer, in headless Chromium (``browsing.py``): the writable
viewer's thumbs, label, note and delete buttons clicked as a user clicks them, hostile text
typed into the forms, and the read-only viewer showing annotations with no control. With
``TURNSTORE_DOCS_SCREENSHOT=1`` the annotated run's page is saved as ``docs/annotating.png``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from browsing import ROOT, Watch, live_viewer, screenshot
from builders import run_in_new_loop, snapshot
from support import database_target
from turnstore import Store
from webdata import FORKED_ID, Forked, Ids, build, build_forked

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def annotating(
    target_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Ids]]:
    """(base URL, database, the demo's ids) of a live writable viewer over the test
    conversations, on each backend a viewer serves."""
    directory = tmp_path_factory.mktemp("annotating")
    with database_target(target_backend, directory) as db:
        ids = run_in_new_loop(lambda: build(db))  # Playwright may own this thread's loop
        with live_viewer(db, read_only=False) as base:
            yield base, db, ids


_sessions = itertools.count()


@pytest.fixture
def forked(annotating: tuple[str, str, Ids]) -> tuple[str, str, Forked]:
    """(base URL, database, a session of the test's own) of the writable viewer."""
    base, db, _ = annotating
    session_id = f"{FORKED_ID} notes {next(_sessions)}"
    return base, db, run_in_new_loop(lambda: build_forked(db, session_id))


def _session(base: str, session_id: str) -> str:
    return f"{base}/sessions/{quote(session_id, safe='')}"


def _submit(page: Any, button: Any, status: int = 200) -> str:
    """Click a form's button; the page it leads to answers ``status``; returns its text."""
    with page.expect_navigation() as navigation:
        button.click()
    response = navigation.value
    text: str = page.locator("main").inner_text()
    assert response.status == status, (response.status, text)
    return text


def _notes(page: Any, run_id: int) -> list[str]:
    """The annotations shown on a run, each as one line of text."""
    notes = page.locator(f"#run-{run_id} .note-list > li")
    return [" ".join(text.replace("×", "").split()) for text in notes.all_inner_texts()]


def _stored(db: str, session_id: str) -> list[tuple[str, float | None, str | None, str | None]]:
    async def read() -> list[Any]:
        async with Store.open(db) as store:
            return await store.annotations(session_id=session_id, limit=None)

    return [(n.name, n.value, n.label, n.comment) for n in run_in_new_loop(read)]


def test_thumbs_down_a_label_and_a_note_then_delete_one(
    page: Any, annotating: tuple[str, str, Ids]
) -> None:
    base, db, ids = annotating
    watch = Watch(page)
    run = ids.osaka_run
    page.goto(_session(base, "demo"))
    _submit(page, page.get_by_role("button", name=f"Thumbs down for run {run}"))
    assert page.url.endswith(f"#run-{run}")
    page.reload()
    assert [line.split(" · ")[0] for line in _notes(page, run)] == ["thumbs ▼ down human"]
    page.get_by_role("textbox", name=f"label for run {run}").fill("wrong city")
    _submit(page, page.get_by_role("button", name=f"Add the label to run {run}"))
    page.get_by_role("textbox", name=f"note on run {run}").fill(
        "Asked about Osaka: it had no data,\nbut said so plainly."
    )
    _submit(page, page.get_by_role("button", name=f"Add the note to run {run}"))
    page.reload()
    notes = _notes(page, run)
    assert [line.split(" · ")[0] for line in notes] == [
        "thumbs ▼ down human",
        "label wrong city human",
        "note Asked about Osaka: it had no data, but said so plainly. human",
    ]
    assert page.locator(f"#run-{run} .note.down .note-value").inner_text() == "▼ down"
    assert _notes(page, ids.paris_run) == []  # only the run judged
    docs = [ROOT / "docs" / "annotating.png"] if os.environ.get("TURNSTORE_DOCS_SCREENSHOT") else []
    screenshot(page, "web-annotating.png", *docs)
    # Delete the label: the others stay.
    label = page.locator(f"#run-{run} li.note[data-name=label]")
    note_id = (label.get_attribute("id") or "").removeprefix("annotation-")
    _submit(page, page.get_by_role("button", name=f"Delete annotation {note_id}"))
    page.reload()
    assert [line.split(" ")[0] for line in _notes(page, run)] == ["thumbs", "note"]
    assert [name for name, *_ in _stored(db, "demo")] == ["thumbs", "note"]
    assert watch.errors == [], watch.errors


def test_filter_the_sessions_list_by_negative_feedback(
    page: Any, forked: tuple[str, str, Forked]
) -> None:
    base, db, session = forked
    watch = Watch(page)
    page.goto(_session(base, session.session_id))
    _submit(page, page.get_by_role("button", name=f"Thumbs down for run {session.edited_leaf}"))

    async def expected() -> tuple[list[str], list[str]]:
        async with Store.open(db) as store:
            down = [
                i.session_id
                async for i in store.iter_sessions(annotation="thumbs", annotation_max=0)
            ]
            return down, [i.session_id async for i in store.iter_sessions()]

    down, every = run_in_new_loop(expected)
    assert session.session_id in down
    assert len(down) < len(every)  # the filter leaves some out: "long" has no feedback
    page.goto(base + "/sessions")
    page.get_by_role("combobox", name="feedback").select_option(label="▼ a thumbs down")
    _submit(page, page.get_by_role("button", name="Filter"))
    assert "feedback=negative" in page.url
    listed = page.locator("table.sessions .sid").all_inner_texts()
    assert listed == down  # newest first, each with a thumbs down
    # Kept in the URL: a sort link keeps it, and so does the form.
    page.get_by_role("link", name="Runs").click()
    page.wait_for_url(lambda url: "sort=runs" in url)
    assert "feedback=negative" in page.url
    assert sorted(page.locator("table.sessions .sid").all_inner_texts()) == sorted(down)
    assert page.get_by_role("combobox", name="feedback").input_value() == "negative"
    assert watch.errors == [], watch.errors


HUGE_NOTE = "all work and no play " * 4_000  # 84,000 characters: over MAX_COMMENT


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (HUGE_NOTE, "an annotation's comment must be at most 65536 characters"),
        ("a\x00b", "comment must be text without NUL"),
    ],
    ids=["huge", "nul"],
)
def test_hostile_notes_typed_into_the_form(
    page: Any, forked: tuple[str, str, Forked], text: str, says: str
) -> None:
    base, db, session = forked
    run = session.edited_leaf
    before = run_in_new_loop(lambda: _snapshot(db))
    page.goto(_session(base, session.session_id))
    note = page.get_by_role("textbox", name=f"note on run {run}")
    note.evaluate("(box, text) => { box.value = text; }", text)  # as typed, NUL and all
    shown = _submit(page, page.get_by_role("button", name=f"Add the note to run {run}"), 400)
    assert says in shown
    assert run_in_new_loop(lambda: _snapshot(db)) == before


def test_a_form_that_is_not_utf8_changes_nothing(
    page: Any, forked: tuple[str, str, Forked]
) -> None:
    """A lone surrogate in a form's text: a browser's own form sends U+FFFD in its place (the
    encoding's rule), so a client sends it raw, percent-encoded, from the viewer's page."""
    base, db, session = forked
    before = run_in_new_loop(lambda: _snapshot(db))
    page.goto(_session(base, session.session_id))
    token = page.locator("form.add-note input[name=token]").first.get_attribute("value")
    posted = page.evaluate(
        """async ([url, body]) => {
            const response = await fetch(url, {method: "POST", body,
                headers: {"Content-Type": "application/x-www-form-urlencoded"}});
            return [response.status, await response.text()];
        }""",
        [
            f"{base}/annotate/{quote(session.session_id, safe='')}",
            f"token={token}&run={session.edited_leaf}&name=note&comment=%ED%A0%80",
        ],
    )
    assert posted[0] == 400
    assert "the form is not valid UTF-8" in posted[1]
    assert run_in_new_loop(lambda: _snapshot(db)) == before


def test_read_only_shows_annotations_without_controls(
    page: Any, forked: tuple[str, str, Forked]
) -> None:
    _, db, session = forked
    run = session.edited_leaf

    async def judge() -> None:
        async with Store.open(db) as store:
            await store.annotate(run, "thumbs", value=1, source="user", author="ana")
            await store.annotate(run, "correctness", value=0.5, comment="half right")

    run_in_new_loop(judge)
    before = run_in_new_loop(lambda: _snapshot(db))
    with live_viewer(db) as base:
        watch = Watch(page)
        page.goto(_session(base, session.session_id))
        lines = _notes(page, run)
        assert [line.split(" · ")[0] for line in lines] == [
            "thumbs ▲ up user",
            "correctness 0.5 half right human",
        ]
        assert "ana" in lines[0]
        assert page.locator("form").count() == 1  # the "go to a run" form, no other
        assert page.get_by_role("button", name=f"Thumbs down for run {run}").count() == 0
        assert page.get_by_role("button", name="Delete annotation", exact=False).count() == 0
        assert watch.errors == [], watch.errors
        # The endpoint is not there: a post is refused however it is made.
        status = page.evaluate(
            """async (url) => (await fetch(url, {method: "POST", body: "run=1&name=x&value=1",
                headers: {"Content-Type": "application/x-www-form-urlencoded"}})).status""",
            f"{base}/annotate/{quote(session.session_id, safe='')}",
        )
        assert status in (404, 405)
    assert run_in_new_loop(lambda: _snapshot(db)) == before


async def _snapshot(db: str) -> dict[str, Any]:
    async with Store.open(db) as store:
        return await snapshot(store)

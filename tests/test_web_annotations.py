"""Annotations in the viewer, over HTTP on every backend: each run's shown on it (read-only
too), the writable viewer's forms add and delete them, and hostile forms are refused with a
page that says why and change nothing. (The browser clicks them: test_web_annotations_browser.)
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from builders import assistant, snapshot, user
from turnstore import Store
from turnstore.web import create_app

BASE = "http://127.0.0.1"


@dataclass(frozen=True)
class Viewer:
    store: Store
    client: TestClient
    token: str
    runs: list[int]  # of the session "s/1"
    other_run: int  # of the session "other"


async def _fill(store: Store) -> tuple[list[int], int]:
    for n in range(2):
        await store.add_items("s/1", [user(f"question {n}?"), assistant(f"answer {n}.")])
    await store.add_items("other", [user("elsewhere?"), assistant("here.")])
    return [run.id for run in await store.runs("s/1")], (await store.runs("other"))[0].id


@pytest.fixture
def viewer(open_store: Callable[[], Store]) -> Viewer:
    store = open_store()
    runs, other = asyncio.run(_fill(store))
    client = TestClient(create_app(store, read_only=False), base_url=BASE)
    token = re.search(r'name="token" value="([^"]+)"', client.get("/sessions/s%2F1").text)
    assert token is not None
    return Viewer(store, client, token.group(1), runs, other)


def _post(viewer: Viewer, path: str, form: dict[str, str] | bytes) -> tuple[int, str]:
    """Post a form (a dict, or a body as sent) with the viewer's token; (status, what the
    page says: the redirect's target or the error's detail)."""
    body = form if isinstance(form, bytes) else None
    data = None if body is not None else {**form, "token": viewer.token}
    response = viewer.client.post(
        path,
        data=data,
        content=body,
        headers={"content-type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    if response.status_code == 303:
        return 303, response.headers["location"]
    detail = re.search(r'class="detail">([^<]*)', response.text)
    return response.status_code, detail.group(1) if detail else response.text


def _annotate(viewer: Viewer, **form: str) -> tuple[int, str]:
    return _post(viewer, "/annotate/s%2F1", form)


def test_each_form_annotates_and_the_run_shows_it(viewer: Viewer) -> None:
    run = str(viewer.runs[0])
    to_run = f"/sessions/s%2F1?run={run}#run-{run}"
    assert _annotate(viewer, run=run, name="thumbs", value="0") == (303, to_run)
    assert _annotate(viewer, run=run, name="label", label="hallucinated") == (303, to_run)
    assert _annotate(viewer, run=run, name="note", comment="<b>wrong</b>\ntotal") == (303, to_run)
    notes = asyncio.run(viewer.store.annotations(run_id=viewer.runs[0]))
    assert [(n.name, n.value, n.label, n.comment, n.source) for n in notes] == [
        ("thumbs", 0.0, None, None, "human"),
        ("label", None, "hallucinated", None, "human"),
        ("note", None, None, "<b>wrong</b>\ntotal", "human"),
    ]
    page = viewer.client.get("/sessions/s%2F1").text
    shown = page.split(f'id="run-{run}"')[1].split("</article>")[0]
    assert 'class="note down"' in shown
    assert "▼ down" in shown
    assert "hallucinated" in shown
    assert "&lt;b&gt;wrong&lt;/b&gt;\ntotal" in shown  # text, never markup
    other = page.split(f'id="run-{viewer.runs[1]}"')[1].split("</article>")[0]
    assert '<li class="note' not in other  # only the run judged shows them
    # Read-only, the same annotations, and no form.
    read_only = TestClient(create_app(viewer.store), base_url=BASE)
    page = read_only.get("/sessions/s%2F1").text
    assert "hallucinated" in page
    assert "▼ down" in page
    assert "/annotate/" not in page
    assert "/delete-annotation/" not in page
    assert read_only.post("/annotate/s%2F1", data={"run": run}).status_code in (404, 405)


def test_deleting_an_annotation(viewer: Viewer) -> None:
    note = asyncio.run(viewer.store.annotate(viewer.runs[1], "label", label="kept?"))
    other = asyncio.run(viewer.store.annotate(viewer.other_run, "label", label="theirs"))
    run = viewer.runs[1]
    # Not the session's: nothing is deleted.
    assert _post(viewer, "/delete-annotation/s%2F1", {"annotation": str(other.id)})[0] == 404
    done = _post(viewer, "/delete-annotation/s%2F1", {"annotation": str(note.id)})
    assert done == (303, f"/sessions/s%2F1?run={run}#run-{run}")
    assert asyncio.run(viewer.store.annotations(session_id="s/1")) == []
    assert _post(viewer, "/delete-annotation/s%2F1", {"annotation": str(note.id)})[0] == 404
    assert asyncio.run(viewer.store.annotations(session_id="other")) == [other]


HUGE = "x" * 70_000


@pytest.mark.parametrize(
    ("form", "status", "says"),
    [
        ({"name": "note", "comment": HUGE}, 400, "at most 65536 characters"),
        ({"name": "note", "comment": "a\x00b"}, 400, "without NUL"),
        ({"name": "label", "label": "two\nlines"}, 400, "control characters"),
        ({"name": "label", "label": "y" * 201}, 400, "at most 200 characters"),
        ({"name": "thumbs", "value": "nan"}, 400, "decimal number"),
        ({"name": "thumbs", "value": "1e999"}, 400, "decimal number"),
        ({"name": "thumbs"}, 400, "nothing to add"),
        ({"name": "", "value": "1"}, 400, "needs a name"),
        ({"run": "x", "name": "thumbs", "value": "1"}, 400, "whole number"),
        ({"run": "99999999", "name": "thumbs", "value": "1"}, 404, "99999999"),
        ({"run": "OTHER", "name": "thumbs", "value": "1"}, 404, "OTHER"),
    ],
)
def test_hostile_forms_are_refused_and_change_nothing(
    viewer: Viewer, form: dict[str, str], status: int, says: str
) -> None:
    before = asyncio.run(snapshot(viewer.store))
    run = str(viewer.other_run) if form.get("run") == "OTHER" else form.get("run")
    answer = _annotate(viewer, **{**form, "run": run or str(viewer.runs[0])})
    assert answer[0] == status
    assert says.replace("OTHER", str(viewer.other_run)) in answer[1]
    assert asyncio.run(snapshot(viewer.store)) == before


def test_forms_that_are_not_utf8_or_too_large_change_nothing(viewer: Viewer) -> None:
    before = asyncio.run(snapshot(viewer.store))
    head = f"token={quote(viewer.token)}&run={viewer.runs[0]}&name=note&comment="
    lone_surrogate = (head + "%ED%A0%80").encode()  # U+D800 as UTF-8 would spell it
    assert _post(viewer, "/annotate/s%2F1", lone_surrogate) == (400, "the form is not valid UTF-8")
    assert _post(viewer, "/annotate/s%2F1", head.encode() + b"\xff")[0] == 400
    huge = (head + "x" * (1 << 20)).encode()
    assert _post(viewer, "/annotate/s%2F1", huge)[0] == 413
    assert asyncio.run(snapshot(viewer.store)) == before


def _listed(viewer: Viewer, url: str) -> list[str]:
    """The session ids a sessions page lists, every page followed."""
    ids: list[str] = []
    while url:
        page = viewer.client.get(url)
        assert page.status_code == 200, page.text
        ids += re.findall(r'<span class="sid">([^<]*)</span>', page.text)
        older = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        url = older.group(1).replace("&amp;", "&") if older else ""
        if older:
            assert "feedback=" in url or "annotated=" in url  # kept on every page
    return ids


def test_the_sessions_list_filters_by_feedback(open_store: Callable[[], Store]) -> None:
    store = open_store()

    async def fill() -> None:
        for n in range(5):
            await store.add_items(f"s{n}", [user(f"q{n}"), assistant(f"a{n}")])
        for n, value in ((0, 0), (1, 1), (2, 0), (3, 1)):
            run = (await store.runs(f"s{n}"))[0].id
            await store.annotate(run, "thumbs", value=value)
        await store.annotate((await store.runs("s4"))[0].id, "label", label="hallucinated")

    asyncio.run(fill())
    viewer = Viewer(store, TestClient(create_app(store, page_size=1), base_url=BASE), "", [], 0)
    assert _listed(viewer, "/sessions?feedback=negative") == ["s2", "s0"]
    assert sorted(_listed(viewer, "/sessions?feedback=positive")) == ["s1", "s3"]
    assert _listed(viewer, "/sessions?annotated=label") == ["s4"]
    assert _listed(viewer, "/sessions?annotated=nothing") == []
    sorted_page = viewer.client.get("/sessions?feedback=negative&sort=runs").text
    assert "feedback=negative&amp;sort=tokens" in sorted_page  # the sort links keep it
    for bad in ("feedback=bad", "feedback=negative&annotated=label", "annotated=%00"):
        assert viewer.client.get(f"/sessions?{bad}").status_code == 400, bad

"""The viewer's numbers and long-session controls (issue 16): the sessions page's per-session
numbers and sorting, Tools and Usage in a date range, jumps along a branch, branch names."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta, timezone

import pytest
from starlette.testclient import TestClient

from builders import assistant, call, output, user
from support import target_sql
from turnstore import NewRun, Store
from turnstore.web import create_app

BASE = "http://127.0.0.1"
OLD = datetime(2024, 3, 1, 12, tzinfo=timezone.utc)


@pytest.fixture
def db(cli_target: str) -> str:
    """Three sessions: ``long`` (12 runs in a line), ``forked`` (an edit) and ``old`` (a
    failed tool call, in March 2024)."""

    async def build() -> None:
        async with Store.open(cli_target) as store:
            await store.add_runs(
                "long",
                [
                    NewRun([user(f"q{n}"), assistant(f"a{n}")], parent=n - 1 if n else None)
                    for n in range(12)
                ],
                head=11,
            )
            await store.add_items("forked", [user("first"), assistant("one")])
            [run] = await store.runs("forked")
            await store.fork("forked", run.id, "first, edited")
            await store.add_runs(
                "old",
                [NewRun([user("x"), call("c", "lookup"), output("c", "boom")], created_at=OLD)],
                head=0,
            )

    asyncio.run(build())
    target_sql(cli_target, "UPDATE tool_calls SET status = 'failed'", write=True)
    return cli_target


def client(db: str, **options: object) -> TestClient:
    return TestClient(create_app(db, **options), base_url=BASE)  # type: ignore[arg-type]


def rows(page: str) -> list[list[str]]:
    """The sessions table's cells, without markup."""
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [
        [re.sub(r"<[^>]+>", " ", cell).split()[0] if cell.strip() else "" for cell in
         re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]  # fmt: skip


def test_sessions_show_and_sort_their_numbers(db: str) -> None:
    with client(db) as viewer:
        page = viewer.get("/sessions").text
        by_id = {row[0]: row for row in rows(page)}  # title (first user message) first
        # runs, branches, tokens, tool calls, failed (blank: none)
        assert by_id["q0"][2:7] == ["12", "1", "0", "0", ""]
        assert by_id["first"][2:4] == ["2", "2"]
        assert by_id["x"][6] == "1"
        by_runs = [row[2] for row in rows(viewer.get("/sessions?sort=runs").text)]
        assert by_runs == ["12", "2", "1"]
        failed = [row[0] for row in rows(viewer.get("/sessions?sort=failed").text)]
        assert failed[0] == "x"
        assert viewer.get("/sessions?sort=bogus").status_code == 400
        updated = viewer.get("/sessions?sort=updated&user=").text
        assert 'aria-sort="descending"' in updated


def test_tools_and_usage_in_a_date_range(db: str) -> None:
    today = datetime.now(timezone.utc).date()
    with client(db) as viewer:
        everything = viewer.get("/tools").text
        assert "lookup" in everything
        assert "lookup" in viewer.get("/tools?since=2024-03-01&until=2024-03-01").text
        assert "lookup" not in viewer.get(f"/tools?since={today}").text
        assert "lookup" not in viewer.get("/tools?until=2024-02-29").text
        march = viewer.get("/usage?since=2024-03-01&until=2024-03-31").text
        assert re.search(r"Runs</div><div class=\"value\">1<", march)
        recent = viewer.get(f"/usage?since={today - timedelta(days=1)}").text
        assert re.search(r"Runs</div><div class=\"value\">14<", recent)
        for bad in ("/tools?since=yesterday", "/usage?until=2024-13-01"):
            assert viewer.get(bad).status_code == 400


def test_jumps_along_a_long_branch(db: str) -> None:
    with client(db, page_size=5) as viewer:
        newest = viewer.get("/sessions/long").text
        assert "q0</div>" not in newest
        first = re.search(r'class="jump-first" href="([^"]+)"', newest)
        assert first is not None
        start = viewer.get(first.group(1).replace("&amp;", "&")).text
        assert [f"q{n}</div>" in start for n in range(6)] == [True] * 5 + [False]
        ids = [int(found) for found in re.findall(r'<article class="run" id="run-(\d+)"', start)]
        there = viewer.get(f"/sessions/long?run={ids[3]}").text
        assert f'id="run-{ids[3]}"' in there
        assert f"Run {ids[3]}</a>" in there
        assert viewer.get("/sessions/long?run=999999").status_code == 404


def test_naming_a_branch_in_the_viewer(db: str) -> None:
    with client(db, read_only=False) as viewer:
        page = viewer.get("/sessions/forked").text
        token = re.search(r'name="token" value="([^"]+)"', page)
        run = re.search(r'class="name-branch".*?name="run" value="(\d+)"', page, re.S)
        assert token is not None
        assert run is not None
        form = {"token": token.group(1), "run": run.group(1)}
        named = viewer.post("/name-branch/forked", data={**form, "name": "<b>edited</b> 🧳"})
        assert named.status_code == 200  # followed the redirect
        assert '<strong class="branch-name">&lt;b&gt;edited&lt;/b&gt; 🧳</strong>' in named.text
        assert "edit, forks from the start" in named.text
        refused = viewer.post("/name-branch/forked", data={**form, "name": "two\nlines"})
        assert refused.status_code == 400
        forged = viewer.post("/name-branch/forked", data={**form, "token": "x", "name": "y"})
        assert forged.status_code == 403
        viewer.post("/name-branch/forked", data={**form, "name": ""})  # unnames
        assert "branch-name" not in viewer.get("/sessions/forked").text
    with client(db) as read_only:
        assert "name-branch" not in read_only.get("/sessions/forked").text
        assert read_only.post("/name-branch/forked", data={}).status_code in (404, 405)


def test_switching_to_a_named_branch_in_the_viewer(db: str) -> None:
    async def name_both() -> tuple[int, int]:
        async with Store.open(db) as store:
            branches = await store.branches("forked")
            [first] = [b for b in branches if not b.active]
            [edited] = [b for b in branches if b.active]
            await store.name_branch("forked", first.leaf_run_id, "first <i>try</i>")
            await store.name_branch("forked", edited.leaf_run_id, "edited")
            return first.leaf_run_id, edited.leaf_run_id

    async def head() -> int | None:
        async with Store.open(db) as store:
            info = await store.session("forked")
            assert info is not None
            return info.head_run_id

    first, edited = asyncio.run(name_both())
    with client(db, read_only=False) as viewer:
        page = viewer.get("/sessions/forked").text
        # A control on each named branch but the active one, naming it as text.
        forms = re.findall(r'<form class="switch-branch".*?</form>', page, re.S)
        assert len(forms) == 1
        assert 'name="name" value="first &lt;i&gt;try&lt;/i&gt;"' in forms[0]
        token = re.search(r'name="token" value="([^"]+)"', forms[0])
        assert token is not None
        form = {"token": token.group(1), "name": "first <i>try</i>"}
        switched = viewer.post("/switch-branch/forked", data=form, follow_redirects=False)
        assert (switched.status_code, switched.headers["location"]) == (303, "/sessions/forked")
        assert asyncio.run(head()) == first
        page = viewer.get("/sessions/forked").text
        assert "another branch" not in page
        [form_html] = re.findall(r'<form class="switch-branch".*?</form>', page, re.S)
        assert 'value="edited"' in form_html
        missing = viewer.post("/switch-branch/forked", data={**form, "name": "nope"})
        assert missing.status_code == 404
        assert "nope" in missing.text
        assert viewer.post("/switch-branch/forked", data={**form, "name": ""}).status_code == 400
        forged = viewer.post("/switch-branch/forked", data={**form, "token": "x"})
        assert forged.status_code == 403
        as_json = viewer.post("/switch-branch/forked", json=form)
        assert as_json.status_code == 415
        assert viewer.post("/switch-branch/nosuch", data=form).status_code == 404
        elsewhere = {"origin": "http://evil.example"}
        other_site = viewer.post("/switch-branch/forked", data=form, headers=elsewhere)
        assert other_site.status_code == 403
        assert asyncio.run(head()) == first  # none of the refused posts moved it
    with client(db) as read_only:
        assert "switch-branch" not in read_only.get("/sessions/forked").text
        assert read_only.post("/switch-branch/forked", data=form).status_code in (404, 405)
    assert edited != first

"""The web viewer over HTTP (Starlette's TestClient), and the store reads it is built on.

The pages are checked on conversations written by the real ``Runner`` with ``ScriptedModel``
(``webdata.py``); ``Store.path_view`` and the by-id reads run on every backend.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from builders import assistant, call, output, user
from support import MISSING_DATABASE, database_target, sql, target_exists
from turnstore import (
    InvalidOperationError,
    NotFoundError,
    RunNotFoundError,
    SearchResult,
    SessionNotFoundError,
    Store,
)
from turnstore.core.search import SNIPPET_MARKS
from turnstore.web import _hosts_for, create_app
from webdata import (
    HOSTILE_ANSWER,
    HOSTILE_ID,
    HOSTILE_OUTPUT,
    HOSTILE_QUESTION,
    LONG_TURNS,
    MARKUP,
    MARKUP_WORD,
    Ids,
    build,
    build_markup,
)

BASE = "http://127.0.0.1"


# ---------------------------------------------------------------------------------------------
# Fixtures: one database for the module, written once.


@pytest.fixture(scope="module")
def viewer_db(
    target_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Ids]]:
    with database_target(target_backend, tmp_path_factory.mktemp("web")) as db:
        yield db, asyncio.run(build(db))


@pytest.fixture(scope="module")
def viewer_store(viewer_db: tuple[str, Ids]) -> Iterator[Store]:
    store = Store.open(viewer_db[0])
    yield store
    store.close()


@pytest.fixture(scope="module")
def ids(viewer_db: tuple[str, Ids]) -> Ids:
    return viewer_db[1]


@pytest.fixture(scope="module")
def client(viewer_store: Store) -> TestClient:
    return TestClient(create_app(viewer_store), base_url=BASE)


class _Text(HTMLParser):
    """The text a person sees: no tags, no script or style bodies, entities decoded."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "title"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "title"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def text(body: str) -> str:
    parser = _Text()
    parser.feed(body)
    return " ".join(" ".join(parser.parts).split())


def session_url(session_id: str, **params: object) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/sessions/{quote(session_id, safe='')}" + (f"?{query}" if query else "")


def turns_html(body: str) -> str:
    """The turns of a session page: not its title, not its side panel."""
    return body.split('id="runs"')[1].split('class="side"')[0]


def links(body: str) -> list[str]:
    return [html.unescape(href) for href in re.findall(r'href="([^"]*)"', body)]


# ---------------------------------------------------------------------------------------------
# Sessions page


def test_home_redirects_to_sessions(client: TestClient) -> None:
    response = client.get("/", follow_redirects=False)
    assert response.status_code == 302
    assert response.headers["location"] == "/sessions"


def test_sessions_lists_newest_first(client: TestClient) -> None:
    response = client.get("/sessions")
    assert response.status_code == 200
    page = text(response.text)
    # Written in this order: demo, long, hostile; the newest comes first.
    positions = [page.index(name) for name in (HOSTILE_ID, "long", "demo")]
    assert positions == sorted(positions)
    assert "What's the weather in Paris?" in page  # the title: the first user message
    assert session_url("demo") in links(response.text)


def test_sessions_filter_by_user(client: TestClient) -> None:
    page = text(client.get("/sessions?user=alice").text)
    assert "demo" in page
    assert HOSTILE_ID not in page
    assert "Question 0?" not in page
    assert "No sessions of user nobody" in text(client.get("/sessions?user=nobody").text)


def test_sessions_pages_by_cursor(viewer_store: Store) -> None:
    client = TestClient(create_app(viewer_store, page_size=2), base_url=BASE)
    first = client.get("/sessions")
    older = [link for link in links(first.text) if "after=" in link]
    assert len(older) == 1
    assert HOSTILE_ID in text(first.text)
    assert "demo" not in text(first.text)
    second = client.get(older[0])
    assert second.status_code == 200
    assert "demo" in text(second.text)
    assert HOSTILE_ID not in text(second.text)
    assert not [link for link in links(second.text) if "after=" in link]  # the last page
    assert client.get("/sessions?after=not-a-cursor").status_code == 400


def test_search_finds_runs_and_marks_matches(client: TestClient, ids: Ids) -> None:
    response = client.get("/sessions?q=Tokyo")
    assert response.status_code == 200
    assert "<mark>Tokyo</mark>" in response.text
    assert f"/runs/{ids.tokyo_run}" in links(response.text)
    assert "Nothing matches" in text(client.get("/sessions?q=zanzibar").text)
    # Another user's sessions are filtered out.
    assert "<mark>" not in client.get("/sessions?q=Tokyo&user=mallory").text


# ---------------------------------------------------------------------------------------------
# A session


def test_session_shows_the_active_branch(client: TestClient, ids: Ids) -> None:
    response = client.get("/sessions/demo")
    assert response.status_code == 200
    page = text(response.text)
    assert "What's the weather in Paris?" in page
    assert "It is 18°C and sunny in Paris." in page
    assert "And in Osaka?" in page
    assert "I have no weather data for Osaka." in page
    assert "Tokyo" not in page.replace("And in Tokyo", "")  # the other branch is not shown
    assert "another branch" not in page
    # The fork at turn 2: the active version is 2 of 2; "previous" selects the first one.
    assert "2/2" in page
    assert f"/sessions/demo?run={ids.tokyo_run}#run-{ids.tokyo_run}" in links(response.text)


def test_session_through_a_run_shows_its_branch(client: TestClient, ids: Ids) -> None:
    response = client.get(f"/sessions/demo?run={ids.tokyo_run}")
    page = text(response.text)
    assert "And in Tokyo? Convert it to Fahrenheit." in page
    assert "Tokyo is 22°C, which is 71.6°F." in page
    assert "Refund for order 1234 is on its way." in page  # the branch goes on below
    assert "Osaka" not in page.split("Branches")[0]
    assert "1/2" in page
    assert f"/sessions/demo?run={ids.osaka_run}#run-{ids.osaka_run}" in links(response.text)
    assert "another branch than the session's active one" in page
    assert f'id="run-{ids.tokyo_run}"' in response.text


def test_session_tool_calls_are_pretty_printed(client: TestClient, ids: Ids) -> None:
    body = client.get(f"/sessions/demo?run={ids.tokyo_run}").text
    call_html = body.split(f'id="call-{ids.tokyo_call}"')[1].split("</details>")[0]
    shown = html.unescape(call_html)
    assert '{\n  "city": "Tokyo"\n}' in shown  # indented JSON arguments
    assert "22°C, cloudy" in shown
    assert "call_tokyo" in shown
    assert "completed" in shown
    assert "handoff" in text(body)  # the handoff is tagged


def test_session_shows_tokens_and_metadata(client: TestClient) -> None:
    page = text(client.get("/sessions/demo").text)
    assert "288 tokens" in page  # two model calls of 144 tokens each (the demo's usage)
    assert "alice" in page


def test_session_branch_list(client: TestClient, ids: Ids) -> None:
    body = client.get("/sessions/demo").text
    side = text(body.split('class="side"')[1])
    assert "Branches 2" in side
    assert "I need help with a refund for order 1234." in side
    assert "And in Osaka?" in side


def test_session_pages_long_branches(viewer_store: Store) -> None:
    client = TestClient(create_app(viewer_store, page_size=3), base_url=BASE)
    first = client.get("/sessions/long")
    page = text(turns_html(first.text))
    shown = [i for i in range(LONG_TURNS) if f"Question {i}?" in page]
    assert shown == [LONG_TURNS - 3, LONG_TURNS - 2, LONG_TURNS - 1]  # the newest turns
    earlier = [link for link in links(turns_html(first.text)) if "stop=" in link]
    assert len(earlier) == 1
    assert f"stop={LONG_TURNS - 4}" in earlier[0]
    # The fragment the "earlier" button loads: three more turns and a button for the rest.
    fragment = client.get(earlier[0] + "&partial=1")
    assert fragment.status_code == 200
    assert "<html" not in fragment.text
    shown = [i for i in range(LONG_TURNS) if f"Question {i}?" in text(fragment.text)]
    assert shown == [LONG_TURNS - 6, LONG_TURNS - 5, LONG_TURNS - 4]
    assert "Show earlier runs" in text(fragment.text)
    assert "Show later runs" not in text(fragment.text)
    # Without JavaScript the same link is a page with a way back down.
    full = client.get(earlier[0])
    assert "Show later runs" in text(full.text)
    assert "Show earlier runs" in text(full.text)
    later = client.get(
        next(link for link in links(turns_html(full.text)) if "start=" in link) + "&partial=1"
    ).text
    assert f"Question {LONG_TURNS - 1}?" in text(later)


def test_session_errors(client: TestClient, ids: Ids) -> None:
    assert client.get("/sessions/no-such-session").status_code == 404
    assert "no session" in text(client.get("/sessions/no-such-session").text)
    assert client.get("/sessions/demo?run=999999").status_code == 404
    # A run of another session is not part of this one.
    assert client.get(f"/sessions/long?run={ids.tokyo_run}").status_code == 404
    assert client.get("/sessions/demo?run=abc").status_code == 400
    assert client.get("/sessions/demo?start=x").status_code == 400


def test_unknown_route_is_404(client: TestClient) -> None:
    response = client.get("/no/such/page")
    assert response.status_code == 404
    assert "Not found" in text(response.text)


# ---------------------------------------------------------------------------------------------
# Deep links


def test_run_link_redirects_into_its_conversation(client: TestClient, ids: Ids) -> None:
    response = client.get(f"/runs/{ids.refund_run}", follow_redirects=False)
    assert response.status_code == 302
    location = response.headers["location"]
    assert location == f"/sessions/demo?run={ids.refund_run}#run-{ids.refund_run}"
    assert "Refund for order 1234" in text(client.get(location).text)


def test_run_link_of_a_session_id_that_needs_quoting(client: TestClient, ids: Ids) -> None:
    location = client.get(f"/runs/{ids.hostile_run}", follow_redirects=False).headers["location"]
    assert location.startswith("/sessions/" + quote(HOSTILE_ID, safe="") + "?")
    assert client.get(location).status_code == 200


def test_unknown_runs_and_calls_are_404(client: TestClient) -> None:
    for url in ("/runs/999999", "/runs/999999/items", "/calls/999999", "/runs/abc"):
        assert client.get(url, follow_redirects=False).status_code == 404, url


def test_run_items_are_verbatim(client: TestClient, ids: Ids) -> None:
    response = client.get(f"/runs/{ids.tokyo_run}/items")
    assert response.status_code == 200
    shown = html.unescape(response.text)
    assert '"call_id": "call_tokyo"' in shown
    assert '"type": "function_call_output"' in shown


def test_call_page(client: TestClient, ids: Ids) -> None:
    response = client.get(f"/calls/{ids.paris_call}")
    assert response.status_code == 200
    shown = html.unescape(response.text)
    assert '"city": "Paris"' in shown
    assert "18°C, sunny" in shown
    assert "What's the weather in Paris?" in text(response.text)
    in_context = f"/sessions/demo?run={ids.paris_run}#call-{ids.paris_call}"
    assert in_context in links(response.text)


# ---------------------------------------------------------------------------------------------
# Escaping: stored text is text


def test_hostile_content_is_escaped(client: TestClient, ids: Ids) -> None:
    response = client.get(session_url(HOSTILE_ID))
    assert response.status_code == 200
    body = response.text
    for raw in ("<script>window", "<img src=x onerror", "<b>this</b>", "<b>id</b>", "<b>key"):
        assert raw not in body, raw
    assert "&lt;script&gt;window.__pwned" in body
    assert "&lt;b&gt;key&lt;/b&gt;" in body  # metadata keys and values too
    page = text(body)
    assert HOSTILE_QUESTION in page
    assert HOSTILE_ANSWER in page
    assert HOSTILE_OUTPUT in html.unescape(body)
    call_page = client.get(f"/calls/{ids.hostile_call}").text
    assert "<script>window.__pwned" not in call_page
    assert HOSTILE_OUTPUT in text(call_page)
    # A word outside the markup: PostgreSQL's parser does not index text inside tags.
    search = client.get("/sessions?q=says").text
    assert "<script>window" not in search
    assert "<mark>says</mark>" in search


class _Elements(HTMLParser):
    """Every element a page makes: (tag, attributes), and the text of each search snippet."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.snippets: list[str] = []
        self._in_snippet = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.elements.append((tag, values))
        if tag == "td" and values.get("class") == "snippet":
            self._in_snippet = 1
            self.snippets.append("")
        elif self._in_snippet:
            self._in_snippet += 1

    def handle_endtag(self, tag: str) -> None:
        if self._in_snippet:
            self._in_snippet -= 1

    def handle_data(self, data: str) -> None:
        if self._in_snippet:
            self.snippets[-1] += data


def elements(body: str) -> _Elements:
    parser = _Elements()
    parser.feed(body)
    return parser


def no_stored_markup(page: _Elements) -> None:
    """Only the viewer's own elements: none of those stored markup would make, no event
    handler attribute, no javascript: URL, no script but the viewer's."""
    tags = {tag for tag, _ in page.elements}
    assert not tags & {"img", "svg", "iframe", "math", "style", "object", "embed"}, tags
    for tag, attrs in page.elements:
        assert not [name for name in attrs if name.startswith("on")], (tag, attrs)
        assert "autofocus" not in attrs, (tag, attrs)
        urls = [attrs.get(name, "") for name in ("href", "src", "action")]
        assert not [url for url in urls if "javascript:" in url.lower()], (tag, attrs)
        if tag == "script":
            assert attrs["src"] == "/static/app.js", attrs


def test_search_snippets_are_text(cli_target: str) -> None:
    """A snippet holding markup (PostgreSQL's ts_headline keeps <img onerror> and <svg onload>)
    is shown as the text the store returned: no element, handler or javascript: URL of it."""
    asyncio.run(build_markup(cli_target))

    async def snippets(query: str) -> list[str]:
        async with Store.open(cli_target) as store:
            return [hit.snippet for hit in await store.search(query, limit=30)]

    with TestClient(create_app(cli_target), base_url=BASE) as viewer:
        for query in (MARKUP_WORD, "pwned", "onerror"):
            response = viewer.get(f"/sessions?q={query}")
            assert response.status_code == 200
            page = elements(response.text)
            no_stored_markup(page)
            assert page.snippets == asyncio.run(snippets(query)), query
            if query == MARKUP_WORD:  # a message and its answer in every session
                assert len(page.snippets) == 2 * len(MARKUP)

    # The store's snippets are text (what a page escapes): the backends' marks taken out,
    # the matches the word searched for and nothing else, whatever markup a snippet keeps.
    async def hits() -> list[SearchResult]:
        async with Store.open(cli_target) as store:
            return await store.search(MARKUP_WORD, limit=30)

    found = asyncio.run(hits())
    assert len(found) == 2 * len(MARKUP)
    for hit in found:
        assert not set(SNIPPET_MARKS) & set(hit.snippet), hit.snippet
        assert {hit.snippet[a:b] for a, b in hit.matches} == {MARKUP_WORD}, hit.snippet
        assert "".join(piece for piece, _ in hit.pieces()) == hit.snippet


def test_security_headers(client: TestClient) -> None:
    headers = client.get("/sessions/demo").headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "default-src 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"


def test_foreign_host_is_refused(viewer_store: Store) -> None:
    # DNS rebinding: a page of another site reaching the viewer by a name it controls.
    evil = TestClient(create_app(viewer_store), base_url="http://evil.example")
    assert evil.get("/sessions").status_code == 400
    named = TestClient(
        create_app(viewer_store, allowed_hosts=["viewer.test"]), base_url="http://viewer.test"
    )
    assert named.get("/sessions").status_code == 200


def test_static_files(client: TestClient) -> None:
    assert client.get("/static/app.css").status_code == 200
    script = client.get("/static/app.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]


# ---------------------------------------------------------------------------------------------
# Tools and usage


def test_tools_page(client: TestClient, ids: Ids) -> None:
    response = client.get("/tools")
    assert response.status_code == 200
    page = text(response.text)
    for name in ("get_weather", "to_fahrenheit", "fetch_page", "lookup_order"):
        assert name in page
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r"<code>([a-z_]+)</code></a></td>\s*<td class=\"num\">(\d+)", response.text
        )
    }
    assert rows["get_weather"] == "3"  # Paris, Tokyo, Osaka: every branch counts
    assert rows["lookup_order"] == "1"
    # Calls run under session.hooks have durations: they are the slowest calls.
    slowest = response.text.split("Slowest calls")[1].split("Failing calls")[0]
    assert f"/calls/{ids.hostile_call}" in links(slowest)
    assert f"/calls/{ids.paris_call}" not in links(slowest)  # no hooks, no duration
    failing = response.text.split("Failing calls")[1]
    assert f"/calls/{ids.failing_call}" in links(failing)
    assert f"/calls/{ids.paris_call}" not in links(failing)
    assert "<img src=x>" not in response.text  # the failing call's arguments, escaped


def test_tools_page_filters(client: TestClient) -> None:
    page = text(client.get("/tools?tool=get_weather").text)
    assert "get_weather" in page
    assert "fetch_page" not in page
    page = text(client.get(f"/tools?session={quote(HOSTILE_ID)}").text)
    assert "fetch_page" in page
    assert "get_weather" not in page


def test_usage_page(client: TestClient, viewer_store: Store) -> None:
    response = client.get("/usage")
    assert response.status_code == 200
    body = response.text
    assert "<svg" in body
    assert 'class="lower"' in body
    assert 'class="upper"' in body
    page = text(body)
    assert "Tokens per day" in page
    # The store's own count of runs, shown as the page's total.
    [(runs,)] = asyncio.run(sql(viewer_store, "SELECT count(*) FROM runs"))
    assert runs > 1
    assert re.search(rf"\bRuns\s*{runs}\b", page)
    assert "<title>" in body  # a tooltip for each day


def test_usage_page_empty(cli_target: str) -> None:
    with Store.open(cli_target) as store:
        client = TestClient(create_app(store), base_url=BASE)
        assert "No usage recorded" in text(client.get("/usage").text)
        assert "No sessions yet" in text(client.get("/sessions").text)
        assert "No tool calls" in text(client.get("/tools").text)


# ---------------------------------------------------------------------------------------------
# Read-only by default; the one write when asked for


def test_read_only_refuses_writes(client: TestClient, ids: Ids) -> None:
    response = client.post("/checkout/demo", data={"run": str(ids.tokyo_run)})
    assert response.status_code in (404, 405)
    assert "Make this branch active" not in client.get(f"/sessions/demo?run={ids.tokyo_run}").text


def test_writable_viewer_checks_out_a_branch(cli_target: str) -> None:
    db = cli_target
    ids = asyncio.run(build(db))
    with Store.open(db) as store:
        client = TestClient(create_app(store, read_only=False), base_url=BASE)
        body = client.get(f"/sessions/demo?run={ids.tokyo_run}").text
        assert "Make this branch active" in body
        token = re.search(r'name="token" value="([^"]+)"', body)
        assert token is not None
        forged = client.post("/checkout/demo", data={"run": str(ids.tokyo_run), "token": "x"})
        assert forged.status_code == 403
        response = client.post(
            "/checkout/demo",
            data={"run": str(ids.tokyo_run), "token": token.group(1)},
            follow_redirects=False,
        )
        assert response.status_code == 303
        info = asyncio.run(store.session("demo"))
        assert info is not None
        assert info.head_run_id == ids.refund_run
        assert "another branch" not in text(client.get(response.headers["location"]).text)


# ---------------------------------------------------------------------------------------------
# serve()


def test_serve_command(
    new_target: Callable[[], str], target_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    import turnstore.web
    from turnstore.cli import app

    runner = CliRunner()
    nowhere = new_target()
    missing = runner.invoke(app, ["serve", "--db", nowhere])
    assert missing.exit_code == 1
    assert MISSING_DATABASE[target_backend] in missing.output
    assert not target_exists(nowhere)
    served: list[tuple[object, ...]] = []
    monkeypatch.setattr(
        turnstore.web, "serve", lambda *args, **kwargs: served.append((args, kwargs))
    )
    db = new_target()
    Store.open(db).close()
    assert runner.invoke(app, ["serve", "--db", db]).exit_code == 0
    assert served[-1] == (
        (db,),
        {"host": "127.0.0.1", "port": 8000, "read_only": True, "allow_hosts": [], "prices": None},
    )
    result = runner.invoke(
        app,
        [
            *("serve", "--db", db, "--host", "0.0.0.0", "--port", "9", "--writable"),
            *("--allow-host", "a.test", "--allow-host", "b.test"),
        ],
    )
    assert result.exit_code == 0
    assert served[-1] == (
        (db,),
        {
            "host": "0.0.0.0",
            "port": 9,
            "read_only": False,
            "allow_hosts": ["a.test", "b.test"],
            "prices": None,
        },
    )


def test_app_opens_a_database_by_path(viewer_db: tuple[str, Ids]) -> None:
    # Given a path, the app opens the store when the server starts and closes it at the end.
    with TestClient(create_app(viewer_db[0]), base_url=BASE) as client:
        assert "Tokyo" in client.get("/sessions/demo?run=2").text
        assert client.app.state.store is not None  # type: ignore[attr-defined]


def test_hosts_for_binding() -> None:
    assert "127.0.0.1" in _hosts_for("127.0.0.1")
    assert "*" not in _hosts_for("127.0.0.1")
    assert "*" not in _hosts_for("0.0.0.0")
    assert "myhost" in _hosts_for("myhost")
    assert "viewer.test" in _hosts_for("0.0.0.0", ["viewer.test"])


# ---------------------------------------------------------------------------------------------
# The reads behind the session page, on every backend


async def _tree(store: Store) -> dict[str, int]:
    """Turns a-b-c, then b edited (b2) and continued (d): a → {b → c, b2 → d}; head d."""
    sid = "tree"
    await store.add_items(sid, [user("a"), call("c1", "lookup", '{"q": 1}'), output("c1", "one")])
    await store.add_items(sid, [assistant("A")])
    await store.add_items(sid, [user("b"), assistant("B")])
    await store.add_items(sid, [user("c"), assistant("C")])
    runs = await store.runs(sid)
    b2 = await store.fork(sid, runs[1].id, "b2")
    await store.add_items(sid, [assistant("B2")])
    await store.add_items(sid, [user("d"), assistant("D")])
    path = await store.runs(sid)
    return {"a": runs[0].id, "b": runs[1].id, "c": runs[2].id, "b2": b2.id, "d": path[-1].id}


async def test_path_view_of_the_active_path(store: Store) -> None:
    ids = await _tree(store)
    view = await store.path_view("tree")
    assert [run.user_message for run in view.runs] == ["a", "b2", "d"]
    assert view.leaf_run_id == ids["d"]
    assert view.leaf_depth == 2
    assert not view.has_earlier
    assert not view.has_later
    fork = view.forks[ids["b2"]]
    assert (fork.index, fork.count, fork.previous_id, fork.next_id) == (2, 2, ids["b"], None)
    assert set(view.forks) == {ids["b2"]}
    [lookup] = view.tool_calls[ids["a"]]
    assert (lookup.tool_name, lookup.arguments, lookup.output) == ("lookup", '{"q": 1}', "one")
    assert ids["b2"] not in view.tool_calls


async def test_path_view_through_a_run(store: Store) -> None:
    ids = await _tree(store)
    view = await store.path_view("tree", through=ids["b"])
    assert [run.user_message for run in view.runs] == ["a", "b", "c"]  # down to its newest run
    assert view.forks[ids["b"]].next_id == ids["b2"]
    # Through a run above the head: the head's branch.
    await store.move_head("tree", ids["b2"], to_parent=False)
    view = await store.path_view("tree", through=ids["a"])
    assert [run.user_message for run in view.runs] == ["a", "b2"]
    # No head below: the newest run.
    await store.move_head("tree", ids["c"], to_parent=False)
    assert (await store.path_view("tree", through=ids["b2"])).leaf_run_id == ids["d"]


async def test_path_view_windows(store: Store) -> None:
    sid = "deep"
    for i in range(10):
        await store.add_items(sid, [user(f"q{i}"), assistant(f"A{i}")])
    view = await store.path_view(sid, limit=3)
    assert [run.user_message for run in view.runs] == ["q7", "q8", "q9"]
    assert view.has_earlier
    assert not view.has_later
    view = await store.path_view(sid, stop=6, limit=3)
    assert [run.user_message for run in view.runs] == ["q4", "q5", "q6"]
    assert view.has_earlier
    assert view.has_later
    view = await store.path_view(sid, start=8, limit=3)
    assert [run.user_message for run in view.runs] == ["q8", "q9"]
    runs = await store.runs(sid)
    view = await store.path_view(sid, through=runs[5].id, limit=5)
    assert [run.user_message for run in view.runs] == ["q4", "q5", "q6", "q7", "q8"]
    assert view.session_id == sid


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ({"start": 0}, [0, 1, 2]),  # from the root
        ({"start": 2}, [2, 3, 4]),  # exactly limit runs
        ({"stop": 1}, [0, 1]),  # to near the root: what there is
        ({"stop": 5}, [3, 4, 5]),
        ({"stop": 40}, [9, 10, 11]),  # past the leaf: the last runs
        ({"through": 5, "limit": 7}, [4, 5, 6, 7, 8, 9, 10]),  # limit // 5 runs above it
        ({"through": 0, "limit": 7}, [0, 1, 2, 3, 4, 5, 6]),
    ],
)
async def test_path_view_window_edges(
    store: Store, window: dict[str, int], expected: list[int]
) -> None:
    sid = "deep"
    for i in range(12):
        await store.add_items(sid, [user(f"q{i}"), assistant(f"A{i}")])
    runs = await store.runs(sid)
    options = {"limit": 3, **window}
    if "through" in options:
        options["through"] = runs[options["through"]].id
    view = await store.path_view(sid, **options)
    assert [run.user_message for run in view.runs] == [f"q{i}" for i in expected]
    assert (view.leaf_run_id, view.leaf_depth) == (runs[-1].id, 11)


async def test_path_view_errors(store: Store) -> None:
    await store.add_items("one", [user("x")])
    await store.add_items("two", [user("y")])
    other = (await store.runs("two"))[0].id
    with pytest.raises(SessionNotFoundError):
        await store.path_view("missing")
    with pytest.raises(RunNotFoundError):
        await store.path_view("one", through=other)
    with pytest.raises(RunNotFoundError):
        await store.path_view("one", through=10**9)
    await store.pop_item("one")
    empty = await store.path_view("one")
    assert (empty.session_id, empty.leaf_run_id, empty.leaf_depth) == ("one", None, -1)
    assert (empty.runs, empty.forks, empty.tool_calls) == ([], {}, {})
    assert not empty.has_earlier
    assert not empty.has_later


async def test_run_and_call_by_id(store: Store) -> None:
    ids = await _tree(store)
    run = await store.run(ids["c"])
    assert (run.session_id, run.user_message, run.assistant_message) == ("tree", "c", "C")
    items = await store.run_items(ids["a"])
    assert items == [
        user("a"),
        call("c1", "lookup", '{"q": 1}'),
        output("c1", "one"),
        assistant("A"),
    ]
    view = await store.path_view("tree")
    call_id = view.tool_calls[ids["a"]][0].id
    assert (await store.tool_call(call_id)).call_id == "c1"
    with pytest.raises(RunNotFoundError, match=r"^no run 1000000000$"):
        await store.run(10**9)
    with pytest.raises(NotFoundError, match=r"^no tool call 1000000000$"):
        await store.tool_call(10**9)
    with pytest.raises(NotFoundError):
        await store.tool_call(2**63)  # no database stores such an id
    with pytest.raises(InvalidOperationError):
        await store.tool_call("1")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Formatting helpers


def test_a_tool_call_nested_past_the_parser_is_shown_as_text(tmp_path: Path) -> None:
    # A model may write any text as a tool's arguments. Before: JSON nested deeper than the
    # parser reads raised RecursionError in pretty(), and the session page was a 500.
    deep = "[" * 100_000 + "]" * 100_000

    async def write(store: Store) -> None:
        await store.add_items("deep", [user("q"), call("c1", "tool", deep), output("c1", deep)])

    store = Store.open(str(tmp_path / "deep.db"))
    try:
        asyncio.run(write(store))
        response = TestClient(create_app(store), base_url=BASE).get("/sessions/deep")
        assert response.status_code == 200
        assert "[[[[" in response.text
    finally:
        store.close()


def test_pretty() -> None:
    from turnstore.web.format import pretty

    assert pretty('{"b": 1, "a": [1, 2]}').text == '{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}'
    assert pretty("[1]").is_json
    assert pretty("plain text").text == "plain text"
    assert not pretty("{not json").is_json  # shown as it is
    cut = pretty("x" * 10, limit=4)
    assert (cut.text, cut.truncated, cut.length) == ("xxxx", True, 10)
    assert pretty(None).text == ""


def test_duration_and_number() -> None:
    from turnstore.domain.units import duration_text
    from turnstore.web.format import number

    # The viewer shows durations by the one rule (turnstore.domain.units; tests/test_numbers.py).
    assert [duration_text(v) for v in (None, 0.5, 12.4, 2400, 185_000, 7_500_000)] == [
        "",
        "0.5 ms",
        "12 ms",
        "2.4 s",
        "3 min 05 s",
        "2 h 05 min",
    ]
    assert number(1234567) == "1,234,567"


def test_usage_chart_layout() -> None:
    from datetime import date

    from turnstore.web.format import bar_chart, fill_days

    days = fill_days([(date(2026, 1, 3), 10, 1), (date(2026, 1, 1), 30, 5)])
    assert days == [(date(2026, 1, 1), 30, 5), (date(2026, 1, 2), 0, 0), (date(2026, 1, 3), 10, 1)]
    chart = bar_chart([(d.isoformat(), low, up) for d, low, up in days])
    tallest = chart.bars[0]
    assert tallest.lower + tallest.upper <= chart.plot_height
    assert chart.bars[1].lower == 0
    assert tallest.lower / tallest.upper == pytest.approx(30 / 5)
    assert chart.ticks[0][1] == "0"
    assert max(bar.x + bar.width for bar in chart.bars) <= chart.left + chart.plot_width
    # Years apart: not thousands of empty days.
    assert len(fill_days([(date(2020, 1, 1), 1, 1), (date(2026, 1, 1), 1, 1)])) == 2


@pytest.mark.parametrize(
    ("item_type", "role", "shown"),
    [
        ("message", "user", "user message"),
        ("message", "assistant", "assistant message"),
        ("function_call", None, "tool call"),
        ("function_call_output", None, "tool output"),
        ("mcp_call", None, "MCP call"),
        ("image_generation_call", None, "image generation call"),
        ("message", None, "message"),
    ],
)
def test_where_a_search_match_lies_reads_as_words(
    item_type: str, role: str | None, shown: str
) -> None:
    from turnstore.web.format import item_kind

    assert item_kind(item_type, role) == shown

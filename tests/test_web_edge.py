"""The viewer's edge on every backend: hostile input is a 400 or 404 page, never a 500, and
writes nothing; the Host check (DNS rebinding) and the CSRF token's reach.

The fuzz test enumerates the application's routes, so a page added later is fuzzed too.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx2 as httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount
from starlette.testclient import TestClient

from builders import assistant, call, output, user
from support import old_database, run_as_reader, sql, target_state, unwritable
from turnstore import Store, Usage
from turnstore.web import _hosts_for, create_app
from turnstore.web.params import Page

BASE = "http://127.0.0.1"
ERROR_PAGE = 'class="error-box"'  # the viewer's own error template


# ---------------------------------------------------------------------------------------------
# A small database on each backend, and what it holds


@dataclass(frozen=True)
class Viewer:
    """A writable viewer over a filled store: the app, a client, and real values to mix in."""

    store: Store
    app: Starlette
    client: TestClient
    token: str
    session_ids: list[str]
    run_ids: list[int]
    call_ids: list[int]
    cursor: str


async def _fill(store: Store) -> tuple[list[int], list[int], str]:
    """Three sessions, one with a fork; (run ids, the inactive branch's run first; tool call
    ids; a sessions cursor)."""
    usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
    await store.add_items(
        "alpha",
        [user("weather in Paris?"), call("c1", "get_weather", '{"city": "Paris"}')],
        usage,
    )
    await store.add_items("alpha", [output("c1", "18 C"), assistant("Sunny.")], usage)
    await store.add_items("alpha", [user("and Tokyo?"), assistant("Cloudy.")], usage)
    await store.update_session("alpha", user_id="alice", metadata={"team": "<b>x</b>"})
    tokyo = (await store.runs("alpha"))[1]
    await store.fork("alpha", tokyo.id, "and Osaka?")  # a second branch, active
    await store.add_items("b/with slash?&#", [user("<script>1</script>")])
    await store.add_items("gamma", [user("hello")])
    runs = [tokyo.id] + [run.id for sid in ("alpha", "gamma") for run in await store.runs(sid)]
    calls = [c.id for c in await store.tool_calls(limit=None)]
    page = await store.sessions(limit=1)
    assert page.next_cursor is not None
    await store.search("Paris")  # the index is fed now, not by the first search under test
    return runs, calls, page.next_cursor


async def snapshot(store: Store) -> dict[str, list[str]]:
    """Every row of every table of the store's database: what "nothing written" compares."""
    if store.backend.dialect == "sqlite":
        listing = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    else:
        listing = (
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() ORDER BY table_name"
        )
    tables = [name for (name,) in await sql(store, listing)]
    return {name: sorted(map(repr, await sql(store, f'SELECT * FROM "{name}"'))) for name in tables}


@pytest.fixture
def viewer(open_store: Callable[[], Store]) -> Viewer:
    store = open_store()
    runs, calls, cursor = asyncio.run(_fill(store))
    app = create_app(store, read_only=False)
    client = TestClient(app, base_url=BASE)
    # The form on a page of an inactive branch carries the token.
    body = client.get(f"/sessions/alpha?run={runs[0]}").text
    token = re.search(r'name="token" value="([^"]+)"', body)
    assert token is not None
    return Viewer(
        store,
        app,
        TestClient(app, base_url=BASE, raise_server_exceptions=False),
        token.group(1),
        ["alpha", "b/with slash?&#", "gamma"],
        runs,
        calls,
        cursor,
    )


def encode(value: str, safe: str = "") -> str:
    """``value`` percent-encoded as UTF-8, a lone surrogate as the invalid bytes it would be."""
    return quote(value.encode("utf-8", "surrogatepass"), safe=safe)


def cursor_of(*parts: Any) -> str:
    """A sessions cursor as the store writes one, around any JSON."""
    data = json.dumps(list(parts)).encode("utf-8")
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def assert_refused_as_page(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code >= 400:
        assert ERROR_PAGE in response.text, response.text[:500]


# ---------------------------------------------------------------------------------------------
# Each input that answered 500, and its neighbours


BAD_URLS = [
    "/sessions/%00",
    "/sessions/a%00b",
    "/tools?session=%00",
    "/tools?tool=a%00",
    "/usage?user=%00",
    "/sessions?user=%00",
    "/sessions?q=abc%00def",
    "/sessions?q=%ED%A0%80",  # a lone surrogate, as the invalid UTF-8 it becomes in a URL
    "/sessions/%ED%A0%80",
    "/runs/99999999999999999999",
    "/runs/9223372036854775808",
    "/runs/99999999999999999999/items",
    "/calls/99999999999999999999",
    "/runs/" + "9" * 5000,  # more digits than int() converts
    "/runs/-1",
    "/runs/abc",
    "/sessions/alpha?start=99999999999999999999",
    "/sessions/alpha?stop=99999999999999999999",
    "/sessions/alpha?run=99999999999999999999",
    "/sessions/alpha?start=-1",
    "/sessions/alpha?start=" + "9" * 5000,
    "/sessions/alpha?start=%EF%BC%91",  # a fullwidth digit one, which int() takes
    "/sessions/alpha?start=1_0",
    "/sessions?after=not-a-cursor",
    "/sessions?after=%ED%A0%80",
    "/sessions?after=" + cursor_of("created_at", "\ud800", "x"),
    "/sessions?after=" + cursor_of("created_at", "2026-01-01T00:00:00+00:00", "\udfff"),
    "/sessions?after=" + cursor_of("created_at", "not a time", "x"),  # PostgreSQL: 22007
    "/sessions?after=" + cursor_of("created_at", "9999999-01-01", "x"),  # out of range
    "/sessions?after=" + cursor_of("created_at", "2026-01-01\u0000", "x"),
    "/sessions?after=" + cursor_of("created_at", 1, "x"),
    "/sessions?after=" + cursor_of("updated_at", "2026-01-01", "x"),  # another order
    "/sessions/" + "x" * 1025,  # longer than any session id the store keeps
    "/tools?session=" + "x" * 1025,
    "/usage?user=" + "é" * 513,
    "/sessions?user=" + "x" * 1025,
]


def test_bad_input_is_a_400_or_404_page(viewer: Viewer) -> None:
    before = asyncio.run(snapshot(viewer.store))
    for url in BAD_URLS:
        response = viewer.client.get(url, follow_redirects=False)
        assert response.status_code in (400, 404), (url, response.status_code)
        assert ERROR_PAGE in response.text, url
    assert asyncio.run(snapshot(viewer.store)) == before


def test_good_input_still_answers(viewer: Viewer) -> None:
    # The edge refuses only what is bad: real ids and cursors, and ids up to 2**63 - 1.
    client = viewer.client
    assert client.get(f"/sessions?after={viewer.cursor}").status_code == 200
    assert client.get(f"/sessions/alpha?start=0&stop={2**63 - 1}").status_code == 200
    assert client.get(f"/runs/{2**63 - 1}").status_code == 404
    assert client.get(f"/runs/{viewer.run_ids[0]}/items").status_code == 200
    assert client.get(f"/calls/{viewer.call_ids[0]}").status_code == 200
    assert client.get("/sessions/" + encode("b/with slash?&#")).status_code == 200


# ---------------------------------------------------------------------------------------------
# Fuzz: every route, hostile path and query values


HOSTILE = [
    "",
    " ",
    "\x00",
    "abc\x00def",
    "\ud800",
    "a\udfffb",
    "\ufffd",
    "\u202e\ufeff",
    "🙂",
    "-1",
    "0",
    "-99999999999999999999",
    "99999999999999999999",
    str(2**63),
    str(2**63 - 1),
    "9" * 5000,
    "1e9",
    "1_0",
    " 1",
    "١٢",
    "NaN",
    "x" * 20_000,
    "' OR 1=1 --",
    "'; DROP TABLE runs; --",
    '"unterminated',
    "NEAR(a b",
    "a OR",
    "(",
    "*",
    "-",
    "a:b",
    "%",
    "%00",
    "\\",
    "../..",
    "<script>alert(1)</script>",
    "&amp;&#0;",
    "\r\nX-Injected: 1",
    "not a time",
    "2026-13-45T99:99:99",
    "9999999-01-01",
]

cursors = st.one_of(
    st.builds(
        cursor_of,
        st.sampled_from(["created_at", "updated_at", "x"]),
        st.sampled_from(HOSTILE) | st.integers() | st.none(),
        st.sampled_from(HOSTILE) | st.text(max_size=10),
    ),
    st.binary(max_size=40).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
)
# Any text, lone surrogates included (they reach the URL as invalid UTF-8).
any_text = st.text(st.characters(exclude_categories=()), max_size=30)
hostile_values = st.one_of(
    st.sampled_from(HOSTILE),
    any_text,
    st.integers().map(str),
    cursors,
)


@st.composite
def requests(draw: st.DrawFn, viewer: Viewer, route: BaseRoute) -> tuple[str, str, dict[str, str]]:
    """(method, URL, form) for ``route``, with hostile values."""
    if isinstance(route, Mount):  # the viewer's static files
        return "GET", route.path + "/" + encode(draw(hostile_values)), {}
    assert isinstance(route, Page), f"{route!r} does not go through the viewer's edge"
    numbers = [*map(str, viewer.run_ids), *map(str, viewer.call_ids), "0", "1"]

    def value(name: str) -> str:
        # Half real values, so that the hostile ones also reach the pages behind them.
        if draw(st.booleans()):
            return draw(st.sampled_from(viewer.session_ids if "session" in name else numbers))
        return draw(hostile_values)

    def path_value(match: re.Match[str]) -> str:
        # A {name:path} parameter may hold slashes: sent both encoded and raw.
        raw_slashes = match.group(2) == "path" and draw(st.booleans())
        return encode(value(match.group(1)), safe="/" if raw_slashes else "")

    path = re.sub(r"\{(\w+)(?::(\w+))?\}", path_value, route.path)
    names = [*sorted(route.query), "unknown"]
    query = {name: value(name) for name in draw(st.sets(st.sampled_from(names), max_size=4))}
    url = path + "".join(
        ("&" if i else "?") + f"{encode(k)}={encode(v)}" for i, (k, v) in enumerate(query.items())
    )
    methods = sorted((route.methods or {"GET"}) - {"HEAD"})
    method = draw(st.sampled_from(methods))
    form: dict[str, str] = {}
    if method == "POST":
        # The real token with a hostile run, or a hostile token: neither may write. (A drawn
        # integer that is a real run's id is no hostile run: checking it out writes.)
        def no_run(text: str) -> bool:
            try:
                return int(text) not in viewer.run_ids
            except ValueError:
                return True

        form = {
            "token": draw(st.sampled_from([viewer.token]) | hostile_values),
            "run": draw(hostile_values.filter(no_run)),
        }
    return method, url, form


def send(viewer: Viewer, method: str, url: str, form: dict[str, str]) -> httpx.Response:
    body = urlencode(form, encoding="utf-8", errors="surrogatepass").encode("ascii")
    return viewer.client.request(
        method,
        url,
        content=body if method == "POST" else None,
        headers={"content-type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )


def test_fuzz_every_route(viewer: Viewer) -> None:
    """Every route (the writable viewer's too), hostile values: no 500, and nothing written."""
    before = asyncio.run(snapshot(viewer.store))

    @settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        for route in viewer.app.routes:  # each example tries every route
            assert_refused_as_page(send(viewer, *data.draw(requests(viewer, route))))

    fuzz()
    assert asyncio.run(snapshot(viewer.store)) == before


# ---------------------------------------------------------------------------------------------
# The Host check: DNS rebinding


async def _asgi(app: Starlette, method: str, path: str, headers: list[tuple[str, str]]) -> Any:
    """One request straight to the ASGI app, with exactly these headers (or no Host at all)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body.decode()


def status_for(app: Starlette, host: str | None) -> int:
    headers = [] if host is None else [("host", host)]
    status: int = asyncio.run(_asgi(app, "GET", "/sessions", headers))[0]
    return status


@pytest.fixture(scope="module")
def plain_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    store = Store.open(str(tmp_path_factory.mktemp("hosts") / "hosts.db"))
    asyncio.run(store.add_items("s", [user("hello")]))
    yield store
    store.close()


HOST_CASES = [
    # (bound to, --allow-host, Host header, answered)
    ("127.0.0.1", [], "localhost", True),
    ("127.0.0.1", [], "localhost:8000", True),
    ("127.0.0.1", [], "127.0.0.1:8000", True),
    ("127.0.0.1", [], "[::1]:8000", True),
    ("127.0.0.1", [], "LOCALHOST:8000", True),  # names are case-insensitive
    ("127.0.0.1", [], "localhost.:8000", True),  # and "name." is "name"
    ("127.0.0.1", [], "evil.example", False),  # DNS rebinding
    ("127.0.0.1", [], "evil.example:8000", False),
    ("127.0.0.1", [], "localhost.evil.example", False),
    ("127.0.0.1", [], "localhost..", False),
    ("127.0.0.1", [], "127.0.0.2", False),
    ("127.0.0.1", [], "[::1", False),
    ("127.0.0.1", [], "localhost:8000:1", False),
    ("127.0.0.1", [], "localhost:port", False),
    ("127.0.0.1", [], "", False),
    ("127.0.0.1", [], None, False),  # no Host header at all
    ("127.0.0.1", ["evil.example"], "evil.example", True),
    ("127.0.0.1", ["evil.example"], "EVIL.example.:8000", True),
    ("127.0.0.1", ["evil.example"], "other.example", False),
    ("::1", [], "[::1]:8000", True),
    ("::1", [], "[0:0:0:0:0:0:0:1]:8000", True),
    ("::1", [], "localhost:8000", True),
    ("::1", [], "evil.example:8000", False),
    ("0.0.0.0", [], "192.168.1.20:8000", True),  # every interface: any IP literal
    ("0.0.0.0", [], "10.0.0.1", True),
    ("0.0.0.0", [], "[fe80::1]:8000", True),
    ("0.0.0.0", [], "localhost:8000", True),
    ("0.0.0.0", [], "evil.example:8000", False),  # the hole: any Host was accepted
    ("0.0.0.0", [], "192.168.1.20.nip.io", False),
    ("0.0.0.0", [], "0x7f.1", False),
    ("0.0.0.0", [], None, False),
    ("0.0.0.0", ["viewer.lan"], "viewer.lan:8000", True),
    ("0.0.0.0", ["viewer.lan"], "VIEWER.LAN.", True),
    ("0.0.0.0", ["viewer.lan"], "evil.example", False),
    ("::", [], "[2001:db8::1]:8000", True),
    ("::", [], "evil.example", False),
    ("viewer.lan", [], "viewer.lan:8000", True),
    ("viewer.lan", [], "evil.example", False),
]


@pytest.mark.parametrize(("bound", "allow", "host", "answered"), HOST_CASES)
def test_host_check(
    plain_store: Store, bound: str, allow: list[str], host: str | None, answered: bool
) -> None:
    app = create_app(plain_store, allowed_hosts=_hosts_for(bound, allow))
    assert status_for(app, host) == (200 if answered else 400)


def test_host_policy_refuses_what_is_not_a_host(plain_store: Store) -> None:
    from turnstore import ConfigurationError

    with pytest.raises(ConfigurationError):
        create_app(plain_store, allowed_hosts=["evil.example:8000"])
    # "*" is the library's explicit opt-out, for a proxy in front that checks Host itself.
    assert status_for(create_app(plain_store, allowed_hosts=["*"]), "any.example") == 200


# ---------------------------------------------------------------------------------------------
# The CSRF token cannot be had, or used, from another origin


def test_csrf_token_does_not_reach_another_origin(viewer: Viewer) -> None:
    app = create_app(viewer.store, read_only=False, allowed_hosts=_hosts_for("0.0.0.0"))
    page = f"/sessions/alpha?run={viewer.run_ids[0]}"
    # The page that carries the token, asked for under a rebound name: refused, no token.
    status, _, body = asyncio.run(_asgi(app, "GET", page, [("host", "evil.example")]))
    assert status == 400
    assert viewer.token not in body
    # Asked for by a script of another origin: no CORS header lets that script read it.
    for method in ("GET", "OPTIONS"):
        status, headers, body = asyncio.run(
            _asgi(app, method, page, [("host", "10.0.0.1:8000"), ("origin", "http://evil.example")])
        )
        assert not any(name.lower().startswith(b"access-control-") for name in headers)
    frame_guard = headers[b"content-security-policy"].decode()
    assert "frame-ancestors 'none'" in frame_guard  # nor can it frame the page and read it


def test_writes_from_another_origin_are_refused(viewer: Viewer) -> None:
    head = asyncio.run(viewer.store.session("alpha"))
    form = {"run": str(viewer.run_ids[0]), "token": viewer.token}
    for origin in ("http://evil.example", "null", "http://127.0.0.1:1"):
        response = viewer.client.post(
            "/checkout/alpha", data=form, headers={"origin": origin}, follow_redirects=False
        )
        assert response.status_code == 403, origin
    assert asyncio.run(viewer.store.session("alpha")) == head
    same = viewer.client.post(
        "/checkout/alpha", data=form, headers={"origin": BASE}, follow_redirects=False
    )
    assert same.status_code == 303
    after = asyncio.run(viewer.store.session("alpha"))
    assert after is not None
    assert head is not None
    assert after.head_run_id != head.head_run_id


def test_writes_without_the_token_are_refused(viewer: Viewer) -> None:
    """Every form posted from the viewer's own origin (or with no Origin, as a client that
    sends none), each valid but for its token: without one, with an empty one or a wrong
    one, it is a 403 and nothing changes."""
    run = str(viewer.run_ids[0])
    asyncio.run(viewer.store.name_branch("alpha", viewer.run_ids[0], "tokyo"))
    note = asyncio.run(viewer.store.annotate(viewer.run_ids[0], "label", label="to delete"))
    writes = {  # in an order in which each, with its token, is written
        "/switch-branch/alpha": {"name": "tokyo"},
        "/checkout/alpha": {"run": run},
        "/name-branch/alpha": {"run": run, "name": "renamed"},
        "/annotate/alpha": {"run": run, "name": "thumbs", "value": "0"},
        "/delete-annotation/alpha": {"annotation": str(note.id)},
    }
    routes = {route.path for route in viewer.app.routes if "POST" in getattr(route, "methods", ())}
    assert routes == {"/checkout/{session_id:path}", "/name-branch/{session_id:path}",
                      "/switch-branch/{session_id:path}", "/annotate/{session_id:path}",
                      "/delete-annotation/{session_id:path}"}  # fmt: skip
    before = asyncio.run(snapshot(viewer.store))
    for path, form in writes.items():
        for token in (None, "", "x", viewer.token[:-1]):
            for headers in ({"origin": BASE}, {}):
                data = form if token is None else {**form, "token": token}
                response = viewer.client.post(
                    path, data=data, headers=headers, follow_redirects=False
                )
                assert response.status_code == 403, (path, token, headers)
                assert "did not come from this viewer" in response.text
    assert asyncio.run(snapshot(viewer.store)) == before
    # The same forms with the token are written.
    for path, form in writes.items():
        response = viewer.client.post(
            path, data={**form, "token": viewer.token}, follow_redirects=False
        )
        assert response.status_code == 303, (path, response.text)
    assert asyncio.run(snapshot(viewer.store)) != before


# ---------------------------------------------------------------------------------------------
# A real server on ::1


def _free_port(family: socket.AddressFamily, host: str) -> int:
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def ipv6_loopback() -> None:
    try:
        _free_port(socket.AF_INET6, "::1")
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")


def _wait_for(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert server.poll() is None, server.communicate()
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"the viewer did not answer at {url}")


@pytest.mark.usefixtures("ipv6_loopback")
def test_serve_on_ipv6_loopback(tmp_path: Path) -> None:
    db = str(tmp_path / "v6.db")
    with Store.open(db) as store:
        asyncio.run(store.add_items("s", [user("hello")]))
    port = _free_port(socket.AF_INET6, "::1")
    command = [sys.executable, "-m", "turnstore.cli", "serve", "--db", db, "--host", "::1"]
    server = subprocess.Popen([*command, "--port", str(port)], stderr=subprocess.PIPE)
    try:
        url = f"http://[::1]:{port}/sessions"
        _wait_for(url, server)
        assert httpx.get(url).status_code == 200  # Host: [::1]:port, refused before
        assert httpx.get(url, headers={"host": "evil.example"}).status_code == 400
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_serve_refuses_an_allow_host_that_is_not_a_name(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from turnstore.cli import app

    db = str(tmp_path / "there.db")
    Store.open(db).close()
    result = CliRunner().invoke(app, ["serve", "--db", db, "--allow-host", "viewer.lan:80"])
    assert result.exit_code == 1
    assert "not a host name or IP address: 'viewer.lan:80'" in result.output


# ---------------------------------------------------------------------------------------------
# The read-only viewer writes nothing


def _with_backlog(target: str) -> None:
    """A database whose SQLite search index lags (fewer items than a batch): a search that
    may write feeds it, and so changes the file."""

    async def write() -> None:
        store = Store.open(target)
        try:
            await store.add_items("s", [user("where is the zebra"), assistant("by the giraffe")])
        finally:
            await store.aclose()

    asyncio.run(write())


def test_viewer_search_leaves_the_database_unchanged(cli_target: str, target_backend: str) -> None:
    _with_backlog(cli_target)
    before = target_state(cli_target)
    # Given a path or URL, as `turnstore serve` gives it: the viewer opens the store read-only.
    with TestClient(create_app(cli_target), base_url=BASE) as client:
        found = client.get("/sessions?q=zebra")
        assert found.status_code == 200
        assert "<mark>zebra</mark>" in found.text  # SQLite's unindexed items are still found
        assert client.get("/sessions/s").status_code == 200
        assert client.get("/tools").status_code == 200
        assert client.get("/usage").status_code == 200
        assert client.app.state.store.read_only  # type: ignore[attr-defined]
    assert target_state(cli_target) == before
    if target_backend == "sqlite-file":
        # The writable viewer's search feeds SQLite's index: what the read-only one must not
        # (PostgreSQL's index is written with the items).
        with TestClient(create_app(cli_target, read_only=False), base_url=BASE) as client:
            assert client.get("/sessions?q=zebra").status_code == 200
        assert target_state(cli_target) != before


_SERVER = textwrap.dedent(
    """
    import json, os, sys, tempfile
    from starlette.testclient import TestClient
    from turnstore import Store
    from turnstore.web import create_app

    URLS = ("/sessions", "/sessions?q=zebra", "/sessions/s")

    def pages(target):
        with TestClient(create_app(target), base_url="http://127.0.0.1") as client:
            return {url: client.get(url) for url in URLS}

    # A first server imports everything: the interpreter's files are out of nobody's reach.
    warm = os.path.join(tempfile.mkdtemp(), "warm.db")
    Store.open(warm).close()
    pages(warm)
    if os.getuid() == 0:
        os.setgid(int(sys.argv[3])); os.setuid(int(sys.argv[2]))
    served = pages(sys.argv[1])
    found = "<mark>zebra</mark>" in served["/sessions?q=zebra"].text
    print(json.dumps({**{url: r.status_code for url, r in served.items()}, "found": found}))
    """
)


def test_viewer_serves_a_database_it_cannot_write(
    target_backend: str, request: pytest.FixtureRequest
) -> None:
    """A read-only mount, not even a -shm can be made, read as ``nobody`` (SQLite); a role
    that may only read the schema (PostgreSQL): pages and search answer, nothing changes."""
    with unwritable(target_backend, _with_backlog, request) as target:
        result = run_as_reader(target, _SERVER)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "/sessions": 200,
        "/sessions?q=zebra": 200,
        "/sessions/s": 200,
        "found": True,
    }


def test_serve_says_when_the_schema_is_too_old(
    cli_target: str, target_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    import turnstore.web
    from turnstore.cli import app

    old_database(monkeypatch, target_backend, cli_target, {})
    before = target_state(cli_target)
    served: list[object] = []
    monkeypatch.setattr(turnstore.web, "serve", lambda *args, **kwargs: served.append(args))
    result = CliRunner().invoke(app, ["serve", "--db", cli_target])
    assert result.exit_code == 1
    assert "too old to read without migrating" in result.output
    assert not served
    assert target_state(cli_target) == before

"""The viewer's ASGI application: server-rendered pages over a ``Store``.

Pages are Jinja2 templates with autoescaping on for every template, so stored text (user
messages, tool arguments, outputs) always reaches the browser as text; a strict
Content-Security-Policy (scripts only from ``/static``) is a second wall behind it.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import Store
from ..domain.diff import CALL_FIELDS, word_changes
from ..domain.model import PathView
from ..domain.prices import Prices, cost_text, unknown_cost_reason
from ..domain.units import duration_text
from ..errors import (
    ClosedError,
    ConflictError,
    ConnectionFailedError,
    InvalidItemError,
    InvalidOperationError,
    NotFoundError,
    TurnstoreError,
)
from . import annotating, catalogue, timeline
from . import format as fmt
from .hosts import HostCheck, HostPolicy
from .params import Page, Params, whole_number

__all__ = ["build_app"]

HERE = Path(__file__).parent
MAX_FORM_BYTES = 1 << 20  # the viewer's forms are short; a note is at most 64 Ki characters

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # Not "no-referrer": under it a browser sends ``Origin: null`` even on the viewer's own
    # form posts, which the origin check (hosts.py) must refuse. "same-origin" keeps the real
    # Origin on them and still tells other sites nothing.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


class SecurityHeaders:
    """Adds ``SECURITY_HEADERS`` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


# ---------------------------------------------------------------------------------------------
# URLs: one place builds every link, so that session ids with any characters round-trip.


def _with_query(path: str, params: Mapping[str, Any]) -> str:
    query = urlencode({k: v for k, v in params.items() if v is not None and v != ""})
    return f"{path}?{query}" if query else path


class Urls:
    """The links of one request (relative to the app's mount point)."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    def sessions(self, **params: Any) -> str:
        """The sessions page."""
        return _with_query(f"{self.root}/sessions", params)

    def session(self, session_id: str, **params: Any) -> str:
        """A session's page; ``run=`` picks the branch through that run."""
        return _with_query(f"{self.root}/sessions/{quote(session_id, safe='')}", params)

    def name_branch(self, session_id: str) -> str:
        """Where the form that names a branch posts."""
        return f"{self.root}/name-branch/{quote(session_id, safe='')}"

    def switch_branch(self, session_id: str) -> str:
        """Where the form that makes a named branch active posts (not in read-only mode)."""
        return f"{self.root}/switch-branch/{quote(session_id, safe='')}"

    def checkout(self, session_id: str) -> str:
        """Where the form that makes a branch active posts to (not in read-only mode)."""
        return f"{self.root}/checkout/{quote(session_id, safe='')}"

    def annotate(self, session_id: str) -> str:
        """Where the forms that annotate a run post (not in read-only mode)."""
        return f"{self.root}/annotate/{quote(session_id, safe='')}"

    def delete_annotation(self, session_id: str) -> str:
        """Where the form that deletes an annotation posts (not in read-only mode)."""
        return f"{self.root}/delete-annotation/{quote(session_id, safe='')}"

    def compare(self, session_id: str, a: int, b: int | None = None) -> str:
        """Two courses of a session compared: the branch through run ``a`` against the one
        through ``b`` (None: the active branch)."""
        return _with_query(f"{self.root}/compare/{quote(session_id, safe='')}", {"a": a, "b": b})

    def run(self, run_id: int) -> str:
        """A run's permanent link (redirects into its conversation)."""
        return f"{self.root}/runs/{run_id}"

    def run_in_context(self, session_id: str, run_id: int) -> str:
        """A run shown in its conversation, scrolled to."""
        return self.session(session_id, run=run_id) + f"#run-{run_id}"

    def run_items(self, run_id: int) -> str:
        """A run's verbatim items."""
        return f"{self.root}/runs/{run_id}/items"

    def run_timeline(self, run_id: int) -> str:
        """A run's trace spans as a timeline."""
        return f"{self.root}/runs/{run_id}/timeline"

    def call(self, call_id: int) -> str:
        """A tool call's page."""
        return f"{self.root}/calls/{call_id}"

    def call_in_context(self, session_id: str, run_id: int, call_id: int) -> str:
        """A tool call shown open in its conversation."""
        return self.session(session_id, run=run_id) + f"#call-{call_id}"

    def tools(self, **params: Any) -> str:
        """The tools page."""
        return _with_query(f"{self.root}/tools", params)

    def usage(self, **params: Any) -> str:
        """The usage page."""
        return _with_query(f"{self.root}/usage", params)

    def static(self, name: str) -> str:
        """A file of the viewer's own (CSS, JavaScript)."""
        return f"{self.root}/static/{name}"


def _db_label(store: Store | str | os.PathLike[str]) -> str:
    """What the header shows of the database: a file name, or a URL without credentials."""
    if isinstance(store, Store):
        if store.dialect != "sqlite":
            return "Postgres"  # not the server's address: the page may be shared
        target = store.label  # SQLite's path
    else:
        target = os.fspath(store)
    if "://" in target:
        parts = urlsplit(target)
        return f"{parts.scheme}://{parts.hostname or ''}{parts.path}"
    return os.path.basename(target) or target


# ---------------------------------------------------------------------------------------------
# Request helpers

# The status of each refusal the store can raise; any other TurnstoreError is the server's 500.
ERROR_STATUS: tuple[tuple[type[TurnstoreError], int], ...] = (
    (NotFoundError, 404),
    (InvalidOperationError, 400),
    (InvalidItemError, 400),
    (ConflictError, 409),
    (ConnectionFailedError, 503),
    (ClosedError, 503),
)


def error_status(exc: TurnstoreError) -> int:
    """The HTTP status a page answers with when the store raised ``exc``."""
    return next((status for kind, status in ERROR_STATUS if isinstance(exc, kind)), 500)


def _urls(request: Request) -> Urls:
    return Urls(request.scope.get("root_path", ""))


def _store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def build_app(
    store: Store | str | os.PathLike[str],
    *,
    read_only: bool,
    allowed_hosts: list[str],
    page_size: int,
    prices: Prices,
) -> Starlette:
    """Assemble the application; see ``turnstore.web.create_app``."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        pretty=fmt.pretty,
        number=fmt.number,
        duration=duration_text,
        run_duration_ms=fmt.run_duration_ms,
        timestamp=fmt.timestamp,
        status_class=fmt.status_class,
        call_class=fmt.call_class,
        to_json=fmt.to_json,
        item_kind=fmt.item_kind,
        word_changes=word_changes,
        cost_text=cost_text,
        cost_reason=unknown_cost_reason,
        call_fields=CALL_FIELDS,
    )
    # A token that only pages of this server carry: another site cannot forge a write.
    csrf_token = secrets.token_urlsafe(32)
    db_label = _db_label(store)

    def context(request: Request) -> dict[str, Any]:
        return {
            "urls": _urls(request),
            "read_only": read_only,
            "csrf_token": csrf_token,
            "db_label": db_label,
        }

    templates = Jinja2Templates(env=env, context_processors=[context])

    def render(request: Request, name: str, status_code: int = 200, **values: Any) -> Response:
        return templates.TemplateResponse(request, name, values, status_code=status_code)

    # -- pages ---------------------------------------------------------------------------

    async def home(request: Request, params: Params) -> Response:
        return RedirectResponse(_urls(request).sessions(), 302)

    async def sessions_page(request: Request, params: Params) -> Response:
        values = await catalogue.sessions_page(_store(request), params, page_size)
        return render(request, "sessions.html", nav="sessions", **values)

    async def session_page(request: Request, params: Params) -> Response:
        session_id = params.path_text("session_id")
        store = _store(request)
        info = await store.session(session_id)
        if info is None:
            raise NotFoundError(f"no session {session_id!r}")
        start, stop = params.integer("start"), params.integer("stop")
        view = await store.path_view(
            session_id, through=params.integer("run"), start=start, stop=stop, limit=page_size
        )
        notes = await annotating.run_annotations(store, session_id, view)
        if params.text("partial"):
            # Another page of the same branch, for the "earlier" / "later" buttons.
            return render(
                request,
                "_window.html",
                view=view,
                notes=notes,
                info=info,
                on_active_path=_on_active_path(view, info.head_run_id),
                show_earlier=start is None,
                show_later=stop is None,
            )
        branches = await store.branches(session_id)
        summary = (await store.session_summaries([session_id]))[session_id]
        costs = await store.usage("session", session_id=session_id, prices=prices)
        return render(
            request,
            "session.html",
            nav="sessions",
            info=info,
            view=view,
            notes=notes,
            branches=branches,
            summary=summary,
            cost=costs[0] if costs else None,
            active_name=next((b.name for b in branches if b.active), None),
            current_name=next(
                (b.name for b in branches if b.leaf_run_id == view.leaf_run_id), None
            ),
            on_active_path=_on_active_path(view, info.head_run_id),
            show_earlier=True,
            show_later=True,
        )

    async def run_link(request: Request, params: Params) -> Response:
        run = await _store(request).run(params.path_id("run_id"))
        return RedirectResponse(_urls(request).run_in_context(run.session_id, run.id), 302)

    async def run_items_page(request: Request, params: Params) -> Response:
        store = _store(request)
        run = await store.run(params.path_id("run_id"))
        items = await store.run_items(run.id)
        return render(request, "run_items.html", nav="sessions", run=run, items=items)

    async def timeline_page(request: Request, params: Params) -> Response:
        store = _store(request)
        run = await store.run(params.path_id("run_id"))
        spans = await store.spans(session_id=run.session_id, run_id=run.id)
        rows = timeline.waterfall(spans)
        return render(
            request,
            "timeline.html",
            nav="sessions",
            run=run,
            rows=rows,
            ticks=timeline.axis(spans),
            details=timeline.details,
            width=timeline.WIDTH,
        )

    async def compare_page(request: Request, params: Params) -> Response:
        """The branch through run ``a`` against the one through ``b`` (else the active one)."""
        session_id = params.path_text("session_id")
        store = _store(request)
        a, b = params.integer("a"), params.integer("b")
        if a is None:
            raise HTTPException(400, "compare needs a run: ?a=RUN")
        diff = await store.diff(
            await _branch_leaf(store, session_id, a),
            None if b is None else await _branch_leaf(store, session_id, b),
            session_id=session_id,
        )
        return render(request, "compare.html", nav="sessions", session_id=session_id, diff=diff)

    async def call_page(request: Request, params: Params) -> Response:
        store = _store(request)
        call = await store.tool_call(params.path_id("call_id"))
        run = await store.run(call.run_id)
        return render(request, "call.html", nav="tools", call=call, run=run)

    async def tools_page(request: Request, params: Params) -> Response:
        values = await catalogue.tools_page(_store(request), params)
        return render(request, "tools.html", nav="tools", **values)

    async def usage_page(request: Request, params: Params) -> Response:
        values = await catalogue.usage_page(_store(request), params, prices)
        return render(request, "usage.html", nav="usage", **values)

    async def posted_form(request: Request) -> dict[str, list[str]]:
        """A form this viewer served (its token), posted as forms are; else a 415 or 403."""
        if request.headers.get("content-type", "").split(";")[0] != (
            "application/x-www-form-urlencoded"
        ):
            raise HTTPException(415, "expected a form")
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise HTTPException(413, f"a form of at most {MAX_FORM_BYTES:,} bytes")
        try:
            # Strictly: a value that is not UTF-8 (a lone surrogate, percent-encoded) is
            # refused, not stored as another text with U+FFFD in its place.
            form = parse_qs(body.decode("utf-8"), keep_blank_values=True, errors="strict")
        except UnicodeDecodeError:
            raise HTTPException(400, "the form is not valid UTF-8") from None
        token = form.get("token", [""])[0]
        if not hmac.compare_digest(token.encode(), csrf_token.encode()):
            raise HTTPException(403, "this form did not come from this viewer")
        return form

    async def checkout(request: Request, params: Params) -> Response:
        """Make the branch through a run the session's active path (not in read-only mode)."""
        session_id = params.path_text("session_id")
        form = await posted_form(request)
        run_id = whole_number("run", form.get("run", [""])[0])
        store = _store(request)
        view = await store.path_view(session_id, through=run_id, limit=1)
        if view.leaf_run_id is None:  # a view through a run has a leaf, unless it is gone
            raise HTTPException(404, f"no run {run_id} in this session")
        await store.move_head(session_id, view.leaf_run_id, to_parent=False)
        return RedirectResponse(_urls(request).run_in_context(session_id, run_id), 303)

    async def switch_branch(request: Request, params: Params) -> Response:
        """Make the branch of a name the session's active path (``Store.switch_to_branch``)."""
        session_id = params.path_text("session_id")
        form = await posted_form(request)
        # A name that is no branch's is the store's NotFoundError (a 404 page that says so),
        # one that cannot be a name its InvalidOperationError (a 400).
        await _store(request).switch_to_branch(session_id, form.get("name", [""])[0])
        return RedirectResponse(_urls(request).session(session_id), 303)

    async def name_branch(request: Request, params: Params) -> Response:
        """Name (or rename, or with an empty name unname) the branch through a run."""
        session_id = params.path_text("session_id")
        form = await posted_form(request)
        run_id = whole_number("run", form.get("run", [""])[0])
        name = form.get("name", [""])[0]
        # A refused name (control characters, surrounding space, taken) is the store's
        # InvalidOperationError: a 400 page that says why.
        await _store(request).name_branch(session_id, run_id, name or None)
        return RedirectResponse(_urls(request).run_in_context(session_id, run_id), 303)

    async def annotate(request: Request, params: Params) -> Response:
        """Add an annotation to a run (thumbs, a label, a note); not in read-only mode."""
        session_id = params.path_text("session_id")
        form = await posted_form(request)
        run_id = await annotating.annotate(_store(request), session_id, form)
        return RedirectResponse(_urls(request).run_in_context(session_id, run_id), 303)

    async def delete_annotation(request: Request, params: Params) -> Response:
        """Delete an annotation of a run of the session; not in read-only mode."""
        session_id = params.path_text("session_id")
        form = await posted_form(request)
        run_id = await annotating.delete(_store(request), session_id, form)
        return RedirectResponse(_urls(request).run_in_context(session_id, run_id), 303)

    # -- errors --------------------------------------------------------------------------

    async def error_page(request: Request, exc: Exception) -> Response:
        """Every refusal, whichever page raised it: the store's errors and the edge's."""
        if isinstance(exc, TurnstoreError):
            status, detail = error_status(exc), str(exc)
        elif isinstance(exc, HTTPException):
            status, detail = exc.status_code, exc.detail
            if status == 404 and detail == "Not Found":  # the router's: no route matched
                detail = f"nothing at {request.url.path}"
        else:  # pragma: no cover - only registered for the two above
            raise exc
        return render(request, "error.html", status_code=status, status=status, detail=detail)

    routes: list[Route | Mount] = [
        Page("/", home),
        Page(
            "/sessions",
            sessions_page,
            query=("q", "after", "start", "sort", "page", *catalogue.FILTERS, "session"),
            name="sessions",
        ),
        Page(
            "/sessions/{session_id:path}",
            session_page,
            query=("run", "start", "stop", "partial"),
            name="session",
        ),
        Page("/compare/{session_id:path}", compare_page, query=("a", "b"), name="compare"),
        Page("/runs/{run_id}", run_link, name="run"),
        Page("/runs/{run_id}/items", run_items_page, name="run_items"),
        Page("/runs/{run_id}/timeline", timeline_page, name="run_timeline"),
        Page("/calls/{call_id}", call_page, name="call"),
        Page("/tools", tools_page, query=("session", "tool", "since", "until"), name="tools"),
        Page("/usage", usage_page, query=("user", "since", "until"), name="usage"),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    if not read_only:
        routes.append(Page("/checkout/{session_id:path}", checkout, methods=["POST"]))
        routes.append(Page("/name-branch/{session_id:path}", name_branch, methods=["POST"]))
        routes.append(Page("/switch-branch/{session_id:path}", switch_branch, methods=["POST"]))
        routes.append(Page("/annotate/{session_id:path}", annotate, methods=["POST"]))
        routes.append(
            Page("/delete-annotation/{session_id:path}", delete_annotation, methods=["POST"])
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if isinstance(store, Store):
            yield
            return
        # Opened here, on the server's event loop, and closed with the server. Read-only, the
        # viewer cannot write the database: not by migrating it, not by feeding the search
        # index, and it serves a file or mount it cannot write.
        opened = Store.open(store, read_only=read_only)
        app.state.store = opened
        try:
            yield
        finally:
            await opened.aclose()

    handlers: dict[Any, Callable[[Request, Exception], Any]] = {
        TurnstoreError: error_page,
        HTTPException: error_page,
    }
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(HostCheck, policy=HostPolicy.of(allowed_hosts)),
        ],
        exception_handlers=handlers,
        lifespan=lifespan,
    )
    if isinstance(store, Store):
        app.state.store = store
    return app


async def _branch_leaf(store: Store, session_id: str, run_id: int) -> int:
    """The newest run of the branch through ``run_id`` (the branch a link names by any run
    of it, as the session page does)."""
    view = await store.path_view(session_id, through=run_id, limit=1)
    if view.leaf_run_id is None:
        raise NotFoundError(f"no run {run_id} in session {session_id!r}")
    return view.leaf_run_id


def _on_active_path(view: PathView, head_run_id: int | None) -> bool:
    """Whether the branch shown is the session's active path (its leaf is the head)."""
    return view.leaf_run_id == head_run_id

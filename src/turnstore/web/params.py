"""The viewer's edge: every page's path and query parameters, checked once before the page runs.

A value the store could not take (NUL, a lone surrogate, an integer out of the 64-bit range,
a number spelt in some other way than decimal digits) is refused here, with a 404 for a path
that names nothing and a 400 for a query value, so that no page passes hostile input on.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime, timedelta, timezone
from urllib.parse import unquote_to_bytes

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..domain.units import written_duration
from ..domain.validate import MAX_INT, MAX_KEY_BYTES

__all__ = ["MAX_ID", "Page", "Params", "whole_number"]

MAX_ID = MAX_INT  # the largest id (and depth) either backend stores
# NUL is refused by PostgreSQL TEXT, lone surrogates by every UTF-8 encoder.
_UNSAFE = re.compile("[\x00\ud800-\udfff]")
_DIGITS = re.compile("[0-9]{1,19}")
_DATE = re.compile(
    "[0-9]{4}-[0-9]{2}-[0-9]{2}"
)  # int() would also take " 1", "1_0" and other scripts' digits


def _integer(value: str) -> int | None:
    """``value`` as an int in 0..MAX_ID, or None if it is not one."""
    if _DIGITS.fullmatch(value) is None:
        return None
    number = int(value)
    return number if number <= MAX_ID else None


def _too_long(text: str) -> bool:
    """Whether ``text`` is longer than any session or user id the store keeps."""
    return len(text.encode("utf-8")) > MAX_KEY_BYTES


def whole_number(name: str, value: str) -> int:
    """The parameter ``name``'s ``value`` as an int in 0..MAX_ID; else a 400."""
    number = _integer(value)
    if number is None:
        raise HTTPException(400, f"{name} must be a whole number from 0 to {MAX_ID}")
    return number


class Params:
    """A request's parameters, each checked: text without NUL or lone surrogates, integers in
    0..MAX_ID. Only the query names the page declared can be read."""

    def __init__(self, request: Request, query_names: Collection[str]) -> None:
        # Starlette decodes the URL with U+FFFD for bytes that are not UTF-8: they would
        # silently become another value, so they are refused instead.
        raw = request.scope.get("raw_path", b"") + b"?" + request.scope.get("query_string", b"")
        try:
            unquote_to_bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise HTTPException(400, "the URL is not valid UTF-8") from None
        for value in request.path_params.values():
            if isinstance(value, str) and (_UNSAFE.search(value) or _too_long(value)):
                raise HTTPException(404, f"nothing at {request.url.path}")
        query = request.query_params
        for name, value in query.multi_items():
            if _UNSAFE.search(name) or _UNSAFE.search(value):
                raise HTTPException(400, f"{name!r} holds a NUL or an invalid character")
        self._path = request.path_params
        self._query = query
        self._names = query_names
        self._url = request.url.path

    def path_text(self, name: str) -> str:
        """The path parameter ``name``."""
        value: str = self._path[name]
        return value

    def path_id(self, name: str) -> int:
        """The path parameter ``name`` as an id; a URL with anything else names nothing."""
        number = _integer(self._path[name])
        if number is None:
            raise HTTPException(404, f"nothing at {self._url}")
        return number

    def text(self, name: str) -> str | None:
        """The query parameter ``name`` without surrounding space, None if absent or blank."""
        if name not in self._names:  # the viewer's own mistake, not the request's
            raise LookupError(f"{name} is not a declared query parameter")
        value = self._query.get(name, "").strip()
        return value or None

    def key(self, name: str) -> str | None:
        """The query parameter ``name`` as a session or user id, None if absent or blank; a
        value longer than any stored key is a 400."""
        value = self.text(name)
        if value is not None and _too_long(value):
            raise HTTPException(400, f"{name} must be at most {MAX_KEY_BYTES} bytes in UTF-8")
        return value

    def day(self, name: str, *, end: bool = False) -> datetime | None:
        """The query parameter ``name`` as a UTC date (``2026-11-23``, what a date field
        sends), an ISO 8601 time or a duration back from now (``7d``, ``12h``: as the CLI's
        ``--since``), None if absent or blank; else a 400. A date ``end``s a range: it means
        the end of that day (the next midnight), so the day is included."""
        value = self.text(name)
        if value is None:
            return None
        try:
            span = written_duration(value)
            when = datetime.now(timezone.utc) - span if span else datetime.fromisoformat(value)
        except ValueError:
            raise HTTPException(
                400, f"{name} must be a date (YYYY-MM-DD), a time or a duration (7d, 12h)"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        if end and _DATE.fullmatch(value):
            when += timedelta(days=1)
        return when

    def integer(self, name: str) -> int | None:
        """The query parameter ``name`` as an int in 0..MAX_ID, None if absent or blank."""
        value = self.text(name)
        return None if value is None else whole_number(name, value)


PageHandler = Callable[[Request, Params], Awaitable[Response]]


class Page(Route):
    """A route whose handler receives the request's checked ``Params``; ``query`` names the
    query parameters the page reads (the web fuzz test sends hostile values for each)."""

    def __init__(
        self,
        path: str,
        handler: PageHandler,
        *,
        query: Collection[str] = (),
        methods: list[str] | None = None,
        name: str | None = None,
    ) -> None:
        self.query = frozenset(query)

        async def endpoint(request: Request) -> Response:
            return await handler(request, Params(request, self.query))

        super().__init__(path, endpoint, methods=methods, name=name or handler.__name__)

"""The web viewer: browse sessions, flip between branches and inspect every tool call.

``turnstore serve`` runs it; from Python, ``serve("conversations.db")`` or mount
``create_app(store)`` in any ASGI server. It needs the ``web`` extra
(``pip install 'turnstore[web]'``: Starlette, Jinja2, uvicorn).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..domain.extras import missing_extra
from ..domain.prices import Prices

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..store import Store

__all__ = ["create_app", "serve"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def create_app(
    store: Store | str | os.PathLike[str],
    *,
    read_only: bool = True,
    allowed_hosts: list[str] | None = None,
    page_size: int = 30,
    prices: Prices | None = None,
) -> Starlette:
    """The viewer as an ASGI application over ``store``.

    ``store`` is an open ``Store`` (the caller closes it) or a database path or URL, opened
    when the server starts (with ``Store.open(..., read_only=True)`` unless ``read_only`` is
    False) and closed when it stops. ``read_only=False`` adds the writes the viewer
    offers: making a branch the session's active one, naming a branch, and annotating a run
    (thumbs, a label, a note) or deleting an annotation. Requests must name one of
    ``allowed_hosts`` in their ``Host`` header (default: the loopback names), so that another
    web site cannot read the viewer through DNS rebinding: names and IP addresses, where an
    unspecified address (``0.0.0.0``, ``::``) admits every IP literal and ``"*"`` any host
    (only behind a proxy that checks it). ``page_size`` is the number of runs per page.
    Costs are priced with ``prices`` (None: ``Prices.default()``).
    """
    try:
        from .app import build_app
    except ImportError as exc:
        raise missing_extra("web", "the web viewer", exc.name) from exc
    return build_app(
        store,
        read_only=read_only,
        allowed_hosts=list(allowed_hosts) if allowed_hosts is not None else list(LOOPBACK_HOSTS),
        page_size=page_size,
        prices=Prices.default() if prices is None else prices,
    )


def _hosts_for(host: str, allow_hosts: Sequence[str] = ()) -> list[str]:
    """The hosts a server bound to ``host`` answers to, besides the names ``allow_hosts``.

    Bound to every interface, it is reached by any of the machine's addresses, so every IP
    literal is admitted (``host`` itself, unspecified, says so to ``create_app``), but of the
    names only localhost and ``allow_hosts``: a name is what DNS rebinding forges.
    """
    try:
        everywhere = ipaddress.ip_address(host).is_unspecified
    except ValueError:  # a name, not an address
        everywhere = False
    if everywhere:
        return [host, "localhost", *allow_hosts]
    return [*LOOPBACK_HOSTS, host, *allow_hosts]


def serve(
    db: str | os.PathLike[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    read_only: bool = True,
    allow_hosts: Sequence[str] = (),
    log_level: str = "info",
    prices: Prices | None = None,
) -> None:
    """Serve the viewer for the database ``db`` (a path or URL) until interrupted.

    Binds to loopback unless ``host`` says otherwise; read-only unless ``read_only=False``.
    Requests must name loopback, ``host`` or one of the names ``allow_hosts`` (bound to every
    interface: any IP literal, localhost or one of ``allow_hosts``).
    ``db`` is opened as ``Store.open`` opens it (``turnstore serve`` first refuses a missing
    file or a database of another kind). Costs are priced with ``prices`` (None: the
    shipped table).
    """
    try:
        import uvicorn
    except ImportError as exc:
        raise missing_extra("web", "the web viewer", exc.name) from exc
    app = create_app(
        db, read_only=read_only, allowed_hosts=_hosts_for(host, allow_hosts), prices=prices
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level)

"""The web viewer in a real browser: headless Chromium driven by Playwright, a live viewer
(uvicorn on a thread, 127.0.0.1, a free port), what a page did besides rendering, and
screenshots in ``test-artifacts/``."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from support import require_module, unavailable
from turnstore import Prices
from turnstore.web import create_app

# One launch configuration serves these tests and the viewer's benchmark.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_web import CHROMIUM, CHROMIUM_ARGS

# Without Chromium's local network access checks, which stop a sandboxed or data: frame from
# posting to a loopback address before the viewer sees the request (other browsers have no
# such check): the tests see the viewer's own refusal of other origins.
ARGS = [*CHROMIUM_ARGS, "--disable-features=LocalNetworkAccessChecks"]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium (Debian's, by path), driven by Playwright; skipped without them
    (failed under ``CI=true``)."""
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_playwright = require_module("playwright.sync_api").sync_playwright
    with sync_playwright() as playwright:
        # Never a downloaded browser: Debian's, by path.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@contextmanager
def live_viewer(db: str, *, read_only: bool = True, prices: Prices | None = None) -> Iterator[str]:
    """The base URL of a live viewer over the database ``db``, opened as ``turnstore serve``
    opens it (``--writable`` unless ``read_only``; ``--prices`` as ``prices``)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(db, read_only=read_only, prices=prices)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
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


def screenshot(page: Any, name: str, *also: Path) -> Path:
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

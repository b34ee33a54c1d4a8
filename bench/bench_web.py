"""The web viewer: a session of 5,000 runs opens in headless Chromium in <= 1 s.

    .venv/bin/python bench/bench_web.py                 # 5,000 runs, 10 repeats
    .venv/bin/python bench/bench_web.py --runs 20000 --repeats 5
    .venv/bin/python bench/bench_web.py --json bench/results/web.json

The session is built from realistic turns (``_common``: a question, a tool call and its
output, an answer, about 1.5 KB each) with an edit every 100 runs, so that the branch shows
fork switchers. A live server (uvicorn, 127.0.0.1) serves it; Debian's ``/usr/bin/chromium``
(driven by Playwright, never a downloaded browser) opens, each time in a fresh tab:

- the session page (its active path, newest page of turns first);
- a deep link to a run in the middle of the branch (``/runs/ID``, redirected into context);
- the "show earlier turns" button on that page (a fragment fetched and inserted in place).

"Opens" is navigation start to the load event (HTML, CSS and script fetched, page laid out),
from the browser's Navigation Timing; the button is click to the new turns in the DOM. The
server's own time for the page (one HTTP GET, Python client) is shown beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from _common import environment, format_table, make_turns, write_json
from turnstore import Store, StructuredSession
from turnstore.domain.model import NewRun
from turnstore.web import create_app

TARGET_MS = 1000.0
CHROMIUM = "/usr/bin/chromium"
# Headless, and no traffic of Chromium's own: this machine's network is closed. The browser
# tests (tests/test_web_browser.py) launch it the same way.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SESSION = "big"


async def build(db: str, runs: int) -> tuple[int, int]:
    """A ``runs``-deep session (plus an edit every 100 runs); (middle run id, path length)."""
    store = Store.open(db)
    try:
        turns = make_turns(runs)
        last: int | None = None
        for start in range(0, runs, 500):  # bulk writes: the history is set-up, not measured
            chunk = [
                NewRun(
                    items=[item for batch in turn for item in batch],
                    parent=i - 1 if i else None,
                    parent_id=None if i else last,
                )
                for i, turn in enumerate(turns[start : start + 500])
            ]
            last = (await store.add_runs(SESSION, chunk, head=len(chunk) - 1))[-1]
        session = StructuredSession(SESSION, store)
        path = await session.runs()
        head = path[-1].id
        for run in path[50::100]:  # a fork every 100 runs; the head stays on the long branch
            await session.edit(run.id, "An edited question.")
        await session.checkout(head)
        return path[len(path) // 2].id, len(path)
    finally:
        await store.aclose()


class Server:
    """uvicorn on a thread, on 127.0.0.1 and a free port."""

    def __init__(self, store: Store) -> None:
        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(store), log_level="warning"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def _load_ms(page: Any) -> float:
    """Navigation start to the end of the load event, as the browser timed it."""
    entry = json.loads(
        page.evaluate("JSON.stringify(performance.getEntriesByType('navigation')[0])")
    )
    return float(entry["loadEventEnd"] - entry["startTime"])


def measure(url: str, middle_run: int, repeats: int) -> dict[str, list[float]]:
    """Milliseconds of each case, ``repeats`` times, each in a fresh tab."""
    from playwright.sync_api import sync_playwright

    figures: dict[str, list[float]] = {"session page": [], "deep link": [], "earlier": []}
    server: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            # One warm-up: the first page of a fresh browser pays for its own start.
            warm = browser.new_page()
            warm.goto(f"{url}/sessions/{SESSION}")
            warm.close()
            for _ in range(repeats):
                page = browser.new_page()
                page.goto(f"{url}/sessions/{SESSION}", wait_until="load")
                figures["session page"].append(_load_ms(page))
                page.close()

                page = browser.new_page()
                page.goto(f"{url}/runs/{middle_run}", wait_until="load")
                figures["deep link"].append(_load_ms(page))
                before = page.locator(".run").count()
                started = time.perf_counter()
                page.get_by_role("link", name="Show earlier turns").first.click()
                page.locator(".run").nth(before).wait_for()
                figures["earlier"].append((time.perf_counter() - started) * 1000)
                page.close()

                started = time.perf_counter()
                with urllib.request.urlopen(f"{url}/sessions/{SESSION}") as response:
                    response.read()
                server.append((time.perf_counter() - started) * 1000)
        finally:
            browser.close()
    figures["server: session page"] = server
    return figures


def main() -> None:
    """Build the session, serve it, open it in Chromium, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing: apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "web.db")
        started = time.perf_counter()
        middle, length = asyncio.run(build(db, args.runs))
        print(
            f"built a session of {length:,} runs on its active path in "
            f"{time.perf_counter() - started:.1f} s"
        )
        store = Store.open(db)
        try:
            with Server(store) as server:
                figures = measure(server.url, middle, args.repeats)
        finally:
            store.close()
    rows = []
    for name, values in figures.items():
        rows.append(
            [name, f"{statistics.median(values):.0f}", f"{min(values):.0f}", f"{max(values):.0f}"]
        )
    print(format_table(["ms (browser unless noted)", "median", "min", "max"], rows))
    opened = statistics.median(figures["session page"])
    verdict = "PASS" if opened <= TARGET_MS else "MISS"
    print(
        f"\nsession of {length:,} runs opens in {opened:.0f} ms (target <= {TARGET_MS:.0f} ms): "
        f"{verdict}"
    )
    if args.json:
        write_json(
            args.json,
            {
                "environment": environment(),
                "runs": length,
                "figures_ms": figures,
                "target_ms": TARGET_MS,
                "verdict": verdict,
            },
        )


if __name__ == "__main__":
    main()

"""Issue 17: the viewer's timeline of a turn in headless Chromium: the turn of a raising tool
and a handoff, recorded by ``turnstore.tracing`` with the real Runner, shows its spans as a
waterfall with the failed span's error text, the handoff and the guardrail's trip."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from browsing import Watch, live_viewer, screenshot
from builders import run_in_new_loop
from scripted import STORED_ERROR, converse_traced, tracing_on
from support import database_target
from turnstore import Store, StructuredSession, tracing

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(scope="module")
def traced(
    target_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, list[int]]]:
    """(base URL, run ids) of a live viewer over the acceptance conversation, traced, on each
    of the backends a viewer serves."""
    with database_target(target_backend, tmp_path_factory.mktemp("traced")) as db:

        async def build() -> list[int]:
            async with Store.open(db) as store:
                await converse_traced("run", StructuredSession("traced", store))
                await tracing.aflush()
                return [run.id for run in await store.runs("traced")]

        with tracing_on():
            runs = run_in_new_loop(build)
        with live_viewer(db) as base:
            yield base, runs


def test_the_timeline_shows_the_failed_span(page: Any, traced: tuple[str, list[int]]) -> None:
    base, (first, tripped, _) = traced
    watch = Watch(page)
    page.goto(base + "/sessions/traced")
    page.locator(f"#run-{first}").get_by_role("link", name="timeline").click()
    page.wait_for_url(re.compile(rf"/runs/{first}/timeline$"))
    failed = page.locator("tr.span.failed")
    assert failed.count() == 1
    assert failed.locator(".name").inner_text() == "lookup"
    assert failed.locator(".span-error").inner_text() == STORED_ERROR
    assert failed.locator(".span-error").is_visible()
    handoff = page.locator("tr.kind-handoff")
    assert handoff.locator(".name").inner_text() == "Assistant -> Billing"
    assert page.locator("tr.kind-agent .name").all_inner_texts() == ["Assistant", "Billing"]
    # The function span sits under its agent: deeper in the waterfall.
    assert page.locator("tr.span").first.get_attribute("data-kind") in ("task", "agent")
    bars = page.locator("tr.span svg.bar rect")
    assert bars.count() == page.locator("tr.span").count()
    # Runs are named alike on every page; the axis has ticks from 0 on.
    assert page.locator("h1").inner_text().startswith(f"Timeline of run {first}")
    ticks = page.locator("svg.axis text").all_text_contents()
    assert len(ticks) >= 2
    assert ticks[0] in ("0 ms", "0 s")
    # A span opens to its data: the failed tool's input and error, the handoff's target.
    failed.locator("details.span-data summary").click()
    shown = failed.locator("details.span-data").inner_text()
    assert "input" in shown
    assert "disk on fire" in shown  # the error as the SDK recorded it
    handoff.locator("details.span-data summary").click()
    assert "Billing" in handoff.locator("details.span-data").inner_text()
    screenshot(page, "web-timeline.png")

    page.goto(base + f"/runs/{tripped}/timeline")
    trip = page.locator("tr.kind-guardrail.tripped")
    assert trip.locator(".name").inner_text() == "no_forbidden"
    assert trip.get_by_text("tripped").is_visible()
    assert watch.errors == [], watch.errors  # CSP violations would show here
    assert watch.dialogs == []

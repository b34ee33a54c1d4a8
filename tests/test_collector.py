"""Big decodes run with CPython's cyclic collector paused (``core.collector``), and the pause
is correct for the whole process: it nests across threads, restores only what it changed,
and a read through any backend leaves the collector as the program set it."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from builders import assistant, user
from turnstore import Store
from turnstore.core import codec
from turnstore.core.collector import PAUSE_FROM, collector_paused, pause_for


@pytest.fixture
def collector_on() -> Iterator[None]:
    """The collector on for the test, and as it was after."""
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def test_a_pause_switches_the_collector_off_and_back_on(collector_on: None) -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_program_that_runs_without_the_collector_keeps_it_off(collector_on: None) -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_a_pause_still_restores_the_collector(collector_on: None) -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("decode failed")
    assert gc.isenabled()


def test_overlapping_pauses_in_threads_end_with_the_last(collector_on: None) -> None:
    """Thread A pauses, B pauses, A ends: the collector stays off until B ends too."""
    a_in, b_in, a_out, b_may_end = (threading.Event() for _ in range(4))
    seen: dict[str, bool] = {}

    def a() -> None:
        with collector_paused():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b() -> None:
        a_in.wait(10)
        with collector_paused():
            b_in.set()
            a_out.wait(10)
            seen["after A ended"] = gc.isenabled()
            b_may_end.wait(10)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    a_out.wait(10)
    b_may_end.set()
    for thread in threads:
        thread.join(10)
    assert seen == {"after A ended": False}
    assert gc.isenabled()


def test_small_decodes_leave_the_collector_alone(collector_on: None) -> None:
    with pause_for(PAUSE_FROM - 1):
        assert gc.isenabled()
    with pause_for(PAUSE_FROM):
        assert not gc.isenabled()


def test_a_big_decode_runs_paused_and_a_corrupt_item_still_falls_back(
    collector_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    during: list[bool] = []
    decode = codec._decode_object

    def spy(data: Any) -> Any:
        during.append(gc.isenabled())
        return decode(data)

    monkeypatch.setattr(codec, "_decode_object", spy)
    good = [b'{"n": %d}' % n for n in range(PAUSE_FROM)]
    assert codec.decode_data(good, "s") == [{"n": n} for n in range(PAUSE_FROM)]
    assert set(during) == {False}
    assert gc.isenabled()
    # One item that is no JSON object: the rest are decoded one by one, the collector on.
    assert len(codec.decode_data([*good[:-1], b"[1]"], "s")) == PAUSE_FROM - 1
    assert gc.isenabled()


async def test_reads_leave_the_collector_as_the_program_set_it(
    store: Store, collector_on: None
) -> None:
    turns = PAUSE_FROM // 2 + 1
    for turn in range(turns):
        await store.add_items("big", [user(f"q{turn}"), assistant(f"a{turn}", f"m{turn}")])
    assert len(await store.get_items("big")) == 2 * turns
    assert gc.isenabled()
    assert len(await store.tree("big")) == turns
    assert gc.isenabled()
    gc.disable()
    assert len(await store.get_items("big")) == 2 * turns
    assert not gc.isenabled()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_during_a_pause_has_its_collector_back(collector_on: None) -> None:
    with collector_paused():
        pid = os.fork()
        if pid == 0:  # the child: the collector on, and a pause works (its lock is free)
            ok = gc.isenabled()
            with collector_paused():
                ok = ok and not gc.isenabled()
            os._exit(0 if ok and gc.isenabled() else 1)
        _, status = os.waitpid(pid, 0)
        assert not gc.isenabled()  # the parent's pause goes on
    assert os.waitstatus_to_exitcode(status) == 0
    assert gc.isenabled()

"""What ``turnstore.tracing`` costs a turn: the same Runner turns with it on and off.

A turn is a real ``Runner.run`` with ``agents.testing.ScriptedModel`` (emitting its model
spans, as real models do): the user's question, one function tool call, the answer, on a
``StructuredSession`` over a SQLite file. "off" runs the SDK's tracing with no processor
(what a turn costs without turnstore's); "on" has ``turnstore.tracing.install()``'s processor,
and its time includes writing every span (``tracing.flush()`` after the turns), so the
writes done off the Runner's path are counted too. "no tracing" (the SDK's tracing disabled)
is shown for reference. Each round times ``--turns`` turns of each mode, in alternating
order, on a fresh session; the ratio on/off of each round is reported as min / median / max,
for wall-clock time and for the process's CPU time (every thread: the Runner's, SQLite's
worker, the span writer). On a busy machine the wall clock mostly measures the neighbours;
CPU time is what the turn costs. The target: a turn with tracing on costs at most 1.2x the
same turn with it off.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TARGET = 1.2
MODES = ("no tracing", "off", "on")


def _agent(turns: int) -> Any:
    from agents import Agent, function_tool
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    @function_tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id}: shipped"

    steps = []
    for n in range(turns):
        steps.append(
            ModelStep(
                output=[function_call("lookup_order", {"order_id": f"A-{n}"}, call_id=f"c{n}")]
            )
        )
        steps.append(ModelStep(output=[assistant_message(f"Order A-{n} has shipped.")]))
    return Agent("support", model=ScriptedModel(steps, emit_traces=True), tools=[lookup_order])


async def _turns(mode: str, store: Any, session_id: str, turns: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds for ``turns`` turns in ``mode`` (with the spans' writes,
    when on)."""
    from agents import RunConfig, Runner
    from agents.tracing import set_trace_processors

    from turnstore import StructuredSession, tracing

    if mode == "on":
        set_trace_processors([tracing.install()])
    else:
        tracing.uninstall()
        set_trace_processors([])
    config = RunConfig(tracing_disabled=mode == "no tracing")
    agent = _agent(turns)
    session = StructuredSession(session_id, store)
    start, cpu = time.perf_counter(), time.process_time()
    for n in range(turns):
        await Runner.run(agent, f"Where is order A-{n}?", session=session, run_config=config)
    if mode == "on":
        await tracing.aflush()
    elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    if mode == "on":
        spans = await store.spans(session_id=session_id)
        assert len(spans) >= 4 * turns, "every turn's spans are stored"
    return elapsed, used


Figures = dict[str, dict[str, list[float]]]
"""Milliseconds per turn, by clock ("wall", "cpu") and mode, one figure per round."""


async def bench(rounds: int, turns: int, directory: Path, log: Any) -> Figures:
    """Milliseconds per turn of each mode, one figure per round and clock."""
    from agents.tracing import set_trace_processors, set_tracing_disabled

    from turnstore import Store, tracing

    set_tracing_disabled(False)
    per_turn: Figures = {clock: {mode: [] for mode in MODES} for clock in ("wall", "cpu")}
    async with Store.open(directory / "tracing.db") as store:
        await _turns("off", store, "warm-up", 5)  # imports, the schema, the SDK's caches
        for round_ in range(rounds):
            order = MODES if round_ % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                wall, cpu = await _turns(mode, store, f"{mode}-{round_}", turns)
                per_turn["wall"][mode].append(wall / turns * 1000)
                per_turn["cpu"][mode].append(cpu / turns * 1000)
            log(
                f"round {round_ + 1}/{rounds}: "
                + ", ".join(f"{mode} {per_turn['cpu'][mode][-1]:.2f} ms CPU" for mode in MODES)
            )
    tracing.uninstall()
    set_trace_processors([])
    return per_turn


def report(per_turn: Figures) -> tuple[str, bool]:
    """The table of figures and whether the target is met (the median CPU ratio)."""
    lines = ["clock mode          ms/turn: min / median / max"]
    met = True
    for clock, modes in per_turn.items():
        for mode in MODES:
            values = modes[mode]
            lines.append(
                f"{clock:<5} {mode:<13} {min(values):7.2f} / {statistics.median(values):7.2f} /"
                f" {max(values):7.2f}"
            )
        ratios = [on / off for on, off in zip(modes["on"], modes["off"], strict=True)]
        median = statistics.median(ratios)
        if clock == "cpu":
            met = median <= TARGET
        lines.append(
            f"{clock:<5} on / off      ratio:   {min(ratios):.3f} / {median:.3f} /"
            f" {max(ratios):.3f}"
        )
    lines.append(f"target: median CPU ratio <= {TARGET}: {'met' if met else 'MISSED'}")
    return "\n".join(lines), met


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the benchmark."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="rounds of each mode")
    parser.add_argument("--turns", type=int, default=20, help="turns per round and mode")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory() as directory:
        per_turn = asyncio.run(bench(args.rounds, args.turns, Path(directory), log))
    table, _ = report(per_turn)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

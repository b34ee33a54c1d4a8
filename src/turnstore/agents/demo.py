"""A scripted agent conversation written through turnstore, then read back with plain SQL.

``python -m turnstore.agents.demo [--db demo.db]``. With no ``OPENAI_API_KEY`` the model is
the SDK's ``ScriptedModel`` (no network, same answers every time); with a key, a real model answers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

from ..errors import InvalidOperationError, TurnstoreError
from .session import StructuredSession

__all__ = ["main", "run_demo"]

QUESTIONS = [
    "What's the weather in Paris?",
    "And in Tokyo? Convert it to Fahrenheit.",
    "I need help with a refund for order 1234.",
]


def _scripted_model() -> Any:
    from agents import Usage, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    set_tracing_disabled(True)  # nowhere to send traces without a key
    return ScriptedModel(
        default_usage=Usage(requests=1, input_tokens=120, output_tokens=24, total_tokens=144),
        steps=[
            [function_call("get_weather", {"city": "Paris"}, call_id="call_paris")],
            [assistant_message("It is 18°C and sunny in Paris.", item_id="msg_1")],
            [
                function_call("get_weather", {"city": "Tokyo"}, call_id="call_tokyo"),
                function_call("to_fahrenheit", {"celsius": 22}, call_id="call_f"),
            ],
            [assistant_message("Tokyo is 22°C, which is 71.6°F.", item_id="msg_2")],
            [function_call("transfer_to_refunds_agent", {}, call_id="call_handoff")],
            [assistant_message("Refund for order 1234 is on its way.", item_id="msg_3")],
        ],
    )


def _agents(model: Any) -> Any:
    from agents import Agent, function_tool

    @function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return {"Paris": "18°C, sunny", "Tokyo": "22°C, cloudy"}.get(city, "unknown")

    @function_tool
    def to_fahrenheit(celsius: float) -> str:
        """Convert Celsius to Fahrenheit."""
        return f"{celsius * 9 / 5 + 32:.1f}°F"

    refunds = Agent(name="refunds_agent", instructions="Handle refunds.", model=model)
    return Agent(
        name="assistant",
        instructions="Answer briefly; hand refunds to the refunds agent.",
        model=model,
        tools=[get_weather, to_fahrenheit],
        handoffs=[refunds],
    )


# The demo marks the session it writes, so that a second run replaces its own session and
# nothing else: a session of that id without the mark belongs to someone.
MARK = {"written_by": "turnstore demo"}


async def run_demo(db: str, session_id: str = "demo", *, force: bool = False) -> None:
    """Run the demo conversation into ``db`` (a path or URL) as ``session_id``.

    A session of that id that an earlier demo wrote is replaced; any other is refused with
    ``InvalidOperationError`` unless ``force``.
    """
    from agents import Runner

    model: Any = None if os.environ.get("OPENAI_API_KEY") else _scripted_model()
    agent = _agents(model)
    session = StructuredSession(session_id, db, metadata=MARK)
    try:
        info = await session.info()
        if info is not None and not force and info.metadata != MARK:
            raise InvalidOperationError(
                f"session {session_id!r} exists and was not written by the demo: the demo "
                "replaces only its own (name another with --session, or replace it with --force)"
            )
        await session.clear_session()
        for question in QUESTIONS:
            result = await Runner.run(agent, question, session=session)
            print(f"user: {question}\nagent: {result.final_output}\n")
    finally:
        await session.aclose()


def _print_rows(conn: sqlite3.Connection, title: str, query: str) -> None:
    cursor = conn.execute(query)
    names = [d[0] for d in cursor.description]
    rows = [[("" if v is None else str(v)) for v in row] for row in cursor.fetchall()]
    widths = [min(40, max([len(n)] + [len(r[i]) for r in rows])) for i, n in enumerate(names)]
    print(f"{title}\n  {query.strip()}")
    print("  " + " | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)))
    for row in rows:
        print("  " + " | ".join(v[:w].ljust(w) for v, w in zip(row, widths, strict=True)))
    print()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry: run the demo and print its ``runs`` and ``tool_calls`` rows."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", default="demo.db", help="SQLite file to write (default demo.db)")
    parser.add_argument(
        "--force", action="store_true", help="Replace a 'demo' session the demo did not write"
    )
    args = parser.parse_args(argv)
    try:
        asyncio.run(run_demo(args.db, force=args.force))
    except TurnstoreError as exc:
        parser.exit(1, f"error: {exc}\n")
    print(f"Stored in {Path(args.db).resolve()}. Plain SQL over it:\n")
    with sqlite3.connect(args.db) as conn:
        _print_rows(
            conn,
            "Each user message with its answer:",
            "SELECT id, user_message, assistant_message, total_tokens FROM runs ORDER BY id",
        )
        _print_rows(
            conn,
            "Every tool call with its arguments and output:",
            "SELECT run_id, tool_name, kind, arguments, output, status FROM tool_calls ORDER BY id",
        )


if __name__ == "__main__":
    main()

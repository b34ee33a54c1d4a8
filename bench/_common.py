"""Shared helpers for turnstore's benchmarks: realistic SDK items, timing, tables, targets.

Every benchmark compares *contenders* (turnstore on some backend, the SDK's own sessions) on
the same items, in one process. A contender is a name and a factory of fresh, empty databases;
a database opens SDK ``Session`` objects on itself and may offer a bulk ``fill`` to build large
histories quickly (the history is set-up, not what is measured). The measuring functions take
sessions, not a particular class, so the same code serves SQLite, Postgres or any ``Session``.

Items are the exact shapes the Agents SDK's ``Runner`` writes for a turn with one function
tool (checked against a real ``Runner`` + ``agents.testing.ScriptedModel`` run in
``tests/test_bench_smoke.py``): three ``add_items`` calls per turn,

1. ``[{"content": question, "role": "user"}]``
2. ``[function_call, function_call_output]``
3. ``[assistant message]``
"""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

Item = dict[str, Any]
Turn = list[list[Item]]
"""The ``add_items`` batches of one SDK turn, in the order the Runner writes them."""

ITEMS_PER_TURN = 4

# ---------------------------------------------------------------------------------------------
# Items


def sdk_turn(
    question: str,
    *,
    tool: str,
    arguments: dict[str, Any],
    output: str,
    answer: str,
    call_id: str,
    message_id: str,
) -> Turn:
    """One turn as the SDK writes it to a session: user input, tool call + output, answer.

    Built with the SDK's own helpers, so the keys, their order and the value types are the
    ones a real ``Runner.run`` stores.
    """
    from agents.items import ItemHelpers
    from agents.testing import assistant_message, function_call
    from openai.types.responses import ResponseFunctionToolCall

    call = function_call(tool, arguments, call_id=call_id)
    assert isinstance(call, ResponseFunctionToolCall)
    return [
        [dict(item) for item in ItemHelpers.input_to_new_input_list(question)],
        [
            call.model_dump(exclude_unset=True),
            dict(ItemHelpers.tool_call_output_item(call, output)),
        ],
        [assistant_message(answer, item_id=message_id).model_dump(exclude_unset=True)],
    ]


_VOCABULARY = """
order refund invoice shipping account password delivery weather forecast flight hotel booking
meeting calendar report revenue quarter customer ticket priority status update database query
latency error timeout retry payment card address schedule project budget review deadline summary
analysis trend growth region product inventory warehouse supplier contract renewal subscription
plan upgrade discount coupon café naïve résumé Zürich
"""
_WORDS = tuple(_VOCABULARY.split())
_TOOLS = ("get_weather", "lookup_order", "search_docs", "create_ticket", "get_calendar")


def _sentences(count: int) -> tuple[str, ...]:
    rng = random.Random(12345)
    out = []
    for _ in range(count):
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 18)))
        out.append(text[0].upper() + text[1:] + ".")
    return tuple(out)


# Texts are drawn from a fixed pool of sentences: generating word by word would make building
# a 20,000-item history take seconds.
_SENTENCES = _sentences(4_000)


def _text(rng: random.Random, low: int, high: int) -> str:
    """A few sentences, about ``low``-``high`` words in all (12 words a sentence on average)."""
    count = max(1, rng.randint(low, high) // 12)
    return " ".join(rng.choices(_SENTENCES, k=count))


def make_turn(index: int, *, seed: int = 0, question: str | None = None) -> Turn:
    """A realistic turn: a 10-50 word question, a tool call and its 20-150 word output,
    and a 30-200 word answer (about 1.5 KB of JSON). Deterministic in ``(seed, index)``."""
    rng = random.Random(seed * 1_000_003 + index)
    tool = rng.choice(_TOOLS)
    return sdk_turn(
        question if question is not None else _text(rng, 10, 50),
        tool=tool,
        arguments={
            "query": " ".join(rng.choices(_WORDS, k=rng.randint(2, 5))),
            "limit": rng.randint(1, 20),
            "verbose": False,
        },
        output=_text(rng, 20, 150),
        answer=_text(rng, 30, 200),
        call_id=f"call_{seed}_{index}_{rng.getrandbits(32):08x}",
        message_id=f"msg_{seed}_{index}_{rng.getrandbits(32):08x}",
    )


def make_turns(count: int, *, seed: int = 0, start: int = 0) -> list[Turn]:
    """``count`` consecutive turns (indices ``start`` …)."""
    return [make_turn(start + i, seed=seed) for i in range(count)]


def flatten(turns: Iterable[Turn]) -> list[Item]:
    """The items of ``turns`` in the order they are written."""
    return [item for turn in turns for batch in turn for item in batch]


def history(n_items: int, *, seed: int = 0) -> list[Item]:
    """A history of ``n_items`` items (whole turns: ``n_items`` is a multiple of 4).

    Built once per (size, seed) and shared: the list is new, the items are not; do not modify
    them.
    """
    if n_items % ITEMS_PER_TURN:
        raise ValueError(f"a history is whole turns: {n_items} is not a multiple of 4")
    return list(_history(n_items, seed))


@functools.lru_cache(maxsize=16)
def _history(n_items: int, seed: int) -> tuple[Item, ...]:
    return tuple(flatten(make_turns(n_items // ITEMS_PER_TURN, seed=seed)))


# ---------------------------------------------------------------------------------------------
# Contenders and databases


async def close_quietly(obj: Any) -> None:
    """Close a session or store: ``aclose()`` when it has one, else ``close()`` (sync or not)."""
    closer = getattr(obj, "aclose", None) or getattr(obj, "close", None)
    if closer is None:
        return
    result = closer()
    if inspect.isawaitable(result):
        await result


def split_runs(items: Sequence[Item]) -> list[list[Item]]:
    """``items`` cut before every user message: one list per run (the first may extend)."""
    runs: list[list[Item]] = []
    for item in items:
        if not runs or item.get("role") == "user":
            runs.append([])
        runs[-1].append(item)
    return runs


async def fill_store(
    store: Any, session_id: str, items: Sequence[Item], chunk: int = 4_000
) -> None:
    """Append ``items`` to a turnstore session through ``Store.add_runs``, the bulk path.

    Each call of ``add_runs`` (about ``chunk`` items, one transaction) hangs its runs below the
    session's head and moves the head to its last run: the same tree ``add_items`` builds.
    """
    from turnstore import NewRun

    runs = split_runs(items)
    per_call = max(1, chunk // ITEMS_PER_TURN)
    for start in range(0, len(runs), per_call):
        info = await store.session(session_id)
        head = info.head_run_id if info is not None else None
        batch = [
            NewRun(run, parent_id=head) if index == 0 else NewRun(run, parent=index - 1)
            for index, run in enumerate(runs[start : start + per_call])
        ]
        await store.add_runs(session_id, batch, head=len(batch) - 1)


def settle(path: str | Path) -> None:
    """Fold a SQLite file's write-ahead log into the database after a bulk fill.

    A fill leaves tens of megabytes in the WAL; its checkpoint (turnstore's runs on a thread of
    its own, the SDK's inside a later commit) would otherwise fall into the first timed calls.
    Waits for any checkpoint under way (up to 60 s).
    """
    conn = sqlite3.connect(path, timeout=60)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


@dataclass
class Database:
    """One fresh database of one contender.

    ``open_session(session_id)`` returns an SDK ``Session`` on it (the database closes every
    session it opened). ``fill(session_id, items)`` appends a large history quickly; without it
    the history is written through ``Session.add_items`` in chunks.
    """

    open_session: Callable[[str], Any]
    fill: Callable[[str, Sequence[Item]], Awaitable[None]] | None = None
    on_close: Callable[[], Awaitable[None]] | None = None
    path: Path | None = None  # the database file, where one holds it
    sessions: list[Any] = field(default_factory=list)

    def session(self, session_id: str) -> Any:
        """An SDK ``Session`` for ``session_id`` on this database."""
        session = self.open_session(session_id)
        self.sessions.append(session)
        return session

    async def add_history(self, session_id: str, items: Sequence[Item], chunk: int = 4000) -> None:
        """Append ``items`` to ``session_id`` by the fastest path the contender offers."""
        if self.fill is not None:
            await self.fill(session_id, items)
            return
        session = self.session(session_id)
        for start in range(0, len(items), chunk):
            await session.add_items(list(items[start : start + chunk]))

    async def close(self) -> None:
        """Close every session opened here, then the database itself."""
        for session in self.sessions:
            await close_quietly(session)
        self.sessions.clear()
        if self.on_close is not None:
            await self.on_close()


@dataclass(frozen=True)
class Contender:
    """A named factory of fresh, empty databases (``create(label)``, label names the file)."""

    name: str
    create: Callable[[str], Database]


D = TypeVar("D", bound=Database)


async def open_all(
    contenders: Sequence[Contender],
    label: str,
    items: Sequence[Item],
    kind: type[D] = Database,  # type: ignore[assignment]
) -> dict[str, D]:
    """A fresh database of each contender (by name), each holding ``items`` as history.

    ``kind`` is the Database subclass the contenders create. If one fails to open, those
    already open are closed.
    """
    dbs: dict[str, D] = {}
    try:
        for contender in contenders:
            db = contender.create(label)
            assert isinstance(db, kind)
            dbs[contender.name] = db
            if items:
                await db.add_history("bench", items)
    except BaseException:
        await close_all(dbs)
        raise
    return dbs


async def close_all(dbs: Mapping[Any, Database]) -> None:
    """Close every database of ``dbs``."""
    for db in dbs.values():
        await db.close()


# ---------------------------------------------------------------------------------------------
# Timing


@dataclass
class Timing:
    """The samples of one measurement, in nanoseconds: wall-clock time, and the CPU time of
    the whole process (every thread: the sessions work on worker threads) over the same call.

    Wall time is what the targets are about; CPU time leaves out the waiting for a busy
    machine's cores (and for the disk), so its ratios stay steady when other work shares the
    machine.
    """

    samples_ns: list[int]
    cpu_samples_ns: list[int] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        """The median wall time, in milliseconds."""
        return statistics.median(self.samples_ns) / 1e6

    @property
    def cpu_median_ms(self) -> float | None:
        """The median CPU time, in milliseconds (None when not recorded)."""
        return statistics.median(self.cpu_samples_ns) / 1e6 if self.cpu_samples_ns else None

    @property
    def min_ms(self) -> float:
        """The fastest sample, in milliseconds."""
        return min(self.samples_ns) / 1e6

    @property
    def max_ms(self) -> float:
        """The slowest sample, in milliseconds."""
        return max(self.samples_ns) / 1e6


Action = Callable[[], Awaitable[Any]]
K = TypeVar("K", bound=Hashable)


async def measure_side_by_side(
    actions: Mapping[K, Action],
    *,
    repeats: int,
    warmup: int = 1,
    between: Mapping[K, Action] | None = None,
) -> dict[K, Timing]:
    """Time each ``await actions[key]()`` ``repeats`` times, after ``warmup`` untimed rounds.

    Keys name what is timed: a contender, or a (case, contender) pair. The actions take turns
    (one call each per round, the order rotating every round), so that a machine that gets
    busier or quieter during the run weighs on all of them alike and their ratios stay
    meaningful. ``between[key]`` runs untimed before each call of ``key``
    (to reset state, e.g. switch a branch back). The garbage collector is paused for the whole
    loop, as ``timeit`` does, so that a collection triggered by set-up garbage is not charged
    to whichever call happens to run.
    """
    keys = list(actions)
    timings = {key: Timing([], []) for key in keys}
    # No gc.collect() first: with the SDK imported a full collection takes ~0.2 s, and
    # nothing collected now would be collected inside the loop anyway.
    gc.disable()
    try:
        for round_ in range(warmup + repeats):
            shift = round_ % len(keys) if keys else 0
            for key in keys[shift:] + keys[:shift]:
                if between is not None and key in between:
                    await between[key]()
                cpu = time.process_time_ns()
                start = time.perf_counter_ns()
                await actions[key]()
                elapsed = time.perf_counter_ns() - start
                cpu = time.process_time_ns() - cpu
                if round_ >= warmup:
                    timings[key].samples_ns.append(elapsed)
                    timings[key].cpu_samples_ns.append(cpu)
    finally:
        gc.enable()
    return timings


async def measure(
    action: Action,
    *,
    repeats: int,
    warmup: int = 1,
    between: Action | None = None,
) -> Timing:
    """Time one action alone (see ``measure_side_by_side``)."""
    timings = await measure_side_by_side(
        {"": action},
        repeats=repeats,
        warmup=warmup,
        between=None if between is None else {"": between},
    )
    return timings[""]


async def write_turns(session: Any, turns: Sequence[Turn]) -> None:
    """Write turns as the Runner does: each batch of each turn, one ``add_items`` call each."""
    for turn in turns:
        for batch in turn:
            await session.add_items(batch)


def two_batches(turn: Turn) -> Turn:
    """``turn`` as the Runner writes it when the model's answer comes with the tool's output
    (the two-batch form): the input, then everything else in one ``add_items``."""
    return [turn[0], [item for batch in turn[1:] for item in batch]]


def turn_writer(
    session: Any, *, count: int, seed: int = 99, start: int = 10**6, batches: int = 3
) -> Action:
    """An action that writes the next of ``count`` new SDK turns (three ``add_items`` calls,
    or two with ``batches=2``: see ``two_batches``).

    Each call writes a new turn, so the history grows by 4 items per call: negligible next to
    the histories measured.
    """
    made = make_turns(count, seed=seed, start=start)
    turns = iter(made if batches == 3 else [two_batches(turn) for turn in made])

    async def one_turn() -> None:
        await write_turns(session, [next(turns)])

    return one_turn


def reader(session: Any, *, limit: int | None, expect: int) -> Action:
    """An action that calls ``session.get_items(limit)`` and checks it got ``expect`` items."""

    async def read() -> None:
        items = await (session.get_items() if limit is None else session.get_items(limit=limit))
        if len(items) != expect:
            raise AssertionError(f"get_items({limit}) returned {len(items)} items, not {expect}")

    return read


def floor_reader(path: Path, session_id: str, *, expect: int) -> Action:
    """The physical floor of a full read: fetch a session's stored JSON from a turnstore file
    (one indexed query, inline: no thread hop) and decode it with one msgspec call.

    What no session store can beat on this machine: the database's fetch and one C decode,
    with no per-item Python work at all.
    """
    import msgspec

    decode = msgspec.json.Decoder().decode
    conn = sqlite3.connect(path, check_same_thread=False)
    sql = """SELECT CAST(data AS BLOB) FROM items WHERE session_id = ?
             ORDER BY run_id, position"""

    async def read() -> None:
        data = [value for (value,) in conn.execute(sql, (session_id,))]
        items = decode(b"[" + b",".join(data) + b"]")
        if len(items) != expect:
            raise AssertionError(f"the floor read {len(items)} items, not {expect}")

    return read


# ---------------------------------------------------------------------------------------------
# Results, targets and the printed table


@dataclass
class Result:
    """One measured figure: ``case`` (e.g. ``"write turn @1000"``) for one contender."""

    case: str
    contender: str
    timing: Timing
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly form (medians and raw samples)."""
        return {
            "case": self.case,
            "contender": self.contender,
            "median_ms": self.timing.median_ms,
            "min_ms": self.timing.min_ms,
            "max_ms": self.timing.max_ms,
            "cpu_median_ms": self.timing.cpu_median_ms,
            "samples_ns": self.timing.samples_ns,
            "cpu_samples_ns": self.timing.cpu_samples_ns,
            "note": self.note,
        }


class Results:
    """The figures of one benchmark run, looked up by (case, contender)."""

    def __init__(self) -> None:
        self.rows: list[Result] = []

    def add(self, case: str, contender: str, timing: Timing, note: str = "") -> Result:
        """Record a figure."""
        result = Result(case, contender, timing, note)
        self.rows.append(result)
        return result

    def median_ms(self, case: str, contender: str, *, cpu: bool = False) -> float | None:
        """The median (wall, or CPU) of a recorded figure, or None when it was not measured."""
        for row in self.rows:
            if row.case == case and row.contender == contender:
                return row.timing.cpu_median_ms if cpu else row.timing.median_ms
        return None


@dataclass(frozen=True)
class Target:
    """A goal: ``ours`` divided by ``reference`` (a ratio) or ``ours`` alone (in ms), ≤ limit.

    ``ours`` and ``reference`` are (case, contender) pairs of recorded figures.
    """

    label: str
    ours: tuple[str, str]
    limit: float
    reference: tuple[str, str] | None = None

    def value(self, results: Results, *, cpu: bool = False) -> float | None:
        """The ratio (or the ms), from wall or CPU medians; None when a figure is missing."""
        ours = results.median_ms(*self.ours, cpu=cpu)
        if self.reference is None:
            return ours
        ref = results.median_ms(*self.reference, cpu=cpu)
        return None if ours is None or not ref else ours / ref

    def evaluate(self, results: Results) -> dict[str, Any]:
        """The target's value and verdict (on wall time; ``"n/a"`` when a figure is missing)."""
        value = self.value(results)
        verdict = "n/a" if value is None else ("PASS" if value <= self.limit else "MISS")
        return {
            "label": self.label,
            "ours": list(self.ours),
            "reference": list(self.reference) if self.reference else None,
            "ours_ms": results.median_ms(*self.ours),
            "reference_ms": results.median_ms(*self.reference) if self.reference else None,
            "value": value,
            "cpu_value": self.value(results, cpu=True),
            "unit": "x" if self.reference else "ms",
            "limit": self.limit,
            "verdict": verdict,
        }


def _fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [str(cells[0]).ljust(widths[0])]
        out += [str(c).rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def medians_table(results: Results, contenders: Sequence[str], *, cpu: bool = False) -> str:
    """Median milliseconds (wall, or CPU): one row per case, one column per contender."""
    cases: list[str] = []
    for row in results.rows:
        if row.case not in cases:
            cases.append(row.case)
    rows = [
        [case, *(_fmt_ms(results.median_ms(case, c, cpu=cpu)) for c in contenders)]
        for case in cases
    ]
    return format_table(["median cpu ms" if cpu else "median ms", *contenders], rows)


def targets_table(evaluated: Sequence[dict[str, Any]]) -> str:
    """Targets with ours / reference, the value, the limit and PASS / MISS."""
    rows = []
    for t in evaluated:
        unit = t["unit"]

        def shown(value: float | None, unit: str = unit) -> str:
            if value is None:
                return "-"
            return f"{value:.2f}x" if unit == "x" else f"{value:.3f} ms"

        limit = f"<= {t['limit']:g}x" if unit == "x" else f"<= {t['limit']:g} ms"
        rows.append(
            [
                t["label"],
                _fmt_ms(t["ours_ms"]),
                _fmt_ms(t["reference_ms"]) if t["reference"] else "",
                shown(t["value"]),
                limit,
                t["verdict"],
                shown(t["cpu_value"]),
            ]
        )
    return format_table(["target", "ours ms", "ref ms", "value", "target", "", "cpu value"], rows)


def environment() -> dict[str, Any]:
    """What the figures depend on: machine, Python, SQLite, package versions."""
    from importlib.metadata import PackageNotFoundError, version

    def pkg(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "openai-agents": pkg("openai-agents"),
        "turnstore": pkg("turnstore"),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    """Write a results file (creating its directory)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def run(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a benchmark's async ``main`` in a fresh event loop."""
    return asyncio.run(main())

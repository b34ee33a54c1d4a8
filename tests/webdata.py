"""The conversations the web viewer's tests look at, written by the real ``Runner``.

- ``demo``: the demo's scripted conversation (tool calls, a handoff), then turn 2 edited
  ("And in Osaka?") and continued, so that turn 2 is a fork whose second version is active.
- ``HOSTILE_ID``: a session whose id, messages and tool output hold markup and script.
- ``long``: ``LONG_TURNS`` plain question-and-answer turns, for paging.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents import Agent, Runner, Usage, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from builders import assistant, user
from turnstore import NewRun, Store, StructuredSession
from turnstore.agents.demo import _agents, run_demo

HOSTILE_ID = "hostile <b>id</b>/with slash?&#"
# Markup that would run script if the page ever put stored text into the DOM as HTML.
SCRIPT = "<script>window.__pwned = 1; alert('script ran')</script>"
IMG = "<img src=x onerror=\"window.__pwned = 2; alert('onerror ran')\">"
HOSTILE_OUTPUT = f"Page says: {SCRIPT} {IMG}"
HOSTILE_QUESTION = "Fetch <b>this</b> page & tell me <i>what</i> it says"
HOSTILE_ANSWER = f"It says {SCRIPT}"
LONG_TURNS = 35  # more than a page (30 turns)


@dataclass(frozen=True)
class Ids:
    """Run and tool call ids the tests link to."""

    tokyo_run: int  # turn 2, first version (inactive)
    osaka_run: int  # turn 2, second version (active)
    refund_run: int  # turn 3 on the Tokyo branch
    paris_run: int  # turn 1
    paris_call: int
    tokyo_call: int
    hostile_run: int
    hostile_call: int
    failing_call: int


def _usage() -> Usage:
    return Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)


async def _continue_after_edit(session: StructuredSession) -> None:
    model = ScriptedModel(
        default_usage=_usage(),
        steps=[
            [function_call("get_weather", {"city": "Osaka"}, call_id="call_osaka")],
            [assistant_message("I have no weather data for Osaka.", item_id="msg_osaka")],
        ],
    )
    await Runner.run(_agents(model), [], session=session, hooks=session.hooks)


async def _hostile(store: Store) -> None:
    @function_tool
    def fetch_page(url: str) -> str:
        """Fetch a web page."""
        return HOSTILE_OUTPUT

    @function_tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        raise RuntimeError(f"order {order_id} not found")

    model = ScriptedModel(
        default_usage=_usage(),
        steps=[
            [
                function_call(
                    "fetch_page", {"url": "https://example.test/<script>"}, call_id="call_page"
                ),
                function_call("lookup_order", {"order_id": "<img src=x>"}, call_id="call_order"),
            ],
            [assistant_message(HOSTILE_ANSWER, item_id="msg_hostile")],
        ],
    )
    agent = Agent(name="fetcher", model=model, tools=[fetch_page, lookup_order])
    session = StructuredSession(
        HOSTILE_ID, store, user_id="mallory", metadata={"<b>key</b>": "<i>value</i>"}
    )
    await Runner.run(agent, HOSTILE_QUESTION, session=session, hooks=session.hooks)


async def _long(store: Store) -> None:
    model = ScriptedModel(
        default_usage=_usage(),
        steps=[[assistant_message(f"Answer {i}.", item_id=f"a{i}")] for i in range(LONG_TURNS)],
    )
    agent = Agent(name="echo", model=model)
    session = StructuredSession("long", store)
    for i in range(LONG_TURNS):
        await Runner.run(agent, f"Question {i}?", session=session)


async def build(db: str) -> Ids:
    """Write the viewer's test conversations into the database ``db`` names."""
    set_tracing_disabled(True)
    await run_demo(db, "demo")
    store = Store.open(db)
    try:
        demo = StructuredSession("demo", store)
        first_path = await demo.runs()
        tokyo, refund = first_path[1], first_path[2]
        edited = await demo.edit(tokyo.id, "And in Osaka?")
        await _continue_after_edit(demo)
        await _long(store)
        await _hostile(store)
        await store.update_session("demo", user_id="alice", metadata={"team": "support"})
        calls = {call.call_id: call for call in await store.tool_calls(limit=None)}
    finally:
        await store.aclose()
    return Ids(
        tokyo_run=tokyo.id,
        osaka_run=edited.id,
        refund_run=refund.id,
        paris_run=calls["call_paris"].run_id,
        paris_call=calls["call_paris"].id,
        tokyo_call=calls["call_tokyo"].id,
        hostile_run=calls["call_page"].run_id,
        hostile_call=calls["call_page"].id,
        failing_call=calls["call_order"].id,
    )


# Sessions whose third turn was edited, for the writable viewer's forms; their ids need quoting
# in every URL the forms post to.
FORKED_ID = "forks/α & β?#"
FORKED_TURNS = 4


@dataclass(frozen=True)
class Forked:
    """A session of two branches: the first version (inactive) and the edit (active)."""

    session_id: str
    first_leaf: int  # the last of the FORKED_TURNS runs of the first version
    edited_leaf: int  # the edited third turn, the head


async def build_forked(db: str, session_id: str) -> Forked:
    """Write such a session into the database ``db`` names."""
    async with Store.open(db) as store:
        ids = await store.add_runs(
            session_id,
            [
                NewRun(
                    [user(f"Question {n}?"), assistant(f"Answer {n}.")],
                    parent=n - 1 if n else None,
                )
                for n in range(FORKED_TURNS)
            ],
            head=FORKED_TURNS - 1,
        )
        edited = await store.fork(session_id, ids[2], "Question 2, edited?")
    return Forked(session_id, first_leaf=ids[-1], edited_leaf=edited.id)


# Markup a search snippet may hold: each would make an element, run script or break out of an
# attribute if a page ever put a snippet in as HTML. PostgreSQL's ts_headline keeps some tags
# (<img>, <svg>) and drops others; SQLite's snippet() keeps all.
MARKUP = [
    '<img src=x onerror="window.__pwned = 1; alert(1)">',
    "<svg onload=\"window.__pwned = 2; alert(2)\"><circle r='9'/></svg>",
    '<a href="javascript:window.__pwned = 3; alert(3)">click me</a>',
    '"><img src=x onerror=window.__pwned=4;alert(4)>',
    "' autofocus onfocus='window.__pwned = 5' x='",
    "<script>window.__pwned = 6; alert(6)</script>",
    '<iframe srcdoc="<script>parent.__pwned = 7</script>"></iframe>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(8)>",
]
MARKUP_WORD = "zebra"  # in every message of the markup sessions, so that a search finds all


async def build_markup(db: str) -> None:
    """Write a session per ``MARKUP`` into the database ``db`` names: the markup between two
    ``MARKUP_WORD``s, asked and answered."""
    async with Store.open(db) as store:
        for n, markup in enumerate(MARKUP):
            text = f"{MARKUP_WORD} {markup} {MARKUP_WORD} pwned"
            await store.add_items(f"markup-{n}", [user(text), assistant(f"You said: {text}")])

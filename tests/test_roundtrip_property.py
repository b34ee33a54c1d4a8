"""Hypothesis: arbitrary JSON-compatible items come back equal, in order, key order kept.

One store per backend serves every example (a fresh session id each), so that the example
count stays useful while the suite stays fast.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import integers, items, scalars, text
from turnstore import Store, StructuredSession
from turnstore.core.codec import decode_data, decode_items, dumps_item
from turnstore.core.results import ItemRow

batches = st.lists(st.lists(items, max_size=4), min_size=1, max_size=4)


def same_shape(a: Any, b: Any) -> bool:
    """Equal, with the same types and the same key order at every level (NaN matches NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_shape(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_shape(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (a != a and b != b)  # NaN is the same as NaN here


_ids = itertools.count()


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(batches=batches)
def test_items_round_trip_in_order(
    shared_loop_store: tuple[asyncio.AbstractEventLoop, Store], batches: list[list[Any]]
) -> None:
    loop, store = shared_loop_store
    session = StructuredSession(f"prop-{next(_ids)}", store)
    written = [item for batch in batches for item in batch]

    async def check() -> None:
        for batch in batches:
            await session.add_items(batch)
        got = await session.get_items()
        assert got == written
        assert same_shape(got, written)
        # Byte for byte what json.dumps made of the input: the SDK's fingerprints match.
        assert [json.dumps(i) for i in got] == [json.dumps(i) for i in written]
        assert [json.dumps(i, sort_keys=True) for i in got] == [
            json.dumps(i, sort_keys=True) for i in written
        ]
        if written:
            tail = len(written) // 2 + 1
            assert same_shape(await session.get_items(tail), written[-tail:])
            assert same_shape(await session.pop_item(), written[-1])

    loop.run_until_complete(check())


# NaN too: json.dumps writes it, so the decoder must read it back (compared via json.dumps).
any_json = st.recursive(
    scalars | st.floats() | integers,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(item=st.dictionaries(text, any_json, max_size=6), as_bytes=st.booleans())
def test_stored_json_decodes_exactly_as_json_loads(item: dict[str, Any], as_bytes: bool) -> None:
    # Items are decoded by msgspec, with json for what msgspec refuses: the result must be what
    # json.loads gives, whatever the stored text holds (big integers, -0.0, subnormal floats,
    # NaN, infinities, escapes, lone surrogates) and whether the backend hands str or bytes.
    data = dumps_item(item)
    stored = data.encode("utf-8") if as_bytes else data
    [decoded] = decode_data([stored], "s")
    assert decode_items([ItemRow(1, stored)], "s") == [decoded]
    expected = json.loads(data)
    assert same_shape(decoded, expected)
    assert json.dumps(decoded) == json.dumps(expected) == json.dumps(item)

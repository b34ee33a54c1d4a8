"""Hypothesis strategies of what the SDK may hand a session: JSON-compatible items."""

from __future__ import annotations

from hypothesis import strategies as st

# Text as the SDK may hand it over: any unicode, including NUL and lone surrogates.
text = st.text(max_size=20)
# NaN is not equal to itself; infinities are kept, as json.dumps (and SQLiteSession) keep them.
scalars = st.none() | st.booleans() | st.floats(allow_nan=False) | text
# Beyond 64 bits too: JSON has no integer limit and the item is stored verbatim.
integers = st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
json_values = st.recursive(
    scalars | integers,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=12,
)
items = st.dictionaries(text, json_values, max_size=5) | st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": json_values}
)

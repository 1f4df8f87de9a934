"""Hypothesis strategies shared by the wire-mapping properties (OpenAI, Gemini)."""

from __future__ import annotations

from hypothesis import strategies as st

#: Any JSON value, small: what tool arguments and results are made of.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
#: A tool call's arguments: a JSON object.
arg_objects = st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=4)
#: Tool and function names as models write them.
names = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)

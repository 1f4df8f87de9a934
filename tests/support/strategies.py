"""Hypothesis strategies shared by the test folders: JSON values, tool arguments, names."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_of(
    scalars: st.SearchStrategy[Any],
    *,
    keys: st.SearchStrategy[str] | None = None,
    max_leaves: int = 8,
    list_size: int = 3,
    dict_size: int | None = 3,
) -> st.SearchStrategy[Any]:
    """JSON values built from ``scalars``: lists and objects (``keys`` as their keys), nested.

    Each property says what its leaves are (the numbers and strings its code meets) and how big
    a value may grow; the shape of the nesting is the same everywhere.
    """
    names = st.text(max_size=6) if keys is None else keys
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=list_size) | st.dictionaries(names, inner, max_size=dict_size)
        ),
        max_leaves=max_leaves,
    )


#: Any JSON value, small: what tool arguments and results are made of.
json_values = json_of(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=12)
)
#: A tool call's arguments: a JSON object.
arg_objects = st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=4)
#: Tool and function names as models write them.
names = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)

"""``accepts_keyword`` answers exactly as ``inspect.signature`` does, for any signature."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from hypothesis import given, strategies as st

from ollm_lite.providers._accepts_keyword import accepts_keyword

NAMES = ("cancel", "model", "request", "timeout")


def by_inspect(func: Callable[..., Any], name: str) -> bool:
    """The reference: what ``inspect.signature`` says binds ``name=`` by keyword."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == name and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        for p in parameters
    )


@st.composite
def signatures(draw: st.DrawFn) -> str:
    """Parameter lists such as ``a, /, cancel=None, *args, model, **kw``."""
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    cuts = sorted(draw(st.lists(st.integers(0, len(names)), min_size=2, max_size=2)))
    positional_only, positional, keyword_only = (
        names[: cuts[0]],
        names[cuts[0] : cuts[1]],
        names[cuts[1] :],
    )
    parts = list(positional_only) + (["/"] if positional_only else []) + list(positional)
    if draw(st.booleans()):
        parts.append("*args")
    elif keyword_only:
        parts.append("*")
    parts += keyword_only
    if draw(st.booleans()):
        parts.append("**options")
    return ", ".join(parts)


def _compile(params: str, *, method: bool) -> Any:
    namespace: dict[str, Any] = {}
    head = f"self, {params}" if method and params else ("self" if method else params)
    exec(f"def f({head}):\n    pass\n", namespace)
    return namespace["f"]


@given(signatures(), st.sampled_from(NAMES))
def test_plain_functions_and_bound_methods_read_as_inspect_reads_them(
    params: str, name: str
) -> None:
    function = _compile(params, method=False)
    assert accepts_keyword(function, name) == by_inspect(function, name), params
    holder = type("Holder", (), {"f": _compile(params, method=True)})()
    assert accepts_keyword(holder.f, name) == by_inspect(holder.f, name), params


def test_a_bound_first_parameter_is_not_a_keyword() -> None:
    class Odd:
        def method(cancel, model):  # type: ignore[no-untyped-def]
            """``cancel`` is the instance here."""

    assert not accepts_keyword(Odd().method, "cancel")
    assert accepts_keyword(Odd.method, "cancel")  # unbound: an ordinary parameter


def test_other_callables_are_read_by_inspect() -> None:
    def takes(model: str, *, cancel: object = None) -> None:
        """A provider method."""

    @functools.wraps(takes)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        """Hides its signature behind ``__wrapped__``: inspect reads ``takes``."""

    class Callable_:
        def __call__(self, cancel: object = None) -> None:
            """A callable object."""

    for func in (wrapper, functools.partial(takes, "m"), Callable_(), len, dict.get, print):
        assert accepts_keyword(func, "cancel") == by_inspect(func, "cancel"), func
    assert not accepts_keyword(wrapper, "timeout")

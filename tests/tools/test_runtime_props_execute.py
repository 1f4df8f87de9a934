"""``ToolRegistry.execute`` never raises, whatever the tool raises or returns.

Tools raise exceptions of every kind (``BaseException`` subclasses included) whose ``__str__``
and ``__repr__`` may themselves raise, and return values JSON cannot carry (cycles, NaN, huge
integers, odd keys, objects whose hooks raise, malformed ``ToolResult`` s). Every call ends in a
``ToolResult`` whose ``to_json()`` is valid JSON and which becomes a tool message.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings, strategies as st

from ollm_lite.errors import Cancelled, OllmError
from ollm_lite.tools import ToolRegistry, tool
from ollm_lite.types import ErrorInfo, Message, ToolCall, ToolResult

EXAMPLES = 1000


class Boom(Exception):
    """Raised by the hooks below."""


def hostile_exception(
    base: type[BaseException], str_raises: type[BaseException] | None, repr_raises: bool
) -> BaseException:
    """An exception of ``base`` whose ``__str__`` (and maybe ``__repr__``) raise."""

    def broken_str(self: BaseException) -> str:
        if str_raises is None:
            return "plain message"
        raise str_raises()

    def broken_repr(self: BaseException) -> str:
        raise Boom()

    namespace: dict[str, Any] = {"__str__": broken_str}
    if repr_raises:
        namespace["__repr__"] = broken_repr
    hostile = type("Hostile", (base,), namespace)
    return hostile("message") if issubclass(base, OllmError) else hostile()


class NoStr:
    def __str__(self) -> str:
        raise Boom()

    __repr__ = __str__


class BadItems(dict[str, Any]):
    def items(self) -> Any:
        raise Boom()

    def __iter__(self) -> Any:
        raise Boom()


class Color(enum.Enum):
    RED = NoStr()


@dataclasses.dataclass
class Holder:
    value: Any


def deep() -> list[Any]:
    nested: list[Any] = []
    for _ in range(100_000):
        nested = [nested]
    return nested


def cyclic() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


odd_values: list[Callable[[], Any]] = [
    object,
    NoStr,
    cyclic,
    lambda: float("nan"),
    lambda: {"x": float("inf")},
    lambda: 10**5000,
    lambda: {(1, 2): "tuple key"},
    lambda: {NoStr(): 1},
    lambda: BadItems(a=1),
    lambda: Color.RED,
    lambda: Holder(NoStr()),
    lambda: Holder(cyclic()),
    lambda: (i for i in range(3)),
    deep,
    lambda: ToolResult(ok="yes", data=1),  # type: ignore[arg-type]
    lambda: ToolResult(ok=True, data=NoStr()),
    lambda: ToolResult(ok=True, data=cyclic()),
    lambda: ToolResult(ok=False, error="not an ErrorInfo"),  # type: ignore[arg-type]
    lambda: ToolResult(ok=False, error=ErrorInfo(1, 2)),  # type: ignore[arg-type]
    lambda: ToolResult(ok=False, error=ErrorInfo("m", "C", {"d": NoStr()})),
    lambda: ToolResult(ok=False, error=ErrorInfo("m", "C", "details")),  # type: ignore[arg-type]
    lambda: ToolResult(ok=False),
]

exception_bases = st.sampled_from(
    [Exception, ValueError, RuntimeError, OSError, KeyError, SystemExit, GeneratorExit,
     BaseException, ArithmeticError, RecursionError, MemoryError, Cancelled, OllmError]
)  # fmt: skip
str_failures = st.sampled_from([None, Boom, RuntimeError, SystemExit, GeneratorExit, TypeError])

raises = st.builds(hostile_exception, exception_bases, str_failures, st.booleans()).map(
    lambda exc: ("raise", exc)
)
returns = st.one_of(
    st.sampled_from(odd_values).map(lambda make: ("return", make())),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
            | st.tuples(inner, inner)
            | st.frozensets(st.integers(), max_size=3)
        ),
        max_leaves=8,
    ).map(lambda value: ("return", value)),
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.one_of(raises, returns), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
def test_execute_never_raises_and_every_result_serialises(
    behaviour: tuple[str, Any], args: dict[str, Any]
) -> None:
    action, payload = behaviour

    @tool(name="hostile")
    def hostile(**kwargs: Any) -> Any:
        """Raises or returns what hypothesis chose."""
        if action == "raise":
            raise payload
        return payload

    call = ToolCall.from_arguments("c1", "hostile", args)
    result = ToolRegistry([hostile]).execute(call)
    assert isinstance(result, ToolResult)
    decoded = json.loads(result.to_json())
    assert decoded["ok"] is result.ok
    if not result.ok:
        assert isinstance(result.error, ErrorInfo | None)
        if result.error is not None:
            assert isinstance(result.error.message, str) and isinstance(result.error.code, str)
    if action == "raise":
        assert not result.ok
    message = Message.tool(result, call)
    assert json.loads(message.text)["ok"] is result.ok

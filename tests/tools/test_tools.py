"""``@tool`` schemas, docstring parsing and ``ToolRegistry.execute``'s results and error codes.

Every claim is checked on real functions run through the real registry: the schema a function
gets, the arguments it receives (types included), and the ``ToolResult`` the model would see.
"""

from __future__ import annotations

import enum
import json
import logging
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict, Union

import pytest

from ollm_lite.errors import BadResponse, Cancelled
from ollm_lite.tools import Tool, ToolDefinitionError, ToolRegistry, tool
from ollm_lite.tools._docstrings import parse_docstring
from ollm_lite.tools._validation import validate_arguments
from ollm_lite.types import ErrorInfo, ToolCall, ToolResult, ToolSchema


def call(name: str, args: dict[str, Any] | str | None = None, id: str = "c1") -> ToolCall:
    return ToolCall.from_arguments(id, name, {} if args is None else args)


def run(fn: Any, args: dict[str, Any] | str | None = None, **kw: Any) -> ToolResult:
    registry = ToolRegistry([fn])
    name = registry.names()[0]
    return registry.execute(call(name, args), **kw)


def code(result: ToolResult) -> str | None:
    return result.error.code if result.error else None


# --------------------------------------------------------------------------- types for hints


class Unit(enum.Enum):
    C = "c"
    F = "f"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Point:
    """A point on the map.

    Attributes:
        x: East-west position.
        y: North-south position.
    """

    x: float
    y: float = 0.0


@dataclass
class Route:
    name: str
    stops: list[Point]
    unit: Unit = Unit.C


@dataclass
class Positive:
    n: int

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ValueError("n must be positive")


@dataclass
class Node:
    value: int
    children: list[Node] = field(default_factory=list)


class Filters(TypedDict):
    city: str
    limit: NotRequired[int]


class Opaque:
    pass


# --------------------------------------------------------------------------- schemas


def test_scalars_required_and_defaults() -> None:
    """str/int/float/bool map to JSON types; parameters with defaults are not required."""

    @tool
    def f(a: str, b: int, c: float = 1.5, d: bool = False) -> None:
        pass

    assert f.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer"},
            "c": {"type": "number", "default": 1.5},
            "d": {"type": "boolean", "default": False},
        },
        "required": ["a", "b"],
    }
    assert f.name == "f" and f.description is None and not f.accepts_cancel


def test_api_example_get_weather() -> None:
    """The README's Tools example: description and per-argument text from a Google docstring."""

    @tool
    def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
        """Current weather for a city.

        Args:
            city: City name.
            unit: Temperature unit.
        """
        return {"city": city, "unit": unit}

    assert isinstance(get_weather, Tool)
    assert get_weather.description == "Current weather for a city."
    assert get_weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"description": "City name.", "type": "string"},
            "unit": {
                "description": "Temperature unit.",
                "type": "string",
                "enum": ["c", "f"],
                "default": "c",
            },
        },
        "required": ["city"],
    }
    assert get_weather.schema() == ToolSchema(
        "get_weather", "Current weather for a city.", get_weather.parameters
    )
    assert get_weather("Oslo") == {"city": "Oslo", "unit": "c"}  # still a plain callable


def test_literal_enum_and_intenum() -> None:
    """Literal values and Enum member values become ``enum``; mixed kinds carry no ``type``."""

    @tool
    def f(a: Literal[1, 2], b: Literal["x", 3], u: Unit, lv: Level = Level.LOW) -> None:
        pass

    props = f.parameters["properties"]
    assert props["a"] == {"type": "integer", "enum": [1, 2]}
    assert props["b"] == {"enum": ["x", 3]}
    assert props["u"] == {"type": "string", "enum": ["c", "f"]}
    assert props["lv"] == {"type": "integer", "enum": [1, 2], "default": 1}


def test_containers() -> None:
    """list/tuple/set become arrays (items typed), dict an object, fixed tuples prefixItems."""

    @tool
    def f(
        a: list[int],
        b: tuple[str, ...],
        c: set[str],
        d: dict[str, float],
        e: dict,  # type: ignore[type-arg]
        g: tuple[int, str],
        h: list,  # type: ignore[type-arg]
    ) -> None:
        pass

    props = f.parameters["properties"]
    assert props["a"] == {"type": "array", "items": {"type": "integer"}}
    assert props["b"] == {"type": "array", "items": {"type": "string"}}
    assert props["c"] == {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    assert props["d"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["e"] == {"type": "object"}
    assert props["g"] == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }
    assert props["h"] == {"type": "array"}


def test_optional_and_unions() -> None:
    """``X | None`` adds ``null`` to the type; other unions become ``anyOf``; Any is ``{}``."""

    @tool
    def f(
        a: int | None = None,
        b: Optional[Literal["x", "y"]] = None,  # noqa: UP045 - the spelling under test
        c: Union[int, str] = 0,  # noqa: UP007
        d: Point | None = None,
        e: Any = None,
        g: list[int] | None = None,
        h=None,  # type: ignore[no-untyped-def]
    ) -> None:
        pass

    props = f.parameters["properties"]
    assert props["a"] == {"type": ["integer", "null"], "default": None}
    assert props["b"] == {"type": ["string", "null"], "enum": ["x", "y", None], "default": None}
    assert props["c"] == {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": 0}
    assert props["d"]["type"] == ["object", "null"] and props["d"]["required"] == ["x"]
    assert props["e"] == {"default": None}
    assert props["g"] == {"type": ["array", "null"], "items": {"type": "integer"}, "default": None}
    assert props["h"] == {"default": None}
    assert "required" not in f.parameters


def test_dataclass_and_typeddict_nested_objects() -> None:
    """Dataclasses and TypedDicts become nested objects with their own required fields."""

    @tool
    def f(route: Route, filters: Filters) -> None:
        pass

    props = f.parameters["properties"]
    point = {
        "description": "A point on the map.",
        "type": "object",
        "properties": {
            "x": {"description": "East-west position.", "type": "number"},
            "y": {"description": "North-south position.", "type": "number"},
        },
        "required": ["x"],
    }
    assert props["route"] == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "stops": {"type": "array", "items": point},
            "unit": {"type": "string", "enum": ["c", "f"]},
        },
        "required": ["name", "stops"],
    }
    assert props["filters"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["city"],
    }


def test_annotated_description_and_docstring_precedence() -> None:
    """``Annotated[X, "text"]`` describes a parameter and wins over the docstring's entry."""

    @tool
    def f(a: Annotated[str, "from annotation"], b: int) -> None:
        """Do it.

        Args:
            a: ignored
            b: from docstring
        """

    props = f.parameters["properties"]
    assert props["a"] == {"description": "from annotation", "type": "string"}
    assert props["b"] == {"description": "from docstring", "type": "integer"}


def test_name_and_description_overrides() -> None:
    """``@tool(name=..., description=...)`` replaces the function's name and docstring text."""

    @tool(name="lookup-v2", description="Look things up.")
    def f(q: str) -> str:
        """Ignored."""
        return q

    assert (f.name, f.description) == ("lookup-v2", "Look things up.")
    again = tool(f, name="other")
    assert again.name == "other" and again.parameters == f.parameters


def test_cancel_parameter_is_not_in_the_schema() -> None:
    """A ``cancel`` keyword is left out of the schema and marks the tool ``accepts_cancel``."""

    @tool
    def f(q: str, cancel: threading.Event | None = None) -> str:
        return q

    assert f.accepts_cancel
    assert list(f.parameters["properties"]) == ["q"]


def test_kwargs_parameter_is_ignored_in_schema() -> None:
    @tool
    def f(q: str, **extra: Any) -> dict[str, Any]:
        return extra

    assert list(f.parameters["properties"]) == ["q"]
    assert run(f, {"q": "x", "more": 1}).data == {"more": 1}


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: tool(lambda x: x), "invalid tool name '<lambda>'"),
        (lambda: tool(name="has space")(lambda: 1), "invalid tool name"),
        (lambda: tool(name="x" * 65)(lambda: 1), "invalid tool name"),
        (lambda: tool(_varargs), "cannot be passed by keyword"),
        (lambda: tool(_posonly), "cannot be passed by keyword"),
        (lambda: tool(_opaque), "no JSON Schema for the annotation"),
        (lambda: tool(_bytes), "no JSON Schema for the annotation"),
        (lambda: tool(_recursive), "recursive type Node"),
        (lambda: tool(_int_keys), "object keys must be str"),
        (lambda: tool(_unresolvable), "cannot resolve"),
        (lambda: tool(42), "must be a callable"),  # type: ignore[call-overload]
    ],
)
def test_definition_errors(make: Any, fragment: str) -> None:
    """Functions that cannot be tools fail at definition with TOOL_INVALID_DEFINITION."""
    with pytest.raises(ToolDefinitionError) as info:
        make()
    assert info.value.code == "TOOL_INVALID_DEFINITION"
    assert isinstance(info.value, TypeError)
    assert fragment in str(info.value)


def _varargs(*items: int) -> None:
    pass


def _posonly(a: int, /) -> None:
    pass


def _opaque(a: Opaque) -> None:
    pass


def _bytes(a: bytes) -> None:
    pass


def _recursive(n: Node) -> None:
    pass


def _int_keys(m: dict[int, str]) -> None:
    pass


def _unresolvable(a: DoesNotExist) -> None:  # type: ignore[name-defined]  # noqa: F821
    pass


def test_callable_object_and_partial() -> None:
    """Callable objects and ``functools.partial`` work (with an explicit name)."""
    import functools

    class Adder:
        """Add a number."""

        def __call__(self, a: int, b: int = 1) -> int:
            return a + b

    t = tool(Adder(), name="adder")
    assert t.parameters["required"] == ["a"]
    assert run(t, {"a": 2}).data == 3

    def mul(a: int, b: int) -> int:
        return a * b

    p = tool(functools.partial(mul, b=3), name="triple")
    assert run(p, {"a": 5}).data == 15


def test_bound_method() -> None:
    class Store:
        def __init__(self) -> None:
            self.items: list[str] = []

        def add(self, item: str) -> int:
            """Add an item."""
            self.items.append(item)
            return len(self.items)

    store = Store()
    t = tool(store.add)
    assert t.parameters == {
        "type": "object",
        "properties": {"item": {"type": "string"}},
        "required": ["item"],
    }
    assert run(t, {"item": "milk"}).data == 1 and store.items == ["milk"]


# --------------------------------------------------------------------------- docstrings


def test_google_docstring() -> None:
    doc = """Summary line.

    More about it,
    over two lines.

    Args:
        city (str): City name,
            continued here.
        *extra: Ignored style marker.
        unit: Unit.

    Returns:
        dict: the weather.

    Raises:
        ValueError: never.
    """
    text, args = parse_docstring(doc)
    assert text == "Summary line.\n\nMore about it,\nover two lines."
    assert args == {
        "city": "City name, continued here.",
        "extra": "Ignored style marker.",
        "unit": "Unit.",
    }


def test_rest_docstring() -> None:
    doc = """Look up a city.

    :param city: The city,
        in English.
    :param str unit: Unit.
    :type city: str
    :returns: the weather
    :raises ValueError: never
    """
    assert parse_docstring(doc) == (
        "Look up a city.",
        {"city": "The city, in English.", "unit": "Unit."},
    )


def test_numpy_docstring() -> None:
    doc = """Look up a city.

    Parameters
    ----------
    city : str
        The city.
    unit
        Unit,
        celsius or fahrenheit.

    Returns
    -------
    dict
        The weather.
    """
    assert parse_docstring(doc) == (
        "Look up a city.",
        {"city": "The city.", "unit": "Unit, celsius or fahrenheit."},
    )


@pytest.mark.parametrize("doc", [None, "", "   \n  "])
def test_empty_docstring(doc: str | None) -> None:
    assert parse_docstring(doc) == (None, {})


def test_docstring_only_sections() -> None:
    assert parse_docstring("Args:\n    a: x\n") == (None, {"a": "x"})


# --------------------------------------------------------------------------- registry


def _echo(text: str) -> str:
    """Echo the text."""
    return text


def _upper(text: str) -> str:
    return text.upper()


def test_registry_basics() -> None:
    registry = ToolRegistry([_echo])
    t = registry.register(_upper)
    assert registry.names() == ["_echo", "_upper"]
    assert "_echo" in registry and "nope" not in registry and len(registry) == 2
    assert [x.name for x in registry] == ["_echo", "_upper"]
    assert registry.get("_upper") is t and registry.get("nope") is None
    assert [s.name for s in registry.schemas()] == ["_echo", "_upper"]
    assert registry.schemas()[0].description == "Echo the text."
    assert registry.register(t) is t  # the same tool again is fine
    assert registry.timeout is None and "_echo" in repr(registry)


def test_registry_rejects_a_second_tool_with_the_same_name() -> None:
    registry = ToolRegistry([_echo])
    with pytest.raises(ToolDefinitionError, match="already registered"):
        registry.register(tool(_upper, name="_echo"))


def test_schemas_are_copies() -> None:
    """Changing a returned schema (as a provider might) does not change the tool."""
    registry = ToolRegistry([_echo])
    registry.schemas()[0].parameters["properties"]["text"]["type"] = "integer"  # type: ignore[index]
    assert registry.execute(call("_echo", {"text": "hi"})).data == "hi"


@pytest.mark.parametrize("bad", [0, -1, True, "5", math.nan])
def test_registry_timeout_validation(bad: Any) -> None:
    with pytest.raises(ValueError, match="timeout"):
        ToolRegistry(timeout=bad)
    assert ToolRegistry(timeout=2.5).timeout == 2.5


# --------------------------------------------------------------------------- execute: success


def test_execute_ok_and_to_json() -> None:
    result = run(_echo, {"text": "hi"})
    assert result == ToolResult(ok=True, data="hi")
    assert json.loads(result.to_json()) == {"ok": True, "data": "hi"}


def test_execute_accepts_raw_json_text_arguments() -> None:
    """Arguments arriving as JSON text (OpenAI-style) are parsed by ToolCall and used."""
    assert run(_echo, '{"text": "raw"}').data == "raw"


def test_coercion_enum_dataclass_tuple_set_int() -> None:
    """Only what JSON cannot express is converted: Enum, dataclass, tuple, set, 3.0 → int."""
    seen: dict[str, Any] = {}

    @tool
    def f(
        unit: Unit,
        route: Route,
        pair: tuple[int, str],
        tags: set[str],
        n: int,
        level: Level = Level.LOW,
        maybe: Point | None = None,
        table: dict[str, Unit] | None = None,
        filters: Filters | None = None,
    ) -> str:
        seen.update(locals())
        return "ok"

    result = run(
        f,
        {
            "unit": "f",
            "route": {"name": "r", "stops": [{"x": 1, "y": 2.5}, {"x": 3}], "unit": "c"},
            "pair": [1, "a"],
            "tags": ["x", "y"],
            "n": 3.0,
            "level": 2,
            "maybe": {"x": 0},
            "table": {"a": "c"},
            "filters": {"city": "Oslo"},
        },
    )
    assert result.ok, result
    assert seen["unit"] is Unit.F
    assert seen["route"] == Route("r", [Point(1, 2.5), Point(3)], Unit.C)
    assert seen["pair"] == (1, "a") and seen["tags"] == {"x", "y"}
    assert seen["n"] == 3 and type(seen["n"]) is int
    assert seen["level"] is Level.HIGH
    assert seen["maybe"] == Point(0)
    assert seen["table"] == {"a": Unit.C}
    assert seen["filters"] == {"city": "Oslo"}


def test_no_silent_coercion_of_json_types() -> None:
    """A number for a string, a string for a number, 1 for a bool are rejected, not converted."""

    @tool
    def f(s: str = "", n: int = 0, x: float = 0.0, b: bool = False) -> None:
        pass

    for args in ({"s": 1}, {"n": "1"}, {"n": 1.5}, {"n": True}, {"x": "2"}, {"b": 1}, {"s": None}):
        result = run(f, args)
        assert code(result) == "TOOL_INVALID_ARGUMENTS", args
    assert run(f, {"x": 2}).ok  # an integer is a number


def test_cancel_keyword_receives_the_chat_event() -> None:
    got: list[threading.Event] = []

    @tool
    def f(cancel: threading.Event) -> bool:
        got.append(cancel)
        return cancel.is_set()

    event = threading.Event()
    assert run(f, cancel=event).data is False
    assert got[-1] is event
    assert run(f).data is False  # no event given: a fresh, unset one
    assert isinstance(got[-1], threading.Event) and got[-1] is not event


def test_model_cannot_pass_cancel_itself() -> None:
    @tool
    def f(cancel: threading.Event) -> None:
        pass

    assert code(run(f, {"cancel": True})) == "TOOL_INVALID_ARGUMENTS"


def test_tool_returning_results_of_many_shapes() -> None:
    """Dataclass and Enum results become JSON data; a returned ToolResult passes through."""
    own = ToolResult(ok=False, error=ErrorInfo("no such city", "CITY_UNKNOWN"))
    assert run(tool(lambda: Point(1, 2), name="p")).data == {"x": 1, "y": 2}
    assert run(tool(lambda: Unit.F, name="u")).data == "f"
    assert run(tool(lambda: (1, 2), name="t")).data == [1, 2]
    assert run(tool(lambda: {"s": {3}}, name="s")).data == {"s": [3]}
    assert run(tool(lambda: None, name="n")) == ToolResult(ok=True, data=None)
    assert run(tool(lambda: own, name="own")) is own


# --------------------------------------------------------------------------- execute: failures


def test_unknown_tool() -> None:
    registry = ToolRegistry([_echo])
    result = registry.execute(call("nope", {}))
    assert code(result) == "TOOL_NOT_FOUND"
    assert result.error is not None and result.error.details == {
        "name": "nope",
        "available": ["_echo"],
    }
    assert "_echo" in result.error.message


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '"text"', "null", "{broken", "x" * 500])
def test_arguments_text_not_a_json_object(raw: str) -> None:
    """args == {} with non-object text → TOOL_INVALID_ARGUMENTS carrying the first 200 chars."""
    result = run(_echo, raw)
    assert code(result) == "TOOL_INVALID_ARGUMENTS"
    assert result.error is not None and result.error.details == {"arguments": raw[:200]}


def test_empty_arguments_text_means_no_arguments() -> None:
    result = ToolRegistry([tool(lambda: "none", name="noargs")]).execute(
        ToolCall("c", "noargs", {}, "")
    )
    assert result.data == "none"


def test_missing_required_and_wrong_type_are_listed() -> None:
    @tool
    def f(city: str, days: int) -> None:
        pass

    result = run(f, {"days": "3"})
    assert code(result) == "TOOL_INVALID_ARGUMENTS"
    assert result.error is not None and result.error.details == {
        "errors": [
            "missing required argument 'city'",
            "argument 'days' must be integer, got string \"3\"",
        ]
    }


def test_enum_and_nested_violations() -> None:
    @tool
    def f(unit: Unit, route: Route | None = None) -> None:
        pass

    assert code(run(f, {"unit": "kelvin"})) == "TOOL_INVALID_ARGUMENTS"
    bad = run(f, {"unit": "c", "route": {"name": "r", "stops": [{"y": 1}]}})
    assert code(bad) == "TOOL_INVALID_ARGUMENTS"
    assert bad.error is not None and "route.stops[0].x" in bad.error.message


def test_unexpected_argument_for_a_function_without_kwargs() -> None:
    result = run(_echo, {"text": "a", "extra": 1})
    assert code(result) == "TOOL_INVALID_ARGUMENTS"
    assert result.error is not None and "extra" in result.error.message


def test_dataclass_validation_failure_is_an_argument_error() -> None:
    @tool
    def f(p: Positive) -> int:
        return p.n

    assert run(f, {"p": {"n": 2}}).data == 2
    result = run(f, {"p": {"n": -1}})
    assert code(result) == "TOOL_INVALID_ARGUMENTS"
    assert result.error is not None and "n must be positive" in result.error.message


def test_handwritten_tool_schema_is_enforced() -> None:
    """A Tool built by hand is validated against its own schema (additionalProperties too)."""
    t = Tool(
        name="add",
        description="Add.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        fn=lambda **kw: kw["a"] + kw["b"],
    )
    registry = ToolRegistry([t])
    assert registry.execute(call("add", {"a": 1, "b": 2})).data == 3
    for args in ({"a": 1}, {"a": -1, "b": 0}, {"a": 1, "b": 2, "c": 3}):
        assert code(registry.execute(call("add", args))) == "TOOL_INVALID_ARGUMENTS", args


def test_tool_exception_is_captured() -> None:
    def boom(x: int) -> None:
        raise ValueError(f"bad x {x}")

    result = run(boom, {"x": 3})
    assert code(result) == "TOOL_EXECUTION_FAILED"
    assert result.error is not None
    assert result.error.message == "ValueError: bad x 3"
    assert result.error.details == {"exception": "ValueError"}
    assert json.loads(result.to_json())["error"]["code"] == "TOOL_EXECUTION_FAILED"


def test_library_error_inside_a_tool_keeps_its_code_in_details() -> None:
    def fetch() -> None:
        raise BadResponse("upstream broke")

    result = run(fetch)
    assert code(result) == "TOOL_EXECUTION_FAILED"
    assert result.error is not None and result.error.details == {
        "exception": "BadResponse",
        "code": "LLM_BAD_RESPONSE",
    }


def test_cancelled_before_start_does_not_run_the_tool() -> None:
    ran: list[bool] = []

    def f() -> None:
        ran.append(True)

    event = threading.Event()
    event.set()
    assert code(run(f, cancel=event)) == "CANCELLED"
    assert ran == []


def test_tool_raising_cancelled() -> None:
    @tool
    def f(cancel: threading.Event) -> None:
        raise Cancelled("stopped early")

    assert code(run(f)) == "CANCELLED"


@pytest.mark.parametrize("value", [object(), math.nan, [math.inf], b"bytes", {"s": {1j}}])
def test_result_not_json_serialisable(value: Any) -> None:
    result = run(tool(lambda: value, name="weird"))
    assert code(result) == "TOOL_RESULT_INVALID", result
    assert json.loads(result.to_json())["ok"] is False


def test_keyboard_interrupt_passes_through() -> None:
    def f() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(f)


def test_concurrent_execute_calls_are_independent() -> None:
    """The registry is safe to use from a thread pool: parallel calls get their own results."""

    def slow(n: int) -> int:
        time.sleep(0.05)
        return n * n

    registry = ToolRegistry([slow])
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: registry.execute(call("slow", {"n": i})), range(16)))
    assert [r.data for r in results] == [i * i for i in range(16)]


def test_arguments_and_results_are_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    secret = "sk-very-secret-value"

    def f(token: str) -> str:
        raise RuntimeError("failed")

    with caplog.at_level(logging.DEBUG, logger="ollm_lite"):
        run(f, {"token": secret})
        run(_echo, {"text": secret})
    assert caplog.records, "execute logs at DEBUG"
    assert secret not in caplog.text


# --------------------------------------------------------------------------- the validator


def test_validator_keywords() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string", "minLength": 2, "maxLength": 3},
            "a": {"type": "array", "minItems": 1, "maxItems": 2, "uniqueItems": True},
            "n": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
            "k": {"const": "fixed"},
            "o": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "all": {"allOf": [{"type": "integer"}, {"maximum": 5}]},
        },
    }
    assert validate_arguments({"s": "ab", "a": [1], "n": 5, "k": "fixed", "o": 1.5}, schema) == []
    bad = [
        {"s": "a"},
        {"s": "abcd"},
        {"a": []},
        {"a": [1, 2, 3]},
        {"a": [1, 1]},
        {"n": 0},
        {"n": 10},
        {"k": "other"},
        {"o": 1},  # matches both: not exactly one
        {"all": 6},
    ]
    for value in bad:
        assert validate_arguments(value, schema), value
    assert validate_arguments("x", {"type": "object"}) == [
        'the arguments must be object, got string "x"'
    ]
    assert validate_arguments({"x": 1}, {"properties": {"x": "not a schema"}}) == []

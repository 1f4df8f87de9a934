"""Tools the model can call: ``@tool``, the JSON Schema built from a signature, ``ToolRegistry``.

``@tool`` turns a plain function into a :class:`Tool`: its name, a description taken from the
docstring (Google, reST or NumPy style) and a JSON Schema object built from the type hints:

=====================================  ===================================================
Python annotation                      JSON Schema
=====================================  ===================================================
``str`` / ``int`` / ``float`` /        ``string`` / ``integer`` / ``number`` / ``boolean``
``bool``
``Literal["a", "b"]``                  ``{"type": "string", "enum": ["a", "b"]}``
an ``Enum`` subclass                   ``enum`` of the members' values
``list[X]``, ``tuple[X, ...]``,        ``{"type": "array", "items": <X>}``
``set[X]``
``dict`` / ``dict[str, X]``            ``{"type": "object"}`` (``additionalProperties: <X>``)
``X | None`` / ``Optional[X]``         ``X`` with ``"null"`` added to its ``type``
``X | Y``                              ``{"anyOf": [<X>, <Y>]}``
a dataclass / ``TypedDict``            a nested object with its own ``properties``/``required``
``Annotated[X, "text"]``               ``X`` with ``"text"`` as description
no annotation / ``Any``                ``{}`` (any JSON value)
=====================================  ===================================================

Tools living elsewhere (an MCP server's, from ``McpServer.tools()``) carry a ``runner`` instead:
the registry hands it the JSON arguments and the cancel event, unconverted.

A parameter with a default is not ``required`` (its default is written as ``"default"`` when
JSON can express it). A parameter named ``cancel`` is left out of the schema: the tool then
receives the chat's ``threading.Event`` there and should return early once it is set.

:meth:`ToolRegistry.execute` never raises (``KeyboardInterrupt``/``SystemExit`` aside): every
failure becomes ``ToolResult(ok=False, error=ErrorInfo(code=...))`` for the model to read:

* ``TOOL_NOT_FOUND``: no tool has that name;
* ``TOOL_INVALID_ARGUMENTS``: the raw arguments were not a JSON object, or they fail the schema's
  ``required``/``type`` checks (also ``enum``, ``additionalProperties: false`` and the usual
  bounds), or the function's signature cannot take them;
* ``TOOL_EXECUTION_FAILED``: the tool raised (message: exception type and text);
* ``TOOL_RESULT_INVALID``: the return value is not JSON-serialisable;
* ``CANCELLED``: the cancel event was set before the tool started (or the tool raised
  :class:`~ollm_lite.errors.Cancelled`);
* ``TOOL_TIMEOUT``: reserved for the chat runtime, which enforces :attr:`ToolRegistry.timeout`.

Arguments are passed on as the model sent them. The only conversions are for what JSON cannot
express: a value for an ``Enum`` parameter becomes the member, an object for a dataclass
parameter becomes an instance (recursively), an array for a ``tuple``/``set`` parameter becomes
one, and an integral number such as ``3.0`` for an ``int`` parameter becomes ``3`` (JSON Schema
counts it as an integer). On the way back a dataclass or ``Enum`` result is turned into JSON
data (``dataclasses.asdict`` / ``.value``); a tool may also return a :class:`ToolResult` itself.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import inspect
import json
import logging
import re
import threading
import time
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, Literal, overload

from ._docstrings import parse_docstring
from ._safe_text import exception_text, safe_str, type_name
from ._validation import validate_arguments
from .errors import Cancelled, OllmError
from .types import ErrorInfo, ToolCall, ToolResult, ToolSchema

__all__ = [
    "Tool",
    "ToolDefinitionError",
    "ToolRegistry",
    "parse_docstring",
    "schema_for_type",
    "tool",
    "validate_arguments",
    "value_for_type",
]

logger = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CANCEL_PARAM = "cancel"
_ARGS_PREVIEW = 200


class ToolDefinitionError(OllmError, TypeError):
    """A function cannot be made into a tool (bad name, unsupported annotation, ``*args`` ...).

    Raised when the tool is defined or registered, never while a chat runs.
    """

    code = "TOOL_INVALID_DEFINITION"


# --------------------------------------------------------------------------- the Tool value


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call, with the schema it is shown."""

    name: str
    """Name the model uses to call the tool (``[A-Za-z0-9_-]{1,64}``)."""
    description: str | None
    """What the tool does, for the model."""
    parameters: dict[str, Any]
    """JSON Schema (``{"type": "object", ...}``) of the keyword arguments."""
    fn: Callable[..., Any]
    """The function itself; called with the arguments as keywords."""
    accepts_cancel: bool = False
    """``fn`` takes a ``cancel`` keyword and receives the chat's ``threading.Event`` there."""
    runner: Callable[[dict[str, Any], threading.Event | None], ToolResult] | None = None
    """For tools that live elsewhere (an MCP server): runs a call from its JSON arguments and
    the cancel event, instead of ``fn``; the arguments reach it unconverted."""
    server: str | None = None
    """Name of the server the tool comes from; when tools given together share a name, such
    a tool is renamed ``<server>_<name>`` (local tools never are)."""

    def schema(self) -> ToolSchema:
        """The tool as the model sees it (a copy: providers may not change the tool).

        Returns:
            A :class:`~ollm_lite.types.ToolSchema` with the name, description and parameters.
        """
        return ToolSchema(self.name, self.description, deepcopy(self.parameters))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly, so a decorated function stays usable as before."""
        return self.fn(*args, **kwargs)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    fn: None = None, *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function into a :class:`Tool`; use as ``@tool`` or ``@tool(name=..., ...)``.

    Args:
        fn: The function (given when used as a bare decorator or called directly).
        name: Tool name; defaults to the function's ``__name__``.
        description: Tool description; defaults to the docstring's text before its sections.

    Returns:
        The tool, or a decorator that makes one when ``fn`` is not given.

    Raises:
        ToolDefinitionError: ``TOOL_INVALID_DEFINITION`` when the name is not
            ``[A-Za-z0-9_-]{1,64}``, a parameter is positional-only or ``*args``, or an
            annotation has no JSON Schema equivalent.
    """

    def build(func: Callable[..., Any]) -> Tool:
        return _make_tool(func, name=name, description=description)

    if fn is None:
        return build
    return build(fn)


def _make_tool(fn: Callable[..., Any], *, name: str | None, description: str | None) -> Tool:
    bound = _bound_tool(fn)
    if bound is not None:
        fn = bound
    if isinstance(fn, Tool):
        return dataclasses.replace(
            fn,
            name=_check_name(name or fn.name),
            description=description if description is not None else fn.description,
        )
    if not callable(fn):
        raise ToolDefinitionError(f"a tool must be a callable, not {type(fn).__name__}")
    tool_name = _check_name(name or getattr(fn, "__name__", "") or "")
    doc_text, arg_docs = parse_docstring(inspect.getdoc(fn))
    parameters, accepts_cancel = _signature_schema(fn, tool_name, arg_docs)
    return Tool(
        name=tool_name,
        description=description if description is not None else doc_text,
        parameters=parameters,
        fn=fn,
        accepts_cancel=accepts_cancel,
    )


def _bound_tool(item: Any) -> Tool | None:
    """The :class:`Tool` of a schema bound to its server (``McpServer.tools()``), else ``None``."""
    as_tool = getattr(item, "as_tool", None)
    if isinstance(item, ToolSchema) and callable(as_tool):
        made = as_tool()
        if isinstance(made, Tool):
            return made
    return None


def _check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise ToolDefinitionError(
            f"invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-' "
            "(pass name=... to @tool)"
        )
    return name


# --------------------------------------------------------------------------- schema building


def _signature_schema(
    fn: Callable[..., Any], tool_name: str, arg_docs: Mapping[str, str]
) -> tuple[dict[str, Any], bool]:
    """The parameters schema of ``fn`` and whether it takes a ``cancel`` keyword."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: no signature ({exc})") from exc
    hints = _hints(fn, tool_name)
    properties: dict[str, Any] = {}
    required: list[str] = []
    accepts_cancel = False
    for pname, param in sig.parameters.items():
        if param.kind is param.VAR_KEYWORD:
            continue
        if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {pname!r} cannot be passed by keyword; "
                "tools are called with keyword arguments only"
            )
        if pname == _CANCEL_PARAM:
            accepts_cancel = True
            continue
        annotation = hints.get(pname, param.annotation)
        if isinstance(annotation, str):
            raise ToolDefinitionError(f"tool {tool_name!r}: cannot resolve {annotation!r}")
        try:
            prop = _schema_for(annotation, set())
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"tool {tool_name!r}, parameter {pname!r}: {exc}") from None
        prop = _described(prop, pname, arg_docs)
        if param.default is param.empty:
            required.append(pname)
        else:
            default = _json_default(param.default)
            if default is not _NO_DEFAULT:
                prop["default"] = default
        properties[pname] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema, accepts_cancel


def _hints(obj: Any, where: str) -> dict[str, Any]:
    """Resolved annotations of a function or class (``{}`` for other callables we cannot read)."""
    plain = inspect.isfunction(obj) or inspect.ismethod(obj) or isinstance(obj, type)
    if plain:
        target = obj
    elif isinstance(obj, functools.partial):
        target = obj.func
    else:
        target = getattr(obj, "__call__", obj)  # noqa: B004
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as exc:  # NameError for unresolvable forward references, among others
        if not plain:
            return {}  # functools.partial and friends: fall back to the signature's annotations
        raise ToolDefinitionError(f"{where}: cannot resolve type hints ({safe_str(exc)})") from exc


_NO_DEFAULT = object()


def _json_default(value: Any) -> Any:
    """The default as JSON data, or ``_NO_DEFAULT`` when JSON cannot express it."""
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return _NO_DEFAULT
    return deepcopy(value)


_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema_for(annotation: Any, seen: set[Any]) -> dict[str, Any]:
    """JSON Schema for one annotation. ``seen`` guards against recursive dataclasses."""
    if annotation is Any or annotation is inspect.Parameter.empty or annotation is object:
        return {}
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = _schema_for(args[0], seen)
        text = next((a for a in args[1:] if isinstance(a, str)), None)
        return {"description": text, **inner} if text and "description" not in inner else inner
    if origin is Literal:
        return _enum_schema(list(args))
    if origin is typing.Union or origin is types.UnionType:
        return _union_schema(args, seen)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_schema([m.value for m in annotation])
    if annotation in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset):
        return _array_schema(origin or annotation, args, seen)
    if annotation is dict or origin is dict:
        if len(args) == 2 and args[0] is not str:
            raise ToolDefinitionError(f"object keys must be str, not {args[0]!r}")
        value = _schema_for(args[1], seen) if len(args) == 2 else {}
        return {"type": "object", "additionalProperties": value} if value else {"type": "object"}
    if isinstance(annotation, type) and (
        dataclasses.is_dataclass(annotation) or typing.is_typeddict(annotation)
    ):
        return _object_schema(annotation, seen)
    raise ToolDefinitionError(f"no JSON Schema for the annotation {annotation!r}")


def schema_for_type(annotation: Any) -> dict[str, Any]:
    """The JSON Schema of a type annotation, by the same rules as tool parameters.

    Used for typed answers too (a dataclass or ``TypedDict`` becomes an object schema with
    its fields' descriptions from the class docstring).

    Raises:
        ToolDefinitionError: ``TOOL_INVALID_DEFINITION`` for an annotation JSON Schema
            cannot express.
    """
    return _schema_for(annotation, set())


def value_for_type(value: Any, annotation: Any) -> Any:
    """JSON data converted to what ``annotation`` names (a dataclass instance, an ``Enum``
    member, a tuple …), by the same rules as tool arguments.

    Raises:
        Exception: whatever the target's constructor raises for data it rejects.
    """
    return _coerce(value, annotation)


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    kinds = {_json_type(v) for v in values}
    schema: dict[str, Any] = {}
    if len(kinds) == 1:
        schema["type"] = kinds.pop()
    schema["enum"] = values
    return schema


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    raise ToolDefinitionError(f"enum value {value!r} is not a JSON scalar")


def _union_schema(args: tuple[Any, ...], seen: set[Any]) -> dict[str, Any]:
    members = [a for a in args if a is not type(None)]
    nullable = len(members) < len(args)
    if len(members) == 1:
        schema = _schema_for(members[0], seen)
        if not nullable or not schema:
            return schema
        kind = schema.get("type")
        if isinstance(kind, str):
            schema = {**schema, "type": [kind, "null"]}
            if "enum" in schema:
                schema["enum"] = [*schema["enum"], None]
            return schema
        return {"anyOf": [schema, {"type": "null"}]}
    options = [_schema_for(m, seen) for m in members]
    if any(not o for o in options):
        return {}
    if nullable:
        options.append({"type": "null"})
    return {"anyOf": options}


def _array_schema(kind: Any, args: tuple[Any, ...], seen: set[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array"}
    if kind is tuple and args and args[-1] is not Ellipsis:
        items = [_schema_for(a, seen) for a in args]
        schema.update(prefixItems=items, minItems=len(items), maxItems=len(items))
        return schema
    item = _schema_for(args[0], seen) if args else {}
    if item:
        schema["items"] = item
    if kind in (set, frozenset):
        schema["uniqueItems"] = True
    return schema


def _object_schema(cls: type, seen: set[Any]) -> dict[str, Any]:
    if cls in seen:
        raise ToolDefinitionError(f"recursive type {cls.__name__} has no finite JSON Schema")
    seen = seen | {cls}
    hints = _hints(cls, cls.__name__)
    doc = cls.__doc__ or ""
    if dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}("):
        doc = ""  # the signature dataclasses writes when a class has no docstring
    text, field_docs = parse_docstring(doc)
    properties: dict[str, Any] = {}
    required: list[str] = []
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            properties[f.name] = _described(
                _schema_for(hints.get(f.name, Any), seen), f.name, field_docs
            )
            has_default = (
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            )
            if not has_default:
                required.append(f.name)
    else:
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        for key, hint in hints.items():
            inner, origin = hint, typing.get_origin(hint)
            if origin in (typing.Required, typing.NotRequired):
                inner = typing.get_args(hint)[0]
            properties[key] = _described(_schema_for(inner, seen), key, field_docs)
            # The marker beats __required_keys__, which string annotations leave wrong on 3.11.
            if origin is typing.Required or (
                origin is not typing.NotRequired and key in required_keys
            ):
                required.append(key)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if text:
        schema = {"description": text, **schema}
    if required:
        schema["required"] = required
    return schema


def _described(schema: dict[str, Any], name: str, docs: Mapping[str, str]) -> dict[str, Any]:
    doc = docs.get(name)
    return {"description": doc, **schema} if doc and "description" not in schema else schema


# --------------------------------------------------------------------------- binding and coercion


class _InvalidArguments(Exception):
    """Internal: the arguments do not fit the function."""


@dataclass(frozen=True, slots=True)
class _Binding:
    """What the registry knows about a tool's function beyond its schema."""

    signature: inspect.Signature | None
    hints: Mapping[str, Any]

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> _Binding:
        try:
            sig: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        try:
            hints = _hints(fn, getattr(fn, "__name__", "tool"))
        except ToolDefinitionError:
            hints = {}
        return cls(sig, hints)

    def arguments(self, args: dict[str, Any], cancel: threading.Event | None) -> dict[str, Any]:
        """The keyword arguments for the call, converted; raises ``_InvalidArguments``."""
        if cancel is not None and _CANCEL_PARAM in args:
            raise _InvalidArguments(f"unexpected argument {_CANCEL_PARAM!r}")
        kwargs = {name: self._convert(name, value) for name, value in args.items()}
        if cancel is not None:
            kwargs[_CANCEL_PARAM] = cancel
        if self.signature is not None:
            try:
                self.signature.bind(**kwargs)
            except TypeError as exc:
                raise _InvalidArguments(str(exc)) from None
        return kwargs

    def _convert(self, name: str, value: Any) -> Any:
        hint = self.hints.get(name)
        if hint is None:
            return value
        try:
            return _coerce(value, hint)
        except _InvalidArguments:
            raise
        except Exception as exc:  # a dataclass __post_init__ or Enum lookup rejecting the value
            raise _InvalidArguments(f"argument {name!r}: {exception_text(exc)}") from None


def _coerce(value: Any, hint: Any) -> Any:
    """Convert JSON data to what the annotation names, where JSON cannot say it itself."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _coerce(value, args[0])
    if origin in (typing.Required, typing.NotRequired):
        return _coerce(value, args[0])
    if value is None:
        return None
    if origin is typing.Union or origin is types.UnionType:
        for arm in args:
            if arm is type(None):
                continue
            try:
                if not validate_arguments(value, _schema_for(arm, set())):
                    return _coerce(value, arm)
            except ToolDefinitionError:
                continue
        return value
    if hint is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if isinstance(value, list) and (
        origin in (list, tuple, set, frozenset) or hint in (tuple, set, frozenset)
    ):
        return _coerce_array(value, origin or hint, args)
    if isinstance(value, dict):
        if origin is dict and len(args) == 2:
            return {k: _coerce(v, args[1]) for k, v in value.items()}
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            hints = typing.get_type_hints(hint)
            return hint(**{k: _coerce(v, hints.get(k, Any)) for k, v in value.items()})
        if isinstance(hint, type) and typing.is_typeddict(hint):
            hints = typing.get_type_hints(hint)
            return {k: _coerce(v, hints.get(k, Any)) for k, v in value.items()}
    return value


def _coerce_array(value: list[Any], kind: Any, args: tuple[Any, ...]) -> Any:
    if kind is tuple and args and args[-1] is not Ellipsis:
        return tuple(_coerce(v, a) for v, a in zip(value, args, strict=False))
    item = args[0] if args else Any
    items = [_coerce(v, item) for v in value]
    if kind is tuple:
        return tuple(items)
    if kind in (set, frozenset):
        return kind(items)
    return items


def _jsonable(value: Any) -> Any:
    """A tool's return value as JSON data; raises ``TypeError``/``ValueError`` when impossible."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        value = value.value
    return json.loads(json.dumps(value, allow_nan=False, default=_json_fallback))


def _json_fallback(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


# --------------------------------------------------------------------------- the registry


def _failure(code: str, message: str, details: dict[str, Any] | None = None) -> ToolResult:
    return ToolResult(ok=False, error=ErrorInfo(message=message, code=code, details=details))


class ToolRegistry:
    """The tools of a chat, by name; runs calls and turns every failure into a result.

    Besides functions and tools it accepts tool schemas bound to a server (what
    ``McpServer.tools()`` returns). When such a tool shares its name with another tool of the
    registry, it is renamed ``<server>_<name>`` (cut to ``[A-Za-z0-9_-]{1,64}``); local tools
    and unique names never change.

    Attributes:
        timeout: Per-call wall-clock limit in seconds the chat runtime enforces
            (``None``: no limit); a call over it gets a ``TOOL_TIMEOUT`` result.
    """

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        *,
        timeout: float | None = None,
    ) -> None:
        """Register ``tools`` (functions are wrapped with :func:`tool`).

        Raises:
            ToolDefinitionError: ``TOOL_INVALID_DEFINITION`` for a function that cannot be a
                tool or a second tool with a name already taken.
            ValueError: ``timeout`` is not a positive number.
        """
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.timeout = timeout
        self._tools: dict[str, Tool] = {}
        self._bindings: dict[str, _Binding] = {}
        made = [_as_tool(item) for item in tools]
        counts = collections.Counter(t.name for t in made)
        for item in made:
            if counts[item.name] > 1 and item.server is not None:
                item = _qualified(item)  # two tools given together share the name
            self.register(item)

    def register(self, fn_or_tool: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a plain function is wrapped with :func:`tool` first).

        Returns:
            The registered :class:`Tool`.

        A server's tool whose name is taken is renamed ``<server>_<name>``; a local tool whose
        name a server's tool holds takes the name, and that tool is renamed instead.

        Raises:
            ToolDefinitionError: ``TOOL_INVALID_DEFINITION`` when the function cannot be a tool
                or another tool already has the name (registering the same tool twice is fine).
        """
        item = _as_tool(fn_or_tool)
        existing = self._tools.get(item.name)
        if existing is not None:
            if existing is item or existing == item:
                return existing
            if item.server is not None:
                item = _qualified(item)
            elif existing.server is not None:  # a server's tool makes room for a local one
                del self._tools[existing.name], self._bindings[existing.name]
                self._add(_qualified(existing))
            if item.name in self._tools:
                if self._tools[item.name] == item:
                    return self._tools[item.name]
                raise ToolDefinitionError(f"a tool named {item.name!r} is already registered")
        self._add(item)
        return item

    def _add(self, item: Tool) -> None:
        if item.name in self._tools:
            raise ToolDefinitionError(f"a tool named {item.name!r} is already registered")
        self._tools[item.name] = item
        self._bindings[item.name] = _Binding.of(item.fn)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def schemas(self) -> list[ToolSchema]:
        """Every tool as the model sees it, in registration order."""
        return [t.schema() for t in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names()!r}, timeout={self.timeout!r})"

    def execute(self, call: ToolCall, cancel: threading.Event | None = None) -> ToolResult:
        """Run one tool call. Never raises (``KeyboardInterrupt``/``SystemExit`` pass through).

        Args:
            call: The call as the model made it.
            cancel: The chat's cancel event; passed to tools that take ``cancel`` (they get a
                fresh, never-set event when it is ``None``).

        Returns:
            ``ToolResult(ok=True, data=...)``, or ``ok=False`` with ``error.code`` one of
            ``CANCELLED``, ``TOOL_NOT_FOUND``, ``TOOL_INVALID_ARGUMENTS``,
            ``TOOL_EXECUTION_FAILED``, ``TOOL_RESULT_INVALID``.
        """
        try:
            return self._execute(call, cancel)
        except Exception as exc:  # a bug in a hook we do not control (e.g. a broken __eq__)
            logger.debug("tool call: unexpected failure", exc_info=True)
            return _failure(
                "TOOL_EXECUTION_FAILED", exception_text(exc), {"exception": type_name(exc)}
            )

    def _execute(self, call: ToolCall, cancel: threading.Event | None) -> ToolResult:
        if cancel is not None and cancel.is_set():
            return _failure("CANCELLED", f"tool {call.name!r} was not started: cancelled")
        item = self._tools.get(call.name)
        if item is None:
            return _failure(
                "TOOL_NOT_FOUND",
                f"no tool named {call.name!r}; available: {', '.join(self.names()) or 'none'}",
                {"name": call.name, "available": self.names()},
            )
        invalid = self._check_arguments(item, call)
        if invalid is not None:
            return invalid
        if item.runner is not None:
            return self._run_remote(item, call, cancel)
        try:
            kwargs = self._bindings[item.name].arguments(
                # A copy: a tool that changes its arguments must not change the call, which
                # belongs to the caller (a scripted turn, the history, an event already yielded).
                deepcopy(call.args),
                (cancel or threading.Event()) if item.accepts_cancel else None,
            )
        except _InvalidArguments as exc:
            return _failure(
                "TOOL_INVALID_ARGUMENTS", f"tool {item.name!r}: {exc}", {"errors": [str(exc)]}
            )
        return self._run(item, kwargs, cancel)

    def _check_arguments(self, item: Tool, call: ToolCall) -> ToolResult | None:
        raw = call.arguments or ""
        if not call.args and raw.strip() and not _is_json_object(raw):
            return _failure(
                "TOOL_INVALID_ARGUMENTS",
                f"tool {item.name!r}: the arguments are not a JSON object",
                {"arguments": raw[:_ARGS_PREVIEW]},
            )
        errors = validate_arguments(call.args, item.parameters)
        if errors:
            return _failure(
                "TOOL_INVALID_ARGUMENTS",
                f"tool {item.name!r}: {'; '.join(errors)}",
                {"errors": errors},
            )
        return None

    def _run_remote(self, item: Tool, call: ToolCall, cancel: threading.Event | None) -> ToolResult:
        assert item.runner is not None
        try:
            result: Any = item.runner(dict(call.args), cancel)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the runner promises results, but a bug is a failure
            logger.debug("tool %s raised", item.name, exc_info=True)
            return _failure("TOOL_EXECUTION_FAILED", f"{type(exc).__name__}: {exc}")
        if isinstance(result, ToolResult):
            return result
        return _failure(
            "TOOL_RESULT_INVALID",
            f"tool {item.name!r} returned {type(result).__name__}, not a ToolResult",
        )

    def _run(
        self, item: Tool, kwargs: dict[str, Any], cancel: threading.Event | None
    ) -> ToolResult:
        started = time.monotonic()
        try:
            value = item.fn(**kwargs)
        except Cancelled as exc:
            return _failure("CANCELLED", f"tool {item.name!r} was cancelled: {safe_str(exc)}")
        except KeyboardInterrupt:
            raise  # Ctrl-C on the calling thread stops the program, not just the tool
        except BaseException as exc:  # SystemExit, asyncio.CancelledError ... are tool failures
            logger.debug("tool %s raised", item.name, exc_info=True)
            details: dict[str, Any] = {"exception": type_name(exc)}
            if isinstance(exc, OllmError) and isinstance(exc.code, str):
                details["code"] = exc.code
            return _failure("TOOL_EXECUTION_FAILED", exception_text(exc), details)
        finally:
            logger.debug("tool %s ran for %.3fs", item.name, time.monotonic() - started)
        try:
            return _result_of(item.name, value)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # foreign code in the value (asdict, __iter__ ...) failed
            return _invalid_result(item.name, value, exc)


def _result_of(name: str, value: Any) -> ToolResult:
    """The tool's return value as a result JSON can carry; raises when it cannot.

    A returned :class:`ToolResult` passes through unchanged once its parts are checked.
    """
    if not isinstance(value, ToolResult):
        return ToolResult(ok=True, data=_jsonable(value))
    if value.ok is True:
        _jsonable(value.data)
        return value
    if value.ok is not False:
        raise TypeError(f"ToolResult.ok must be True or False, not a {type_name(value.ok)}")
    error = value.error
    if error is None:
        return value
    if not (
        isinstance(error, ErrorInfo)
        and isinstance(error.message, str)
        and isinstance(error.code, str)
        and (error.details is None or isinstance(error.details, dict))
    ):
        raise TypeError("ToolResult.error must be an ErrorInfo with a str message and code")
    _jsonable(error.details)
    return value


def _invalid_result(name: str, value: Any, exc: BaseException) -> ToolResult:
    return _failure(
        "TOOL_RESULT_INVALID",
        f"tool {name!r} returned something JSON cannot carry: {exception_text(exc)}",
        {"type": type_name(value)},
    )


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    if isinstance(item, Tool):
        return item
    return _bound_tool(item) or tool(item)


def _qualified(item: Tool) -> Tool:
    """``item`` renamed ``<server>_<name>``, cut to the characters and length names allow."""
    assert item.server is not None
    name = re.sub(r"[^A-Za-z0-9_-]", "_", f"{item.server}_{item.name}")[:64]
    return dataclasses.replace(item, name=name)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False

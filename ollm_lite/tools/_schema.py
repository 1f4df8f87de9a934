"""Type hints to JSON Schema: the parameters schema of a tool and the schema of a typed answer.

The rules (which annotation becomes which schema) are listed in :mod:`ollm_lite.tools`.
Descriptions come from docstrings (:func:`~ollm_lite.tools._docstrings.parse_docstring`): the
function's for its parameters, a dataclass's or ``TypedDict``'s for its fields.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping
from copy import deepcopy
from typing import Any, Literal

from .._safe_text import json_type, safe_str
from ..errors import OllmError
from ._docstrings import parse_docstring

__all__ = [
    "CANCEL_PARAM",
    "ToolDefinitionError",
    "schema_for_type",
    "signature_schema",
    "type_hints",
]

#: The parameter that receives the chat's cancel event instead of a value from the model.
CANCEL_PARAM = "cancel"


class ToolDefinitionError(OllmError, TypeError):
    """A function cannot be made into a tool (bad name, unsupported annotation, ``*args`` ...).

    Raised when the tool is defined or registered, never while a chat runs.
    """

    code = "TOOL_INVALID_DEFINITION"
    # Its public home, also for tracebacks and pickle (``ollm_lite.tools`` re-exports it).
    __module__ = "ollm_lite.tools"


def signature_schema(
    fn: Callable[..., Any], tool_name: str, arg_docs: Mapping[str, str]
) -> tuple[dict[str, Any], bool]:
    """The parameters schema of ``fn`` and whether it takes a ``cancel`` keyword."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: no signature ({exc})") from exc
    hints = type_hints(fn, tool_name)
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
        if pname == CANCEL_PARAM:
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


def type_hints(obj: Any, where: str) -> dict[str, Any]:
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


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    kinds = {_json_type(v) for v in values}
    schema: dict[str, Any] = {}
    if len(kinds) == 1:
        schema["type"] = kinds.pop()
    schema["enum"] = values
    return schema


def _json_type(value: Any) -> str:
    kind = json_type(value)
    if kind is None or kind in ("array", "object"):
        raise ToolDefinitionError(f"enum value {value!r} is not a JSON scalar")
    return kind


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
    hints = type_hints(cls, cls.__name__)
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

"""Checking tool arguments against a JSON Schema (the subset tool schemas use).

:func:`validate_arguments` returns one message per problem, each naming its path, so the model
can correct its call; the registry reports them as ``TOOL_INVALID_ARGUMENTS``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["validate_arguments"]

_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and math.isfinite(v) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def validate_arguments(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """Check ``value`` against a JSON Schema (the subset tools use).

    Understood keywords: ``type`` (a name or a list), ``enum``, ``const``, ``properties``,
    ``required``, ``additionalProperties``, ``items``, ``prefixItems``, ``anyOf``, ``oneOf``,
    ``allOf``, ``minimum``/``maximum`` (and the exclusive forms), ``minLength``/``maxLength``,
    ``minItems``/``maxItems``, ``uniqueItems``. Others (``$ref``, ``pattern``, ``format`` ...)
    are ignored.

    Args:
        value: The arguments (parsed JSON).
        schema: The JSON Schema.

    Returns:
        One message per problem, each naming its path (``city``, ``items[2].name``); empty when
        the value is valid.
    """
    errors: list[str] = []
    _validate(value, schema, "", errors)
    return errors


def _where(path: str) -> str:
    return f"argument {path!r}" if path else "the arguments"


def _validate(value: Any, schema: Any, path: str, errors: list[str]) -> None:
    if not isinstance(schema, Mapping):
        return  # a hand-written schema may hold anything; only objects constrain
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if not any(_TYPE_CHECKS.get(k, lambda v: True)(value) for k in kinds):
            expected = " or ".join(str(k) for k in kinds)
            errors.append(f"{_where(path)} must be {expected}, got {_describe(value)}")
            return
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        allowed = ", ".join(json.dumps(e) for e in schema["enum"])
        errors.append(f"{_where(path)} must be one of {allowed}, got {_describe(value)}")
        return
    if "const" in schema and not _same(value, schema["const"]):
        errors.append(f"{_where(path)} must be {json.dumps(schema['const'])}")
        return
    _validate_combinators(value, schema, path, errors)
    if isinstance(value, dict):
        _validate_object(value, schema, path, errors)
    elif isinstance(value, list):
        _validate_array(value, schema, path, errors)
    elif isinstance(value, str):
        _bound(len(value), schema, "minLength", "maxLength", path, "characters", errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _validate_number(value, schema, path, errors)


def _validate_combinators(
    value: Any, schema: Mapping[str, Any], path: str, errors: list[str]
) -> None:
    for sub in schema.get("allOf", ()):
        _validate(value, sub, path, errors)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if not options:
            continue
        passing = sum(1 for sub in options if not validate_arguments(value, sub))
        if passing == 0 or (key == "oneOf" and passing > 1):
            errors.append(f"{_where(path)} matches none of the allowed shapes ({key})")


def _validate_object(
    value: dict[str, Any], schema: Mapping[str, Any], path: str, errors: list[str]
) -> None:
    props: Mapping[str, Any] = schema.get("properties") or {}
    for key in schema.get("required", ()):
        if key not in value:
            errors.append(f"missing required argument {_join(path, key)!r}")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in props:
            _validate(item, props[key], _join(path, key), errors)
        elif extra is False:
            errors.append(f"unexpected argument {_join(path, key)!r}")
        elif isinstance(extra, Mapping):
            _validate(item, extra, _join(path, key), errors)


def _validate_array(
    value: list[Any], schema: Mapping[str, Any], path: str, errors: list[str]
) -> None:
    prefix = schema.get("prefixItems") or []
    for i, sub in enumerate(prefix[: len(value)]):
        _validate(value[i], sub, f"{path}[{i}]", errors)
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i in range(len(prefix), len(value)):
            _validate(value[i], items, f"{path}[{i}]", errors)
    _bound(len(value), schema, "minItems", "maxItems", path, "items", errors)
    if schema.get("uniqueItems") is True:
        seen = [json.dumps(v, sort_keys=True, default=str) for v in value]
        if len(set(seen)) != len(seen):
            errors.append(f"{_where(path)} must not repeat items")


def _validate_number(value: float, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    checks: tuple[tuple[str, Callable[[float], bool], str], ...] = (
        ("minimum", lambda b: value >= b, ">="),
        ("maximum", lambda b: value <= b, "<="),
        ("exclusiveMinimum", lambda b: value > b, ">"),
        ("exclusiveMaximum", lambda b: value < b, "<"),
    )
    for key, ok, op in checks:
        bound = schema.get(key)
        if isinstance(bound, int | float) and not isinstance(bound, bool) and not ok(bound):
            errors.append(f"{_where(path)} must be {op} {bound}, got {value}")


def _bound(
    size: int, schema: Mapping[str, Any], lo: str, hi: str, path: str, unit: str, errors: list[str]
) -> None:
    low, high = schema.get(lo), schema.get(hi)
    if isinstance(low, int) and size < low:
        errors.append(f"{_where(path)} needs at least {low} {unit}, got {size}")
    if isinstance(high, int) and size > high:
        errors.append(f"{_where(path)} allows at most {high} {unit}, got {size}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _same(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1, 1 equals 1.0.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _describe(value: Any) -> str:
    kind = {dict: "object", list: "array", str: "string", bool: "boolean"}.get(type(value))
    if value is None:
        return "null"
    if kind is None:
        kind = "number" if isinstance(value, int | float) else type(value).__name__
    text = json.dumps(value, default=str)
    return f"{kind} {text[:40]}{'...' if len(text) > 40 else ''}"

"""One tool call's way in and out: arguments bound to the function, the return value as JSON.

On the way in, :class:`Binding` turns the model's JSON arguments into keyword arguments, with
the conversions JSON cannot express itself (an ``Enum`` member, a dataclass instance, a tuple or
set, ``3.0`` as ``3`` for an ``int``). On the way out, :func:`result_of` turns the return value
into a :class:`~ollm_lite.types.ToolResult` JSON can carry.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import threading
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._safe_text import exception_text, type_name
from ..types import ErrorInfo, ToolResult
from ._schema import CANCEL_PARAM, ToolDefinitionError, schema_for_type, type_hints
from ._validation import validate_arguments

__all__ = [
    "Binding",
    "InvalidArguments",
    "failure",
    "invalid_result",
    "result_of",
    "value_for_type",
]


def failure(code: str, message: str, details: dict[str, Any] | None = None) -> ToolResult:
    """A failed tool result with ``code`` (what the model sees)."""
    return ToolResult(ok=False, error=ErrorInfo(message=message, code=code, details=details))


class InvalidArguments(Exception):
    """Internal: the arguments do not fit the function."""


@dataclass(frozen=True, slots=True)
class Binding:
    """What the registry knows about a tool's function beyond its schema."""

    signature: inspect.Signature | None
    hints: Mapping[str, Any]

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Binding:
        try:
            sig: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        try:
            hints = type_hints(fn, getattr(fn, "__name__", "tool"))
        except ToolDefinitionError:
            hints = {}
        return cls(sig, hints)

    def arguments(self, args: dict[str, Any], cancel: threading.Event | None) -> dict[str, Any]:
        """The keyword arguments for the call, converted; raises ``InvalidArguments``."""
        if cancel is not None and CANCEL_PARAM in args:
            raise InvalidArguments(f"unexpected argument {CANCEL_PARAM!r}")
        kwargs = {name: self._convert(name, value) for name, value in args.items()}
        if cancel is not None:
            kwargs[CANCEL_PARAM] = cancel
        if self.signature is not None:
            try:
                self.signature.bind(**kwargs)
            except TypeError as exc:
                raise InvalidArguments(str(exc)) from None
        return kwargs

    def _convert(self, name: str, value: Any) -> Any:
        hint = self.hints.get(name)
        if hint is None:
            return value
        try:
            return _coerce(value, hint)
        except InvalidArguments:
            raise
        except Exception as exc:  # a dataclass __post_init__ or Enum lookup rejecting the value
            raise InvalidArguments(f"argument {name!r}: {exception_text(exc)}") from None


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
                if not validate_arguments(value, schema_for_type(arm)):
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


def value_for_type(value: Any, annotation: Any) -> Any:
    """JSON data converted to what ``annotation`` names (a dataclass instance, an ``Enum``
    member, a tuple …), by the same rules as tool arguments.

    Raises:
        Exception: whatever the target's constructor raises for data it rejects.
    """
    return _coerce(value, annotation)


def result_of(name: str, value: Any) -> ToolResult:
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


def invalid_result(name: str, value: Any, exc: BaseException) -> ToolResult:
    return failure(
        "TOOL_RESULT_INVALID",
        f"tool {name!r} returned something JSON cannot carry: {exception_text(exc)}",
        {"type": type_name(value)},
    )

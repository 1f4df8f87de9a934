"""Text for objects the library does not control: tool exceptions, tool results, hooks.

``str()`` of a foreign object runs foreign code (``__str__``, ``__repr__``, a metaclass's
``__name__``), which may raise anything. Every message about such an object is built here, and
falls back to the object's type name, so reporting a failure never becomes a second failure.
:func:`json_type` names the JSON type of a parsed value, for messages and schemas alike.
Standard library only.
"""

from __future__ import annotations

import reprlib

__all__ = ["exception_text", "json_type", "safe_str", "short_repr", "type_name"]

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60

#: JSON Schema's name for each JSON type but null; ``bool`` before ``int``, which it subclasses.
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def type_name(value: object) -> str:
    """The name of ``value``'s type, or ``"object"`` when even that cannot be read."""
    try:
        name = type(value).__name__
    except KeyboardInterrupt:
        raise
    except BaseException:  # a metaclass's __name__ may raise anything, even SystemExit
        return "object"
    return name if isinstance(name, str) else "object"


def safe_str(value: object) -> str:
    """``str(value)``, or ``<TypeName object>`` when its ``__str__`` raises."""
    text = _str_or_none(value)
    return f"<{type_name(value)} object>" if text is None else text


def short_repr(value: object) -> str:
    """A short ``repr`` for messages: nesting and long texts cut (never a ``RecursionError``),
    the type's name when the value's own ``__repr__`` fails."""
    try:
        text = _REPR.repr(value)
    except KeyboardInterrupt:
        raise
    except BaseException:  # a foreign __repr__ may raise anything, even SystemExit
        return f"<{type_name(value)} object>"
    return text if isinstance(text, str) else f"<{type_name(value)} object>"


def exception_text(exc: BaseException) -> str:
    """``"TypeName: message"``, or a note in place of a message that cannot be printed."""
    name = type_name(exc)
    message = _str_or_none(exc)
    return f"{name} (its message cannot be printed)" if message is None else f"{name}: {message}"


def _str_or_none(value: object) -> str | None:
    """``str(value)``, or ``None`` when its ``__str__`` raises or gives no string."""
    try:
        text = str(value)
    except KeyboardInterrupt:
        raise
    except BaseException:  # a foreign __str__ may raise anything, even SystemExit
        return None
    return text if isinstance(text, str) else None


def json_type(value: object) -> str | None:
    """JSON Schema's type name for a parsed JSON value (``"integer"`` …); ``None`` for others."""
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), None)

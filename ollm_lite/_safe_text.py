"""Text for objects the library does not control: tool exceptions, tool results, hooks.

``str()`` of a foreign object runs foreign code (``__str__``, ``__repr__``, a metaclass's
``__name__``), which may raise anything. Every message about such an object is built here, and
falls back to the object's type name, so reporting a failure never becomes a second failure.
Standard library only.
"""

from __future__ import annotations

__all__ = ["exception_text", "safe_str", "type_name"]


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
    try:
        text = str(value)
    except KeyboardInterrupt:
        raise
    except BaseException:  # a foreign __str__ may raise anything, even SystemExit
        return f"<{type_name(value)} object>"
    return text if isinstance(text, str) else f"<{type_name(value)} object>"


def exception_text(exc: BaseException) -> str:
    """``"TypeName: message"``, or a note in place of a message that cannot be printed."""
    name = type_name(exc)
    try:
        message = str(exc)
    except KeyboardInterrupt:
        raise
    except BaseException:  # a foreign __str__ may raise anything, even SystemExit
        return f"{name} (its message cannot be printed)"
    return f"{name}: {message}"

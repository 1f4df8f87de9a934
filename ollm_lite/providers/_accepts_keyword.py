"""Whether a callable takes a keyword argument, without importing :mod:`inspect` when it can.

The chat runtime asks this once per adapter class and method (does ``context_length`` take
``cancel=``?). ``inspect`` loads ``ast`` and ``dis``, several milliseconds a chat would pay for
one question, so a plain function or method is read from its code object; anything else (a
builtin, a ``functools.partial``, a callable object, a function with ``__signature__`` or
``__wrapped__``) goes to ``inspect.signature``, which gives the same answer for all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FunctionType, MethodType
from typing import Any

__all__ = ["accepts_keyword"]

#: ``co_flags`` bit of a function with a ``**kwargs`` parameter (``inspect.CO_VARKEYWORDS``).
_VARKEYWORDS = 0x08


def accepts_keyword(func: Callable[..., Any], name: str) -> bool:
    """Whether ``func(..., name=value)`` binds ``name``: a parameter called ``name`` that is
    not positional-only, or a ``**kwargs``. ``False`` when the signature cannot be read."""
    plain = _plain_function(func)
    if plain is None:
        return _accepts_keyword_by_inspect(func, name)
    function, bound = plain
    code = function.__code__
    if code.co_flags & _VARKEYWORDS:
        return True
    start = code.co_posonlyargcount
    if bound and start == 0 and code.co_argcount:
        start = 1  # the bound first parameter (self) cannot be passed again
    return name in code.co_varnames[start : code.co_argcount + code.co_kwonlyargcount]


def _plain_function(func: Callable[..., Any]) -> tuple[FunctionType, bool] | None:
    """``(function, bound)`` for a function or a method bound to one, whose signature is its
    code's (nothing for ``inspect.signature`` to unwrap); else ``None``."""
    bound = isinstance(func, MethodType)
    target = func.__func__ if isinstance(func, MethodType) else func
    if type(target) is not FunctionType:
        return None
    if hasattr(target, "__signature__") or hasattr(target, "__wrapped__"):
        return None
    return target, bound


def _accepts_keyword_by_inspect(func: Callable[..., Any], name: str) -> bool:
    import inspect  # only for callables whose code object does not tell

    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # no signature to read (some builtins): do not guess
        return False
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == name and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        for p in parameters
    )

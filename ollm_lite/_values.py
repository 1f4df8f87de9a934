"""``@value``: slotted dataclasses that cost less to define and to create.

A ``@value`` class is a real dataclass (``dataclasses.fields``, ``replace``, ``asdict``,
``is_dataclass`` and pattern matching work, ``__dataclass_params__`` says ``frozen``, ``eq``,
``repr`` as for ``@dataclass(frozen=True, slots=True)``), built with one generated function
instead of seven. ``@dataclass`` compiles ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` from source for every class, which made importing the
library's ~30 data classes a third of what a script paid to import it; here only
``__init__`` is compiled, and the rest are shared functions closed over the field names.

The generated ``__init__`` stores through the slots' own descriptors instead of
``object.__setattr__``, so a frozen value is about as cheap to create as a mutable one (events
are created once per streamed token). It is compiled on first use (the first instance, or the
first look at ``cls.__init__``, e.g. by ``inspect.signature``): most classes a script imports
are never created, and compiling is most of what defining one costs.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["value"]

T = TypeVar("T")


class _Factory:
    """The default shown in signatures for a field with a ``default_factory``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


@overload
def value(cls: type[T], /) -> type[T]: ...


@overload
def value(*, frozen: bool = True, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def value(cls: type[T] | None = None, /, *, frozen: bool = True, kw_only: bool = False) -> Any:
    """Make ``cls`` a slotted dataclass, frozen unless ``frozen=False``.

    Equivalent to ``@dataclass(frozen=frozen, slots=True, kw_only=kw_only)`` for classes whose
    fields are plain (defaults, ``default_factory``, ``kw_only``, ``__post_init__``; no
    ``InitVar``, no ``init=False`` field without a default); a ``@value`` class may subclass
    another one.
    """

    def wrap(cls: type[T]) -> type[T]:
        return _build(cls, frozen, kw_only)

    return wrap if cls is None else wrap(cls)


def _build(cls: type[T], frozen: bool, kw_only: bool) -> type[T]:
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=True, kw_only=kw_only)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = tuple(f.name for f in fields)
    own = cls.__dict__
    # As @dataclass: a method the class body wrote itself is kept.
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    new: dict[str, Any] = {
        "__init__": _LazyInit(cls, fields),
        "__repr__": _repr(tuple(f.name for f in fields if f.repr)),
        "__eq__": _eq(_getter(tuple(f.name for f in fields if f.compare))),
    }
    if frozen:
        hashed = _getter(tuple(f.name for f in fields if (f.hash is None and f.compare) or f.hash))
        new["__setattr__"] = _frozen_setattr(cls, names)
        new["__delattr__"] = _frozen_delattr(cls, names)
        state = _getter(names)
        new["__getstate__"] = lambda self: state(self)  # a function: bound as a method
        new["__setstate__"] = _setstate(cls, names)
        if not explicit_hash:
            setattr(cls, "__hash__", lambda self: hash(hashed(self)))  # noqa: B010
    elif not explicit_hash:
        setattr(cls, "__hash__", None)  # noqa: B010 - mutable, compared by value: unhashable
    for name, method in new.items():
        if name not in own:
            setattr(cls, name, method)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    params.init = params.repr = params.eq = True
    params.frozen = frozen
    return cls


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function returning the tuple of these attributes (for one name too)."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return attrgetter(*names)


class _LazyInit:
    """A class's ``__init__`` until first looked up: then compiled and put in its place."""

    __slots__ = ("cls", "fields")

    def __init__(self, cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> None:
        self.cls = cls
        self.fields = fields

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        init = _init(self.cls, self.fields)
        setattr(self.cls, "__init__", init)  # noqa: B010 - later lookups find the function
        return init.__get__(obj, owner)


def _slot(cls: type, name: str) -> Any:
    """The descriptor of slot ``name``, which a base class may own."""
    return next(k.__dict__[name] for k in cls.__mro__ if name in k.__dict__)


def _init(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> Any:
    """Compile ``__init__``: each argument stored through its slot's descriptor."""
    env: dict[str, Any] = {"_FACTORY": _FACTORY}
    params: list[str] = []
    kw_params: list[str] = []
    body: list[str] = []
    for f in fields:
        setter = f"_set_{f.name}"
        env[setter] = _slot(cls, f.name).__set__
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_factory:
            env[f"_make_{f.name}"] = f.default_factory
        if not f.init:
            if f.default is not dataclasses.MISSING:
                env[f"_default_{f.name}"] = f.default
                body.append(f"{setter}(self, _default_{f.name})")
            elif has_factory:
                body.append(f"{setter}(self, _make_{f.name}())")
            continue
        param = f.name
        if has_factory:
            param += "=_FACTORY"
            body.append(f"{setter}(self, _make_{f.name}() if {f.name} is _FACTORY else {f.name})")
        else:
            if f.default is not dataclasses.MISSING:
                env[f"_default_{f.name}"] = f.default
                param += f"=_default_{f.name}"
            body.append(f"{setter}(self, {f.name})")
        (kw_params if f.kw_only is True else params).append(param)
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    signature = ", ".join(["self", *params, *(["*", *kw_params] if kw_params else [])])
    source = f"def __init__({signature}):\n    " + "\n    ".join(body or ["pass"])
    exec(source, env)  # our own field names, as dataclasses itself does
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
    return init


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({inner})"

    return __repr__


def _eq(compared: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    return __eq__


def _frozen_setattr(cls: type, names: tuple[str, ...]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    return __setattr__


def _frozen_delattr(cls: type, names: tuple[str, ...]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)

    return __delattr__


def _setstate(cls: type, names: tuple[str, ...]) -> Callable[[Any, Any], None]:
    setters = [_slot(cls, name).__set__ for name in names]

    def __setstate__(self: Any, state: Any) -> None:
        for store, item in zip(setters, state, strict=True):
            store(self, item)

    return __setstate__

"""``@value``: slotted dataclasses that cost little to define and to create.

A ``@value`` class is a real dataclass: ``dataclasses.fields``, ``replace``, ``asdict``,
``is_dataclass`` and pattern matching work, and ``__dataclass_params__`` says ``frozen``,
``eq`` and ``repr`` as for ``@dataclass(frozen=True, slots=True)``. Defining one costs a
fraction of what ``@dataclass`` costs, which matters because a script pays, at import, for
every data class of the library it loads:

* ``@dataclass`` compiles ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
  ``__setattr__`` and ``__delattr__`` from source for every class. Here ``__init__`` is
  compiled on first use (the first instance, or the first look at ``cls.__init__``, e.g. by
  ``inspect.signature``), and the rest are shared functions closed over the field names.
* Importing :mod:`dataclasses` itself loads :mod:`inspect` and :mod:`ast`. Here the
  ``dataclasses`` view of a class (``__dataclass_fields__``, ``__dataclass_params__``) is
  built on first access, by :mod:`dataclasses` itself; a chat that never asks for it never
  imports that module. :func:`field` and :func:`replace` stand in for the ``dataclasses``
  ones in the library's own modules.

The generated ``__init__`` stores through the slots' own descriptors instead of
``object.__setattr__``, so a frozen value is about as cheap to create as a mutable one (events
are created once per streamed token).

Supported: defaults, ``field(default_factory=..., repr=..., compare=..., hash=..., kw_only=...,
init=False with a default)``, ``ClassVar`` annotations, ``__post_init__``, class-level
``kw_only``, a ``@value`` base class. Not supported (``TypeError``): ``InitVar``, ``KW_ONLY``,
a base that is a plain dataclass, ``__slots__`` in the class body.
"""

from __future__ import annotations

import reprlib
import sys
from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

from ._value_fields import MISSING, Spec, field, specs_of_body

__all__ = ["field", "replace", "value"]

T = TypeVar("T")


@overload
def value(cls: type[T], /) -> type[T]: ...


@overload
def value(*, frozen: bool = True, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def value(cls: type[T] | None = None, /, *, frozen: bool = True, kw_only: bool = False) -> Any:
    """Make ``cls`` a slotted dataclass, frozen unless ``frozen=False``.

    Equivalent to ``@dataclass(frozen=frozen, slots=True, kw_only=kw_only)`` for the classes
    described in the module docstring.
    """

    def wrap(cls: type[T]) -> type[T]:
        return _build(cls, frozen, kw_only)

    return wrap if cls is None else wrap(cls)


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the dataclass instance ``obj`` with ``changes``: ``dataclasses.replace``.

    Raises:
        ValueError: a change names an ``init=False`` field.
        TypeError: a change names no field, or ``obj`` is no dataclass instance.
    """
    specs = _own_specs(type(obj))
    if specs is None:
        import dataclasses  # a plain dataclass: its own module already paid for this import

        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    for spec in specs:
        if not spec.init:
            if spec.name in changes:
                raise ValueError(
                    f"field {spec.name} is declared with init=False, "
                    "it cannot be specified with replace()"
                )
        elif spec.name not in changes:
            changes[spec.name] = getattr(obj, spec.name)
    return obj.__class__(**changes)


def _own_specs(cls: type) -> tuple[Spec, ...] | None:
    """The fields of ``cls`` when its nearest dataclass ancestor is a ``@value`` class."""
    for klass in cls.__mro__:
        own = klass.__dict__
        if "__value_fields__" in own:
            return own["__value_fields__"]  # type: ignore[no-any-return]
        if "__dataclass_fields__" in own:
            return None
    return None


def _build(cls: type[T], frozen: bool, kw_only: bool) -> type[T]:
    own = cls.__dict__
    if "__slots__" in own:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    module = sys.modules.get(cls.__module__)
    body = specs_of_body(cls, vars(module) if module else {}, kw_only)
    specs = _merged(cls, body)
    names = tuple(s.name for s in specs)
    inherited = {slot for base in cls.__mro__[1:-1] for slot in _slots(base)}
    namespace = {k: v for k, v in own.items() if k not in names}
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    namespace["__slots__"] = tuple(n for n in names if n not in inherited)
    namespace["__value_fields__"] = specs
    namespace["__value_frozen__"] = frozen
    namespace["__dataclass_fields__"] = _DataclassView()
    namespace["__dataclass_params__"] = _DataclassView()
    if "__match_args__" not in own:
        namespace["__match_args__"] = tuple(s.name for s in specs if s.init and not s.kw_only)
    if not own.get("__doc__"):
        namespace["__doc__"] = cls.__name__ + _text_signature(specs)
    metaclass: Any = type(cls)
    new: type[T] = metaclass(cls.__name__, cls.__bases__, namespace)
    new.__qualname__ = cls.__qualname__
    for name, method in _methods(new, specs, frozen):
        if name not in own:
            setattr(new, name, method)
    return new


def _merged(cls: type, body: list[Spec]) -> tuple[Spec, ...]:
    """The fields of the bases (``@value`` classes), then those of the body, by name."""
    merged: dict[str, Spec] = {}
    for base in cls.__mro__[-1:0:-1]:
        if "__dataclass_fields__" in base.__dict__ and "__value_fields__" not in base.__dict__:
            raise TypeError(f"a @value class may not subclass the dataclass {base.__name__}")
        merged.update((s.name, s) for s in base.__dict__.get("__value_fields__", ()))
    merged.update((s.name, s) for s in body)
    specs = tuple(merged.values())
    seen_default = False
    for spec in specs:
        if not spec.init or spec.kw_only:
            continue
        if spec.has_default:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {spec.name!r} follows default argument")
    return specs


def _slots(cls: type) -> Iterator[str]:
    slots = cls.__dict__.get("__slots__", ())
    yield from (slots,) if isinstance(slots, str) else slots


def _methods(cls: type, specs: tuple[Spec, ...], frozen: bool) -> Iterator[tuple[str, Any]]:
    """The methods ``@dataclass(eq=True, frozen=frozen, slots=True)`` would add."""
    own = cls.__dict__
    yield "__init__", _LazyInit(cls)
    yield "__repr__", _repr(tuple(s.name for s in specs if s.repr))
    yield "__eq__", _eq(_getter(tuple(s.name for s in specs if s.compare)))
    if sys.version_info >= (3, 13):
        yield "__replace__", replace
    # As @dataclass: a __hash__ the class body wrote itself is kept.
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if frozen:
        names = tuple(s.name for s in specs)
        yield "__setattr__", _frozen_setattr(cls, names)
        yield "__delattr__", _frozen_delattr(cls, names)
        state = _getter(names)
        yield "__getstate__", lambda self: state(self)  # a function: bound as a method
        yield "__setstate__", _setstate(cls, names)
        hashed = _getter(tuple(s.name for s in specs if s.hashed))
        if not explicit_hash:
            setattr(cls, "__hash__", lambda self: hash(hashed(self)))  # noqa: B010
    elif not explicit_hash:
        setattr(cls, "__hash__", None)  # noqa: B010 - mutable, compared by value: unhashable


def _text_signature(specs: tuple[Spec, ...]) -> str:
    """``(x: 'int', y: 'int' = 0)``: the ``__doc__`` @dataclass gives an undocumented class."""
    params: list[str] = []
    keywords: list[str] = []
    for s in specs:
        if not s.init:
            continue
        text = f"{s.name}: {_annotation_text(s.annotation)}"
        if s.default_factory is not MISSING:
            text += " = <factory>"
        elif s.default is not MISSING:
            text += f" = {s.default!r}"
        (keywords if s.kw_only else params).append(text)
    return f"({', '.join([*params, *(['*', *keywords] if keywords else [])])})"


def _annotation_text(annotation: Any) -> str:
    """An annotation as ``inspect.formatannotation`` writes it."""
    if isinstance(annotation, type):
        if annotation.__module__ == "builtins":
            return annotation.__qualname__
        return f"{annotation.__module__}.{annotation.__qualname__}"
    return repr(annotation).replace("typing.", "")


class _DataclassView:
    """``__dataclass_fields__`` or ``__dataclass_params__`` until first read: then both are
    built by :mod:`dataclasses` from the class's fields and put in the descriptors' place."""

    __slots__ = ("cls", "name")

    def __set_name__(self, owner: type, name: str) -> None:
        self.cls, self.name = owner, name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        fields, params = _dataclass_view(self.cls)
        setattr(self.cls, "__dataclass_fields__", fields)  # noqa: B010
        setattr(self.cls, "__dataclass_params__", params)  # noqa: B010
        return fields if self.name == "__dataclass_fields__" else params


def _dataclass_view(cls: type) -> tuple[dict[str, Any], Any]:
    """What ``@dataclass`` would have stored on ``cls``, made by ``@dataclass`` on a stand-in
    class with the same annotations and defaults (one per ``@value`` level of the MRO)."""
    import dataclasses

    shadow: type | None = None
    for klass in (*cls.__mro__[-1:0:-1], cls):
        if "__value_fields__" not in klass.__dict__:
            continue
        specs = {s.name: s for s in klass.__dict__["__value_fields__"]}
        own = vars(klass)  # not inspect.get_annotations: this module avoids importing inspect
        annotations = own.get("__annotations__", {})
        namespace: dict[str, Any] = {
            "__module__": klass.__module__,
            "__qualname__": klass.__qualname__,
            "__doc__": klass.__doc__,
            "__annotations__": annotations,
        }
        for name in annotations:
            if name in specs:
                namespace[name] = specs[name].to_field(dataclasses)
            elif name in klass.__dict__:  # a ClassVar's value
                namespace[name] = klass.__dict__[name]
        bases = () if shadow is None else (shadow,)
        shadow = dataclasses.dataclass(
            type(klass.__name__, bases, namespace), init=False, repr=False, eq=False
        )
    assert shadow is not None  # cls itself is a @value class
    params = shadow.__dataclass_params__  # type: ignore[attr-defined]
    params.init = params.repr = params.eq = True
    params.frozen = cls.__dict__["__value_frozen__"]
    return dict(shadow.__dataclass_fields__), params  # type: ignore[attr-defined]


class _LazyInit:
    """A class's ``__init__`` until first looked up: then compiled and put in its place."""

    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        init = _init(self.cls, self.cls.__dict__["__value_fields__"])
        setattr(self.cls, "__init__", init)  # noqa: B010 - later lookups find the function
        return init.__get__(obj, owner)


def _slot(cls: type, name: str) -> Any:
    """The descriptor of slot ``name``, which a base class may own."""
    return next(k.__dict__[name] for k in cls.__mro__ if name in k.__dict__)


def _init(cls: type, specs: tuple[Spec, ...]) -> Any:
    """Compile ``__init__``: each argument stored through its slot's descriptor."""
    env: dict[str, Any] = {"_FACTORY": _FACTORY}
    params: list[str] = []
    kw_params: list[str] = []
    body: list[str] = []
    for s in specs:
        setter = f"_set_{s.name}"
        env[setter] = _slot(cls, s.name).__set__
        has_factory = s.default_factory is not MISSING
        if has_factory:
            env[f"_make_{s.name}"] = s.default_factory
        if not s.init:
            if s.default is not MISSING:
                env[f"_default_{s.name}"] = s.default
                body.append(f"{setter}(self, _default_{s.name})")
            elif has_factory:
                body.append(f"{setter}(self, _make_{s.name}())")
            continue
        param = s.name
        if has_factory:
            param += "=_FACTORY"
            body.append(f"{setter}(self, _make_{s.name}() if {s.name} is _FACTORY else {s.name})")
        else:
            if s.default is not MISSING:
                env[f"_default_{s.name}"] = s.default
                param += f"=_default_{s.name}"
            body.append(f"{setter}(self, {s.name})")
        (kw_params if s.kw_only else params).append(param)
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    signature = ", ".join(["self", *params, *(["*", *kw_params] if kw_params else [])])
    # As @dataclass does: the helpers reach __init__ as closure cells, and its globals are the
    # class's module, where typing.get_type_hints(cls.__init__) resolves string annotations.
    source = (
        f"def __make_init__({', '.join(env)}):\n"
        f"  def __init__({signature}):\n    " + "\n    ".join(body or ["pass"]) + "\n"
        "  return __init__"
    )
    module = sys.modules.get(cls.__module__)
    made: dict[str, Any] = {}
    exec(source, vars(module) if module else {}, made)  # our own field names, as @dataclass
    init = made["__make_init__"](**env)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {s.name: s.annotation for s in specs if s.init} | {"return": None}
    return init


class _Factory:
    """The default shown in signatures for a field with a ``default_factory``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function returning the tuple of these attributes (for one name too)."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return attrgetter(*names)


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


def _frozen_error() -> type[AttributeError]:
    """``dataclasses.FrozenInstanceError`` (its module is loaded by then, or loaded now)."""
    import dataclasses

    return dataclasses.FrozenInstanceError


def _frozen_setattr(cls: type, names: tuple[str, ...]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error()(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    return __setattr__


def _frozen_delattr(cls: type, names: tuple[str, ...]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error()(f"cannot delete field {name!r}")
        object.__delattr__(self, name)

    return __delattr__


def _setstate(cls: type, names: tuple[str, ...]) -> Callable[[Any, Any], None]:
    setters = [_slot(cls, name).__set__ for name in names]

    def __setstate__(self: Any, state: Any) -> None:
        for store, item in zip(setters, state, strict=True):
            store(self, item)

    return __setstate__

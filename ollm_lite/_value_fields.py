"""The fields of a ``@value`` class: :func:`field`, and what a class body declares.

A :class:`Spec` holds what a ``dataclasses.Field`` holds, so that defining a ``@value`` class
needs no :mod:`dataclasses` import; :meth:`Spec.to_field` makes the real ``Field`` when the
``dataclasses`` view of the class is first asked for. ``dataclasses.field(...)`` in a class
body is understood too.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Mapping
from types import ModuleType
from typing import Any

__all__ = ["MISSING", "Spec", "field", "specs_of_body"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: "No default": the stand-in for ``dataclasses.MISSING``.
MISSING: Any = _Missing()


class Spec:
    """One field of a ``@value`` class, as ``dataclasses.field`` describes one."""

    __slots__ = (
        "annotation",
        "compare",
        "default",
        "default_factory",
        "hash",
        "init",
        "kw_only",
        "metadata",
        "name",
        "repr",
    )

    def __init__(
        self,
        default: Any = MISSING,
        default_factory: Any = MISSING,
        init: bool = True,
        repr: bool = True,
        hash: bool | None = None,
        compare: bool = True,
        metadata: Mapping[Any, Any] | None = None,
        kw_only: Any = MISSING,
    ) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.annotation: Any = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.hash = hash
        self.compare = compare
        self.metadata = metadata
        self.kw_only = kw_only

    @property
    def has_default(self) -> bool:
        """Whether ``__init__`` may leave this field out."""
        return self.default is not MISSING or self.default_factory is not MISSING

    @property
    def hashed(self) -> bool:
        """Whether ``__hash__`` reads this field (``@dataclass``'s rule)."""
        return bool(self.compare) if self.hash is None else bool(self.hash)

    def named(self, name: str, annotation: Any, kw_only: bool) -> Spec:
        """This field as ``name: annotation``; ``kw_only`` unless the field says otherwise."""
        spec = Spec(
            self.default,
            self.default_factory,
            self.init,
            self.repr,
            self.hash,
            self.compare,
            self.metadata,
            kw_only if self.kw_only is MISSING else bool(self.kw_only),
        )
        spec.name, spec.annotation = name, annotation
        return spec

    def to_field(self, dataclasses: ModuleType) -> Any:
        """The ``dataclasses.Field`` that declares the same field."""

        def real(item: Any) -> Any:
            return dataclasses.MISSING if item is MISSING else item

        return dataclasses.field(
            default=real(self.default),
            default_factory=real(self.default_factory),
            init=self.init,
            repr=self.repr,
            hash=self.hash,
            compare=self.compare,
            metadata=self.metadata,
            kw_only=real(self.kw_only),
        )


def field(**options: Any) -> Any:
    """A field of a ``@value`` class with options: ``dataclasses.field``'s keywords.

    Type checkers read the keywords by name (``typing.dataclass_transform`` field specifier),
    so one untyped signature serves where ``dataclasses.field`` has overloads.

    Raises:
        ValueError: both ``default`` and ``default_factory``.
        TypeError: a keyword ``dataclasses.field`` does not take.
    """
    return Spec(**options)


def specs_of_body(cls: type, module: Mapping[str, Any], kw_only: bool) -> list[Spec]:
    """The fields the body of ``cls`` declares, in order (``ClassVar`` annotations left out).

    ``module`` is the namespace string annotations are read in (``from __future__ import
    annotations``), as ``@dataclass`` reads them.

    Raises:
        TypeError: an ``InitVar`` or ``KW_ONLY`` annotation, or a field without annotation.
        ValueError: a mutable default (a list, dict or set): use ``default_factory``.
    """
    own = cls.__dict__
    annotations = own.get("__annotations__", {})
    specs = []
    for name, annotation in annotations.items():
        kind = _special(annotation, module)
        if kind == "ClassVar":
            continue
        if kind is not None:
            raise TypeError(f"@value does not support {kind} ({cls.__name__}.{name})")
        spec = _as_spec(own.get(name, MISSING))
        if spec.default is not MISSING and type(spec.default).__hash__ is None:
            raise ValueError(
                f"mutable default {type(spec.default)} for field {name} is not allowed: "
                "use default_factory"
            )
        specs.append(spec.named(name, annotation, kw_only))
    for name, item in own.items():
        if name not in annotations and _is_field(item):
            raise TypeError(f"{name!r} is a field but has no type annotation")
    return specs


def _as_spec(item: Any) -> Spec:
    if isinstance(item, Spec):
        return item
    if not _is_field(item):
        return Spec(default=item)
    dataclasses = sys.modules["dataclasses"]

    def ours(option: Any) -> Any:
        return MISSING if option is dataclasses.MISSING else option

    return Spec(
        ours(item.default),
        ours(item.default_factory),
        item.init,
        item.repr,
        item.hash,
        item.compare,
        item.metadata or None,
        ours(item.kw_only),
    )


def _is_field(item: Any) -> bool:
    """Whether ``item`` is a ``Spec`` or a ``dataclasses.Field`` (loaded only if used)."""
    dataclasses = sys.modules.get("dataclasses")
    return isinstance(item, Spec) or (
        dataclasses is not None and isinstance(item, dataclasses.Field)
    )


def _special(annotation: Any, module: Mapping[str, Any]) -> str | None:
    """``"ClassVar"``, ``"InitVar"`` or ``"KW_ONLY"`` for such an annotation, else ``None``."""
    if isinstance(annotation, str):  # "ClassVar[int]", "typing.ClassVar[int]"
        owner, _, name = annotation.split("[", 1)[0].strip().rpartition(".")
        target = getattr(module.get(owner.strip()), name, None) if owner else module.get(name)
    else:
        target = typing.get_origin(annotation) or annotation
    if target is typing.ClassVar:
        return "ClassVar"
    dataclasses = sys.modules.get("dataclasses")
    if dataclasses is None:
        return None
    if target is dataclasses.InitVar or isinstance(target, dataclasses.InitVar):
        return "InitVar"
    return "KW_ONLY" if target is dataclasses.KW_ONLY else None

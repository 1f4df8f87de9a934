"""``@value`` classes behave exactly like ``@dataclass(frozen=..., slots=True)`` ones."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import subprocess
import sys
import typing
from typing import Any, ClassVar

import pytest
from hypothesis import given, strategies as st

from ollm_lite._values import field, replace, value


@value
class Point:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, slots=True)
class RefPoint:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)


@value(frozen=False)
class Box:
    items: list[int] = dataclasses.field(default_factory=list)
    label: str = ""
    seen: int = dataclasses.field(default=0, kw_only=True)

    def __post_init__(self) -> None:
        self.label = self.label.strip()


@dataclasses.dataclass(slots=True)
class RefBox:
    items: list[int] = dataclasses.field(default_factory=list)
    label: str = ""
    seen: int = dataclasses.field(default=0, kw_only=True)

    def __post_init__(self) -> None:
        self.label = self.label.strip()


def _same_shape(ours: type, ref: type) -> None:
    assert dataclasses.is_dataclass(ours)
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(ref)]
    assert str(inspect.signature(ours)) == str(inspect.signature(ref))
    assert ours.__match_args__ == ref.__match_args__  # type: ignore[attr-defined]
    assert ours.__slots__ == ref.__slots__  # type: ignore[attr-defined]
    for flag in ("init", "repr", "eq", "frozen", "order"):
        ref_params = ref.__dataclass_params__  # type: ignore[attr-defined]
        assert getattr(ours.__dataclass_params__, flag) == getattr(ref_params, flag), flag  # type: ignore[attr-defined]


def test_the_classes_look_like_dataclasses() -> None:
    _same_shape(Point, RefPoint)
    _same_shape(Box, RefBox)


@given(st.integers(), st.integers(), st.lists(st.text(max_size=3), max_size=3))
def test_a_frozen_value_behaves_like_a_frozen_dataclass(x: int, y: int, tags: list[str]) -> None:
    ours, ref = Point(x, y, tags), RefPoint(x, y, tags)
    assert repr(ours).replace("Point", "RefPoint", 1) == repr(ref)
    assert ours == Point(x, y, list(tags)) and ours != Point(x + 1, y, tags)
    assert ours != ref  # another class is never equal, as with dataclasses
    assert copy.deepcopy(ours) == ours and pickle.loads(pickle.dumps(ours)) == ours
    assert dataclasses.replace(ours, y=y + 1) == Point(x, y + 1, tags)
    assert dataclasses.asdict(ours) == dataclasses.asdict(ref)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ours.x = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del ours.y  # type: ignore[misc]


@value
class Pair:
    a: int
    b: str = ""


def test_a_frozen_value_hashes_by_content() -> None:
    assert hash(Pair(1, "x")) == hash(Pair(1, "x"))
    assert len({Pair(1, "x"), Pair(1, "x"), Pair(2, "x")}) == 2
    with pytest.raises(TypeError):
        hash(Point(1, 2))  # a list field: unhashable, as with dataclasses


def test_defaults_are_fresh_and_keywords_stay_keywords() -> None:
    a, b = Point(1), Point(1)
    assert a.tags == [] and a.tags is not b.tags
    box = Box([1], "  x  ", seen=3)
    assert box == RefBoxLike(box) and box.label == "x"
    with pytest.raises(TypeError):
        Box([1], "x", 3)  # type: ignore[misc]


def RefBoxLike(box: Box) -> Box:
    ref = RefBox(list(box.items), box.label, seen=box.seen)
    return Box(ref.items, ref.label, seen=ref.seen)


def test_a_mutable_value_is_mutable_and_unhashable() -> None:
    box = Box()
    box.items.append(1)
    box.label = "y"
    assert box == Box([1], "y")
    with pytest.raises(TypeError):
        hash(box)
    assert copy.deepcopy(box) == box and pickle.loads(pickle.dumps(box)) == box


def test_pattern_matching_uses_the_fields() -> None:
    point: Any = Point(3, 4)
    match point:
        case Point(x, y):
            assert (x, y) == (3, 4)
        case _:  # pragma: no cover
            pytest.fail("no match")


def test_a_dataclass_may_subclass_a_frozen_value() -> None:
    @dataclasses.dataclass(frozen=True)
    class Point3(Point):
        z: int = 0

    assert Point3(1, 2, [], 3).z == 3


# --------------------------------------------------------------------------- the dataclasses view


@value(kw_only=True)
class Options:
    """Keyword-only fields, a ClassVar, and fields left out of repr, eq and hash."""

    kind: ClassVar[str] = "options"
    name: str
    level: int = 1
    secret: str = dataclasses.field(default="", repr=False)
    note: str = dataclasses.field(default="", compare=False, metadata={"doc": "free text"})
    ident: int = field(default=0, hash=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RefOptions:
    kind: ClassVar[str] = "options"
    name: str
    level: int = 1
    secret: str = dataclasses.field(default="", repr=False)
    note: str = dataclasses.field(default="", compare=False, metadata={"doc": "free text"})
    ident: int = dataclasses.field(default=0, hash=False)


@value(frozen=False)
class Base:
    a: int
    b: str = "b"


@value(frozen=False)
class Derived(Base):
    c: list[int] = field(default_factory=list)


@dataclasses.dataclass(slots=True)
class RefBase:
    a: int
    b: str = "b"


@dataclasses.dataclass(slots=True)
class RefDerived(RefBase):
    c: list[int] = dataclasses.field(default_factory=list)


_FIELD_ATTRS = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare")


def _same_fields(ours: type, ref: type) -> None:
    ours_all = ours.__dataclass_fields__  # type: ignore[attr-defined]
    ref_all = ref.__dataclass_fields__  # type: ignore[attr-defined]
    assert list(ours_all) == list(ref_all)  # ClassVar pseudo-fields included, in order
    for name, ref_field in ref_all.items():
        ours_field = ours_all[name]
        for attr in (*_FIELD_ATTRS, "kw_only", "metadata", "_field_type"):
            assert getattr(ours_field, attr) == getattr(ref_field, attr), (name, attr)


def test_the_dataclasses_view_matches_dataclass_field_by_field() -> None:
    for ours, ref in ((Point, RefPoint), (Box, RefBox), (Options, RefOptions)):
        _same_shape(ours, ref)
        _same_fields(ours, ref)
    _same_fields(Derived, RefDerived)
    assert [f.name for f in dataclasses.fields(Derived)] == ["a", "b", "c"]


def test_keyword_only_classes_and_field_options_behave_like_dataclass() -> None:
    ours = Options(name="n", secret="s", note="x", ident=7)
    ref = RefOptions(name="n", secret="s", note="x", ident=7)
    assert repr(ours).replace("Options", "RefOptions", 1) == repr(ref)
    assert ours == Options(name="n", secret="s", note="other", ident=7)  # note: compare=False
    assert hash(ours) == hash(Options(name="n", secret="s", ident=8))  # ident: hash=False
    assert Options.kind == "options" and "kind" not in {f.name for f in dataclasses.fields(ours)}
    assert dataclasses.asdict(ours) == dataclasses.asdict(ref)
    with pytest.raises(TypeError):
        Options("n")  # type: ignore[misc]


def test_a_value_may_subclass_a_value() -> None:
    item = Derived(1, "x", [2])
    assert (item.a, item.b, item.c) == (1, "x", [2])
    assert repr(item) == "Derived(a=1, b='x', c=[2])"
    assert item == Derived(1, "x", [2]) and item != Base(1, "x")
    assert str(inspect.signature(Derived)) == str(inspect.signature(RefDerived))
    assert replace(item, b="y") == Derived(1, "y", [2])


@given(st.integers(), st.integers(), st.lists(st.text(max_size=3), max_size=3), st.integers())
def test_replace_is_dataclasses_replace(x: int, y: int, tags: list[str], new_y: int) -> None:
    point = Point(x, y, tags)
    assert replace(point, y=new_y) == dataclasses.replace(point, y=new_y)
    box = Box([x], "a", seen=y)
    assert replace(box, seen=new_y) == dataclasses.replace(box, seen=new_y)
    with pytest.raises(TypeError):
        replace(point, nope=1)


def test_replace_refuses_an_init_false_field_and_serves_plain_dataclasses() -> None:
    @value
    class Counted:
        count: int = field(default=0, init=False)

    with pytest.raises(ValueError, match="init=False"):
        replace(Counted(), count=1)
    assert replace(RefPoint(1), y=2) == RefPoint(1, 2)


def test_an_undocumented_value_gets_the_doc_dataclass_gives() -> None:
    assert Point.__doc__ == (RefPoint.__doc__ or "").replace("Ref", "", 1)
    assert Derived.__doc__ == (RefDerived.__doc__ or "").replace("Ref", "", 1)


def test_class_bodies_dataclass_rejects_are_rejected() -> None:
    with pytest.raises(ValueError, match="mutable default"):

        @value
        class Mutable:
            items: list[int] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="follows default"):

        @value
        class Order:
            a: int = 0
            b: int

    with pytest.raises(TypeError, match="no type annotation"):

        @value
        class Unannotated:
            a = field(default=0)

    with pytest.raises(TypeError, match="__slots__"):

        @value
        class Slotted:
            __slots__ = ("a",)
            a: int


def test_defining_and_using_values_imports_no_dataclasses() -> None:
    """Defining, creating, comparing and replacing values never imports ``dataclasses``
    (it loads ``inspect`` and ``ast``: several milliseconds of every script's import)."""
    code = (
        "import sys\n"
        "from ollm_lite._values import field, replace, value\n"
        "@value\n"
        "class P:\n"
        "    x: int\n"
        "    tags: list[str] = field(default_factory=list)\n"
        "p = replace(P(1), x=2)\n"
        "assert p == P(2) and p != P(1) and repr(p) == 'P(x=2, tags=[])'\n"
        "print(sorted({'dataclasses', 'inspect'} & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def _public_values() -> list[type]:
    import ollm_lite.types as public

    return [
        item
        for name in public.__all__
        if isinstance(item := getattr(public, name), type) and dataclasses.is_dataclass(item)
    ]


@pytest.mark.parametrize("cls", _public_values(), ids=lambda cls: cls.__name__)
def test_init_annotations_resolve_where_the_class_was_defined(cls: type) -> None:
    # @dataclass gives __init__ the class module's globals: get_type_hints(cls.__init__) and
    # inspect.signature(cls, eval_str=True) resolve names such as Any or ToolCall there.
    hints = typing.get_type_hints(cls)
    expected = {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
    assert typing.get_type_hints(cls.__init__) == {**expected, "return": type(None)}
    evaluated = inspect.signature(cls, eval_str=True).parameters
    assert {name: p.annotation for name, p in evaluated.items()} == expected

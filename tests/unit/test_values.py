"""``@value`` classes behave exactly like ``@dataclass(frozen=..., slots=True)`` ones."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest
from hypothesis import given, strategies as st

from ollm_lite._values import value


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

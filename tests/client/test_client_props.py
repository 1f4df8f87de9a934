"""Properties of the script API's pure parts: typed answers, input coercion, options, the fold.

* A value of a schema type, written as JSON the way a model would (also fenced or padded),
  parses back to an equal value; data the schema rejects comes back as messages, and no text
  at all makes :func:`parse_answer` raise.
* Messages given as dicts or ``Message`` values come out with the same roles and texts, and
  the caller's objects are unchanged; image bytes survive the base64 round trip.
* Any set of valid option values resolves; any other keyword is a ``TypeError``.
* The fold of a provider stream agrees with ``collect_result`` (``BaseProvider.chat``).
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import enum
import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import pytest
from hypothesis import given, settings, strategies as st
from support.strategies import json_values

from ollm_lite import (
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    Message,
    OllmError,
    TextEvent,
    TextPart,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
)
from ollm_lite.client._inputs import as_image, as_messages
from ollm_lite.client._options import OPTION_NAMES, check_names, resolve
from ollm_lite.client._typed import answer_spec, parse_answer
from ollm_lite.providers.base import collect_result
from ollm_lite.types._event_fold import fold_events


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclass
class Inner:
    label: str
    score: float


@dataclass
class Record:
    name: str
    count: int
    ok: bool
    tags: list[str]
    color: Color
    kind: Literal["a", "b"]
    inner: Inner
    note: str | None = None
    extra: list[Inner] = field(default_factory=list)


class Point(TypedDict):
    x: int
    y: int


texts = st.text(max_size=20)
floats = st.floats(allow_nan=False, allow_infinity=False, width=32)
inners = st.builds(Inner, label=texts, score=floats)
records = st.builds(
    Record,
    name=texts,
    count=st.integers(-(10**9), 10**9),
    ok=st.booleans(),
    tags=st.lists(texts, max_size=3),
    color=st.sampled_from(Color),
    kind=st.sampled_from(["a", "b"]),
    inner=inners,
    note=st.none() | texts,
    extra=st.lists(inners, max_size=2),
)


def as_json(record: Record) -> Any:
    def plain(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, list):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(dataclasses.asdict(record))


wrappings = st.sampled_from(
    [
        "{}",
        "  {}\n",
        "```json\n{}\n```",
        "```\n{}\n```",
        "Here you go: {} Hope that helps.",
    ]
)


@given(records, wrappings, st.integers(0, 2))
def test_a_dataclass_value_round_trips_through_the_answer(
    record: Record, wrapping: str, indent: int
) -> None:
    spec = answer_spec(Record)
    text = wrapping.replace("{}", json.dumps(as_json(record), indent=indent or None))
    value, errors = parse_answer(text, spec)
    assert errors == []
    assert value == record


@given(st.fixed_dictionaries({"x": st.integers(), "y": st.integers()}))
def test_a_typed_dict_value_round_trips(point: dict[str, int]) -> None:
    value, errors = parse_answer(json.dumps(point), answer_spec(Point))
    assert errors == [] and value == point


@given(records, st.sampled_from(["name", "count", "inner", "color", "tags"]), json_values)
def test_changed_data_is_either_reported_or_read_back_exactly(
    record: Record, key: str, junk: Any
) -> None:
    data = as_json(record)
    data[key] = junk
    value, errors = parse_answer(json.dumps(data), answer_spec(Record))
    assert (value is None) == bool(errors)
    if not errors:  # the new value happened to fit the schema: it is what comes back
        assert isinstance(value, Record)
        assert as_json(value) == data


@given(records, st.sampled_from(["name", "count", "ok", "inner"]))
def test_a_missing_required_field_is_named(record: Record, key: str) -> None:
    data = as_json(record)
    del data[key]
    value, errors = parse_answer(json.dumps(data), answer_spec(Record))
    assert value is None
    assert any(key in e for e in errors)


@given(st.text(max_size=200))
def test_parse_answer_never_raises(text: str) -> None:
    for schema in (Record, Point, {"type": "array", "items": {"type": "integer"}}):
        value, errors = parse_answer(text, answer_spec(schema))
        assert (value is None) == bool(errors)


roles = st.sampled_from(["system", "user", "assistant", "tool"])
dict_messages = st.lists(
    st.fixed_dictionaries({"role": roles, "content": st.text(min_size=1, max_size=30)}),
    min_size=1,
    max_size=6,
)


@given(dict_messages)
def test_dict_messages_keep_roles_and_texts_and_are_not_changed(
    items: list[dict[str, str]],
) -> None:
    before = copy.deepcopy(items)
    messages = as_messages(items)
    assert [(m.role, m.text) for m in messages] == [(d["role"], d["content"]) for d in items]
    assert items == before


@given(dict_messages)
def test_message_values_are_copied_equal(items: list[dict[str, str]]) -> None:
    originals = [Message(d["role"], [TextPart(d["content"])]) for d in items]  # type: ignore[arg-type]
    copies = as_messages(originals)
    assert copies == originals
    assert all(
        c is not o and c.parts is not o.parts for c, o in zip(copies, originals, strict=True)
    )


@given(st.binary(min_size=1, max_size=300))
def test_image_bytes_survive_base64(data: bytes) -> None:
    part = as_image(data)
    assert base64.b64decode(part.data) == data
    assert part.mime_type.startswith("image/")


option_values = st.fixed_dictionaries(
    {},
    optional={
        "temperature": floats,
        "max_tokens": st.integers(1, 10**6),
        "top_p": st.floats(0, 1),
        "top_k": st.integers(1, 1000),
        "seed": st.integers(-(2**31), 2**31),
        "stop": st.text(min_size=1, max_size=5) | st.lists(st.text(max_size=5), max_size=3),
        "think": st.booleans() | st.sampled_from(["low", "medium", "high"]),
        "keep_alive": st.sampled_from(["5m", "1h", 0, 30.5]),
        "timeout": st.floats(0.001, 1e6),
        "tool_choice": st.sampled_from(["auto", "none", "required", "add"]),
        "headers": st.dictionaries(
            st.from_regex(r"X-[A-Za-z]{1,8}", fullmatch=True), texts, max_size=2
        ),
        "extra_body": st.dictionaries(st.text(min_size=1, max_size=5), json_values, max_size=3),
    },
)


@given(option_values)
def test_valid_options_resolve(options: dict[str, Any]) -> None:
    before = copy.deepcopy(options)
    check_names(options, "ask")
    resolved = resolve(options)
    assert resolved.generation.temperature == options.get("temperature")
    assert resolved.think == options.get("think")
    assert options == before


@given(st.text(min_size=1, max_size=20).filter(lambda n: n not in OPTION_NAMES))
def test_any_other_keyword_is_a_type_error(name: str) -> None:
    with pytest.raises(TypeError) as raised:
        check_names({name: 1}, "ask")
    assert repr(name) in str(raised.value)


calls = st.builds(
    lambda i, name: ToolCallEvent(ToolCall.from_arguments(f"c{i}", name, {"i": i})),
    st.integers(0, 50),
    st.sampled_from(["a", "b"]),
)
bodies = st.lists(
    st.builds(TextEvent, st.text(max_size=5))
    | st.builds(ThinkingEvent, st.text(max_size=5))
    | calls,
    max_size=8,
)
ends = st.sampled_from(
    [
        FinishEvent("stop"),
        FinishEvent("length"),
        FinishEvent("tool"),
        ErrorEvent(ErrorInfo("x", "LLM_BAD_RESPONSE")),
    ]
)


@settings(max_examples=200)
@given(bodies, ends)
def test_the_fold_agrees_with_collect_result(body: list[Any], end: Any) -> None:
    events = [*body, end]
    folded = fold_events(events)
    try:
        result = collect_result(iter(events))
    except OllmError as exc:
        assert folded.error is not None and folded.error.code == exc.code
        return
    assert folded.text == (result.content or "")
    assert folded.thinking == (result.thinking or "")
    assert folded.tool_calls == result.tool_calls
    assert folded.finish == end.reason

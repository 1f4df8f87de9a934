"""Typed answers: ``ask(prompt, schema=T)`` sends a JSON Schema and returns a validated T.

A dataclass gives an instance, a ``TypedDict`` or a JSON Schema dict gives the parsed data;
an answer that does not validate gets one corrective retry, then ``BadResponse`` with the
model's raw text in ``.details["raw"]``.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Literal, TypedDict

import pytest
from support.client_support import client

import ollm_lite
from ollm_lite import BadResponse, ConfigError, ScriptedProvider, TextEvent, Usage
from ollm_lite.client import Client


@dataclass
class Weather:
    """The weather in a city.

    Args:
        city: The city's name.
        celsius: Temperature in degrees Celsius.
    """

    city: str
    celsius: float
    sky: Literal["clear", "cloudy", "rain"] = "clear"


class Point(TypedDict):
    x: int
    y: int


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


@dataclass
class Diary:
    mood: Mood
    entries: list[Weather]


def test_a_dataclass_schema_returns_an_instance_and_sends_the_schema() -> None:
    llm, provider = client('{"city": "Oslo", "celsius": 4.5, "sky": "rain"}')
    weather = llm.ask("Weather in Oslo?", schema=Weather)
    assert weather == Weather("Oslo", 4.5, "rain")
    (request,) = provider.requests
    assert request.response_format == {
        "description": "The weather in a city.",
        "type": "object",
        "properties": {
            "city": {"description": "The city's name.", "type": "string"},
            "celsius": {"description": "Temperature in degrees Celsius.", "type": "number"},
            "sky": {"type": "string", "enum": ["clear", "cloudy", "rain"]},
        },
        "required": ["city", "celsius"],
        "additionalProperties": False,
    }


def test_the_schema_is_the_one_tool_uses() -> None:
    """The same type-hint → schema code as @tool (apart from closing the object)."""
    from ollm_lite.tools._schema import schema_for_type

    llm, provider = client('{"x": 1, "y": 2}')
    llm.ask("p", schema=Point)
    sent = provider.requests[0].response_format
    assert isinstance(sent, dict)
    expected = schema_for_type(Point)
    assert {k: v for k, v in sent.items() if k != "additionalProperties"} == expected


def test_a_typed_dict_gives_a_dict() -> None:
    llm, _ = client('{"x": 1, "y": 2}')
    assert llm.ask("p", schema=Point) == {"x": 1, "y": 2}


def test_a_json_schema_dict_gives_the_data_and_is_sent_unchanged() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    llm, provider = client('{"ok": true}')
    assert llm.ask("p", schema=schema) == {"ok": True}
    assert provider.requests[0].response_format == schema


def test_nested_dataclasses_and_enums_are_built() -> None:
    answer = {"mood": "happy", "entries": [{"city": "Oslo", "celsius": 1}]}
    llm, _ = client(json.dumps(answer))
    diary = llm.ask("p", schema=Diary)
    assert diary == Diary(Mood.HAPPY, [Weather("Oslo", 1)])


def test_a_fenced_answer_is_read() -> None:
    llm, _ = client('```json\n{"x": 1, "y": 2}\n```')
    assert llm.ask("p", schema=Point) == {"x": 1, "y": 2}


def test_one_corrective_retry_then_the_value() -> None:
    llm, provider = client(
        [TextEvent('{"city": "Oslo"}'), ollm_lite.FinishEvent("stop", Usage(5, 1, 6))],
        [
            TextEvent('{"city": "Oslo", "celsius": 3}'),
            ollm_lite.FinishEvent("stop", Usage(9, 2, 11)),
        ],
    )
    assert llm.ask("Weather?", schema=Weather) == Weather("Oslo", 3)
    first, second = provider.requests
    assert second.response_format == first.response_format
    correction = second.messages[-1]
    assert correction.role == "user"
    assert "celsius" in correction.text
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]


def test_an_answer_that_never_validates_raises_bad_response_with_the_raw_text() -> None:
    llm, provider = client("not json at all", '{"x": "one"}')
    with pytest.raises(BadResponse) as raised:
        llm.ask("p", schema=Point)
    assert raised.value.code == "LLM_BAD_RESPONSE"
    assert raised.value.details["raw"] == '{"x": "one"}'
    assert raised.value.details["attempts"] == 2
    assert len(provider.requests) == 2


def test_retries_are_configurable() -> None:
    llm, provider = client("nope", "nope", '{"x": 1, "y": 2}')
    llm.schema_retries = 0
    with pytest.raises(BadResponse) as raised:
        llm.ask("p", schema=Point)
    assert raised.value.details["raw"] == "nope"
    assert len(provider.requests) == 1
    llm.schema_retries = 2
    llm2 = Client(ScriptedProvider(["a", "b", '{"x": 1, "y": 2}']), model="m", schema_retries=2)
    assert llm2.ask("p", schema=Point) == {"x": 1, "y": 2}


def test_an_extra_key_is_caught_and_corrected() -> None:
    llm, _ = client('{"x": 1, "y": 2, "z": 3}', '{"x": 1, "y": 2}')
    assert llm.ask("p", schema=Point) == {"x": 1, "y": 2}


@pytest.mark.parametrize("bad", [Weather("a", 1), int.__add__, object()])
def test_a_schema_that_is_no_type_is_a_config_error(bad: object) -> None:
    llm, provider = client("x")
    with pytest.raises(ConfigError):
        llm.ask("p", schema=bad)
    assert provider.requests == []


def test_a_session_keeps_the_typed_exchange() -> None:
    llm, _ = client('{"x": 1, "y": 2}', "It is at (1, 2).")
    chat = llm.session()
    assert chat.ask("Where?", schema=Point) == {"x": 1, "y": 2}
    assert chat.ask("Say it in words") == "It is at (1, 2)."
    assert [m.role for m in chat.messages] == ["user", "assistant", "user", "assistant"]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_in_a_typed_answer_is_an_invalid_answer(constant: str) -> None:
    """NaN and Infinity are not JSON: the answer gets the corrective retry (saying why), and
    one that keeps them ends in BadResponse, never a value holding nan."""
    llm, provider = client(
        f'{{"city": "Oslo", "celsius": {constant}}}', '{"city": "Oslo", "celsius": 3}'
    )
    assert llm.ask("Weather?", schema=Weather) == Weather("Oslo", 3)
    assert "NaN or Infinity" in provider.requests[1].messages[-1].text
    llm, _ = client(f'{{"x": {constant}, "y": 1}}', f'Here: {{"x": 1, "y": {constant}}}')
    with pytest.raises(BadResponse):
        llm.ask("p", schema=Point)

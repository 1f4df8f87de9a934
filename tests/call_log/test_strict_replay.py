"""``ScriptedProvider.from_log`` is strict by default: each replayed request must be the one
its logged turn answered (messages, system prompt, tools, schema, ``tool_choice``, ``think``,
generation options), else the call fails with ``ConfigError`` naming the first difference;
``strict=False`` replays by order alone."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from support.log_support import logged, logging_client

import ollm_lite
from ollm_lite import (
    FinishEvent,
    GenerationOptions,
    Message,
    ScriptedProvider,
    TextEvent,
    ToolCall,
    ToolCallEvent,
    ToolSchema,
)
from ollm_lite.call_log._recorder import request_identity
from ollm_lite.call_log._records import dumps
from ollm_lite.call_log._replay import first_difference
from ollm_lite.errors import ConfigError
from ollm_lite.types import ProviderRequest, TextPart


def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


def other(city: str) -> str:
    """Another tool.

    Args:
        city: The city.
    """
    return city


SCHEMA = {"type": "object", "properties": {"capital": {"type": "string"}}}
LOGGED: dict[str, Any] = {
    "system": "Be brief.",
    "temperature": 0.2,
    "tools": [lookup],
    "tool_choice": "auto",
    "think": False,
}


def _logged_run(path: Path) -> list[ollm_lite.LoggedCall]:
    llm, _ = logging_client(path, "Paris.")
    assert llm.run("Capital of France?", **LOGGED).text == "Paris."
    return logged(path)


def test_the_same_request_replays(tmp_path: Path) -> None:
    replay = ScriptedProvider.from_log(_logged_run(tmp_path / "logs.db"))
    offline = ollm_lite.connect(replay, model="another-model")  # the model is not compared
    assert offline.run("Capital of France?", **LOGGED).text == "Paris."


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"prompt": "Summarise the report."}, 'messages[0] (user): logged "Capital of France?"'),
        ({"system": "Be long."}, 'system prompt: logged "Be brief.", now "Be long."'),
        ({"system": None}, 'system prompt: logged "Be brief.", now null'),
        ({"temperature": 0.9}, "options.temperature: logged 0.2, now 0.9"),
        ({"temperature": None}, "options.temperature: logged 0.2, now null"),
        ({"max_tokens": 5}, "options.max_tokens: logged null, now 5"),
        ({"tools": [other]}, "tools: logged"),
        ({"tool_choice": "required"}, 'tool_choice: logged "auto", now "required"'),
        ({"think": True}, "think: logged false, now true"),
    ],
)
def test_a_request_that_differs_fails_naming_the_first_difference(
    tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    replay = ScriptedProvider.from_log(_logged_run(tmp_path / "logs.db"))
    offline = ollm_lite.connect(replay, model="m")
    options = {k: v for k, v in {**LOGGED, **change}.items() if v is not None}
    prompt = options.pop("prompt", "Capital of France?")
    with pytest.raises(ConfigError) as caught:
        offline.run(prompt, **options)
    assert caught.value.code == "CONFIG_INVALID"
    assert "differs from logged turn 1" in str(caught.value)
    assert named in str(caught.value)


def test_ask_raises_the_config_error(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "France is in Europe.")
    llm.ask("Where is France?")
    offline = ollm_lite.connect(ScriptedProvider.from_log(logged(path)), model="m")
    with pytest.raises(ConfigError, match=r'now "Summarise the report\."'):
        offline.ask("Summarise the report.")


def test_a_schema_is_compared(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, '{"capital": "Paris"}')
    assert llm.ask("Capital of France?", schema=SCHEMA) == {"capital": "Paris"}
    again = ollm_lite.connect(ScriptedProvider.from_log(logged(path)), model="m")
    assert again.ask("Capital of France?", schema=SCHEMA) == {"capital": "Paris"}
    offline = ollm_lite.connect(ScriptedProvider.from_log(logged(path)), model="m")
    with pytest.raises(ConfigError, match=r"response_format: logged \{"):
        offline.ask("Capital of France?")


def test_not_strict_replays_by_order_alone(tmp_path: Path) -> None:
    replay = ScriptedProvider.from_log(_logged_run(tmp_path / "logs.db"), strict=False)
    offline = ollm_lite.connect(replay, model="m")
    assert offline.run("Summarise the report.").text == "Paris."


def test_a_tool_loop_replays_turn_by_turn_and_a_changed_tool_result_is_named(
    tmp_path: Path,
) -> None:
    path = tmp_path / "logs.db"
    call = ToolCall.from_arguments("c1", "lookup", {"city": "Oslo"})
    llm, _ = logging_client(
        path, [ToolCallEvent(call), FinishEvent("tool")], [TextEvent("Sunny."), FinishEvent("stop")]
    )
    assert llm.run("Weather in Oslo?", tools=[lookup]).text == "Sunny."
    calls = logged(path)
    again = ollm_lite.connect(ScriptedProvider.from_log(calls), model="m")
    assert again.run("Weather in Oslo?", tools=[lookup]).text == "Sunny."

    def changed(city: str) -> str:
        """The weather of a city.

        Args:
            city: The city.
        """
        return f"rain in {city}"

    changed.__name__ = "lookup"
    replay = ScriptedProvider.from_log(calls)
    with pytest.raises(ConfigError) as caught:
        ollm_lite.connect(replay, model="m").run("Weather in Oslo?", tools=[changed])
    said = str(caught.value)
    assert "logged turn 2" in said and "messages[2] (tool)" in said
    assert "sunny in Oslo" in said and "rain in Oslo" in said


#: What a request carries that is not what it asks: never compared (nor cached on).
NOT_IDENTITY = {"model", "cancel", "timeout", "headers", "keep_alive"}
#: A value other than the default, for each field of the request that is compared.
CHANGED: dict[str, Any] = {
    "messages": [Message("user", [TextPart("Other?")])],
    "system_prompt": "Be brief.",
    "tools": [ToolSchema("t", "A tool.", {"type": "object", "properties": {}})],
    "tool_choice": "required",
    "options": GenerationOptions(temperature=1.0),
    "response_format": "json",
    "think": True,
}


def _plain() -> ProviderRequest:
    return ProviderRequest("m", [Message("user", [TextPart("Hi?")])])


def test_every_field_of_a_request_and_its_options_is_compared() -> None:
    """Derived from the dataclasses: a field added to ``ProviderRequest`` or to
    ``GenerationOptions`` is compared (or this test names it)."""
    logged_request = json.loads(dumps(request_identity(_plain())))
    for item in fields(ProviderRequest):
        if item.name in NOT_IDENTITY:
            assert first_difference(logged_request, replace(_plain(), **{item.name: "x"})) is None
            continue
        changed = replace(_plain(), **{item.name: CHANGED[item.name]})
        assert first_difference(logged_request, changed) is not None, item.name
    for item in fields(GenerationOptions):
        value = {"stop": ["x"], "extra_body": {"k": 1}}.get(item.name, 3)
        changed = replace(_plain(), options=GenerationOptions(**{item.name: value}))
        found = first_difference(logged_request, changed)
        assert found is not None and found.startswith(f"options.{item.name}:"), item.name

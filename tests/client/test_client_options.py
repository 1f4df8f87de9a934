"""Options as keyword arguments: typos are TypeErrors at the call, values reach the request.

Covers every method (``connect``, the module-level shortcuts, ``Client`` and ``Session``),
defaults given to ``connect``, ``tool_choice`` on the first model turn only, and ``timeout``
as the deadline of the whole call.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from support.client_support import client

import ollm_lite
from ollm_lite import (
    ConfigError,
    GenerationOptions,
    RequestTimeout,
    ScriptedProvider,
    ScriptedTurn,
    TextEvent,
    ToolCall,
    ToolCallEvent,
    tool,
)
from ollm_lite._cancel_link import deadline_of
from ollm_lite.chat._call_settings import CallSettings
from ollm_lite.client import Client
from ollm_lite.client._options import OPTION_NAMES, resolve


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def session_of(llm: Client) -> Any:
    return llm.session()


# Every entry point, called with one misspelt keyword.
CALLS: dict[str, Callable[[Client], object]] = {
    "ask": lambda llm: llm.ask("hi", temprature=0.2),  # type: ignore[call-arg]
    "stream": lambda llm: llm.stream("hi", temprature=0.2),  # type: ignore[call-arg]
    "run": lambda llm: llm.run("hi", temprature=0.2),  # type: ignore[call-arg]
    "events": lambda llm: llm.events("hi", temprature=0.2),  # type: ignore[call-arg]
    "session.ask": lambda llm: session_of(llm).ask("hi", temprature=0.2),
    "session.stream": lambda llm: session_of(llm).stream("hi", temprature=0.2),
    "session.run": lambda llm: session_of(llm).run("hi", temprature=0.2),
    "session.events": lambda llm: session_of(llm).events("hi", temprature=0.2),
}


@pytest.mark.parametrize("name", CALLS)
def test_an_unknown_keyword_is_a_type_error_at_the_call(name: str) -> None:
    """Raised by the call itself: for stream/events before any iteration, nothing sent."""
    llm, provider = client("x")
    with pytest.raises(TypeError) as raised:
        CALLS[name](llm)
    assert "'temprature'" in str(raised.value)
    assert "did you mean 'temperature'" in str(raised.value)
    assert not isinstance(raised.value, ollm_lite.OllmError)
    assert provider.requests == []


def test_connect_rejects_an_unknown_keyword() -> None:
    with pytest.raises(TypeError, match="'max_token'"):
        ollm_lite.connect(ScriptedProvider(), max_token=5)  # type: ignore[call-arg]


@pytest.mark.parametrize("shortcut", [ollm_lite.ask, ollm_lite.stream])
def test_module_shortcuts_reject_an_unknown_keyword_before_connecting(
    shortcut: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_connect() -> Client:
        raise AssertionError("connected before checking the keywords")

    monkeypatch.setattr(ollm_lite.client, "connect", no_connect)
    with pytest.raises(TypeError, match="'sead'"):
        shortcut("hi", sead=1)


def test_every_option_reaches_the_request() -> None:
    llm, provider = client("x")
    llm.ask(
        "hi",
        temperature=0.2,
        max_tokens=50,
        top_p=0.9,
        top_k=40,
        repeat_penalty=1.1,
        seed=7,
        stop="END",
        presence_penalty=0.1,
        frequency_penalty=0.2,
        extra_body={"mirostat": 2},
        think=False,
        keep_alive="10m",
        headers={"X-Trace": "abc"},
        timeout=30,
    )
    (request,) = provider.requests
    assert request.options == GenerationOptions(
        temperature=0.2,
        max_tokens=50,
        top_p=0.9,
        top_k=40,
        repeat_penalty=1.1,
        seed=7,
        stop=["END"],
        presence_penalty=0.1,
        frequency_penalty=0.2,
        extra_body={"mirostat": 2},
    )
    assert request.think is False
    assert request.keep_alive == "10m"
    assert request.headers == {"X-Trace": "abc"}
    # the call's deadline travels as the absolute time it is, on the request's cancel event
    deadline = deadline_of(request.cancel)
    assert deadline is not None and 0 < deadline - time.monotonic() <= 30


def test_connect_options_are_defaults_and_a_call_wins() -> None:
    llm, provider = client(
        "x", "y", temperature=0.1, headers={"A": "1"}, extra_body={"k": 1, "j": 2}
    )
    llm.ask("one")
    llm.ask("two", temperature=0.9, headers={"B": "2"}, extra_body={"k": 3})
    first, second = provider.requests
    assert first.options.temperature == 0.1 and first.headers == {"A": "1"}
    assert second.options.temperature == 0.9
    assert second.headers == {"A": "1", "B": "2"}
    assert second.options.extra_body == {"k": 3, "j": 2}


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("temperature", "hot"),
        ("temperature", float("nan")),
        ("max_tokens", 0),
        ("max_tokens", 2.5),
        ("seed", True),
        ("stop", [1, 2]),
        ("timeout", -1),
        ("think", ""),
        ("keep_alive", []),
        ("tool_choice", 3),
        ("headers", {"A": 1}),
        ("extra_body", "x"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_option(option: str, value: object) -> None:
    llm, provider = client("x")
    with pytest.raises(ConfigError) as raised:
        llm.ask("hi", **{option: value})  # type: ignore[arg-type]
    assert raised.value.code == "CONFIG_INVALID"
    assert option in raised.value.message
    assert provider.requests == []


def test_a_bad_default_fails_at_connect() -> None:
    with pytest.raises(ConfigError, match="temperature"):
        ollm_lite.connect(ScriptedProvider(), temperature="warm")  # type: ignore[arg-type]


def test_tool_choice_forces_the_first_turn_only() -> None:
    call = ToolCallEvent(ToolCall.from_arguments("c1", "add", {"a": 1, "b": 2}))
    llm, provider = client([call], "three")
    reply = llm.run("1+2", tools=[add], tool_choice="add")
    assert reply.text == "three"
    first, second = provider.requests
    assert first.tool_choice == {"name": "add"}
    assert second.tool_choice == "auto"


def test_tool_choice_required() -> None:
    call = ToolCallEvent(ToolCall.from_arguments("c1", "add", {"a": 1, "b": 2}))
    llm, provider = client([call], "three")
    llm.run("1+2", tools=[add], tool_choice="required")
    assert [r.tool_choice for r in provider.requests] == ["required", "auto"]


@pytest.mark.parametrize("choice", ["nope", "required"])
def test_tool_choice_must_name_an_offered_tool(choice: str) -> None:
    llm, provider = client("x")
    with pytest.raises(ConfigError, match="tool_choice"):
        llm.run("hi", tool_choice=choice)
    assert provider.requests == []


def test_timeout_is_the_deadline_of_the_whole_call() -> None:
    """Two slow tool turns: every request carries the call's one deadline (what is left
    shrinks, the time does not move), then the call times out."""

    @tool
    def slow() -> str:
        """Takes a while."""
        time.sleep(0.4)
        return "done"

    call = ToolCallEvent(ToolCall.from_arguments("c1", "slow", {}))
    llm, provider = client([call], [call], "never")
    before = time.monotonic()
    with pytest.raises(RequestTimeout) as raised:
        llm.run("go", tools=[slow], timeout=0.6)
    assert raised.value.code == "LLM_TIMEOUT"
    deadlines = [deadline_of(r.cancel) for r in provider.requests]
    assert 1 <= len(deadlines) <= 2  # the third request is never sent
    first = deadlines[0]
    assert first is not None and before < first <= time.monotonic()
    assert all(d == first for d in deadlines)


def test_timeout_bounds_a_silent_model() -> None:
    llm, _ = client(ScriptedTurn([TextEvent("a")], hang=True))
    with pytest.raises(RequestTimeout):
        llm.ask("hi", timeout=0.2)


def test_the_callers_objects_are_not_changed() -> None:
    from ollm_lite import Message

    messages = [{"role": "user", "content": "hi"}]
    typed = [Message.user("hello")]
    extra = {"nested": {"a": 1}}
    headers = {"X": "1"}
    stop = ["END"]
    tools = [add]
    before = copy.deepcopy((messages, typed, extra, headers, stop))
    llm, _ = client("a", "b", extra_body={"nested": {"b": 2}})
    llm.ask(messages, extra_body=extra, headers=headers, stop=stop)
    llm.run(typed, tools=tools)
    assert (messages, typed, extra, headers, stop) == before
    assert tools == [add]


def test_cancel_from_another_thread_stops_ask() -> None:
    cancel = threading.Event()
    llm, _ = client(ScriptedTurn([TextEvent("a")], hang=True))
    threading.Timer(0.1, cancel.set).start()
    with pytest.raises(ollm_lite.Cancelled):
        llm.ask("hi", cancel=cancel)


def test_the_options_are_the_generation_fields_and_the_call_settings() -> None:
    """One table: every ``GenerationOptions`` field is a keyword, and every other keyword is a
    setting of the call, resolved into the ``CallSettings`` field of its name."""
    generation = {f.name for f in dataclasses.fields(GenerationOptions)}
    settings = {f.name for f in dataclasses.fields(CallSettings)}
    assert generation <= set(OPTION_NAMES)
    assert set(OPTION_NAMES) - generation <= settings
    resolved = resolve({"temperature": 0.5, "seed": 3, "keep_alive": "5m", "think": "low"})
    assert resolved.generation == GenerationOptions(temperature=0.5, seed=3)
    assert (resolved.keep_alive, resolved.think, resolved.headers) == ("5m", "low", {})

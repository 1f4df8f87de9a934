"""Malformed messages given to ``ask``/``run``/``events`` and a ``Session``: ``ConfigError``.

A message dict with a field of the wrong type, or a ``Message`` whose (mutable) fields were
set to something else, is refused before anything is sent: ``ask`` and ``run`` raise
``ConfigError`` (``CONFIG_INVALID``), ``events`` yields an ``ErrorEvent`` and never raises, a
session's history is left as it was.
"""

from __future__ import annotations

import reprlib
from typing import Any

import pytest
from support.client_support import client

import ollm_lite
from ollm_lite import ChatFinishEvent, ConfigError, ErrorEvent, Message, TextPart, ToolCall


def deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def broken_message(**changes: Any) -> Message:
    message = Message.user("hi")
    for name, value in changes.items():
        object.__setattr__(message, name, value)
    return message


BAD_DICTS: list[Any] = [
    {"role": "assistant", "content": "x", "tool_calls": 5},
    {"role": "assistant", "content": "x", "tool_calls": "abc"},
    {"role": "assistant", "content": "x", "tool_calls": {"function": {"name": "f"}}},
    {"role": "assistant", "content": "x", "tool_calls": [{"function": "x"}]},
    {"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": 5}}]},
    {"role": "assistant", "tool_calls": [{"id": 5, "function": {"name": "f"}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 5}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": {1, 2}}}}]},
    {
        "role": "assistant",
        "tool_calls": [{"function": {"name": "f", "arguments": {"a": deep(5000)}}}],
    },
    {
        "role": "assistant",
        "tool_calls": [{"function": {"name": "f", "arguments": {"a": float("nan")}}}],
    },
    {"role": "user", "content": [{"type": "image_url", "image_url": "x"}]},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": 5}}]},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "/tmp/p\0.png"}}]},
    {"role": "user", "content": [{"type": "text", "text": 5}]},
    {"role": "user", "content": [5]},
    {"role": "user", "content": [{"type": "audio", "data": deep(5000)}]},
    {"role": "user", "content": {"text": "x"}},
    {"role": deep(5000), "content": "x"},
    {"role": "tool", "content": "x", "tool_call_id": 5},
    {"role": "tool", "content": "x", "name": ["f"]},
]

BAD_MESSAGES: list[Message] = [
    broken_message(role="wizard"),
    broken_message(role=["user"]),
    broken_message(parts=None),
    broken_message(parts=["hi"]),
    broken_message(parts=[TextPart(5)]),  # type: ignore[arg-type]
    broken_message(tool_calls=5),
    broken_message(tool_calls=[{"id": "1"}]),
    broken_message(tool_calls=[ToolCall("1", "f", None, "{}")]),  # type: ignore[arg-type]
    broken_message(name=5),
    broken_message(tool_call_id=b"1"),
]


@pytest.mark.parametrize("bad", [*BAD_DICTS, *BAD_MESSAGES], ids=lambda v: reprlib.repr(v))
def test_a_malformed_message_is_a_config_error_and_an_error_event(bad: Any) -> None:
    llm, provider = client("x", "x")
    prompt = [{"role": "user", "content": "hi"}, bad, {"role": "user", "content": "and?"}]
    with pytest.raises(ConfigError) as caught:
        llm.ask(prompt)
    assert caught.value.code == "CONFIG_INVALID"
    assert caught.value.message.startswith("message 1: ")
    with pytest.raises(ConfigError):
        llm.run(prompt)
    events = list(llm.events(prompt))
    assert [type(e) for e in events] == [ErrorEvent, ChatFinishEvent]
    assert events[0].error.code == "CONFIG_INVALID"
    chat = llm.session()
    with pytest.raises(ConfigError):
        chat.ask(prompt)
    assert next(iter(chat.events(prompt))).type == "error"
    assert chat.messages == []
    assert provider.requests == []


def test_tool_call_arguments_given_as_a_dict_are_copied_not_kept() -> None:
    arguments = {"city": "Oslo"}
    prompt = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "function": {"name": "w", "arguments": arguments}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3 degrees"},
    ]
    llm, provider = client("It is 3 degrees.")
    assert llm.ask(prompt) == "It is 3 degrees."
    sent = provider.requests[0].messages[1].tool_calls[0]
    assert sent.args == arguments and sent.args is not arguments
    assert sent.arguments == '{"city": "Oslo"}'


@pytest.mark.parametrize(
    "messages",
    [5, "hi", [5], [{"role": "user", "content": "x"}], *([m] for m in BAD_MESSAGES)],
    ids=lambda v: reprlib.repr(v),
)
def test_a_session_built_from_bad_messages_is_a_config_error(messages: Any) -> None:
    llm, _ = client()
    with pytest.raises(ConfigError):
        ollm_lite.Session(llm, messages=messages)

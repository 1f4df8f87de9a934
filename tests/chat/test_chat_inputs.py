"""The chat runtime on bad arguments, minimal custom adapters and tools that leave abruptly.

Each bad argument ends the chat with an ``ErrorEvent`` carrying a stable code and a
``ChatFinishEvent("error")``, before anything is sent and without touching the history.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support.transport_support import wait_for_threads

from ollm_lite.chat import ChatClient
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.tools import ToolRegistry
from ollm_lite.types import (
    ChatFinishEvent,
    ErrorEvent,
    FinishEvent,
    ImagePart,
    Message,
    ProviderRequest,
    TextEvent,
    ToolCall,
    ToolCallEvent,
    ToolCallResultEvent,
)


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


def run(events: Iterator[Any]) -> list[Any]:
    return list(events)


def finish(events: list[Any]) -> ChatFinishEvent:
    last = events[-1]
    assert isinstance(last, ChatFinishEvent)
    return last


@pytest.mark.parametrize(
    ("kwargs", "prompt"),
    [
        ({"max_turns": 0}, "hi"),
        ({"max_turns": -3}, "hi"),
        ({"max_turns": 2.5}, "hi"),
        ({"tool_mode": "sometimes"}, "hi"),
        ({"tools": 42}, "hi"),
        ({}, ""),
        ({}, None),
        ({}, Message("user", [])),
        ({"images": ["not an image"]}, "look"),
    ],
)
def test_bad_arguments_end_with_config_invalid_and_leave_history_alone(
    kwargs: dict[str, Any], prompt: Any
) -> None:
    provider = ScriptedProvider(["never sent"])
    conversation = ChatClient(provider, model="m").conversation()
    events = run(conversation.send(prompt, **kwargs))
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [e.error.code for e in errors] == ["CONFIG_INVALID"]
    assert finish(events).reason == "error"
    assert conversation.history == []
    assert provider.requests == []


def test_a_zero_max_turns_is_not_replaced_by_the_default() -> None:
    client = ChatClient(ScriptedProvider(["x"]), model="m", max_turns=5)
    events = run(client.chat("hi", max_turns=0))
    assert finish(events).reason == "error"
    assert "max_turns" in next(e for e in events if isinstance(e, ErrorEvent)).error.message


def test_an_image_only_prompt_is_accepted() -> None:
    provider = ScriptedProvider(["a cat"])
    image = ImagePart("aGk=", "image/png")
    events = run(ChatClient(provider, model="m").chat("", images=[image]))
    assert finish(events).reason == "complete"
    assert provider.requests[0].messages[0].parts == [image]


def test_tools_may_be_a_plain_list_of_functions() -> None:
    provider = ScriptedProvider(
        [[ToolCallEvent(ToolCall.from_arguments("c1", "add", {"a": 2, "b": 3}))], "5"]
    )
    events = run(ChatClient(provider, model="m").chat("2+3?", tools=[add]))
    results = [e.result for e in events if isinstance(e, ToolCallResultEvent)]
    assert [(r.ok, r.data) for r in results] == [(True, 5)]
    assert finish(events).reason == "complete"
    assert provider.requests[0].tools is not None
    assert [s.name for s in provider.requests[0].tools] == ["add"]


class MinimalAdapter:
    """A user's own adapter with only what streaming needs (no capabilities, no extras)."""

    name = "mine"
    streaming_format = "ndjson"

    def __init__(self) -> None:
        self.requests: list[ProviderRequest] = []

    def chat_stream(self, request: ProviderRequest) -> Iterator[Any]:
        self.requests.append(request)
        yield TextEvent("hello")
        yield FinishEvent("stop")


def test_a_minimal_custom_adapter_chats_with_tools() -> None:
    adapter = MinimalAdapter()
    events = run(ChatClient(adapter, model="m", tools=[add]).chat("hi"))  # type: ignore[arg-type]
    assert [e.value for e in events if isinstance(e, TextEvent)] == ["hello"]
    assert finish(events).reason == "complete"
    assert adapter.requests[0].tools is not None  # unknown capabilities: native tools


class DeafAdapter:
    """Streams forever and never looks at ``request.cancel``."""

    name = "deaf"
    streaming_format = "ndjson"

    def __init__(self) -> None:
        self.sent = 0

    def chat_stream(self, request: ProviderRequest) -> Iterator[Any]:
        while True:
            self.sent += 1
            yield TextEvent("x")


def test_cancel_stops_an_adapter_that_ignores_the_cancel_event() -> None:
    adapter = DeafAdapter()
    cancel = threading.Event()
    events = []
    for event in ChatClient(adapter, model="m").chat("hi", cancel=cancel):  # type: ignore[arg-type]
        events.append(event)
        if len(events) == 3:
            cancel.set()
        assert len(events) < 1000, "the chat did not stop after cancel"
    assert finish(events).reason == "cancelled"
    assert adapter.sent <= 4


def exit_tool() -> str:
    """Calls sys.exit."""
    sys.exit(3)


def cancelled_tool() -> str:
    """Raises asyncio.CancelledError (a BaseException)."""
    raise asyncio.CancelledError("torn down")


def interrupted_tool() -> str:
    """Raises KeyboardInterrupt on a worker thread."""
    raise KeyboardInterrupt


@pytest.mark.parametrize("fn", [exit_tool, cancelled_tool, interrupted_tool])
def test_a_tool_raising_a_base_exception_becomes_a_failed_result(fn: Any) -> None:
    """Before: the worker thread died, no result was ever recorded and chat() hung forever."""
    provider = ScriptedProvider(
        [[ToolCallEvent(ToolCall.from_arguments("c1", fn.__name__, {}))], "ok"]
    )
    done: list[list[Any]] = []
    baseline = threading.active_count()
    worker = threading.Thread(
        target=lambda: done.append(run(ChatClient(provider, model="m", tools=[fn]).chat("go"))),
        daemon=True,
    )
    worker.start()
    worker.join(30)
    assert done, "chat() hung on a tool that raised a BaseException"
    events = done[0]
    result = next(e.result for e in events if isinstance(e, ToolCallResultEvent))
    assert not result.ok and result.error is not None
    assert result.error.code == "TOOL_EXECUTION_FAILED"
    assert finish(events).reason == "complete"
    assert wait_for_threads(baseline) == baseline


def test_execute_turns_system_exit_into_a_result_but_lets_ctrl_c_through() -> None:
    tools = ToolRegistry([exit_tool, interrupted_tool])
    result = tools.execute(ToolCall.from_arguments("c1", "exit_tool", {}))
    assert not result.ok and result.error is not None
    assert result.error.code == "TOOL_EXECUTION_FAILED"
    with pytest.raises(KeyboardInterrupt):
        tools.execute(ToolCall.from_arguments("c2", "interrupted_tool", {}))


def test_message_rejects_an_unknown_role() -> None:
    with pytest.raises(ValueError, match="role"):
        Message("bogus", [])  # type: ignore[arg-type]

"""The whole chat loop over real HTTP: ``LocalProvider`` against a loopback Ollama replaying NDJSON.

The server (``ollama_replay`` in conftest.py) streams hand-written ``/api/chat`` lines one HTTP
chunk at a time and answers ``/api/show`` (capabilities, context length), so these tests go
through the transport, the NDJSON decoder, the Ollama wire mapping, the token guard, the tool
pool and the history — no mocks.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from support.transport_support import wait_for_threads

from ollm_lite.chat import ChatClient
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.tools import tool
from ollm_lite.types import (
    ChatEvent,
    ChatFinishEvent,
    ErrorEvent,
    TextEvent,
    ThinkingEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    TurnCompleteEvent,
    WarningEvent,
)

Start = Callable[..., Any]  # conftest.ollama_replay's start(): an OllamaReplay
CREATED = "2025-07-07T20:22:19.184789Z"


def line(content: str = "", **message: Any) -> dict[str, Any]:
    return {
        "model": "llama3.2",
        "created_at": CREATED,
        "message": {"role": "assistant", "content": content, **message},
        "done": False,
    }


def done(prompt: int = 31, evals: int = 7, reason: str = "stop") -> dict[str, Any]:
    return {
        "model": "llama3.2",
        "created_at": CREATED,
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": reason,
        "total_duration": 498215833,
        "load_duration": 25617667,
        "prompt_eval_count": prompt,
        "prompt_eval_duration": 61849250,
        "eval_count": evals,
        "eval_duration": 409442375,
    }


def call(name: str, args: dict[str, Any], id: str, index: int = 0) -> dict[str, Any]:
    return {"id": id, "function": {"index": index, "name": name, "arguments": args}}


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather of a city.

    Args:
        city: The city name.
    """
    return {"city": city, "temp_c": 21}


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


def provider(server: Any) -> LocalProvider:
    return LocalProvider(base_url=server.url, timeout=10, retries=0)


def test_native_tool_loop_over_http(ollama_replay: Start) -> None:
    server = ollama_replay(
        [
            [
                line(thinking="Need weather and a sum."),
                line(tool_calls=[call("get_weather", {"city": "Oslo"}, "call_w1")]),
                line(tool_calls=[call("add", {"a": 2, "b": 3}, "call_a1", index=1)]),
                done(prompt=40, evals=12),
            ],
            [line("Oslo is "), line("21 °C; "), line("2+3=5."), done(prompt=90, evals=9)],
        ]
    )
    client = ChatClient(provider(server), tools=[get_weather, add], model="llama3.2")
    events = list(client.chat("Weather in Oslo, and 2+3?"))

    texts = [e.value for e in events if isinstance(e, TextEvent)]
    assert texts == ["Oslo is ", "21 °C; ", "2+3=5."]
    assert [e.value for e in events if isinstance(e, ThinkingEvent)] == ["Need weather and a sum."]
    starts = [e.tool_call.name for e in events if isinstance(e, ToolCallStartEvent)]
    results = {e.tool_call.name: e.result for e in events if isinstance(e, ToolCallResultEvent)}
    assert starts == ["get_weather", "add"]
    assert results["get_weather"].data == {"city": "Oslo", "temp_c": 21}
    assert results["add"].data == 5
    assert [e.turn_number for e in events if isinstance(e, TurnCompleteEvent)] == [1, 2]
    finish = events[-1]
    assert isinstance(finish, ChatFinishEvent) and finish.reason == "complete"
    assert finish.usage is not None
    assert (finish.usage.prompt_tokens, finish.usage.completion_tokens) == (130, 21)

    first, second = server.chat_bodies
    assert first["model"] == "llama3.2" and first["stream"] is True
    assert {t["function"]["name"] for t in first["tools"]} == {"get_weather", "add"}
    assert [m["role"] for m in first["messages"]] == ["user"]
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["user", "assistant", "tool", "tool"]
    assistant = second["messages"][1]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["get_weather", "add"]
    assert assistant["tool_calls"][0]["function"]["arguments"] == {"city": "Oslo"}
    weather, total = second["messages"][2:]
    assert (weather["tool_name"], weather["tool_call_id"]) == ("get_weather", "call_w1")
    assert json.loads(weather["content"]) == {"ok": True, "data": {"city": "Oslo", "temp_c": 21}}
    assert (total["tool_name"], json.loads(total["content"])) == ("add", {"ok": True, "data": 5})


def test_react_fallback_over_http_for_a_model_without_tools(ollama_replay: Start) -> None:
    server = ollama_replay(
        [
            [
                line("Thought: I should add.\nAction: add\n"),
                line('Action Input: {"a": 40, "b": 2}'),
                done(),
            ],
            [line("Thought: done.\nFinal Answer: "), line("42"), done()],
        ],
        capabilities=["completion"],
    )
    client = ChatClient(provider(server), tools=[add], model="llama3.2")
    events = list(client.chat("What is 40+2?"))

    results = [e.result for e in events if isinstance(e, ToolCallResultEvent)]
    assert [r.data for r in results] == [42]
    assert [e.value for e in events if isinstance(e, TextEvent)] == ["42"]
    assert isinstance(events[-1], ChatFinishEvent) and events[-1].reason == "complete"
    first, second = server.chat_bodies
    assert "tools" not in first  # the model cannot call tools natively: text protocol only
    system = first["messages"][0]
    assert system["role"] == "system" and "add" in system["content"]
    assert "\nObservation:" in first["options"]["stop"]
    observation = second["messages"][-1]
    assert observation["role"] == "user"
    assert observation["content"].startswith("Observation: ")
    assert json.loads(observation["content"][len("Observation: ") :]) == {"ok": True, "data": 42}


def test_conversation_carries_history_across_sends_over_http(ollama_replay: Start) -> None:
    server = ollama_replay([[line("Hi Ada."), done()], [line("Your name is Ada."), done()]])
    conversation = ChatClient(provider(server), model="llama3.2").conversation(
        system_prompt="Be brief."
    )
    assert conversation.run("I am Ada.").phase == "completed"
    result = conversation.run("Who am I?")
    assert (result.phase, result.text, result.turns) == ("completed", "Your name is Ada.", 1)
    messages = server.chat_bodies[1]["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("system", "Be brief."),
        ("user", "I am Ada."),
        ("assistant", "Hi Ada."),
        ("user", "Who am I?"),
    ]


def test_cancel_mid_stream_closes_the_connection_promptly(ollama_replay: Start) -> None:
    server = ollama_replay([{"lines": [line("Once upon")], "hang": True}])
    client = ChatClient(provider(server), model="llama3.2")
    baseline = threading.active_count()
    cancel = threading.Event()
    events: list[ChatEvent] = []
    started = 0.0
    for event in client.chat("Tell a long story", cancel=cancel):
        events.append(event)
        if isinstance(event, TextEvent):
            started = time.monotonic()
            threading.Timer(0.1, cancel.set).start()
    elapsed = time.monotonic() - started

    assert [type(e).__name__ for e in events] == ["TextEvent", "ChatFinishEvent"]
    finish = events[-1]
    assert isinstance(finish, ChatFinishEvent) and finish.reason == "cancelled"
    assert elapsed < 2.0
    assert server.client_gone.wait(2.0), "the HTTP connection was left open"
    assert wait_for_threads(baseline) <= baseline


def test_error_line_mid_stream_ends_the_chat_and_keeps_the_text(ollama_replay: Start) -> None:
    server = ollama_replay([[line("Partial "), {"error": "model runner has unexpectedly stopped"}]])
    conversation = ChatClient(provider(server), model="llama3.2").conversation()
    events = list(conversation.send("hello"))

    assert [type(e).__name__ for e in events] == ["TextEvent", "ErrorEvent", "ChatFinishEvent"]
    error = events[1]
    assert isinstance(error, ErrorEvent)
    assert "unexpectedly stopped" in error.error.message
    assert isinstance(events[-1], ChatFinishEvent) and events[-1].reason == "error"
    assert [(m.role, m.parts[0]) for m in conversation.history][-1][0] == "assistant"
    assert conversation.history[-1].parts[0].text == "Partial "  # type: ignore[union-attr]


def test_token_guard_uses_the_servers_context_length(ollama_replay: Start) -> None:
    server = ollama_replay([], context_length=64)
    client = ChatClient(provider(server), model="llama3.2")
    events = list(client.chat("word " * 400))

    assert [type(e).__name__ for e in events] == ["ErrorEvent", "ChatFinishEvent"]
    error = events[0]
    assert isinstance(error, ErrorEvent) and error.error.code == "TOKEN_LIMIT_EXCEEDED"
    assert error.error.details is not None and error.error.details["limit"] == 64
    assert isinstance(events[-1], ChatFinishEvent) and events[-1].reason == "token_limit"
    assert server.chat_bodies == []  # nothing was sent


def test_near_the_window_warns_once_and_still_answers(ollama_replay: Start) -> None:
    server = ollama_replay([[line("ok"), done()]], context_length=100)
    client = ChatClient(provider(server), model="llama3.2")
    events = list(client.chat("x" * 370))  # about 93 estimated tokens of 100

    warnings = [e for e in events if isinstance(e, WarningEvent)]
    assert [w.code for w in warnings] == ["TOKEN_LIMIT_WARNING"]
    assert isinstance(events[-1], ChatFinishEvent) and events[-1].reason == "complete"
    assert len(server.chat_bodies) == 1


def _silent(client: Any, req: Any) -> None:
    """Read the request, then say nothing until the server shuts down."""
    req.stop.wait(30)


def test_cancel_reaches_the_setup_requests_before_the_first_turn() -> None:
    """README, The chat runtime: cancel stops everything, also the requests made before the chat
    request.

    The runtime asks ``/api/show`` for the window (token guard) and, with tools in auto mode,
    for the model's capabilities, passing its ``cancel`` to those provider methods. Against a
    server that never answers them, setting the event still ends the chat at once.
    """
    from support import ollama_support as oll

    baseline = threading.active_count()
    for tools in ([], [add]):
        with oll.serve({("POST", "/api/show"): _silent}) as server:
            provider = LocalProvider(base_url=server.url, timeout=30)
            chat = ChatClient(provider, tools=tools, model="llama3.2")
            cancel = threading.Event()
            timer = threading.Timer(0.2, cancel.set)
            timer.start()
            t0 = time.monotonic()
            events = list(chat.chat("hi", cancel=cancel))
            elapsed = time.monotonic() - t0
            timer.join()
            provider.close()
            assert events == [ChatFinishEvent("cancelled")]
            assert elapsed < 5.0, f"cancel took {elapsed:.1f} s (the idle timeout is 30 s)"
            assert not any(seen.path == "/api/chat" for seen in server.seen)
        assert wait_for_threads(baseline) <= baseline  # the server's threads ended with it

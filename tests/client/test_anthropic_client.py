"""The script API on the Messages API, unchanged: ask/stream/run/events, typed answers, a
Session, saved sessions, the call log's cache; and thinking that survives a tool loop.

Claude requires the ``thinking`` blocks of an assistant turn, signature included, back
unchanged when that turn is sent again
(https://platform.claude.com/docs/en/build-with-claude/extended-thinking, "Preserving thinking
blocks"); Gemini requires a call's ``thoughtSignature`` back with it
(https://ai.google.dev/gemini-api/docs/thought-signatures). Both must survive a ``run``'s tool
loop, a Session's next call, ``save``/``load_session`` and a new client.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.anthropic_support import (
    BASIC,
    THINKING,
    THINKING_SIGNATURE,
    THINKING_TEXT,
    sse_of,
    whole_message,
)
from support.transport_support import Request, serve, stream_script

import ollm_lite
from ollm_lite.providers.anthropic import AnthropicProvider
from ollm_lite.providers.gemini import GeminiProvider
from ollm_lite.types import ProviderBlock

SIGNED = whole_message(
    [
        {"type": "thinking", "thinking": "I should look it up.", "signature": "U0lHTkVE"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ],
    "tool_use",
)
THINKING_BLOCK = {"type": "thinking", "thinking": "I should look it up.", "signature": "U0lHTkVE"}
REDACTED_BLOCK = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}


def get_weather(city: str) -> str:
    """Weather now.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


class Recorder:
    """Answers each request with the next script and keeps every request body."""

    def __init__(self, *answers: list[bytes]) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, client: socket.socket, req: Request) -> None:
        with self.lock:
            self.bodies.append(req.json)
            chunks = self.answers.pop(0)
        stream_script(chunks)(client, req)


@pytest.fixture
def server() -> Iterator[Any]:
    recorder = Recorder()
    with serve({"/v1/messages": recorder}) as loopback:
        loopback.recorder = recorder  # type: ignore[attr-defined]
        yield loopback


def connect(url: str, **kw: Any) -> ollm_lite.Client:
    return ollm_lite.connect(AnthropicProvider(base_url=url, retries=0), model="claude", **kw)


def assistant_contents(body: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [m["content"] for m in body["messages"] if m["role"] == "assistant"]


def test_run_sends_thinking_back_in_the_tool_loop(server: Any) -> None:
    server.recorder.answers += [sse_of(SIGNED), BASIC]
    with connect(server.url) as llm:
        reply = llm.run("Weather in Oslo?", tools=[get_weather], think=True)
    assert reply.text == "Hello!" and reply.tool_results[0].data == "sunny in Oslo"
    first, second = server.recorder.bodies
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    [assistant] = assistant_contents(second)
    assert assistant == [
        THINKING_BLOCK,
        REDACTED_BLOCK,
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ]
    results = second["messages"][-1]
    assert results["role"] == "user" and results["content"][0]["type"] == "tool_result"
    assert results["content"][0]["tool_use_id"] == "toolu_1"
    kept = [m for m in reply.messages if m.provider_blocks]
    assert kept[0].provider_blocks == (
        ProviderBlock("anthropic", THINKING_BLOCK),
        ProviderBlock("anthropic", REDACTED_BLOCK),
    )


def test_session_save_load_and_a_new_client_keep_the_thinking(server: Any, tmp_path: Path) -> None:
    server.recorder.answers += [THINKING, BASIC, BASIC]
    signed = {
        "type": "thinking",
        "thinking": "".join(THINKING_TEXT),
        "signature": THINKING_SIGNATURE,
    }
    with connect(server.url) as llm:
        chat = llm.session()
        assert "21" in chat.ask("GCD of 1071 and 462?", think=True)
        chat.ask("Thanks", think=True)
        chat.save(tmp_path / "s.json")
    assert assistant_contents(server.recorder.bodies[1])[0][0] == signed
    with connect(server.url) as fresh:
        loaded = ollm_lite.load_session(tmp_path / "s.json", client=fresh)
        loaded.ask("And again", think=True)
    assert assistant_contents(server.recorder.bodies[2])[0][0] == signed


@dataclass
class Point:
    x: int
    y: int


def test_typed_answer_is_a_forced_tool(server: Any) -> None:
    answer = whole_message(
        [{"type": "tool_use", "id": "toolu_9", "name": "json_answer", "input": {"x": 1, "y": 2}}],
        "tool_use",
    )
    server.recorder.answers += [sse_of(answer)]
    with connect(server.url) as llm:
        assert llm.ask("A point", schema=Point) == Point(1, 2)
    body = server.recorder.bodies[0]
    assert body["tool_choice"] == {"type": "tool", "name": "json_answer"}
    assert body["tools"][0]["input_schema"]["required"] == ["x", "y"]


def test_stream_events_and_cache(server: Any, tmp_path: Path) -> None:
    """``stream``/``events`` read the same answer; with ``cache=True`` a repeated turn is
    answered from the log, its thinking blocks too (the next request still sends them)."""
    server.recorder.answers += [BASIC, BASIC, sse_of(SIGNED), BASIC, BASIC]
    log = tmp_path / "calls.db"
    with connect(server.url) as llm:
        assert "".join(llm.stream("Hello")) == "Hello!"
        kinds = {e.type for e in llm.events("Hello")}
        assert {"text", "chat_finish"} <= kinds
    readings = iter(["sunny", "rain"])

    def get_weather(city: str) -> str:  # a changed result: the second turn misses the cache
        """Weather now.

        Args:
            city: The city.
        """
        return f"{next(readings)} in {city}"

    with connect(server.url, cache=True, log=str(log)) as llm:
        llm.run("Weather in Oslo?", tools=[get_weather], think=True)
        served = len(server.recorder.bodies)
        again = llm.run("Weather in Oslo?", tools=[get_weather], think=True)
    assert again.text == "Hello!"
    # the first turn came from the cache; the second was sent, with the kept blocks
    assert len(server.recorder.bodies) == served + 1
    assert assistant_contents(server.recorder.bodies[-1])[0][:2] == [THINKING_BLOCK, REDACTED_BLOCK]


# --------------------------------------------------------------------------- Gemini


def _gemini(parts: list[dict[str, Any]]) -> list[bytes]:
    body = {
        "candidates": [
            {"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}
        ]
    }
    return [b"data: " + json.dumps(body).encode() + b"\r\n\r\n"]


def test_gemini_signatures_survive_save_load_and_a_new_client(tmp_path: Path) -> None:
    call = {
        "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}},
        "thoughtSignature": "R0VN",
    }
    answers = [_gemini([call]), _gemini([{"text": "sunny"}]), _gemini([{"text": "ok"}])]
    bodies: list[dict[str, Any]] = []

    def script(client: socket.socket, req: Request) -> None:
        bodies.append(req.json)
        stream_script(answers.pop(0))(client, req)

    path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    with serve({path: script}) as loopback:
        with ollm_lite.connect(
            GeminiProvider(api_key="k", base_url=loopback.url), model="gemini-2.5-flash"
        ) as llm:
            chat = llm.session(tools=[get_weather])
            assert chat.run("Weather?").text == "sunny"
            chat.save(tmp_path / "g.json")
        fresh_provider = GeminiProvider(api_key="k", base_url=loopback.url)
        with ollm_lite.connect(fresh_provider, model="gemini-2.5-flash") as fresh:
            loaded = ollm_lite.load_session(tmp_path / "g.json", client=fresh)
            loaded.ask("Thanks")
    sent = [p for c in bodies[2]["contents"] for p in c["parts"] if "functionCall" in p]
    assert [p.get("thoughtSignature") for p in sent] == ["R0VN"]


def test_think_as_a_token_budget(server: Any) -> None:
    """``think=<int>`` is a thinking budget (the Messages API's ``budget_tokens``); other wires
    refuse it with CONFIG_INVALID rather than send it."""
    server.recorder.answers += [BASIC]
    with connect(server.url) as llm:
        assert llm.ask("Hello", think=2048) == "Hello!"
    body = server.recorder.bodies[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 2048 + 4096
    from ollm_lite.errors import ConfigError
    from ollm_lite.providers._ollama_wire import chat_body as ollama_body
    from ollm_lite.types import Message, ProviderRequest

    with pytest.raises(ConfigError):
        ollama_body(ProviderRequest("m", [Message.user("x")], think=2048))
    with pytest.raises(ConfigError):
        connect(server.url).ask("Hello", think=0)

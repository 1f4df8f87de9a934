"""Group 4: how streams end when they end badly, for NDJSON and SSE.

Whatever happens — a reset, a clean close mid-answer, an error object after text, a body
shorter than its ``Content-Length``, a tool call cut off mid-arguments — the stream ends with
exactly one terminal event, the text already delivered is kept, and nothing hangs.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable

import pytest
from support.fault_server import (
    NDJSON,
    SSE,
    Wire,
    chunks,
    oa_chunk,
    ollama_done,
    ollama_lines,
    run_stream,
    segments,
    sse_data,
)
from support.transport_support import Request, Script, serve

from ollm_lite.errors import BadResponse, ConnectionFailed
from ollm_lite.types import Message, ProviderRequest, ToolSchema

TOOLS = [ToolSchema("get_weather", "Weather", {"type": "object", "properties": {}})]


def req(**kw: object) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], **kw)  # type: ignore[arg-type]


def partial(wire: Wire) -> list[bytes]:
    """Two words of an unfinished answer."""
    if wire.name == "ndjson":
        return ollama_lines(["Hello", " wor"], done=False)
    return [
        sse_data(oa_chunk({"role": "assistant", "content": ""})),
        sse_data(oa_chunk({"content": "Hello"})),
        sse_data(oa_chunk({"content": " wor"})),
    ]


@pytest.mark.parametrize(
    ("then", "code"),
    [("reset", ConnectionFailed.code), ("close", BadResponse.code)],
    ids=["reset", "clean-close"],
)
def test_connection_ends_mid_answer(
    wire: Wire, then: str, code: str, no_leaks: Callable[..., None]
) -> None:
    """A reset (RST) or a clean close (FIN, chunked framing unfinished) mid-answer: the text
    so far, then exactly one error of the matching code."""
    with serve({wire.path: chunks(partial(wire), then=then, content_type=wire.content_type)}) as s:
        provider = wire.provider(s.url, retries=2)
        out = run_stream(provider, req())
        provider.close()
        assert len(s.requests) == 1
    assert out.text == "Hello wor"
    assert out.code == code
    assert out.elapsed < 2.0
    no_leaks()


def short_body(body: bytes, *, declared: int, wire: Wire) -> Script:
    """A ``Content-Length: declared`` answer that sends only ``body`` and closes."""

    def script(client: socket.socket, request: Request) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {wire.content_type}\r\n"
        client.sendall(f"{head}Content-Length: {declared}\r\n\r\n".encode() + body)
        client.shutdown(socket.SHUT_RDWR)

    return script


@pytest.mark.parametrize("framing", ["close", "length"])
def test_body_ends_early_under_other_framings(
    wire: Wire, framing: str, no_leaks: Callable[..., None]
) -> None:
    """Close-delimited and ``Content-Length`` bodies cut short: text kept, one error."""
    parts = partial(wire)
    if framing == "length":
        script = short_body(b"".join(parts), declared=len(b"".join(parts)) + 100, wire=wire)
    else:
        script = segments(parts, framing="close", content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert out.text == "Hello wor"
    assert out.last.type == "error"
    assert out.code in (BadResponse.code, ConnectionFailed.code)
    no_leaks()


def test_error_object_after_text(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """The server's error object after some text (HTTP 200 already sent): the text kept,
    then one LLM_BAD_RESPONSE carrying the server's message; the rest is ignored."""
    parts = partial(wire)
    if wire.name == "ndjson":
        parts += [b'{"error":"llama runner process has terminated: out of memory"}\n']
        parts += ollama_lines([" after"])
    else:
        err = {"error": {"message": "out of memory", "type": "server_error", "code": 500}}
        parts += [sse_data(err), sse_data(oa_chunk({"content": " after"})), b"data: [DONE]\n\n"]
    script = chunks(parts, content_type=wire.content_type, then="hang")
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert out.text == "Hello wor"
    assert out.code == BadResponse.code
    assert "out of memory" in out.last.error.message
    assert out.elapsed < 1.5
    no_leaks()


@pytest.mark.parametrize("then", ["close", "reset", "end"])
def test_sse_tool_call_cut_mid_arguments(then: str, no_leaks: Callable[..., None]) -> None:
    """OpenAI-style argument fragments and then the end: no half-built ToolCallEvent, one
    error terminal, never a hang."""
    args = json.dumps({"city": "Oslo", "unit": "c"})
    frags = [
        sse_data(oa_chunk({"role": "assistant", "content": "Let me check."})),
        sse_data(
            oa_chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ]
                }
            )
        ),
        sse_data(oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[:9]}}]})),
    ]
    with serve({SSE.path: chunks(frags, then=then, content_type=SSE.content_type)}) as server:
        provider = SSE.provider(server.url)
        out = run_stream(provider, req(tools=TOOLS))
        provider.close()
    assert out.text == "Let me check."
    assert out.last.type == "error"
    assert not [e for e in out.events if e.type == "tool_call"]
    assert out.elapsed < 2.0
    no_leaks()


def test_tool_call_with_unparseable_arguments_then_done(
    wire: Wire, no_leaks: Callable[..., None]
) -> None:
    """A call whose arguments never became JSON, in a stream that finished properly: the
    call is delivered with ``args == {}`` and the raw text (README, Tools), then ``tool``."""
    raw = '{"city": "Os'
    if wire.name == "sse":
        head = {"index": 0, "id": "call_1", "type": "function"}
        fragment = {**head, "function": {"name": "get_weather", "arguments": raw}}
        parts = [
            sse_data(oa_chunk({"tool_calls": [fragment]})),
            sse_data(oa_chunk({}, "tool_calls")),
            b"data: [DONE]\n\n",
        ]
    else:  # Ollama sends an object; a proxy may send the raw string instead
        call = {"function": {"name": "get_weather", "arguments": raw}}
        message = {"role": "assistant", "content": "", "tool_calls": [call]}
        line = json.dumps({"model": "m", "message": message, "done": False}).encode() + b"\n"
        parts = [line, ollama_done()]
    with serve({wire.path: chunks(parts, content_type=wire.content_type)}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req(tools=TOOLS))
        provider.close()
    calls = [e.value for e in out.events if e.type == "tool_call"]
    assert len(calls) == 1
    assert calls[0].name == "get_weather" and calls[0].args == {}
    assert calls[0].arguments == raw
    assert out.last.type == "finish" and out.last.reason == "tool"
    no_leaks()


@pytest.mark.parametrize("then", ["close", "reset"])
def test_ndjson_tool_call_line_cut(then: str, no_leaks: Callable[..., None]) -> None:
    """Ollama sends a whole call in one line; that line cut off: one error, no call."""
    line = json.dumps(
        {
            "model": "m",
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
                ],
            },
            "done": False,
        }
    ).encode()
    parts = [*ollama_lines(["Checking."], done=False), line[: len(line) // 2]]
    with serve({NDJSON.path: chunks(parts, then=then)}) as server:
        provider = NDJSON.provider(server.url)
        out = run_stream(provider, req(tools=TOOLS))
        provider.close()
    assert out.text == "Checking."
    assert out.last.type == "error"
    assert not [e for e in out.events if e.type == "tool_call"]
    no_leaks()


def test_closing_the_generator_early_releases_everything(
    wire: Wire, no_leaks: Callable[..., None]
) -> None:
    """A caller that stops reading (``break``, then ``close()``) leaves no thread or socket,
    even though the server would stream forever."""
    from support.fault_server import repeat_forever

    line = partial(wire)[-1]
    script = repeat_forever(line, every=0.01, content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        stream = provider.chat_stream(req(cancel=threading.Event()))
        for i, _event in enumerate(stream):
            if i == 3:
                break
        stream.close()
        provider.close()
    no_leaks()

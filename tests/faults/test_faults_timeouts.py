"""Group 1: connect, first byte, idle and deadline faults, for NDJSON and SSE.

Each case drives ``chat_stream`` of a real provider against a loopback fault server and checks
what a caller can observe: the terminal event and its code, the partial text kept, an upper
bound on the time taken, and threads and descriptors back to their baseline afterwards.
"""

from __future__ import annotations

from collections.abc import Callable

from support.fault_server import (
    Wire,
    drip,
    headers_then_silence,
    oa_chunk,
    ollama_lines,
    openai_events,
    refused_url,
    repeat_forever,
    run_stream,
    sse_data,
    unanswered_connect,
)
from support.transport_support import serve, silent

from ollm_lite.errors import ConnectionFailed, RequestTimeout
from ollm_lite.http.policy import Timeouts
from ollm_lite.types import Message, ProviderRequest


def req(**kw: object) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], **kw)  # type: ignore[arg-type]


def content_line(wire: Wire, word: str) -> bytes:
    if wire.name == "ndjson":
        return ollama_lines([word], done=False)[0]
    return sse_data(oa_chunk({"content": word}))


def keepalive(wire: Wire) -> bytes:
    """What each format's servers send to keep a connection warm: a blank line, a comment."""
    return b"\n" if wire.name == "ndjson" else b": ping\n\n"


def test_connection_refused(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A closed port: CONNECTION_FAILED naming the URL, fast, retried per policy, no leak."""
    with refused_url() as url:
        provider = wire.provider(url, retries=1)
        out = run_stream(provider, req())
    assert out.code == ConnectionFailed.code
    assert url in out.last.error.message
    assert out.last.error.details.get("attempts") == 2
    assert out.elapsed < 3.0
    provider.close()
    no_leaks()


def test_connect_never_completes(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A SYN that is never answered: LLM_TIMEOUT after the connect limit, not the idle one."""
    with unanswered_connect() as url:
        provider = wire.provider(url, timeout=Timeouts(connect=0.3, idle=30.0))
        out = run_stream(provider, req())
        provider.close()
    assert out.code == RequestTimeout.code
    assert out.elapsed < 2.0
    no_leaks()


def test_accepts_and_never_answers(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Silence before the status line: LLM_TIMEOUT after the idle limit, one request only."""
    with serve({wire.path: silent}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=0.3))
        out = run_stream(provider, req())
        provider.close()
        assert len(server.requests) == 1
    assert out.code == RequestTimeout.code
    assert 0.25 < out.elapsed < 2.0
    no_leaks()


def test_headers_then_silence(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A 200 head and then nothing: LLM_TIMEOUT after the idle limit."""
    with serve({wire.path: headers_then_silence(wire.content_type)}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=0.3))
        out = run_stream(provider, req())
        provider.close()
    assert out.code == RequestTimeout.code
    assert out.elapsed < 2.0
    no_leaks()


def test_silence_after_partial_text_keeps_it(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Text, then silence: the text already yielded stays, the end is one LLM_TIMEOUT."""
    first = [content_line(wire, "Hello"), content_line(wire, " there")]
    script = repeat_forever(b"", every=3600, first=first, content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=0.3))
        out = run_stream(provider, req())
        provider.close()
    assert out.text == "Hello there"
    assert out.code == RequestTimeout.code
    assert out.elapsed < 2.0
    no_leaks()


def test_keepalives_do_not_count_as_content(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Keep-alives every 10 ms and no content: the idle limit still fires."""
    script = repeat_forever(
        keepalive(wire),
        every=0.01,
        first=[content_line(wire, "partial")],
        content_type=wire.content_type,
    )
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=0.4))
        out = run_stream(provider, req())
        provider.close()
    assert out.text == "partial"
    assert out.code == RequestTimeout.code
    assert "idle_timeout" in (out.last.error.details or {})
    assert 0.35 < out.elapsed < 2.5
    no_leaks()


def test_slow_drip_of_content_is_not_idle(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A server dripping a whole answer a byte at a time, each item completing well inside
    the idle limit, is not timed out: the answer arrives complete."""
    words = ["a", "b", "c"]
    if wire.name == "ndjson":
        # Short hand-made lines keep the drip brief; the provider needs only these fields.
        lines = [b'{"message":{"content":"%s"},"done":false}\n' % w.encode() for w in words]
        lines.append(b'{"message":{"content":""},"done":true,"done_reason":"stop"}\n')
    else:
        lines = [b'data: {"choices":[{"delta":{"content":"%s"}}]}\n\n' % w.encode() for w in words]
        lines.append(b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    body = b"".join(lines)
    with serve({wire.path: drip(body, every=0.004, content_type=wire.content_type)}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=2.0))
        out = run_stream(provider, req())
        provider.close()
    assert out.text == "abc"
    assert out.last.type == "finish" and out.last.reason == "stop"
    no_leaks()


def test_drip_too_slow_to_complete_an_item_times_out(
    wire: Wire, no_leaks: Callable[..., None]
) -> None:
    """One byte every 0.1 s never completes a line within the idle limit: LLM_TIMEOUT; the
    connection is released although the server is still dripping."""
    body = content_line(wire, "x" * 40) * 3
    with serve({wire.path: drip(body, every=0.1, content_type=wire.content_type)}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=0.5))
        out = run_stream(provider, req())
        provider.close()
    assert out.code == RequestTimeout.code
    assert out.elapsed < 2.5
    no_leaks()


def test_total_deadline_on_an_endless_stream(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Content every 20 ms forever and ``timeout=0.5``: LLM_TIMEOUT near the deadline, the
    text streamed so far kept."""
    script = repeat_forever(content_line(wire, "x"), every=0.02, content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=5.0))
        out = run_stream(provider, req(timeout=0.5))
        provider.close()
    assert out.code == RequestTimeout.code
    assert "deadline" in out.last.error.message
    assert set(out.text) == {"x"} and len(out.text) >= 3
    assert 0.45 < out.elapsed < 2.0
    no_leaks()


def test_total_deadline_while_silent(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """The deadline also ends the silent wait for the first byte, before the idle limit."""
    with serve({wire.path: silent}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=30.0))
        out = run_stream(provider, req(timeout=0.3))
        provider.close()
    assert out.code == RequestTimeout.code
    assert out.elapsed < 2.0
    no_leaks()


def test_complete_answers_are_unaffected(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Control: the same servers with a well-formed answer finish with ``stop``."""
    from support.fault_server import chunks

    parts = ollama_lines(["Hi", "!"]) if wire.name == "ndjson" else openai_events(["Hi", "!"])
    with serve({wire.path: chunks(parts, content_type=wire.content_type)}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req(timeout=5.0))
        provider.close()
    assert out.text == "Hi!"
    assert out.last.type == "finish" and out.last.reason == "stop"
    no_leaks()


def test_total_deadline_during_connect(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """The deadline also ends a TCP handshake that is never answered, before the connect
    limit."""
    with unanswered_connect() as url:
        provider = wire.provider(url, timeout=Timeouts(connect=10.0, idle=30.0))
        out = run_stream(provider, req(timeout=0.3))
        provider.close()
    assert out.code == RequestTimeout.code
    assert out.elapsed < 1.5
    no_leaks()

"""Group 3: framing faults, written as raw TCP segments, for NDJSON and SSE.

Every byte-level trick (CRLF split across two reads, a UTF-8 character split across two reads,
U+2028 inside JSON, a 20 MB line, keep-alives every 10 ms, the three HTTP body framings, gzip)
must give the same events as a plain stream, or one clear error with the text so far kept.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import pytest
from support.fault_server import (
    Wire,
    chunks,
    gzipped,
    oa_chunk,
    ollama_done,
    ollama_lines,
    openai_events,
    repeat_forever,
    run_stream,
    segments,
    sse_data,
)
from support.transport_support import serve

from ollm_lite.errors import BadResponse
from ollm_lite.http.policy import Timeouts
from ollm_lite.types import Message, ProviderRequest

WORDS = ["Grüße", " aus", " 東京", " 🎉", " line\u2028sep", " para\u2029sep", " end"]
TEXT = "".join(WORDS)


def req(**kw: object) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], **kw)  # type: ignore[arg-type]


def transcript(wire: Wire, words: list[str] = WORDS, eol: bytes = b"\n") -> list[bytes]:
    if wire.name == "ndjson":
        return [line.replace(b"\n", eol) for line in ollama_lines(words)]
    return openai_events(words, eol=eol)


def cut_everywhere(parts: list[bytes], cuts: list[int]) -> list[bytes]:
    """The concatenated body re-cut at the given byte offsets."""
    body = b"".join(parts)
    out, last = [], 0
    for pos in sorted(set(cuts)):
        if 0 < pos < len(body):
            out.append(body[last:pos])
            last = pos
    out.append(body[last:])
    return out


def split_points(body: bytes) -> list[int]:
    """Inside every CRLF and inside every multi-byte UTF-8 character."""
    points = [i + 1 for i in range(len(body) - 1) if body[i : i + 2] == b"\r\n"]
    points += [i for i, b in enumerate(body) if 0x80 <= b < 0xC0]  # continuation bytes
    return points


def assert_complete(out: object, text: str = TEXT) -> None:
    assert out.text == text  # type: ignore[attr-defined]
    last = out.last  # type: ignore[attr-defined]
    assert last.type == "finish" and last.reason == "stop", last


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
def test_crlf_and_utf8_split_across_reads(
    wire: Wire, framing: str, no_leaks: Callable[..., None]
) -> None:
    """CRLF line ends and multi-byte characters cut across TCP segments, under each body
    framing: the text arrives intact, U+2028/U+2029 included (they never end a line)."""
    parts = transcript(wire, eol=b"\r\n")
    body = b"".join(parts)
    pieces = cut_everywhere(parts, split_points(body))
    assert len(pieces) > 20
    script = segments(pieces, framing=framing, content_type=wire.content_type, gap=0.002)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert_complete(out)
    no_leaks()


def test_byte_at_a_time(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Every byte in its own HTTP chunk gives the same answer."""
    body = b"".join(transcript(wire))
    script = chunks([body[i : i + 1] for i in range(len(body))], content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert_complete(out)
    no_leaks()


@pytest.mark.parametrize("framing", ["chunked", "length"])
def test_gzip_bodies(wire: Wire, framing: str, no_leaks: Callable[..., None]) -> None:
    """``Content-Encoding: gzip`` (as some proxies send) is decoded transparently."""
    script = gzipped(transcript(wire), content_type=wire.content_type, chunked=framing == "chunked")
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert_complete(out)
    no_leaks()


def test_twenty_megabyte_line(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A 20 MB line (over the 16 MB limit): text before it kept, then one LLM_BAD_RESPONSE,
    raised without waiting for the line to end."""
    head = transcript(wire, ["before"])[: 1 if wire.name == "ndjson" else 2]
    huge = "y" * (20 * 1024 * 1024)
    if wire.name == "ndjson":
        line = ollama_lines([huge], done=False)[0]
    else:
        line = sse_data(oa_chunk({"content": huge}))
    pieces = [line[i : i + 1024 * 1024] for i in range(0, len(line), 1024 * 1024)]
    script = chunks([*head, *pieces], content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert out.text == "before"
    assert out.code == BadResponse.code
    assert out.elapsed < 10.0
    no_leaks()


def test_long_line_under_the_limit_is_fine(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A 4 MB token (in 64 KiB chunks) is delivered whole."""
    big = "z" * (4 * 1024 * 1024)
    body = b"".join(transcript(wire, [big, "!"]))
    script = chunks(
        [body[i : i + 65536] for i in range(0, len(body), 65536)], content_type=wire.content_type
    )
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert_complete(out, big + "!")
    no_leaks()


def test_keepalives_every_10ms_between_content(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Keep-alives (SSE comments / blank NDJSON lines) between every item change nothing."""
    ping = b": keep-alive\n\n" if wire.name == "sse" else b"\n"
    parts: list[bytes] = []
    for part in transcript(wire):
        parts += [ping, ping, part]
    script = chunks(parts, delay=0.01, content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert_complete(out)
    no_leaks()


def test_ndjson_half_line_at_eof(no_leaks: Callable[..., None]) -> None:
    """Ollama: the last line cut in half by EOF: the text so far, then LLM_BAD_RESPONSE."""
    from support.fault_server import NDJSON

    parts = [*ollama_lines(["Hello", " world"], done=False), ollama_done()[:25]]
    with serve({NDJSON.path: segments(parts, framing="close")}) as server:
        provider = NDJSON.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert out.text == "Hello world"
    assert out.code == BadResponse.code
    no_leaks()


def test_ndjson_garbage_lines_are_skipped(no_leaks: Callable[..., None]) -> None:
    """Ollama: lines that are not JSON objects between good ones are skipped."""
    from support.fault_server import NDJSON

    lines = ollama_lines(["a", "b"], done=False)
    parts = [lines[0], b"not json\n", b"[1,2]\n", b"\r\n", lines[1], ollama_done()]
    with serve({NDJSON.path: chunks(parts)}) as server:
        provider = NDJSON.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert out.text == "ab"
    assert out.last.type == "finish"
    no_leaks()


# --------------------------------------------------------------------------- SSE only


def sse_run(parts: list[bytes], *, then: str = "end", idle: float = 1.0) -> object:
    from support.fault_server import SSE

    with serve({SSE.path: chunks(parts, content_type=SSE.content_type, then=then)}) as server:
        provider = SSE.provider(server.url, timeout=Timeouts(connect=1.0, idle=idle))
        out = run_stream(provider, req())
        provider.close()
    return out


def test_sse_event_error_with_json_body(no_leaks: Callable[..., None]) -> None:
    """``event: error`` carrying an error object after some text: text kept, one
    LLM_BAD_RESPONSE naming the server's message."""
    parts = openai_events(["partial"], finish=None, done=False)
    parts.append(b'event: error\ndata: {"error": {"message": "model overloaded"}}\n\n')
    parts.append(b"data: [DONE]\n\n")
    out = sse_run(parts)
    assert out.text == "partial"  # type: ignore[attr-defined]
    assert out.code == BadResponse.code  # type: ignore[attr-defined]
    assert "model overloaded" in out.last.error.message  # type: ignore[attr-defined]
    no_leaks()


def test_sse_event_error_with_plain_text(no_leaks: Callable[..., None]) -> None:
    """``event: error`` with plain text data (as some proxies and llama.cpp forks send) is an
    error, not a normal end."""
    parts = openai_events(["partial"], finish=None, done=False)
    parts.append(b"event: error\ndata: upstream connect error\n\n")
    parts.append(b"data: [DONE]\n\n")
    out = sse_run(parts)
    assert out.text == "partial"  # type: ignore[attr-defined]
    assert out.code == BadResponse.code  # type: ignore[attr-defined]
    assert "upstream connect error" in out.last.error.message  # type: ignore[attr-defined]
    no_leaks()


def test_sse_retry_only_and_id_only_events(no_leaks: Callable[..., None]) -> None:
    """``retry:``- and ``id:``-only blocks dispatch nothing and change nothing."""
    parts = []
    for part in openai_events(WORDS):
        parts += [b"retry: 3000\n\n", b"id: 7\n\n", b"event: ping\n\n", part]
    out = sse_run(parts)
    assert_complete(out)
    no_leaks()


def test_sse_data_without_json(no_leaks: Callable[..., None]) -> None:
    """``data:`` lines that are not JSON (``data: hello``, ``data:``) are skipped."""
    parts = openai_events(WORDS)
    parts.insert(2, b"data: hello there\n\n")
    parts.insert(4, b"data:\n\n")
    parts.insert(5, b"data: {broken json\n\n")
    out = sse_run(parts)
    assert_complete(out)
    no_leaks()


def test_sse_done_missing_after_finish_reason(no_leaks: Callable[..., None]) -> None:
    """No ``[DONE]`` but a ``finish_reason`` arrived: a normal finish."""
    out = sse_run(openai_events(WORDS, done=False))
    assert_complete(out)
    no_leaks()


def test_sse_done_and_finish_missing(no_leaks: Callable[..., None]) -> None:
    """Neither ``[DONE]`` nor a finish reason: the text kept, then LLM_BAD_RESPONSE."""
    out = sse_run(openai_events(WORDS, finish=None, done=False))
    assert out.text == TEXT  # type: ignore[attr-defined]
    assert out.code == BadResponse.code  # type: ignore[attr-defined]
    no_leaks()


def test_sse_data_after_done_is_ignored(no_leaks: Callable[..., None]) -> None:
    """Anything after ``[DONE]`` is ignored, and the server is not waited for."""
    parts = openai_events(WORDS)
    parts += [sse_data(oa_chunk({"content": " EXTRA"})), b"data: [DONE]\n\n"]
    out = sse_run(parts, then="hang", idle=30.0)
    assert_complete(out)
    assert out.elapsed < 10.0  # type: ignore[attr-defined]  # not the 30 s idle limit
    no_leaks()


def test_ndjson_data_after_done_is_ignored(no_leaks: Callable[..., None]) -> None:
    """Ollama: lines after ``done: true`` are ignored and the server is not waited for."""
    from support.fault_server import NDJSON

    parts = ollama_lines(WORDS) + ollama_lines([" EXTRA"])
    with serve({NDJSON.path: chunks(parts, then="hang")}) as server:
        provider = NDJSON.provider(server.url, timeout=Timeouts(connect=1.0, idle=30.0))
        out = run_stream(provider, req())
        provider.close()
    assert_complete(out)
    assert out.elapsed < 10.0  # not the 30 s idle limit
    no_leaks()


def test_sse_crlf_gemini_style_separators(no_leaks: Callable[..., None]) -> None:
    """CRLF CRLF event separators and a lone-CR stream parse the same."""
    for eol in (b"\r\n", b"\r"):
        out = sse_run(openai_events(WORDS, eol=eol))
        assert_complete(out)
    no_leaks()


def test_sse_multiline_data_event(no_leaks: Callable[..., None]) -> None:
    """A JSON object spread over several ``data:`` lines is joined with LF and parsed."""
    obj = json.dumps(oa_chunk({"content": "joined"}), indent=1).split("\n")
    event = b"".join(b"data: " + line.encode() + b"\n" for line in obj) + b"\n"
    parts = openai_events([])
    parts.insert(1, event)
    out = sse_run(parts)
    assert out.text == "joined"  # type: ignore[attr-defined]
    assert out.last.type == "finish"  # type: ignore[attr-defined]
    no_leaks()


def test_endless_keepalives_end_at_the_idle_limit_not_never(
    wire: Wire, no_leaks: Callable[..., None]
) -> None:
    """A server that only ever sends keep-alives is not a hang: the idle limit ends it."""
    from ollm_lite.http.policy import Timeouts

    ping = b": keep-alive\n\n" if wire.name == "sse" else b"\n"
    script = repeat_forever(ping, every=0.01, content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=0.3))
        out = run_stream(provider, req())
        provider.close()
    assert out.last.type == "error"
    assert out.elapsed < 2.0
    no_leaks()


def test_body_that_is_not_the_announced_gzip(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """``Content-Encoding: gzip`` on a plain body: one LLM_BAD_RESPONSE saying the body could
    not be decoded (not a misleading "stream ended early")."""
    from support.transport_support import Request

    body = b"".join(transcript(wire))

    def script(client: socket.socket, request: Request) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {wire.content_type}\r\nContent-Encoding: gzip\r\n"
        client.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)

    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    assert out.code == BadResponse.code
    assert "could not be decoded" in out.last.error.message
    no_leaks()

"""Compressed bodies are inflated piece by piece: memory stays bounded by the line limit.

A 256 KiB gzip body can inflate to 256 MiB. urllib3 inflates each received chunk whole, before
any limit of the stream decoders can look at it; the transport reads the raw body and inflates
at most a small step at a time, so the SSE/NDJSON line limit (16 MiB) ends the stream long
before the bomb is unpacked. Memory is measured with ``tracemalloc`` (zlib's output buffers are
Python ``bytes``, so they are counted).
"""

from __future__ import annotations

import functools
import gzip
import socket
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings, strategies as st
from support.transport_support import Request, end_chunks, send_chunk, serve

from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.types import ErrorEvent, FinishEvent, Message, ProviderRequest, TextEvent

BOMB_MIB = 256
#: The 16 MiB line limit plus room (about 17 MiB measured), far below the inflated size.
PEAK_LIMIT = 40 * 1024 * 1024


@functools.cache
def bomb() -> bytes:
    """``data: aaaa…`` without a line end, ``BOMB_MIB`` MiB inflated, gzip-compressed."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"a" * (1024 * 1024)
    parts = [packer.compress(b"data: ")]
    parts += [packer.compress(block) for _ in range(BOMB_MIB)]
    return b"".join([*parts, packer.flush()])


def gzip_script(body: bytes, *, chunked: bool, coding: str = "gzip"):  # type: ignore[no-untyped-def]
    def script(client: socket.socket, req: Request) -> None:
        framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
        client.sendall(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            f"Content-Encoding: {coding}\r\n{framing}\r\n\r\n".encode()
        )
        if chunked:
            send_chunk(client, body)  # the whole bomb as one HTTP chunk
            end_chunks(client)
        else:
            client.sendall(body)

    return script


def stream(url: str) -> list[object]:
    provider = OpenAICompatibleProvider(base_url=url, retries=0)
    try:
        return list(provider.chat_stream(ProviderRequest("m", [Message.user("hi")])))
    finally:
        provider.close()


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_a_gzip_bomb_stays_within_the_line_limit(chunked: bool) -> None:
    body = bomb()
    assert len(body) < 1024 * 1024
    with serve({"/v1/chat/completions": gzip_script(body, chunked=chunked)}) as server:
        tracemalloc.start()
        try:
            events = stream(server.url)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    [event] = events
    assert isinstance(event, ErrorEvent) and event.error.code == "LLM_BAD_RESPONSE"
    assert peak < PEAK_LIMIT, f"peak {peak / 2**20:.0f} MiB"


SSE = (
    b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


def deflate_raw(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("gzip", lambda d: gzip.compress(d[:40]) + gzip.compress(d[40:])),  # two members
        ("deflate", zlib.compress),
        ("deflate", deflate_raw),
    ],
    ids=["gzip", "gzip-members", "deflate-zlib", "deflate-raw"],
)
@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_compressed_streams_decode(coding: str, encode, chunked: bool) -> None:  # type: ignore[no-untyped-def]
    script = gzip_script(encode(SSE), chunked=chunked, coding=coding)
    with serve({"/v1/chat/completions": script}) as server:
        events = stream(server.url)
    assert events == [TextEvent("Hel"), TextEvent("lo"), FinishEvent("stop", None)]


def test_a_coding_that_was_not_asked_for_is_a_bad_response() -> None:
    with serve({"/v1/chat/completions": gzip_script(SSE, chunked=True, coding="br")}) as server:
        [event] = stream(server.url)
    assert isinstance(event, ErrorEvent) and event.error.code == "LLM_BAD_RESPONSE"
    assert "br" in event.error.message


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(1, 400), max_size=8))
def test_inflating_in_pieces_equals_inflating_at_once(data: bytes, cuts: list[int]) -> None:
    """Whatever the chunking of the compressed body, the pieces join to the original."""
    from ollm_lite.http.inflate import Inflater as _Inflater

    packed = gzip.compress(data * 50)
    inflater = _Inflater("gzip")
    out: list[bytes] = []
    start = 0
    for cut in [*cuts, len(packed)]:
        piece = packed[start : start + cut]
        start += len(piece)
        out.extend(inflater.feed(piece))
        if start >= len(packed):
            break
    out.extend(inflater.feed(packed[start:]))
    out.append(inflater.flush())
    assert all(len(p) <= 64 * 1024 for p in out)
    assert b"".join(out) == data * 50

"""Group 2: HTTP statuses, retries and error bodies, for NDJSON and SSE.

Statuses go through the providers' public ``chat_stream`` (ErrorEvent code) and ``chat``
(exception class). Retry timing cases use :class:`~ollm_lite.http.transport.Transport` directly with
a tiny backoff so they stay fast; ``Retry-After: 0`` does the same through the providers.
"""

from __future__ import annotations

import email.utils
import json
import socket
import time
from collections.abc import Callable

import pytest
from support.fault_server import (
    CANARY,
    Wire,
    chunks,
    oa_chunk,
    ollama_lines,
    openai_events,
    reset_without_answer,
    run_stream,
    sequence,
    sse_data,
    status,
)
from support.transport_support import Request, Script, serve

from ollm_lite.errors import (
    AuthenticationError,
    ConnectionFailed,
    HTTPStatusError,
    ModelNotFound,
    OllmError,
    RateLimited,
    RequestTimeout,
)
from ollm_lite.http.policy import RetryPolicy, Timeouts
from ollm_lite.http.transport import Transport
from ollm_lite.types import Message, ProviderRequest


def req(**kw: object) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], **kw)  # type: ignore[arg-type]


def answer(wire: Wire, words: list[str]) -> Script:
    parts = ollama_lines(words) if wire.name == "ndjson" else openai_events(words)
    return chunks(parts, content_type=wire.content_type)


def error_body(wire: Wire, message: str) -> dict[str, object]:
    if wire.name == "ndjson":
        return {"error": message}
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


STATUSES = [
    (401, AuthenticationError),
    (403, AuthenticationError),
    (404, ModelNotFound),
    (408, RequestTimeout),
    (413, HTTPStatusError),
    (429, RateLimited),
    (500, HTTPStatusError),
    (502, HTTPStatusError),
    (503, HTTPStatusError),
    (504, RequestTimeout),
]


@pytest.mark.parametrize(("code", "cls"), STATUSES, ids=[str(s) for s, _ in STATUSES])
def test_status_maps_to_class_and_code(
    wire: Wire, code: int, cls: type[OllmError], no_leaks: Callable[..., None]
) -> None:
    """Each status ends the stream with one ErrorEvent of the class's code carrying the
    server's own message; ``chat()`` raises that class. No retries with ``retries=0``."""
    script = status(code, error_body(wire, f"server says {code}"))
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        with pytest.raises(cls) as info:
            provider.chat(req())
        provider.close()
        assert len(server.requests) == 2
    assert out.code == cls.code
    assert f"server says {code}" in out.last.error.message
    assert type(info.value) is cls
    assert f"server says {code}" in info.value.message
    if isinstance(info.value, HTTPStatusError):
        assert info.value.status == code
    no_leaks()


RETRIED = [408, 429, 500, 502, 503, 504]


@pytest.mark.parametrize("code", RETRIED)
def test_retryable_statuses_retry_then_fail_with_attempts(
    wire: Wire, code: int, no_leaks: Callable[..., None]
) -> None:
    """A status that keeps coming back is tried ``retries + 1`` times, then reported with
    ``attempts`` counted."""
    script = status(code, error_body(wire, "busy"), headers={"Retry-After": "0"})
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, retries=2)
        out = run_stream(provider, req())
        provider.close()
        assert len(server.requests) == 3
    assert out.last.type == "error"
    assert out.last.error.details["attempts"] == 3
    assert out.elapsed < 2.0
    no_leaks()


@pytest.mark.parametrize("code", [400, 401, 403, 404, 413, 422])
def test_final_statuses_are_not_retried(
    wire: Wire, code: int, no_leaks: Callable[..., None]
) -> None:
    """Client errors are final: one request, whatever ``retries`` says."""
    with serve({wire.path: status(code, error_body(wire, "no"))}) as server:
        provider = wire.provider(server.url, retries=3)
        out = run_stream(provider, req())
        provider.close()
        assert len(server.requests) == 1
    assert out.last.type == "error"
    no_leaks()


def test_retry_then_success(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """503, 429, then a good answer: the caller sees only the answer."""
    script = sequence(
        status(503, error_body(wire, "loading"), headers={"Retry-After": "0"}),
        status(429, error_body(wire, "slow down"), headers={"Retry-After": "0"}),
        answer(wire, ["ok"]),
    )
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, retries=2)
        out = run_stream(provider, req())
        provider.close()
        assert len(server.requests) == 3
    assert out.text == "ok"
    assert out.last.type == "finish"
    no_leaks()


def test_reset_before_any_answer_is_retried(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A connection reset before the status line delivered nothing: it is safe to retry."""
    script = sequence(reset_without_answer, answer(wire, ["fine"]))
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, retries=1)
        out = run_stream(provider, req())
        provider.close()
        assert len(server.requests) == 2
    assert out.text == "fine"
    no_leaks()


def test_no_replay_once_content_was_delivered(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Content, then a reset: never retried (that would duplicate the answer); the partial
    text stays and the end is one CONNECTION_FAILED."""
    if wire.name == "ndjson":
        parts = ollama_lines(["one", " two"], done=False)
    else:
        parts = [sse_data(oa_chunk({"content": "one"})), sse_data(oa_chunk({"content": " two"}))]
    script = chunks(parts, then="reset", content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, retries=3)
        out = run_stream(provider, req())
        provider.close()
        assert len(server.requests) == 1
    assert out.text == "one two"
    assert out.code == ConnectionFailed.code
    no_leaks()


def test_html_error_page_from_a_proxy(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A proxy's HTML page: the title is reported, never the markup."""
    page = (
        "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway"
        "</h1></center><hr><center>nginx/1.25.3</center>" + "<!-- padding -->" * 500 + "</html>"
    )
    with serve({wire.path: status(502, page, content_type="text/html")}) as server:
        provider = wire.provider(server.url)
        out = run_stream(provider, req())
        provider.close()
    message = out.last.error.message
    assert out.code == HTTPStatusError.code
    assert "502 Bad Gateway" in message and "HTML" in message
    assert "<" not in message and len(message) < 600
    no_leaks()


def test_error_body_echoing_the_key_is_redacted(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A 400 whose JSON echoes the request, auth header included: the key appears in no
    message, no details, no ``str``/``repr`` of the exception; the message stays short."""
    echoed = {
        "error": {
            "message": f"invalid request; headers: Authorization: Bearer {CANARY}; "
            f"x-api-key: {CANARY}; body: " + json.dumps({"messages": "hi " * 3000}),
            "type": "invalid_request_error",
            "code": CANARY,
        }
    }
    with serve({wire.path: status(400, echoed)}) as server:
        provider = wire.provider(server.url, api_key=CANARY)
        out = run_stream(provider, req())
        with pytest.raises(HTTPStatusError) as info:
            provider.chat(req())
        provider.close()
    assert out.code == HTTPStatusError.code
    assert "invalid request" in out.last.error.message
    assert len(out.last.error.message) < 2000
    for text in (repr(out.last), str(info.value), repr(info.value), repr(info.value.details)):
        assert CANARY not in text
    no_leaks()


# --------------------------------------------------------------------------- Retry-After


def timed(code: int, headers: dict[str, str], times: list[float]) -> Script:
    """A status answer that records when each request arrived."""
    inner = status(code, {"error": "wait"}, headers=headers)

    def script(client: socket.socket, request: Request) -> None:
        times.append(time.monotonic())
        inner(client, request)

    script.keep_alive = True  # type: ignore[attr-defined]
    return script


def transport(url: str, retries: int = 2) -> Transport:
    return Transport(
        url,
        provider="test",
        timeouts=Timeouts(connect=1.0, idle=2.0),
        retry=RetryPolicy(retries=retries, backoff=0.01, max_backoff=0.05),
    )


def http_date(offset: float) -> str:
    return email.utils.formatdate(time.time() + offset, usegmt=True)


@pytest.mark.parametrize(
    ("header", "retried"),
    [
        ({"Retry-After": "0"}, True),
        ({"Retry-After": http_date(-60)}, True),  # a date in the past: go now
        ({"Retry-After": "-5"}, True),  # negative: ignored, backoff used
        ({"Retry-After": "soon, maybe"}, True),  # garbage: ignored, backoff used
        ({"Retry-After": "1e999"}, True),  # not digits: ignored
        ({"retry-after-ms": "5"}, True),
        ({"Retry-After": "86400"}, False),  # a day: give up now, say when
        ({"Retry-After": http_date(7200)}, False),
        ({}, True),
    ],
    ids=["zero", "past-date", "negative", "garbage", "overflow", "ms", "huge", "far-date", "none"],
)
def test_retry_after_variants(header: dict[str, str], retried: bool) -> None:
    """Every ``Retry-After`` form ends in a prompt retry or a prompt, final RateLimited."""
    times: list[float] = []
    with serve({"/x": timed(429, header, times)}) as server:
        t = transport(server.url)
        started = time.monotonic()
        with pytest.raises(RateLimited) as info:
            t.request_json("GET", "/x")
        elapsed = time.monotonic() - started
        t.close()
    assert len(times) == (3 if retried else 1)
    assert info.value.details["attempts"] == len(times)
    assert elapsed < 2.0
    if not retried:
        assert info.value.retry_after is not None and info.value.retry_after > 3600


def test_retry_after_seconds_is_honoured() -> None:
    """``Retry-After: 0.3`` makes the next try wait at least that long (a lower bound only)."""
    times: list[float] = []
    with serve({"/x": timed(503, {"Retry-After": "0.3"}, times)}) as server:
        t = transport(server.url, retries=1)
        with pytest.raises(HTTPStatusError):
            t.request_json("GET", "/x")
        t.close()
    assert len(times) == 2
    assert times[1] - times[0] >= 0.28


def test_quota_429_is_not_retried() -> None:
    """OpenAI's ``insufficient_quota`` 429 will not clear by waiting: one request."""
    body = {"error": {"message": "You exceeded your quota", "type": "insufficient_quota"}}
    times: list[float] = []
    with serve({"/x": timed(429, {}, times)}) as server:
        server.scripts["/x"] = status(429, body)
        t = transport(server.url)
        with pytest.raises(RateLimited):
            t.request_json("GET", "/x")
        t.close()
        assert len(server.requests) == 1


def test_redirect_loop(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A redirect loop ends in one LLM_BAD_RESPONSE, promptly and without retrying it."""
    from support.fault_server import redirect

    with serve({}) as server:
        server.scripts[wire.path] = redirect(server.url + wire.path, 307)
        provider = wire.provider(server.url, retries=2)
        out = run_stream(provider, req())
        provider.close()
        assert len(server.requests) <= 31
    assert out.code == "LLM_BAD_RESPONSE"
    assert "redirected too many times" in out.last.error.message
    no_leaks()


@pytest.mark.parametrize(
    "greeting", [b"SSH-2.0-OpenSSH_9.6\r\n", b"hello\n", b"\x16\x03\x01\x02\x00"]
)
def test_server_that_does_not_speak_http(
    wire: Wire, greeting: bytes, no_leaks: Callable[..., None]
) -> None:
    """Pointed at the wrong service (SSH, a line protocol, TLS): one CONNECTION_FAILED that
    says it is not HTTP, not retried."""

    def script(client: socket.socket, request: Request) -> None:
        client.sendall(greeting)
        client.shutdown(socket.SHUT_RDWR)

    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, retries=2)
        out = run_stream(provider, req())
        provider.close()
        assert len(server.requests) == 1
    assert out.code == ConnectionFailed.code
    assert "did not answer with HTTP" in out.last.error.message
    no_leaks()

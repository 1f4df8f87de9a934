"""Every fault group against ``GeminiProvider`` (SSE with CRLF separators and no ``[DONE]``).

Gemini differs from the OpenAI-style servers where faults hurt most: events end with CRLF
CRLF, the stream has no sentinel (it ends when the connection does, the last event carrying
``finishReason``), errors use Google's ``{"error": {"code", "status", "details"}}`` shape (an
invalid key is HTTP 400 ``API_KEY_INVALID``, not 401), the key travels in ``x-goog-api-key``,
and a function call arrives whole.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.fault_server import (
    CANARY,
    Outcome,
    chunks,
    headers_then_silence,
    redirect,
    refused_url,
    repeat_forever,
    run_stream,
    segments,
    sequence,
    status,
)
from support.log_records import Records, captured_records
from support.transport_support import LoopbackServer, Script, serve, silent

from ollm_lite.chat import ChatClient
from ollm_lite.errors import (
    AuthenticationError,
    BadResponse,
    ConnectionFailed,
    HTTPStatusError,
    ModelNotFound,
    RateLimited,
    RequestTimeout,
)
from ollm_lite.http.policy import Timeouts
from ollm_lite.providers.gemini import GeminiProvider
from ollm_lite.tools import ToolRegistry, tool
from ollm_lite.types import Message, ProviderRequest

PATH = "/v1beta/models/m:streamGenerateContent"
SSE_TYPE = "text/event-stream"


def req(**kw: object) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], **kw)  # type: ignore[arg-type]


def provider(url: str, **kw: Any) -> GeminiProvider:
    kw.setdefault("api_key", CANARY)
    kw.setdefault("timeout", Timeouts(connect=1.0, idle=1.0))
    kw.setdefault("retries", 0)
    return GeminiProvider(base_url=url, **kw)


def event(obj: Any) -> bytes:
    """One SSE event as Gemini writes it: compact JSON after ``data: ``, CRLF CRLF."""
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\r\n\r\n"


def text_chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5},
        "modelVersion": "m",
    }


def call_chunk(name: str, args: Any) -> dict[str, Any]:
    part = {"functionCall": {"name": name, "args": args}}
    return {"candidates": [{"content": {"parts": [part], "role": "model"}, "finishReason": "STOP"}]}


def answer(words: list[str]) -> list[bytes]:
    """A whole streamed answer: a chunk per word, the last carrying ``finishReason``."""
    return [
        event(text_chunk(w, "STOP" if i == len(words) - 1 else None)) for i, w in enumerate(words)
    ]


def google_error(code: int, status_name: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status_name, **extra}}


# --------------------------------------------------------------------------- group 1


def test_refused(no_leaks: Callable[..., None]) -> None:
    """A closed port: CONNECTION_FAILED naming the URL."""
    with refused_url() as url:
        p = provider(url)
        out = run_stream(p, req())
        p.close()
    assert out.code == ConnectionFailed.code and url in out.last.error.message
    no_leaks()


@pytest.mark.parametrize("script", [silent, headers_then_silence(SSE_TYPE)], ids=["silent", "head"])
def test_silence_hits_the_idle_limit(script: Script, no_leaks: Callable[..., None]) -> None:
    """Silence before or after the head: LLM_TIMEOUT after the idle limit."""
    with serve({PATH: script}) as server:
        p = provider(server.url, timeout=Timeouts(connect=1.0, idle=0.3))
        out = run_stream(p, req())
        p.close()
    assert out.code == RequestTimeout.code and out.elapsed < 2.0
    no_leaks()


def test_keepalives_are_not_content(no_leaks: Callable[..., None]) -> None:
    """Text, then comment lines every 10 ms: LLM_TIMEOUT at the idle limit, text kept."""
    script = repeat_forever(
        b": ping\r\n\r\n", every=0.01, first=[event(text_chunk("Hel"))], content_type=SSE_TYPE
    )
    with serve({PATH: script}) as server:
        p = provider(server.url, timeout=Timeouts(connect=1.0, idle=0.4))
        out = run_stream(p, req())
        p.close()
    assert out.text == "Hel" and out.code == RequestTimeout.code and out.elapsed < 2.5
    no_leaks()


def test_total_deadline(no_leaks: Callable[..., None]) -> None:
    """An endless stream against ``timeout=0.4``: LLM_TIMEOUT near the deadline."""
    script = repeat_forever(event(text_chunk("x")), every=0.02, content_type=SSE_TYPE)
    with serve({PATH: script}) as server:
        p = provider(server.url, timeout=Timeouts(connect=1.0, idle=5.0))
        out = run_stream(p, req(timeout=0.4))
        p.close()
    assert out.code == RequestTimeout.code and "x" in out.text and out.elapsed < 2.0
    no_leaks()


# --------------------------------------------------------------------------- group 2

GOOGLE_STATUSES = [
    (
        400,
        google_error(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            details=[
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
            ],
        ),
        AuthenticationError,
    ),
    (403, google_error(403, "PERMISSION_DENIED", "denied"), AuthenticationError),
    (404, google_error(404, "NOT_FOUND", "models/m is not found"), ModelNotFound),
    (
        429,
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "quota",
            details=[{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "47s"}],
        ),
        RateLimited,
    ),
    (500, google_error(500, "INTERNAL", "internal"), HTTPStatusError),
    (503, google_error(503, "UNAVAILABLE", "The model is overloaded."), HTTPStatusError),
    (400, google_error(400, "INVALID_ARGUMENT", "bad request"), HTTPStatusError),
]


@pytest.mark.parametrize(
    ("code", "body", "cls"),
    GOOGLE_STATUSES,
    ids=["key-invalid", "403", "404", "429", "500", "503", "400"],
)
def test_google_errors_map_to_classes(
    code: int, body: dict[str, Any], cls: type, no_leaks: Callable[..., None]
) -> None:
    """Google's error shapes: class, code and the server's message; 429 keeps retryDelay."""
    with serve({PATH: status(code, body)}) as server:
        p = provider(server.url)
        out = run_stream(p, req())
        p.close()
    assert out.code == cls.code  # type: ignore[attr-defined]
    assert body["error"]["message"][:10] in out.last.error.message
    if cls is RateLimited:
        assert out.last.error.details["retry_after"] == 47.0
    no_leaks()


def test_array_form_error_body(no_leaks: Callable[..., None]) -> None:
    """The streamed array form ``[{"error": …}]`` is read like the object form."""
    body = json.dumps([google_error(403, "PERMISSION_DENIED", "no access")]).encode()
    with serve({PATH: status(403, body)}) as server:
        p = provider(server.url)
        out = run_stream(p, req())
        p.close()
    assert out.code == AuthenticationError.code and "no access" in out.last.error.message
    no_leaks()


def test_retry_then_answer_and_no_replay_after_content(no_leaks: Callable[..., None]) -> None:
    """503 then an answer: retried; then content and a reset: not retried, text kept."""
    overloaded = status(503, google_error(503, "UNAVAILABLE", "busy"), headers={"Retry-After": "0"})
    with serve({PATH: sequence(overloaded, chunks(answer(["ok"]), content_type=SSE_TYPE))}) as s:
        p = provider(s.url, retries=1)
        out = run_stream(p, req())
        p.close()
        assert len(s.requests) == 2
    assert out.text == "ok" and out.last.type == "finish"
    cut = chunks([event(text_chunk("par"))], then="reset", content_type=SSE_TYPE)
    with serve({PATH: cut}) as s:
        p = provider(s.url, retries=3)
        out = run_stream(p, req())
        p.close()
        assert len(s.requests) == 1
    assert out.text == "par" and out.code == ConnectionFailed.code
    no_leaks()


# --------------------------------------------------------------------------- groups 3 and 4


def test_crlf_and_utf8_split_across_reads(no_leaks: Callable[..., None]) -> None:
    """CRLF CRLF separators and multi-byte characters cut across TCP segments; the stream
    ends with the connection (no ``[DONE]``) and finishes ``stop``."""
    words = ["Grüße", " 東京", " 🎉", " a\u2028b"]
    body = b"".join(answer(words))
    cuts = sorted(
        {i for i, b in enumerate(body) if 0x80 <= b < 0xC0}
        | {i + 1 for i in range(len(body) - 1) if body[i : i + 2] == b"\r\n"}
    )
    pieces, last = [], 0
    for cut in cuts:
        pieces.append(body[last:cut])
        last = cut
    pieces.append(body[last:])
    with serve({PATH: segments(pieces, framing="close", content_type=SSE_TYPE, gap=0.001)}) as s:
        p = provider(s.url)
        out = run_stream(p, req())
        p.close()
    assert out.text == "".join(words)
    assert out.last.type == "finish" and out.last.reason == "stop"
    no_leaks()


@pytest.mark.parametrize("then", ["end", "close", "reset"])
def test_cut_before_finish_reason(then: str, no_leaks: Callable[..., None]) -> None:
    """The connection ends before any ``finishReason``: text kept, one error (a Gemini
    stream has no sentinel, so only ``finishReason`` proves it complete)."""
    parts = [event(text_chunk("Hello")), event(text_chunk(" wor"))]
    with serve({PATH: chunks(parts, then=then, content_type=SSE_TYPE)}) as s:
        p = provider(s.url)
        out = run_stream(p, req())
        p.close()
    assert out.text == "Hello wor"
    assert out.last.type == "error"
    no_leaks()


@pytest.mark.parametrize(
    ("code", "body", "cls"),
    GOOGLE_STATUSES,
    ids=["key-invalid", "403", "404", "429", "500", "503", "400"],
)
def test_error_object_mid_stream(
    code: int, body: dict[str, Any], cls: type, no_leaks: Callable[..., None]
) -> None:
    """An error event after text: text kept, one error mapped as the same body answered
    before the stream (429 keeps retryDelay), with Google's message; nothing read after."""
    parts = [event(text_chunk("par")), event(body), event(text_chunk("more", "STOP"))]
    with serve({PATH: chunks(parts, then="hang", content_type=SSE_TYPE)}) as s:
        p = provider(s.url)
        out = run_stream(p, req())
        p.close()
    assert out.text == "par" and out.code == cls.code  # type: ignore[attr-defined]
    assert [e.type for e in out.events].count("error") == 1
    assert body["error"]["message"] in out.last.error.message and out.elapsed < 1.5
    if cls is RateLimited:
        assert out.last.error.details["retry_after"] == 47.0
    no_leaks()


@pytest.mark.parametrize(
    ("body", "cls"),
    [
        (google_error(500, "INTERNAL", "raw failure"), HTTPStatusError),
        (
            google_error(
                429,
                "RESOURCE_EXHAUSTED",
                "raw quota",
                details=[
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "47s"}
                ],
            ),
            RateLimited,
        ),
        (google_error(403, "PERMISSION_DENIED", "raw denied"), AuthenticationError),
    ],
    ids=["500", "429", "403"],
)
def test_raw_json_error_without_data_prefix(
    body: dict[str, Any], cls: type, no_leaks: Callable[..., None]
) -> None:
    """An error payload mid-stream without ``data:`` (as the google-genai SDK reads them): one error
    carrying Google's message and the mapped code, text kept, never a normal finish."""
    raw = json.dumps(body).encode() + b"\r\n\r\n"
    with serve({PATH: chunks([event(text_chunk("par")), raw], content_type=SSE_TYPE)}) as s:
        p = provider(s.url)
        out = run_stream(p, req())
        p.close()
    assert out.text == "par" and out.last.type == "error"
    assert out.code == cls.code  # type: ignore[attr-defined]
    assert body["error"]["message"] in out.last.error.message
    assert "finishReason" not in out.last.error.message
    if cls is RateLimited:
        assert out.last.error.details["retry_after"] == 47.0
    no_leaks()


@pytest.mark.parametrize(
    ("error", "cls"),
    [
        ({"message": "odd failure"}, BadResponse),
        ("odd failure", BadResponse),
        ({"message": "odd failure", "status": "RESOURCE_EXHAUSTED"}, RateLimited),
        ({"message": "odd failure", "status": "UNAUTHENTICATED"}, AuthenticationError),
    ],
    ids=["no-code", "string", "status-only-429", "status-only-401"],
)
def test_error_object_without_a_code(error: Any, cls: type, no_leaks: Callable[..., None]) -> None:
    """No HTTP code to map by: Google's status name still decides; otherwise the stream is
    LLM_BAD_RESPONSE, with the server's message."""
    parts = [event(text_chunk("par")), event({"error": error})]
    with serve({PATH: chunks(parts, then="hang", content_type=SSE_TYPE)}) as s:
        p = provider(s.url)
        out = run_stream(p, req())
        p.close()
    assert out.text == "par" and out.code == cls.code  # type: ignore[attr-defined]
    assert "odd failure" in out.last.error.message
    no_leaks()


def test_raw_pretty_printed_error_split_across_reads(no_leaks: Callable[..., None]) -> None:
    """The array form, pretty-printed over CRLF lines and cut into small TCP segments: read
    whole (the SDK balances braces over lines), mapped, the text before it kept."""
    body = google_error(503, "UNAVAILABLE", "The model is overloaded.")
    raw = json.dumps([body], indent=2).replace("\n", "\r\n").encode() + b"\r\n"
    pieces = [event(text_chunk("par"))] + [raw[i : i + 7] for i in range(0, len(raw), 7)]
    script = segments(pieces, framing="close", content_type=SSE_TYPE, gap=0.001)
    with serve({PATH: script}) as s:
        p = provider(s.url)
        out = run_stream(p, req())
        p.close()
    assert out.text == "par" and out.code == HTTPStatusError.code
    assert "The model is overloaded." in out.last.error.message
    assert out.last.error.details["status"] == 503
    no_leaks()


def test_function_call_cut_mid_event(no_leaks: Callable[..., None]) -> None:
    """A ``functionCall`` event cut in half by a reset: no call delivered, one error."""
    whole = event(call_chunk("get_weather", {"city": "Oslo"}))
    parts = [event(text_chunk("Checking.")), whole[: len(whole) // 2]]
    with serve({PATH: chunks(parts, then="reset", content_type=SSE_TYPE)}) as s:
        p = provider(s.url)
        out = run_stream(p, req())
        p.close()
    assert out.text == "Checking." and out.last.type == "error"
    assert not [e for e in out.events if e.type == "tool_call"]
    no_leaks()


# --------------------------------------------------------------------------- group 5


@tool
def get_weather(city: str) -> dict[str, str]:
    """Weather.

    Args:
        city: City name.
    """
    return {"city": city, "sky": "clear"}


def chat(turns: list[Script], **kw: Any) -> tuple[list[Any], LoopbackServer]:
    with serve({PATH: sequence(*turns)}) as server:
        p = provider(server.url)
        client = ChatClient(
            p, tools=ToolRegistry([get_weather]), model="m", context_limits={"m": 100_000}
        )
        events = list(client.chat("go", tool_mode="native", **kw))
        p.close()
    return events, server


@pytest.mark.parametrize(
    ("name", "args", "code"),
    [
        ("launch", {}, "TOOL_NOT_FOUND"),
        ("get_weather", {"city": 7}, "TOOL_INVALID_ARGUMENTS"),
        ("get_weather", ["Oslo"], "TOOL_INVALID_ARGUMENTS"),
    ],
    ids=["unknown", "wrong-type", "not-an-object"],
)
def test_bad_function_calls_become_function_responses(
    name: str, args: Any, code: str, no_leaks: Callable[..., None]
) -> None:
    """A bad call comes back to the model as a ``functionResponse`` carrying the error, and
    the loop goes on to the final answer."""
    events, server = chat(
        [
            chunks([event(call_chunk(name, args))], content_type=SSE_TYPE),
            chunks(answer(["done"]), content_type=SSE_TYPE),
        ]
    )
    assert events[-1].type == "chat_finish" and events[-1].reason == "complete"
    results = [e.result for e in events if e.type == "tool_call_result"]
    assert [r.error.code for r in results] == [code]
    chats = [r for r in server.requests if r.path.split("?")[0] == PATH]
    assert len(chats) == 2
    second = json.loads(chats[1].body)
    assert code in json.dumps(second) and "functionResponse" in json.dumps(second)
    no_leaks()


# --------------------------------------------------------------------------- group 6


@pytest.mark.parametrize("where", ["first-byte", "mid-stream"])
def test_cancel(where: str, no_leaks: Callable[..., None]) -> None:
    """Cancel while silent or mid-stream: ``cancelled`` within 0.5 s, text kept."""
    if where == "first-byte":
        script: Script = silent
    else:
        script = repeat_forever(event(text_chunk("x")), every=0.01, content_type=SSE_TYPE)
    with serve({PATH: script}) as s:
        p = provider(s.url, timeout=Timeouts(connect=1.0, idle=30.0))
        cancel = threading.Event()
        timer = threading.Timer(0.25, cancel.set)
        timer.start()
        out = run_stream(p, req(cancel=cancel))
        timer.join()
        p.close()
    assert out.last.type == "finish" and out.last.reason == "cancelled"
    assert out.elapsed - 0.25 < 5.0  # generous: the idle limit it must beat is 30 s
    if where == "mid-stream":
        assert "x" in out.text
    no_leaks()


# --------------------------------------------------------------------------- group 7


@pytest.fixture
def records() -> Iterator[Records]:
    with captured_records() as handler:
        yield handler


@pytest.mark.parametrize("source", ["constructor", "env"])
def test_key_only_in_its_header(
    source: str, records: Records, monkeypatch: pytest.MonkeyPatch, no_leaks: Callable[..., None]
) -> None:
    """The key travels in ``x-goog-api-key`` only — never the URL (which urllib3 logs) — and
    error bodies echoing it (400, mid-stream) are redacted everywhere."""
    if source == "env":
        monkeypatch.setenv("GEMINI_API_KEY", CANARY)
    echo = google_error(
        400,
        "INVALID_ARGUMENT",
        f"API key {CANARY} not valid",
        details=[{"reason": "API_KEY_INVALID", "metadata": {"key": CANARY}}],
    )
    mid = [event(text_chunk("a")), event(google_error(500, "INTERNAL", f"key {CANARY} died"))]
    texts: list[str] = []
    with serve({PATH: sequence(status(400, echo), chunks(mid, content_type=SSE_TYPE))}) as s:
        p = provider(s.url, api_key=CANARY if source == "constructor" else None)
        for _ in range(2):
            out: Outcome = run_stream(p, req())
            texts += [repr(e) for e in out.events]
        texts.append(repr(p))
        p.close()
        seen = s.requests
    assert all(r.headers.get("x-goog-api-key") == CANARY for r in seen)
    assert all(CANARY not in r.path for r in seen)
    assert "authorization" not in {k.lower() for r in seen for k in r.headers}
    leaks = [t for t in texts + records.texts if CANARY in t]
    assert leaks == [], leaks[:3]
    no_leaks()


def test_redirect_to_another_host_drops_the_key(no_leaks: Callable[..., None]) -> None:
    """``x-goog-api-key`` is not forwarded when a redirect leaves the host."""
    with serve({PATH: chunks(answer(["moved"]), content_type=SSE_TYPE)}) as other:
        target = other.url.replace("127.0.0.1", "localhost") + PATH + "?alt=sse"
        with serve({PATH: redirect(target, 307)}) as first:
            p = provider(first.url)
            out = run_stream(p, req())
            p.close()
        received = other.requests
    assert received and out.text == "moved"
    assert all(CANARY not in repr(r.headers) and CANARY not in r.path for r in received)
    no_leaks()

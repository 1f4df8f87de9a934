"""Every fault group against ``AnthropicProvider`` (the Messages API's SSE stream).

The Messages API differs from the other wires where faults hurt most: each event names itself
twice (``event: <type>`` and ``data.type``), the stream proves itself complete with
``message_delta``'s ``stop_reason`` (then ``message_stop``), ``ping`` events keep an idle
stream open (https://platform.claude.com/docs/en/build-with-claude/streaming), errors come as
``{"type": "error", "error": {"type", "message"}}`` both as an HTTP answer and as an ``error``
event inside a 200 stream (https://platform.claude.com/docs/en/api/errors), an overloaded API
answers 529, the key travels in ``x-api-key``, and a tool call's input arrives in
``input_json_delta`` fragments.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.anthropic_support import (
    block_start,
    block_stop,
    delta,
    error_body,
    event,
    message_start,
    text_stream,
)
from support.fault_server import (
    CANARY,
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
    ConnectionFailed,
    HTTPStatusError,
    ModelNotFound,
    RateLimited,
    RequestTimeout,
)
from ollm_lite.http.policy import Timeouts
from ollm_lite.providers.anthropic import AnthropicProvider
from ollm_lite.tools import ToolRegistry, tool
from ollm_lite.types import Message, ProviderRequest

PATH = "/v1/messages"
SSE_TYPE = "text/event-stream"
PING = event({"type": "ping"})


def req(**kw: object) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], **kw)  # type: ignore[arg-type]


def provider(url: str, **kw: Any) -> AnthropicProvider:
    kw.setdefault("api_key", CANARY)
    kw.setdefault("timeout", Timeouts(connect=1.0, idle=1.0))
    kw.setdefault("retries", 0)
    return AnthropicProvider(base_url=url, **kw)


def answer(words: list[str]) -> list[bytes]:
    """A whole streamed answer, one text delta per word."""
    return text_stream(*words)


def opening(text: str) -> list[bytes]:
    """The start of an answer: ``message_start``, a text block and its first delta."""
    return [
        event(message_start()),
        event(block_start(0, {"type": "text", "text": ""})),
        event(delta(0, {"type": "text_delta", "text": text})),
    ]


def tool_use(name: str, args: Any) -> list[bytes]:
    """An answer that is one ``tool_use`` block, its input in one fragment."""
    block = {"type": "tool_use", "id": "toolu_01", "name": name, "input": {}}
    fragment = {"type": "input_json_delta", "partial_json": json.dumps(args)}
    return [
        event(message_start()),
        event(block_start(0, block)),
        event(delta(0, fragment)),
        event(block_stop(0)),
        event({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}}),
        event({"type": "message_stop"}),
    ]


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


def test_pings_are_not_content(no_leaks: Callable[..., None]) -> None:
    """Text, then ``ping`` events every 10 ms: LLM_TIMEOUT at the idle limit, text kept (a
    ping keeps the connection open; it is no progress of the answer)."""
    script = repeat_forever(PING, every=0.01, first=opening("Hel"), content_type=SSE_TYPE)
    with serve({PATH: script}) as server:
        p = provider(server.url, timeout=Timeouts(connect=1.0, idle=0.4))
        out = run_stream(p, req(timeout=20.0))  # the deadline only bounds a failing run
        p.close()
    assert out.text == "Hel" and out.code == RequestTimeout.code
    assert out.last.error.details["idle_timeout"] == 0.4 and out.elapsed < 10.0
    no_leaks()


def test_total_deadline(no_leaks: Callable[..., None]) -> None:
    """An endless stream against ``timeout=0.4``: LLM_TIMEOUT near the deadline."""
    script = repeat_forever(
        event(delta(0, {"type": "text_delta", "text": "x"})),
        every=0.02,
        first=opening("x"),
        content_type=SSE_TYPE,
    )
    with serve({PATH: script}) as server:
        p = provider(server.url, timeout=Timeouts(connect=1.0, idle=5.0))
        out = run_stream(p, req(timeout=0.4))
        p.close()
    assert out.code == RequestTimeout.code and "x" in out.text and out.elapsed < 2.0
    no_leaks()


# --------------------------------------------------------------------------- group 2

#: Anthropic's error types with their statuses (https://platform.claude.com/docs/en/api/errors).
STATUSES = [
    (401, error_body("authentication_error", "invalid x-api-key"), AuthenticationError),
    (403, error_body("permission_error", "no access to this model"), AuthenticationError),
    (404, error_body("not_found_error", "model: m"), ModelNotFound),
    (429, error_body("rate_limit_error", "Number of request tokens has exceeded"), RateLimited),
    (529, error_body("overloaded_error", "Overloaded"), RateLimited),
    (500, error_body("api_error", "Internal server error"), HTTPStatusError),
    (400, error_body("invalid_request_error", "messages: field required"), HTTPStatusError),
    (413, error_body("request_too_large", "Request exceeds the maximum size"), HTTPStatusError),
]
IDS = ["401", "403", "404", "429", "529", "500", "400", "413"]


@pytest.mark.parametrize(("code", "body", "cls"), STATUSES, ids=IDS)
def test_errors_map_to_classes(
    code: int, body: dict[str, Any], cls: type, no_leaks: Callable[..., None]
) -> None:
    """Anthropic's error answers: class, code and the server's message; retry-after kept."""
    script = status(code, body, headers={"retry-after": "47"})
    with serve({PATH: script}) as server:
        p = provider(server.url)
        out = run_stream(p, req())
        p.close()
    assert out.code == cls.code  # type: ignore[attr-defined]
    assert body["error"]["message"] in out.last.error.message
    if cls is RateLimited:
        assert out.last.error.details["retry_after"] == 47.0
    no_leaks()


def test_retry_then_answer_and_no_replay_after_content(no_leaks: Callable[..., None]) -> None:
    """529 then an answer: retried; then content and a reset: not retried, text kept."""
    overloaded = status(
        529, error_body("overloaded_error", "Overloaded"), headers={"retry-after": "0"}
    )
    with serve({PATH: sequence(overloaded, chunks(answer(["ok"]), content_type=SSE_TYPE))}) as s:
        p = provider(s.url, retries=1)
        out = run_stream(p, req())
        p.close()
        assert len(s.requests) == 2
    assert out.text == "ok" and out.last.type == "finish"
    cut = chunks(opening("par"), then="reset", content_type=SSE_TYPE)
    with serve({PATH: cut}) as s:
        p = provider(s.url, retries=3)
        out = run_stream(p, req())
        p.close()
        assert len(s.requests) == 1
    assert out.text == "par" and out.code == ConnectionFailed.code
    no_leaks()


# --------------------------------------------------------------------------- groups 3 and 4


def test_crlf_and_utf8_split_across_reads(no_leaks: Callable[..., None]) -> None:
    """CRLF line ends and multi-byte characters cut across TCP segments."""
    words = ["Grüße", " 東京", " 🎉", " a\u2028b"]
    body = b"".join(answer(words)).replace(b"\n", b"\r\n")
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
def test_cut_before_stop_reason(then: str, no_leaks: Callable[..., None]) -> None:
    """The connection ends before any ``stop_reason``: text kept, one error."""
    parts = [*opening("Hello"), event(delta(0, {"type": "text_delta", "text": " wor"}))]
    with serve({PATH: chunks(parts, then=then, content_type=SSE_TYPE)}) as s:
        p = provider(s.url)
        out = run_stream(p, req())
        p.close()
    assert out.text == "Hello wor"
    assert out.last.type == "error" and [e.type for e in out.events].count("error") == 1
    no_leaks()


@pytest.mark.parametrize(("code", "body", "cls"), STATUSES, ids=IDS)
def test_error_event_mid_stream(
    code: int, body: dict[str, Any], cls: type, no_leaks: Callable[..., None]
) -> None:
    """An ``error`` event after text: text kept, one error mapped as the same body answered
    before the stream, with the server's message; nothing read after it."""
    parts = [*opening("par"), event(body), *answer(["more"])]
    with serve({PATH: chunks(parts, then="hang", content_type=SSE_TYPE)}) as s:
        p = provider(s.url)
        out = run_stream(p, req())
        p.close()
        assert len(s.requests) == 1
    assert out.text == "par" and out.code == cls.code  # type: ignore[attr-defined]
    assert [e.type for e in out.events].count("error") == 1
    assert body["error"]["message"] in out.last.error.message and out.elapsed < 1.5
    no_leaks()


def test_tool_use_cut_mid_event(no_leaks: Callable[..., None]) -> None:
    """A ``tool_use`` answer cut inside its input fragment by a reset: no call delivered."""
    whole = tool_use("get_weather", {"city": "Oslo"})
    parts = [*whole[:2], whole[2][: len(whole[2]) // 2]]
    with serve({PATH: chunks(parts, then="reset", content_type=SSE_TYPE)}) as s:
        p = provider(s.url)
        out = run_stream(p, req())
        p.close()
    assert out.last.type == "error"
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
def test_bad_tool_calls_become_error_tool_results(
    name: str, args: Any, code: str, no_leaks: Callable[..., None]
) -> None:
    """A bad call comes back to the model as a ``tool_result`` with ``is_error: true``
    carrying the error, and the loop goes on to the final answer."""
    events, server = chat(
        [
            chunks(tool_use(name, args), content_type=SSE_TYPE),
            chunks(answer(["done"]), content_type=SSE_TYPE),
        ]
    )
    assert events[-1].type == "chat_finish" and events[-1].reason == "complete"
    results = [e.result for e in events if e.type == "tool_call_result"]
    assert [r.error.code for r in results] == [code]
    chats = [r for r in server.requests if r.path == PATH]
    assert len(chats) == 2
    [*_, asked, answered] = json.loads(chats[1].body)["messages"]
    assert asked["role"] == "assistant" and asked["content"][-1]["type"] == "tool_use"
    [result] = answered["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_01"
    assert result["is_error"] is True and code in result["content"]
    no_leaks()


# --------------------------------------------------------------------------- group 6


@pytest.mark.parametrize("where", ["first-byte", "mid-stream"])
def test_cancel(where: str, no_leaks: Callable[..., None]) -> None:
    """Cancel while silent or mid-stream: ``cancelled`` promptly, text kept."""
    if where == "first-byte":
        script: Script = silent
    else:
        script = repeat_forever(
            event(delta(0, {"type": "text_delta", "text": "x"})),
            every=0.01,
            first=opening("x"),
            content_type=SSE_TYPE,
        )
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
    """The key travels in ``x-api-key`` only, and error bodies echoing it (401, mid-stream)
    are redacted everywhere."""
    if source == "env":
        monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    echo = error_body("authentication_error", f"invalid x-api-key {CANARY}")
    mid = [*opening("a"), event(error_body("api_error", f"key {CANARY} died"))]
    texts: list[str] = []
    with serve({PATH: sequence(status(401, echo), chunks(mid, content_type=SSE_TYPE))}) as s:
        p = provider(s.url, api_key=CANARY if source == "constructor" else None)
        for _ in range(2):
            out = run_stream(p, req())
            texts += [repr(e) for e in out.events]
        texts.append(repr(p))
        p.close()
        seen = s.requests
    assert all(r.headers.get("x-api-key") == CANARY for r in seen)
    assert all(r.headers.get("anthropic-version") == "2023-06-01" for r in seen)
    assert all(CANARY not in r.path for r in seen)
    assert "authorization" not in {k.lower() for r in seen for k in r.headers}
    leaks = [t for t in texts + records.texts if CANARY in t]
    assert leaks == [], leaks[:3]
    no_leaks()


def test_redirect_to_another_host_drops_the_key(no_leaks: Callable[..., None]) -> None:
    """``x-api-key`` is not forwarded when a redirect leaves the host."""
    with serve({PATH: chunks(answer(["moved"]), content_type=SSE_TYPE)}) as other:
        target = other.url.replace("127.0.0.1", "localhost") + PATH
        with serve({PATH: redirect(target, 307)}) as first:
            p = provider(first.url)
            out = run_stream(p, req())
            p.close()
        received = other.requests
    assert received and out.text == "moved"
    assert all(CANARY not in repr(r.headers) and CANARY not in r.path for r in received)
    no_leaks()

"""Only library exceptions leave the providers, whatever JSON a server sends.

Any JSON value — arbitrary, or a valid chunk with one node replaced by an arbitrary value — is
sent as a stream chunk and as an error body through the four wires (Ollama NDJSON,
OpenAI-compatible SSE, Gemini SSE, Anthropic's Messages SSE) of the public providers, served
by ``responses``. A stream yields events only and ends with exactly one terminal event
(``FinishEvent`` or ``ErrorEvent``), last; ``chat()`` returns a ``ChatResult`` or raises an
``OllmError``; ``list_models()`` raises only ``OllmError``; ``health()`` never raises.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from typing import Any

import responses
from hypothesis import HealthCheck, given, settings, strategies as st
from support.strategies import json_of

from ollm_lite.errors import OllmError
from ollm_lite.providers.anthropic import AnthropicProvider
from ollm_lite.providers.base import BaseProvider
from ollm_lite.providers.gemini import GeminiProvider
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.types import (
    ChatResult,
    ErrorEvent,
    FinishEvent,
    HealthStatus,
    Message,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
)

URL = "http://wire.test:9"
ANY_URL = re.compile(r"http://wire\.test:9/.*")
EXAMPLES = 300

#: Any JSON value, with the numbers and strings vendors actually send.
any_json = json_of(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(["stop", "length", "tool_calls", "STOP", "MAX_TOKENS", "0", ""]),
    keys=st.text(max_size=8)
    | st.sampled_from(["index", "prompt", "completion", "total", "error", "message"]),
    max_leaves=12,
    list_size=4,
    dict_size=4,
)

OPENAI_CHUNKS: list[Any] = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]},
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"a": 1}'},
                        }
                    ]
                },
            }
        ]
    },
    {"choices": [{"index": 0, "delta": {"refusal": "No."}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": None},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
    {"error": {"message": "boom", "type": "server_error", "code": 500}},
]
OLLAMA_CHUNKS: list[Any] = [
    {"model": "m", "message": {"role": "assistant", "content": "Hi"}, "done": False},
    {
        "model": "m",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}],
        },
        "done": False,
    },
    {
        "model": "m",
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 3,
        "eval_count": 2,
    },
    {"error": "boom"},
]
GEMINI_CHUNKS: list[Any] = [
    {
        "candidates": [
            {"content": {"parts": [{"text": "Hi"}], "role": "model"}, "index": 0},
        ],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1},
    },
    {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]},
                "finishReason": "STOP",
            }
        ]
    },
    {"promptFeedback": {"blockReason": "SAFETY"}},
    {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}},
]
#: The events of https://platform.claude.com/docs/en/build-with-claude/streaming.
ANTHROPIC_CHUNKS: list[Any] = [
    {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 3}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'},
    },
    {"type": "content_block_start", "index": 2, "content_block": {"type": "thinking"}},
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "signature_delta", "signature": "sig"},
    },
    {"type": "content_block_stop", "index": 1},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use"},
        "usage": {"output_tokens": 2, "cache_read_input_tokens": 1},
    },
    {"type": "message_stop"},
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
]
ERROR_BODIES: list[Any] = [
    {"error": {"message": "quota", "details": [{"reason": "X", "retryDelay": "1s"}]}},
    {"error": {"message": "quota", "type": "insufficient_quota", "code": 429, "status": "S"}},
    {"detail": [{"msg": "bad"}]},
    [{"error": {"code": 429, "message": "m", "status": "RESOURCE_EXHAUSTED"}}],
    {"error": "text"},
    {"type": "error", "error": {"type": "not_found_error", "message": "model: m"}},
]


@st.composite
def mutated(draw: st.DrawFn, templates: list[Any]) -> Any:
    """A template with one node (the root included) replaced by any JSON value."""
    value = json.loads(json.dumps(draw(st.sampled_from(templates))))
    paths: list[list[Any]] = [[]]

    def walk(node: Any, path: list[Any]) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            paths.append([*path, key])
            if isinstance(child, dict | list):
                walk(child, [*path, key])

    walk(value, [])
    path = draw(st.sampled_from(paths))
    replacement = draw(any_json)
    if not path:
        return replacement
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = replacement
    return value


def chunk_values(templates: list[Any]) -> st.SearchStrategy[list[Any]]:
    return st.lists(mutated(templates) | any_json, min_size=1, max_size=3)


def request() -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")])


def check_stream(provider: BaseProvider) -> None:
    events = list(provider.chat_stream(request()))
    assert events, "no terminal event"
    allowed = (TextEvent, ThinkingEvent, ToolCallEvent, FinishEvent, ErrorEvent)
    assert all(isinstance(e, allowed) for e in events), events
    terminals = [e for e in events if isinstance(e, FinishEvent | ErrorEvent)]
    assert len(terminals) == 1 and terminals[0] is events[-1], events


def check_chat(provider: BaseProvider) -> None:
    try:
        result = provider.chat(request())
    except OllmError:
        return
    assert isinstance(result, ChatResult)


def check_all(provider: BaseProvider, *, error_body: bool) -> None:
    check_stream(provider)
    check_chat(provider)
    if error_body:
        with contextlib.suppress(OllmError):
            provider.list_models()
        assert isinstance(provider.health(), HealthStatus)


def serve(body: bytes, status: int, content_type: str, run: Callable[[], None]) -> None:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        for method in (responses.GET, responses.POST):
            rsps.add(method, ANY_URL, body=body, status=status, content_type=content_type)
        run()


def ollama() -> BaseProvider:
    return LocalProvider(base_url=URL, retries=0)


def openai() -> BaseProvider:
    return OpenAICompatibleProvider(base_url=URL, retries=0, api_key="sk-secret-key-123")


def gemini() -> BaseProvider:
    return GeminiProvider(base_url=URL, retries=0, api_key="gm-secret-key-123")


def anthropic() -> BaseProvider:
    return AnthropicProvider(base_url=URL, retries=0, api_key="sk-ant-secret-key-123")


PROPS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPS
@given(chunk_values(OLLAMA_CHUNKS))
def test_any_json_as_an_ollama_chunk_gives_only_events(values: list[Any]) -> None:
    body = b"".join(json.dumps(v).encode() + b"\n" for v in values)
    serve(body, 200, "application/x-ndjson", lambda: check_all(ollama(), error_body=False))


@PROPS
@given(chunk_values(OPENAI_CHUNKS), st.booleans())
def test_any_json_as_an_openai_chunk_gives_only_events(values: list[Any], done: bool) -> None:
    body = b"".join(b"data: " + json.dumps(v).encode() + b"\n\n" for v in values)
    body += b"data: [DONE]\n\n" if done else b""
    serve(body, 200, "text/event-stream", lambda: check_all(openai(), error_body=False))


@PROPS
@given(chunk_values(GEMINI_CHUNKS))
def test_any_json_as_a_gemini_chunk_gives_only_events(values: list[Any]) -> None:
    body = b"".join(b"data: " + json.dumps(v).encode() + b"\r\n\r\n" for v in values)
    serve(body, 200, "text/event-stream", lambda: check_all(gemini(), error_body=False))


@PROPS
@given(chunk_values(ANTHROPIC_CHUNKS), st.booleans())
def test_any_json_as_a_messages_event_gives_only_events(values: list[Any], named: bool) -> None:
    body = b"".join(
        (b"event: x\n" if named else b"") + b"data: " + json.dumps(v).encode() + b"\n\n"
        for v in values
    )
    serve(body, 200, "text/event-stream", lambda: check_all(anthropic(), error_body=False))


error_statuses = st.sampled_from([400, 401, 403, 404, 408, 422, 429, 500, 503, 504])


#: The members vendors put a message and facts in, each holding any JSON value.
error_members = (
    st.builds(lambda v: {"error": v}, any_json)
    | st.builds(lambda v: {"error": {"message": "quota", "details": v}}, any_json)
    | st.builds(lambda v: {"error": {"message": v, "status": v, "code": v, "type": v}}, any_json)
    | st.builds(lambda v: {"detail": v}, any_json)
    | st.builds(lambda v: [{"error": v}], any_json)
)


@PROPS
@given(
    mutated(ERROR_BODIES) | error_members | any_json,
    error_statuses,
    st.sampled_from([ollama, openai, gemini, anthropic]),
)
def test_any_json_error_body_maps_by_status(
    value: Any, status: int, make: Callable[[], BaseProvider]
) -> None:
    body = json.dumps(value).encode()
    serve(body, status, "application/json", lambda: check_all(make(), error_body=True))


# --------------------------------------------------------------------------- secrets


#: Keys of Latin-1 letters (sendable in a header): no six of them in a row can come from
#: anything but the key, since every message the library writes is ASCII.
keys = st.text(
    alphabet="ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖØÙÚÛÜÝÞßàáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿ",
    min_size=8,
    max_size=48,
)


def echoes(key: str, pad: int, kind: str) -> tuple[int, str, bytes]:
    """An answer that quotes ``key`` after ``pad`` filler characters."""
    text = "~" * pad + key + "~" * 20
    if kind == "json":
        return 400, "application/json", json.dumps({"error": {"message": text}}).encode()
    if kind == "text":
        return 500, "text/plain", text.encode()
    if kind == "html":
        return 502, "text/html", f"<html><title>{text}</title></html>".encode()
    if kind == "openai-stream":
        chunk = {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}
        body = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps({'error': text})}\n\n"
        return 200, "text/event-stream", body.encode()
    if kind.startswith("anthropic"):  # https://platform.claude.com/docs/en/api/errors
        error = {"type": "error", "error": {"type": "api_error", "message": text}}
        if kind == "anthropic-json":
            return 400, "application/json", json.dumps(error).encode()
        return 200, "text/event-stream", f"event: error\ndata: {json.dumps(error)}\n\n".encode()
    if kind == "ollama-stream":
        return 200, "application/x-ndjson", (json.dumps({"error": text}) + "\n").encode()
    error = {"error": {"code": 500, "message": text, "status": "INTERNAL"}}
    return 200, "text/event-stream", f"data: {json.dumps(error)}\r\n\r\n".encode()


def shown(provider: BaseProvider) -> str:
    """Every text the caller can see of the failure: messages and details."""
    events = list(provider.chat_stream(request()))
    texts = [
        e.error.message + json.dumps(e.error.details, default=str, ensure_ascii=False)
        for e in events
        if isinstance(e, ErrorEvent)
    ]
    try:
        provider.chat(request())
    except OllmError as exc:
        texts.append(exc.message + json.dumps(exc.details, default=str, ensure_ascii=False))
    return "\n".join(texts)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    keys,
    st.integers(0, 1100),
    st.sampled_from(
        [
            *("json", "text", "html", "openai-stream", "ollama-stream", "gemini-stream"),
            *("anthropic-stream", "anthropic-json"),
        ]
    ),
)
def test_no_part_of_a_key_survives_any_cut(key: str, pad: int, kind: str) -> None:
    status, ctype, body = echoes(key, pad, kind)
    makers = {"ollama": LocalProvider, "gemini": GeminiProvider, "anthropic": AnthropicProvider}
    make = makers.get(kind.split("-")[0])
    factory = make or OpenAICompatibleProvider
    provider = factory(base_url=URL, retries=0, api_key=key)  # type: ignore[operator]
    seen: list[str] = []
    serve(body, status, ctype, lambda: seen.append(shown(provider)))
    windows = {key[i : i + 6] for i in range(len(key) - 5)}
    assert not any(w in seen[0] for w in windows), seen[0]


# --------------------------------------------------------------------------- whole answers

ANSWERS: dict[str, list[Any]] = {
    "openai": [
        {
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": "Hi",
                        "refusal": None,
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    },
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ],
    "ollama": [
        {
            "model": "m",
            "message": {
                "role": "assistant",
                "content": "Hi",
                "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}],
            },
            "done": True,
            "done_reason": "stop",
            "eval_count": 1,
        }
    ],
    "gemini": GEMINI_CHUNKS[:2],
    "anthropic": [
        {
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "redacted_thinking", "data": "d"},
                {"type": "text", "text": "Hi"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 2},
        }
    ],
}
MAKERS: dict[str, Callable[[], BaseProvider]] = {
    "openai": openai,
    "ollama": ollama,
    "gemini": gemini,
    "anthropic": anthropic,
}


@PROPS
@given(st.data(), st.sampled_from(sorted(ANSWERS)))
def test_any_json_as_a_whole_answer_gives_a_result_or_a_library_error(
    data: st.DataObject, wire: str
) -> None:
    value = data.draw(mutated(ANSWERS[wire]) | any_json)
    body = json.dumps(value).encode()
    serve(body, 200, "application/json", lambda: check_chat(MAKERS[wire]()))


LISTINGS: dict[str, list[Any]] = {
    "openai": [{"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "o"}]}],
    "ollama": [
        {"models": [{"name": "m:latest", "size": 1, "details": {"family": "llama"}}]},
        {"model_info": {"llama.context_length": 8192}, "capabilities": ["completion"]},
    ],
    "gemini": [
        {
            "models": [
                {
                    "name": "models/m",
                    "inputTokenLimit": 1,
                    "supportedGenerationMethods": ["generateContent"],
                }
            ],
            "nextPageToken": "",
        }
    ],
    "anthropic": [
        {
            "data": [
                {
                    "type": "model",
                    "id": "m",
                    "display_name": "M",
                    "created_at": "2025-01-01T00:00:00Z",
                }
            ],
            "has_more": True,
            "first_id": "m",
            "last_id": "m",
        }
    ],
}


@PROPS
@given(st.data(), st.sampled_from(sorted(LISTINGS)))
def test_any_json_as_a_model_answer_gives_models_or_a_library_error(
    data: st.DataObject, wire: str
) -> None:
    value = data.draw(mutated(LISTINGS[wire]) | any_json)
    body = json.dumps(value).encode()

    def run() -> None:
        provider = MAKERS[wire]()
        for call in (provider.list_models, lambda: provider.show_model("m")):
            with contextlib.suppress(OllmError):
                call()
        with contextlib.suppress(OllmError):
            provider.context_length("m")
        assert isinstance(provider.health(), HealthStatus)

    serve(body, 200, "application/json", run)

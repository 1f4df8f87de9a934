"""GeminiProvider: request shapes and error mapping (responses), streams (loopback replays)."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import pytest
import responses
from hypothesis import given, strategies as st
from transport_support import Request, serve, stream_script

from ollm_lite.errors import AuthenticationError, ModelNotFound, RateLimited
from ollm_lite.providers._gemini_wire import clean_schema, contents_from_messages
from ollm_lite.providers.gemini import GeminiProvider
from ollm_lite.types import (
    ErrorEvent,
    FinishEvent,
    GenerationOptions,
    ImagePart,
    Message,
    ProviderRequest,
    TextEvent,
    TextPart,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    ToolResult,
    ToolSchema,
)

KEY = "AIza-canary-12345"
URL = "http://gemini.test"
STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
WEATHER = ToolSchema(
    "get_weather",
    "Weather now.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": ["integer", "null"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
)


def req(**kw: Any) -> ProviderRequest:
    return ProviderRequest("gemini-2.5-flash", [Message.user("Hi")], **kw)


def sse(*objs: Any) -> list[bytes]:
    """Events as Gemini writes them: CRLF line ends, one event per HTTP chunk."""
    return [b"data: " + json.dumps(o).encode() + b"\r\n\r\n" for o in objs]


def text_chunk(text: str, finish: str | None = None, thought: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {"text": text}
    if thought:
        part["thought"] = True
    cand: dict[str, Any] = {"content": {"parts": [part], "role": "model"}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    return {
        "candidates": [cand],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7},
    }


def run(chunks: list[bytes], then: str = "end", **kw: Any) -> tuple[list[Any], Request]:
    with serve({STREAM: stream_script(chunks, then=then)}) as server:
        provider = GeminiProvider(api_key=KEY, base_url=server.url, retries=0)
        events = list(provider.chat_stream(req(**kw)))
        provider.close()
        return events, server.requests[0]


def test_text_stream_with_crlf_and_cumulative_usage() -> None:
    events, seen = run(sse(text_chunk("Hel"), text_chunk("lo", "STOP")))
    assert events[:2] == [TextEvent("Hel"), TextEvent("lo")]
    finish = events[-1]
    assert isinstance(finish, FinishEvent) and finish.reason == "stop"
    assert finish.usage is not None and finish.usage.total_tokens == 7
    assert seen.headers["x-goog-api-key"] == KEY
    assert "alt=sse" in seen.path and KEY not in seen.path


def test_function_calls_become_tool_calls_and_finish_tool() -> None:
    chunk = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {
                            "functionCall": {"name": "get_weather", "args": {"city": "Tokyo"}},
                            "thoughtSignature": "c2ln",
                        },
                        {
                            "functionCall": {
                                "name": "get_weather",
                                "args": {"city": "Paris"},
                                "id": "fc-2",
                            }
                        },
                    ],
                    "role": "model",
                },
                "finishReason": "STOP",
            }
        ]
    }
    events, _ = run(sse(chunk), tools=[WEATHER])
    calls = [e.value for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.id, c.args) for c in calls] == [
        ("call_0", {"city": "Tokyo"}),
        ("fc-2", {"city": "Paris"}),
    ]
    assert json.loads(calls[0].arguments) == {"city": "Tokyo"}
    assert events[-1] == FinishEvent("tool", None)


def test_thoughts_are_thinking_events() -> None:
    events, _ = run(sse(text_chunk("hmm", thought=True), text_chunk("4", "STOP")))
    assert events[0] == ThinkingEvent("hmm") and events[1] == TextEvent("4")


@pytest.mark.parametrize(
    ("reason", "mapped"), [("MAX_TOKENS", "length"), ("SAFETY", "content_filter")]
)
def test_finish_reasons(reason: str, mapped: str) -> None:
    events, _ = run(sse(text_chunk("x", reason)))
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == mapped


def test_blocked_prompt_is_an_error_event() -> None:
    events, _ = run(sse({"promptFeedback": {"blockReason": "SAFETY"}}))
    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert "SAFETY" in events[0].error.message


def test_error_mid_stream_keeps_text_one_terminal() -> None:
    err = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    events, _ = run(sse(text_chunk("partial"), err))
    assert events[0] == TextEvent("partial")
    assert isinstance(events[-1], ErrorEvent) and "overloaded" in events[-1].error.message
    assert sum(e.type in ("finish", "error") for e in events) == 1
    # details["status"] is the HTTP number everywhere; Google's own word sits beside it
    assert events[-1].error.details == {"status": 503, "server_status": "UNAVAILABLE"}


def test_stream_cut_without_finish_reason() -> None:
    events, _ = run(sse(text_chunk("par")), then="close")
    assert events[0] == TextEvent("par")
    assert isinstance(events[-1], ErrorEvent) and events[-1].error.code == "LLM_BAD_RESPONSE"


def test_cancel_on_a_silent_stream() -> None:
    with serve({STREAM: stream_script(sse(text_chunk("a")), then="hang")}) as server:
        provider = GeminiProvider(api_key=KEY, base_url=server.url)
        cancel = threading.Event()
        threading.Timer(0.2, cancel.set).start()
        started = time.monotonic()
        events = list(provider.chat_stream(req(cancel=cancel)))
        assert time.monotonic() - started < 2.0
        assert events == [TextEvent("a"), FinishEvent("cancelled")]
        provider.close()


def test_no_key_is_auth_failed_and_health_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    provider = GeminiProvider(base_url=URL)
    [event] = list(provider.chat_stream(req()))
    assert isinstance(event, ErrorEvent) and event.error.code == "LLM_AUTH_FAILED"
    health = provider.health()
    assert not health.ok and health.error is not None and health.error.code == "LLM_AUTH_FAILED"


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/v1beta", "/v1beta/"])
@responses.activate
def test_base_url_with_or_without_a_version_suffix(suffix: str) -> None:
    """API.md: a base_url with or without a trailing /v1 must both work."""
    answer = {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}
    call = responses.post(f"{URL}/v1beta/models/gemini-2.5-flash:generateContent", json=answer)
    provider = GeminiProvider(api_key=KEY, base_url=URL + suffix, retries=0)
    assert provider.base_url == URL
    assert provider.chat(req()).content == "ok"
    assert call.call_count == 1


# --------------------------------------------------------------------------- request shapes


@responses.activate
def test_request_body_shape() -> None:
    answer = {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}
    call = responses.post(f"{URL}/v1beta/models/gemini-2.5-flash:generateContent", json=answer)
    provider = GeminiProvider(api_key=KEY, base_url=URL)
    history = [
        Message.user("Weather in Oslo?", images=[ImagePart("aGk=", "image/png")]),
        Message.assistant("", [ToolCall.from_arguments("call_0", "get_weather", {"city": "Oslo"})]),
        Message.tool(
            ToolResult(ok=True, data=3), ToolCall.from_arguments("call_0", "get_weather", {})
        ),
    ]
    result = provider.chat(
        ProviderRequest(
            "gemini-2.5-flash",
            history,
            system_prompt="Be brief.",
            tools=[WEATHER],
            tool_choice={"name": "get_weather"},
            options=GenerationOptions(temperature=0.2, max_tokens=50, stop=["END"], seed=1),
            response_format={"type": "object", "properties": {"a": {"type": "string"}}},
        )
    )
    assert result.content == "ok"
    body = json.loads(call.calls[0].request.body)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert body["contents"][0]["parts"][1] == {
        "inlineData": {"mimeType": "image/png", "data": "aGk="}
    }
    assert body["contents"][1]["parts"][0]["functionCall"] == {
        "name": "get_weather",
        "args": {"city": "Oslo"},
    }
    response = body["contents"][2]["parts"][0]["functionResponse"]
    assert response == {"name": "get_weather", "response": {"ok": True, "data": 3}}
    params = body["tools"][0]["functionDeclarations"][0]["parameters"]
    assert "additionalProperties" not in params
    assert params["properties"]["days"] == {"type": "integer", "nullable": True}
    assert body["toolConfig"]["functionCallingConfig"] == {
        "mode": "ANY",
        "allowedFunctionNames": ["get_weather"],
    }
    gen = body["generationConfig"]
    assert (
        gen["temperature"] == 0.2
        and gen["maxOutputTokens"] == 50
        and gen["stopSequences"] == ["END"]
    )
    assert gen["responseMimeType"] == "application/json" and "responseSchema" in gen
    assert call.calls[0].request.headers["x-goog-api-key"] == KEY
    assert KEY not in call.calls[0].request.url


@responses.activate
def test_non_streamed_function_calls_to_openai() -> None:
    answer = {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]},
                "finishReason": "STOP",
            }
        ]
    }
    responses.post(f"{URL}/v1beta/models/m:generateContent", json=answer)
    result = GeminiProvider(api_key=KEY, base_url=URL).chat(
        ProviderRequest("m", [Message.user("x")])
    )
    openai = result.to_openai()
    assert openai["finish_reason"] == "tool_calls"
    assert openai["tool_calls"][0]["type"] == "function"
    assert json.loads(openai["tool_calls"][0]["function"]["arguments"]) == {"a": 1}


@responses.activate
def test_thought_signature_is_sent_back() -> None:
    part = {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "U0lH"}
    first = {"candidates": [{"content": {"parts": [part]}, "finishReason": "STOP"}]}
    second = {"candidates": [{"content": {"parts": [{"text": "done"}]}, "finishReason": "STOP"}]}
    call = responses.post(f"{URL}/v1beta/models/m:generateContent", json=first)
    provider = GeminiProvider(api_key=KEY, base_url=URL)
    result = provider.chat(ProviderRequest("m", [Message.user("x")]))
    responses.replace(responses.POST, f"{URL}/v1beta/models/m:generateContent", json=second)
    tc = result.tool_calls[0]
    history = [
        Message.user("x"),
        Message.assistant("", [tc]),
        Message.tool(ToolResult(ok=True), tc),
    ]
    provider.chat(ProviderRequest("m", history))
    body = json.loads(responses.calls[1].request.body)
    assert body["contents"][1]["parts"][0]["thoughtSignature"] == "U0lH"
    assert call is not None


@responses.activate
def test_embed_batches_of_100_in_order() -> None:
    def reply(request: Any) -> tuple[int, dict[str, str], str]:
        reqs = json.loads(request.body)["requests"]
        assert len(reqs) <= 100
        vecs = [{"values": [float(r["content"]["parts"][0]["text"]), 0.5]} for r in reqs]
        return 200, {}, json.dumps({"embeddings": vecs})

    responses.add_callback(
        responses.POST,
        f"{URL}/v1beta/models/gemini-embedding-001:batchEmbedContents",
        callback=reply,
    )
    texts = [str(i) for i in range(250)]
    result = GeminiProvider(api_key=KEY, base_url=URL).embed(texts)
    assert [v[0] for v in result.vectors] == [float(i) for i in range(250)]
    assert result.dimensions == 2 and len(responses.calls) == 3


@responses.activate
def test_count_tokens_list_models_paged_context_length() -> None:
    responses.post(f"{URL}/v1beta/models/gemini-2.5-flash:countTokens", json={"totalTokens": 31})
    page1 = {
        "models": [
            {
                "name": "models/m",
                "inputTokenLimit": 1048576,
                "supportedGenerationMethods": ["generateContent", "countTokens"],
            }
        ],
        "nextPageToken": "p2",
    }
    page2 = {
        "models": [
            {
                "name": "models/e",
                "inputTokenLimit": 2048,
                "supportedGenerationMethods": ["embedContent"],
            }
        ]
    }
    responses.get(
        f"{URL}/v1beta/models",
        json=page1,
        match=[responses.matchers.query_param_matcher({"pageSize": "1000"})],
    )
    responses.get(
        f"{URL}/v1beta/models",
        json=page2,
        match=[responses.matchers.query_param_matcher({"pageSize": "1000", "pageToken": "p2"})],
    )
    provider = GeminiProvider(api_key=KEY, base_url=URL)
    assert provider.count_tokens(req()) == 31
    models = provider.list_models()
    assert [(m.name, m.kind, m.context_length) for m in models] == [
        ("m", "chat", 1048576),
        ("e", "embedding", 2048),
    ]
    assert provider.context_length("m") == 1048576


@responses.activate
@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "API key not valid.",
                    "status": "INVALID_ARGUMENT",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": "API_KEY_INVALID",
                        }
                    ],
                }
            },
            AuthenticationError,
        ),
        (
            404,
            {"error": {"code": 404, "message": "models/x is not found", "status": "NOT_FOUND"}},
            ModelNotFound,
        ),
        (
            429,
            {
                "error": {
                    "code": 429,
                    "message": "quota",
                    "status": "RESOURCE_EXHAUSTED",
                    "details": [
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3600s"}
                    ],
                }
            },
            RateLimited,
        ),
    ],
)
def test_error_mapping(
    status: int, body: dict[str, Any], error: type[Exception], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    responses.post(f"{URL}/v1beta/models/m:generateContent", json=body, status=status)
    provider = GeminiProvider(api_key=KEY, base_url=URL, retries=0)
    with pytest.raises(error) as info:
        provider.chat(ProviderRequest("m", [Message.user("x")]))
    assert KEY not in str(info.value) and KEY not in repr(info.value.details)  # type: ignore[attr-defined]
    assert KEY not in repr(provider)
    assert all(KEY not in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------- mapping properties

_TEXT = st.text(min_size=1, max_size=20)


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), _TEXT), max_size=6))
def test_property_message_mapping_round_trip(turns: list[tuple[str, str]]) -> None:
    """Roles map to user/model and text survives unchanged, in order."""
    messages = [Message(role, [TextPart(text)]) for role, text in turns]  # type: ignore[arg-type]
    contents = contents_from_messages(messages)
    assert [c["role"] for c in contents] == [
        "model" if r == "assistant" else "user" for r, _ in turns
    ]
    assert [c["parts"][0]["text"] for c in contents] == [t for _, t in turns]


@given(
    st.recursive(
        st.sampled_from([{"type": "string"}, {"type": ["integer", "null"]}]),
        lambda inner: st.builds(
            lambda p: {"type": "object", "properties": p, "additionalProperties": False},
            st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
        ),
        max_leaves=6,
    )
)
def test_property_clean_schema_removes_rejected_keywords(schema: dict[str, Any]) -> None:
    cleaned = json.dumps(clean_schema(schema))
    assert "additionalProperties" not in cleaned and '"null"' not in cleaned

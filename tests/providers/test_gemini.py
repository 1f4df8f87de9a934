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
from support.transport_support import Request, respond, serve, stream_script

from ollm_lite.errors import AuthenticationError, ModelNotFound, RateLimited
from ollm_lite.providers._gemini_wire import clean_schema, contents_from_messages, request_body
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
    details = events[-1].error.details or {}
    assert events[-1].error.code == "LLM_HTTP_ERROR"
    assert details["status"] == 503 and details["server_status"] == "UNAVAILABLE"


def test_data_nested_too_deep_is_skipped_not_a_recursion_error() -> None:
    deep = b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\r\n\r\n"
    events, _ = run([*sse(text_chunk("Hel")), deep, *sse(text_chunk("lo", "STOP"))])
    assert events[:2] == [TextEvent("Hel"), TextEvent("lo")]
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "stop"


def test_tool_result_nested_too_deep_is_sent_as_text() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    message = Message("tool", [TextPart(deep)], name="f", tool_call_id="call_0")
    [content] = contents_from_messages([message])
    assert content["parts"][0]["functionResponse"]["response"] == {"result": deep}


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


@responses.activate
def test_the_key_comes_from_the_environment_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """$GEMINI_API_KEY, else $GOOGLE_API_KEY; an explicit api_key= beats both."""
    answer = {"models": []}
    call = responses.get(f"{URL}/v1beta/models", json=answer)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key-1")
    GeminiProvider(base_url=URL, retries=0).list_models()
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key-2")
    GeminiProvider(base_url=URL, retries=0).list_models()
    GeminiProvider(base_url=URL, retries=0, api_key="explicit-3").list_models()
    sent = [c.request.headers["x-goog-api-key"] for c in responses.calls]
    assert sent == ["google-key-1", "gemini-key-2", "explicit-3"]
    assert call.call_count == 3


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
    """README, Google Gemini: a base_url with or without a trailing /v1 must both work."""
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


# --------------------------------------------------------------------------- audit fixes

# Error bodies as Google's API sends them (https://ai.google.dev/gemini-api/docs/troubleshooting),
# captured from the live API and written here inline.
ERROR_429: dict[str, Any] = {
    "error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details. "
        "For more information on this error, head to: "
        "https://ai.google.dev/gemini-api/docs/rate-limits.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/"
                        "generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                        "quotaDimensions": {"location": "global", "model": "gemini-2.0-flash"},
                        "quotaValue": "15",
                    }
                ],
            },
            {
                "@type": "type.googleapis.com/google.rpc.Help",
                "links": [
                    {
                        "description": "Learn more about Gemini API quotas",
                        "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                    }
                ],
            },
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "47s"},
        ],
    }
}
ERROR_KEY_INVALID: dict[str, Any] = {
    "error": {
        "code": 400,
        "message": "API key not valid. Please pass a valid API key.",
        "status": "INVALID_ARGUMENT",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            },
            {
                "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                "locale": "en-US",
                "message": "API key not valid. Please pass a valid API key.",
            },
        ],
    }
}


def test_extra_body_deep_merges_into_generation_config() -> None:
    """``extra_body`` merges nested objects key by key (as the other providers do): adding
    ``thinkingConfig`` keeps temperature, maxOutputTokens, stopSequences, responseSchema."""
    options = GenerationOptions(
        temperature=0.3,
        max_tokens=64,
        stop=["END"],
        extra_body={
            "generationConfig": {"thinkingConfig": {"includeThoughts": True}, "topK": 3},
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "OFF"}],
        },
    )
    body = request_body(req(options=options, response_format={"type": "object"}))
    assert body["generationConfig"] == {
        "temperature": 0.3,
        "maxOutputTokens": 64,
        "stopSequences": ["END"],
        "responseMimeType": "application/json",
        "responseSchema": {"type": "object"},
        "thinkingConfig": {"includeThoughts": True},
        "topK": 3,
    }
    assert body["safetySettings"][0]["threshold"] == "OFF"
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Hi"}]}]
    # a non-object value still replaces; the options object itself is not modified
    body = request_body(req(options=GenerationOptions(extra_body={"contents": []})))
    assert body["contents"] == []
    assert options.extra_body["generationConfig"] == {
        "thinkingConfig": {"includeThoughts": True},
        "topK": 3,
    }


def _google(code: int, status: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status, **extra}}


MID_STREAM_ERRORS = [
    pytest.param(
        ERROR_429,
        "LLM_RATE_LIMITED",
        id="429-fixture",
    ),
    pytest.param(
        ERROR_KEY_INVALID,
        "LLM_AUTH_FAILED",
        id="400-API_KEY_INVALID",
    ),
    pytest.param(_google(401, "UNAUTHENTICATED", "no creds"), "LLM_AUTH_FAILED", id="401"),
    pytest.param(_google(403, "PERMISSION_DENIED", "denied"), "LLM_AUTH_FAILED", id="403"),
    pytest.param(_google(404, "NOT_FOUND", "models/x is not found"), "MODEL_NOT_FOUND", id="404"),
    pytest.param(_google(500, "INTERNAL", "backend died"), "LLM_HTTP_ERROR", id="500"),
    pytest.param(_google(504, "DEADLINE_EXCEEDED", "too slow"), "LLM_TIMEOUT", id="504"),
]


def _both_ways(body: dict[str, Any]) -> tuple[list[Any], ErrorEvent]:
    """``body`` inside a 200 stream after some text, then as the HTTP error answer before
    any stream (same server, so the same URL in the messages): both event lists."""
    stream = stream_script(sse(text_chunk("par"), body, text_chunk("never", "STOP")), then="hang")
    answers = [stream, lambda c, r: respond(c, body["error"]["code"], json.dumps(body).encode())]
    with serve({STREAM: lambda client, request: answers.pop(0)(client, request)}) as server:
        provider = GeminiProvider(api_key=KEY, base_url=server.url, retries=0)
        events = list(provider.chat_stream(req()))
        [before] = list(provider.chat_stream(req()))
        provider.close()
    assert isinstance(before, ErrorEvent)
    return events, before


@pytest.mark.parametrize(("body", "code"), MID_STREAM_ERRORS)
def test_error_mid_stream_maps_like_the_same_body_before_the_stream(
    body: dict[str, Any], code: str
) -> None:
    """Error mapping (README, Error codes) holds inside a 200 stream too: one ErrorEvent after the
    text, with the code, message and details the same body gets as an HTTP error answer."""
    events, before = _both_ways(body)
    assert events[0] == TextEvent("par")
    assert sum(e.type in ("finish", "error") for e in events) == 1
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.error.code == code == before.error.code
    assert body["error"]["message"][:20] in last.error.message
    assert last.error.message == before.error.message
    # "attempts" is the retry loop's count, which only requests before the stream have
    assert last.error.details == {
        k: v for k, v in (before.error.details or {}).items() if k != "attempts"
    }
    if code == "LLM_RATE_LIMITED":
        assert (last.error.details or {})["retry_after"] == 47.0


@pytest.mark.parametrize("form", ["line", "pretty", "array", "cut-crlf"])
def test_raw_json_error_without_data_prefix_keeps_google_message(form: str) -> None:
    """Google's SDK (google-genai) reads non-``data:`` lines as JSON, balanced over lines.
    An error sent that way mid-stream is mapped like any other, never "no finishReason"."""
    body = ERROR_429
    if form == "line":
        raw = [json.dumps(body).encode() + b"\r\n"]
    elif form == "pretty":
        raw = [json.dumps(body, indent=2).replace("\n", "\r\n").encode() + b"\r\n"]
    elif form == "array":
        raw = [json.dumps([body], indent=2).encode() + b"\n"]
    else:  # one line cut across HTTP chunks, CR and LF apart
        text = json.dumps(body).encode()
        raw = [b": ping\r\n", b"  ", text[:30], text[30:] + b"\r", b"\n"]
    events, _ = run(sse(text_chunk("par")) + raw, then="hang")
    assert events[0] == TextEvent("par")
    assert len(events) == 2
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.error.code == "LLM_RATE_LIMITED"
    assert "You exceeded your current quota" in last.error.message
    assert (last.error.details or {})["retry_after"] == 47.0


def test_raw_json_response_objects_are_read_too() -> None:
    """A whole response written without ``data:`` (the SDK reads it) is content, in order
    with the SSE events around it; comment lines and unknown fields stay ignored."""
    lines = [
        b": keep-alive\r\n",
        b"data: " + json.dumps(text_chunk("a")).encode() + b"\r\n\r\n",
        json.dumps(text_chunk("b")).encode() + b"\r\n",
        b"event: message\r\nfoo: {bar}\r\n",
        b"data: " + json.dumps(text_chunk("c", "STOP")).encode() + b"\r\n\r\n",
    ]
    events, _ = run([b"".join(lines)])
    assert events == [TextEvent("a"), TextEvent("b"), TextEvent("c"), events[-1]]
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "stop"


def test_mid_stream_error_echoing_the_key_is_redacted() -> None:
    body = _google(429, "RESOURCE_EXHAUSTED", f"quota for key {KEY}", details=[{"key": KEY}])
    bare = json.dumps(body).encode()
    for chunks in (sse(text_chunk("a"), body), [*sse(text_chunk("a")), bare]):
        events, _ = run([*chunks, b"\r\n"])
        assert events[-1].type == "error" and events[-1].error.code == "LLM_RATE_LIMITED"
        assert KEY not in repr(events)


def _signed_call(signature: str, city: str) -> dict[str, Any]:
    part = {"functionCall": {"name": "w", "args": {"city": city}}, "thoughtSignature": signature}
    return {"candidates": [{"content": {"parts": [part]}, "finishReason": "STOP"}]}


@responses.activate
def test_signatures_stay_with_their_calls_over_several_tool_turns() -> None:
    """Two tool turns, each with one signed call without an id: the ids differ, and the
    third request sends each signature with its own call (generated ids never as ``id``)."""
    done = {"candidates": [{"content": {"parts": [{"text": "done"}]}, "finishReason": "STOP"}]}
    url = f"{URL}/v1beta/models/m:generateContent"
    for answer in (_signed_call("SIG_A", "Oslo"), _signed_call("SIG_B", "Rome"), done):
        responses.post(url, json=answer)
    provider = GeminiProvider(api_key=KEY, base_url=URL)
    history = [Message.user("x")]
    for _ in range(2):
        [call] = provider.chat(ProviderRequest("m", history)).tool_calls
        history += [Message.assistant("", [call]), Message.tool(ToolResult(ok=True), call)]
    assert provider.chat(ProviderRequest("m", history)).content == "done"
    body = json.loads(responses.calls[2].request.body)
    calls = [p for c in body["contents"] for p in c["parts"] if "functionCall" in p]
    assert [(p["functionCall"]["args"]["city"], p["thoughtSignature"]) for p in calls] == [
        ("Oslo", "SIG_A"),
        ("Rome", "SIG_B"),
    ]
    assert all("id" not in p["functionCall"] for p in calls)
    answers = [p for c in body["contents"] for p in c["parts"] if "functionResponse" in p]
    assert len(answers) == 2 and all("id" not in p["functionResponse"] for p in answers)
    ids = [m.tool_calls[0].id for m in history if m.tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)


def test_streamed_and_whole_answers_share_the_id_sequence() -> None:
    chunk = {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": {"name": "f", "args": {}}}] * 2},
                "finishReason": "STOP",
            }
        ]
    }
    with serve({STREAM: stream_script(sse(chunk))}) as server:
        provider = GeminiProvider(api_key=KEY, base_url=server.url, retries=0)
        ids = [
            e.value.id
            for _ in range(3)
            for e in provider.chat_stream(req())
            if isinstance(e, ToolCallEvent)
        ]
        provider.close()
    assert ids == [f"call_{n}" for n in range(6)]


@responses.activate
def test_generated_ids_are_unique_across_threads_sharing_a_provider() -> None:
    parts = [{"functionCall": {"name": "f", "args": {"n": n}}} for n in range(5)]
    answer = {"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]}
    responses.post(f"{URL}/v1beta/models/m:generateContent", json=answer)
    provider = GeminiProvider(api_key=KEY, base_url=URL)
    ids: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(10):
            result = provider.chat(ProviderRequest("m", [Message.user("x")]))
            got = [c.id for c in result.tool_calls]
            with lock:
                ids.extend(got)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == 300 and len(set(ids)) == 300


@responses.activate
def test_health_ok_when_the_models_endpoint_answers() -> None:
    """``health()`` is one ``GET /v1beta/models?pageSize=1`` with the key in its header."""
    call = responses.get(
        f"{URL}/v1beta/models",
        json={"models": [{"name": "models/gemini-2.5-flash"}], "nextPageToken": "x"},
        match=[responses.matchers.query_param_matcher({"pageSize": "1"})],
    )
    provider = GeminiProvider(api_key=KEY, base_url=URL + "/v1beta")
    health = provider.health()
    assert health.ok and health.error is None
    assert health.provider == "gemini" and health.base_url == URL
    assert health.latency_ms is not None and health.latency_ms >= 0
    assert health.checked_at.tzinfo is not None
    assert call.call_count == 1
    sent = call.calls[0].request
    assert sent.headers["x-goog-api-key"] == KEY and KEY not in sent.url


@responses.activate
def test_health_reports_a_rejected_key_without_raising() -> None:
    body = ERROR_KEY_INVALID
    responses.get(f"{URL}/v1beta/models", json=body, status=400)
    health = GeminiProvider(api_key=KEY, base_url=URL, retries=0).health()
    assert not health.ok and health.error is not None
    assert health.error.code == "LLM_AUTH_FAILED" and KEY not in repr(health)

"""OpenAICompatibleProvider: request shapes per backend, answers, models, tokens, health.

Every request the provider sends is checked with ``responses`` (bodies by
``json_params_matcher``, headers by ``header_matcher``); pure mapping functions are tested
directly. Streaming over a real socket lives in ``test_openai_stream.py``.
"""

from __future__ import annotations

import json
import logging
import threading

import pytest
import requests
import responses
from responses import matchers

from ollm_lite.errors import (
    AuthenticationError,
    BadResponse,
    ConfigError,
    ConnectionFailed,
    ModelNotFound,
    UnsupportedOperation,
)
from ollm_lite.providers import _openai_wire as wire
from ollm_lite.providers.backends import BACKENDS, OPENAI_COMPATIBLE_BACKENDS
from ollm_lite.providers.base import approx_token_count
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider, request_text
from ollm_lite.streams import SSEEvent
from ollm_lite.types import (
    FinishEvent,
    GenerationOptions,
    ImagePart,
    Message,
    ProviderRequest,
    TextEvent,
    ToolCall,
    ToolResult,
    ToolSchema,
)

URL = "http://llm.test:1234"
CHAT = URL + "/v1/chat/completions"
CANARY = "sk-canary-12345"
WEATHER = ToolSchema(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SSE_OK = (
    b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_COMPATIBLE_HOST",
        "OPENAI_COMPATIBLE_API_KEY",
        "VLLM_HOST",
        "VLLM_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)


def provider(backend: str = "generic", **kw: object) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(base_url=URL, backend=backend, retries=0, **kw)  # type: ignore[arg-type]


def req(*messages: Message, **kw: object) -> ProviderRequest:
    return ProviderRequest("m", list(messages) or [Message.user("hi")], **kw)  # type: ignore[arg-type]


def sse_reply(rsps: responses.RequestsMock, *match: object, url: str = CHAT) -> None:
    rsps.add(responses.POST, url, body=SSE_OK, content_type="text/event-stream", match=list(match))


# --------------------------------------------------------------------------- configuration


def test_unknown_backend_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        OpenAICompatibleProvider(backend="ollama")
    assert info.value.code == "CONFIG_INVALID"
    for name in OPENAI_COMPATIBLE_BACKENDS:
        assert name in info.value.message


def test_vllm_row_is_not_an_openai_compatible_preset() -> None:
    with pytest.raises(ConfigError):
        OpenAICompatibleProvider(backend="vllm")


@pytest.mark.parametrize(
    ("backend", "default"),
    [
        ("generic", "http://localhost:1234"),
        ("lmstudio", "http://localhost:1234"),
        ("localai", "http://localhost:8080"),
        ("kobold", "http://localhost:5001"),
        ("llamacpp", "http://localhost:8080"),
    ],
)
def test_default_base_url_per_backend(backend: str, default: str) -> None:
    assert OpenAICompatibleProvider(backend=backend).base_url == default


def test_environment_then_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_HOST", "http://env.test:9000/v1")
    assert OpenAICompatibleProvider().base_url == "http://env.test:9000"
    assert OpenAICompatibleProvider(base_url="http://arg.test:1").base_url == "http://arg.test:1"


def test_every_row_cites_a_source() -> None:
    for row in BACKENDS.values():
        assert row.source and row.default_base_url.startswith("http://")


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_base_url_with_or_without_v1(rsps: responses.RequestsMock, suffix: str) -> None:
    sse_reply(rsps)
    p = OpenAICompatibleProvider(base_url=URL + suffix, retries=0)
    assert p.base_url == URL
    assert [type(e) for e in p.chat_stream(req())] == [TextEvent, FinishEvent]


# --------------------------------------------------------------------------- auth


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        ("generic", {"Authorization": f"Bearer {CANARY}"}),
        ("lmstudio", {"Authorization": f"Bearer {CANARY}", "X-API-Key": CANARY}),
        ("localai", {"Authorization": f"Bearer {CANARY}"}),
        ("kobold", {"Authorization": f"Bearer {CANARY}"}),
        ("llamacpp", {"Authorization": f"Bearer {CANARY}"}),
    ],
)
def test_auth_headers_per_backend(
    rsps: responses.RequestsMock, backend: str, expected: dict[str, str]
) -> None:
    sse_reply(rsps, matchers.header_matcher(expected))
    list(provider(backend, api_key=CANARY).chat_stream(req()))
    sent = rsps.calls[0].request.headers
    if backend != "lmstudio":
        assert "X-API-Key" not in sent


def test_key_from_environment(
    rsps: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", CANARY)
    sse_reply(rsps, matchers.header_matcher({"Authorization": f"Bearer {CANARY}"}))
    list(provider().chat_stream(req()))


def test_no_key_no_auth_header(rsps: responses.RequestsMock) -> None:
    sse_reply(rsps)
    list(provider("lmstudio").chat_stream(req()))
    headers = rsps.calls[0].request.headers
    assert "Authorization" not in headers and "X-API-Key" not in headers


def test_key_never_in_repr_errors_or_logs(
    rsps: responses.RequestsMock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    p = provider("lmstudio", api_key=CANARY)
    rsps.add(
        responses.POST,
        CHAT,
        status=401,
        json={"error": {"message": f"Invalid API Key {CANARY}", "type": "authentication_error"}},
    )
    events = list(p.chat_stream(req()))
    assert events[-1].error.code == "LLM_AUTH_FAILED"  # type: ignore[union-attr]
    assert CANARY not in repr(p)
    assert CANARY not in json.dumps(events[-1].error.to_dict(), default=str)  # type: ignore[union-attr]
    assert CANARY not in caplog.text
    rsps.add(responses.GET, URL + "/v1/models", body=requests.ConnectionError("refused"))
    with pytest.raises(ConnectionFailed) as info:
        p.list_models()
    assert CANARY not in str(info.value) and CANARY not in repr(info.value.details)


# --------------------------------------------------------------------------- request bodies


def test_full_request_shape(rsps: responses.RequestsMock) -> None:
    png = "iVBORw0KGgo="
    call = ToolCall.from_arguments("call_1", "get_weather", '{"city": "Oslo"}')
    request = req(
        Message.user("Weather?", images=[ImagePart(png, "image/png")]),
        Message.assistant("", tool_calls=[call]),
        Message.tool(ToolResult(ok=True, data={"t": 3}), call),
        system_prompt="Be brief.",
        tools=[WEATHER],
        options=GenerationOptions(
            temperature=0.2,
            max_tokens=64,
            top_p=0.9,
            top_k=40,
            repeat_penalty=1.1,
            seed=7,
            stop=["\n\n"],
            presence_penalty=0.5,
            frequency_penalty=0.25,
            extra_body={"min_p": 0.05, "stream_options": {"continuous_usage_stats": True}},
        ),
    )
    expected = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
                ],
            },
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"ok": true, "data": {"t": 3}}'},
        ],
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": 0.2,
        "max_tokens": 64,
        "top_p": 0.9,
        "top_k": 40,
        "repeat_penalty": 1.1,
        "seed": 7,
        "stop": ["\n\n"],
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
        "min_p": 0.05,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city.",
                    "parameters": WEATHER.parameters,
                },
            }
        ],
    }
    sse_reply(rsps, matchers.json_params_matcher(expected))
    list(provider().chat_stream(request))


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"name": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}),
        ("none", "none"),
        ("auto", None),
    ],
)
def test_tool_choice_shapes(rsps: responses.RequestsMock, choice: object, expected: object) -> None:
    sse_reply(rsps)
    list(provider().chat_stream(req(tools=[WEATHER], tool_choice=choice)))
    body = json.loads(rsps.calls[0].request.body)
    assert body.get("tool_choice") == expected
    assert body["tools"][0]["function"]["name"] == "get_weather"


def test_forced_tool_not_offered_is_config_error() -> None:
    events = list(provider().chat_stream(req(tools=[WEATHER], tool_choice={"name": "nope"})))
    assert len(events) == 1 and events[0].error.code == "CONFIG_INVALID"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("json", {"type": "json_object"}),
        (
            {"type": "object", "properties": {"a": {"type": "integer"}}},
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "response",
                    "schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
                },
            },
        ),
    ],
)
def test_response_format(rsps: responses.RequestsMock, fmt: object, expected: object) -> None:
    sse_reply(rsps)
    list(provider().chat_stream(req(response_format=fmt)))
    assert json.loads(rsps.calls[0].request.body)["response_format"] == expected


def test_vllm_repeat_penalty_key_differs() -> None:
    body = wire.chat_body(
        req(options=GenerationOptions(repeat_penalty=1.2)), BACKENDS["vllm"], stream=False
    )
    assert body["repetition_penalty"] == 1.2 and "repeat_penalty" not in body
    assert "stream_options" not in body and body["stream"] is False


# --------------------------------------------------------------------------- non-streaming chat


def test_chat_non_streaming_text_and_to_openai(rsps: responses.RequestsMock) -> None:
    answer = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello!", "reasoning_content": "hm"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
    rsps.add(
        responses.POST,
        CHAT,
        json=answer,
        match=[
            matchers.json_params_matcher(
                {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}
            )
        ],
    )
    result = provider().chat(req())
    assert result.content == "Hello!" and result.thinking == "hm"
    assert result.finish_reason == "stop"
    assert result.to_openai() == {
        "content": "Hello!",
        "finish_reason": "stop",
        "tool_calls": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


def test_chat_non_streaming_tool_calls(rsps: responses.RequestsMock) -> None:
    answer = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": {"city": "Bergen"}},
                        },
                    ],
                },
                "finish_reason": "stop",
            }
        ]
    }
    rsps.add(responses.POST, CHAT, json=answer)
    result = provider().chat(req(tools=[WEATHER]))
    assert result.finish_reason == "tool_calls"
    assert [c.args for c in result.tool_calls] == [{"city": "Oslo"}, {"city": "Bergen"}]
    assert result.content is None
    out = result.to_openai()["tool_calls"]
    assert out[1]["function"]["arguments"] == '{"city": "Bergen"}'


def test_chat_server_that_streams_anyway(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.POST, CHAT, body=SSE_OK, content_type="text/event-stream")
    assert provider().chat(req()).content == "Hi"


def test_chat_error_object_raises_bad_response(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.POST, CHAT, json={"object": "error", "message": "boom", "code": 500})
    with pytest.raises(BadResponse) as info:
        provider().chat(req())
    assert "boom" in info.value.message and info.value.provider == "openai-compatible"


def test_chat_404_is_model_not_found(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.POST, CHAT, status=404, json={"error": {"message": "no such model"}})
    with pytest.raises(ModelNotFound):
        provider().chat(req())


def test_chat_401_is_auth_error(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.POST, CHAT, status=401, json={"error": "Unauthorized"})
    with pytest.raises(AuthenticationError):
        provider().chat(req())


# --------------------------------------------------------------------------- models


def test_list_models(rsps: responses.RequestsMock) -> None:
    rsps.add(
        responses.GET,
        URL + "/v1/models",
        json={
            "object": "list",
            "data": [
                {"id": "qwen2.5-7b", "object": "model", "owned_by": "organization_owner"},
                {"id": "nomic-embed", "object": "model", "type": "embeddings"},
            ],
        },
    )
    models = provider("lmstudio").list_models()
    assert [m.name for m in models] == ["qwen2.5-7b", "nomic-embed"]
    assert models[0].details["owned_by"] == "organization_owner"
    assert models[0].context_length is None
    assert models[1].kind == "embedding"


@pytest.mark.parametrize("status", [404, 405, 501])
def test_list_models_without_route_is_empty_and_logged(
    rsps: responses.RequestsMock, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    caplog.set_level(logging.INFO)
    rsps.add(responses.GET, URL + "/v1/models", status=status, body="Not Found")
    assert provider("kobold").list_models() == []
    assert "cannot list models" in caplog.text


def test_list_models_server_down_raises(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/v1/models", body=requests.ConnectionError("refused"))
    with pytest.raises(ConnectionFailed):
        provider().list_models()


def test_model_info_never_reports_trained_maximum() -> None:
    info = wire.model_info_from_openai(
        {"id": "g.gguf", "meta": {"n_ctx_train": 32768, "n_vocab": 262144}}
    )
    assert info.context_length is None
    assert info.details["trained_context_length"] == 32768
    info = wire.model_info_from_openai({"id": "g", "meta": {"n_ctx": 4096, "n_ctx_train": 32768}})
    assert info.context_length == 4096


def test_show_model_unknown(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/v1/models", json={"data": [{"id": "a"}]})
    with pytest.raises(ModelNotFound):
        provider().show_model("b")


def test_generic_has_no_context_length() -> None:
    assert provider().context_length("m") is None  # no request at all


# --------------------------------------------------------------------------- llama.cpp


PROPS = {
    "default_generation_settings": {"n_ctx": 4096, "params": {}},
    "total_slots": 4,
    "chat_template_caps": {"supports_tool_calls": False},
    "modalities": {"vision": False},
    "build_info": "b6000",
}


def test_llamacpp_native_discovery_tokens_and_window(rsps: responses.RequestsMock) -> None:
    """Native llama-server: /props found once; input_tokens counts; n_ctx is the window."""
    rsps.add(responses.GET, URL + "/props", json=PROPS)
    rsps.add(
        responses.POST,
        CHAT + "/input_tokens",
        json={"object": "response.input_tokens", "input_tokens": 49},
    )
    rsps.add(responses.POST, CHAT + "/input_tokens", json={"input_tokens": 12})
    p = provider("llamacpp")
    assert p.capabilities.token_counting is True
    assert p.count_tokens(req()) == 49
    assert p.context_length("gemma.gguf") == 4096
    assert p.context_length("gemma.gguf") == 4096  # cached: no further request
    assert p.count_tokens(req()) == 12
    caps = p.model_capabilities("gemma.gguf")
    assert caps.tool_calling is False and caps.vision is False
    assert sum(c.request.url.endswith("/props") for c in rsps.calls) == 1


def test_llamacpp_native_older_build_tokenizes_text(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/props", json=PROPS)
    rsps.add(
        responses.POST,
        CHAT + "/input_tokens",
        status=404,
        json={"error": {"message": "File Not Found", "code": 404}},
    )
    request = req(Message.user("12345 67890"), system_prompt="Be brief.")
    rsps.add(
        responses.POST,
        URL + "/tokenize",
        json={"tokens": list(range(13))},
        match=[
            matchers.json_params_matcher({"content": "Be brief.\n12345 67890", "add_special": True})
        ],
    )
    rsps.add(responses.POST, URL + "/tokenize", json={"tokens": [1, 2]})
    p = provider("llamacpp")
    assert p.count_tokens(request) == 13
    assert p.count_tokens(request) == 2  # input_tokens is not tried again


def test_llamacpp_python_server(rsps: responses.RequestsMock) -> None:
    """llama-cpp-python: no /props; /extras/tokenize/count; window only if /v1/models says."""
    rsps.add(responses.GET, URL + "/props", status=404, json={"detail": "Not Found"})
    rsps.add(responses.POST, URL + "/extras/tokenize/count", json={"count": 0})
    rsps.add(
        responses.POST,
        URL + "/extras/tokenize/count",
        json={"count": 9},
        match=[matchers.json_params_matcher({"input": "hi"})],
    )
    rsps.add(
        responses.GET,
        URL + "/v1/models",
        json={"object": "list", "data": [{"id": "g.gguf", "owned_by": "me", "permissions": []}]},
    )
    p = provider("llamacpp")
    assert p.count_tokens(req()) == 9
    assert p.context_length("g.gguf") is None  # never a guess presented as fact


def test_llamacpp_discovery_is_thread_safe(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/props", json=PROPS)
    p = provider("llamacpp")
    results: list[int | None] = []
    threads = [
        threading.Thread(target=lambda: results.append(p.context_length("x"))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [4096] * 8
    assert len(rsps.calls) == 1


def test_llamacpp_loading_is_not_remembered(rsps: responses.RequestsMock) -> None:
    loading = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    rsps.add(responses.GET, URL + "/props", status=503, json=loading)
    rsps.add(responses.GET, URL + "/props", json=PROPS)
    p = provider("llamacpp")
    assert p.context_length("g") is None
    assert p.context_length("g") == 4096


def test_llamacpp_without_any_tokenizer(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/props", status=404, body="nf")
    rsps.add(responses.POST, URL + "/extras/tokenize/count", status=404, body="nf")
    p = provider("llamacpp")
    with pytest.raises(UnsupportedOperation):
        p.count_tokens(req())
    assert p.capabilities.token_counting is False


def test_kobold_tokens_and_window(rsps: responses.RequestsMock) -> None:
    rsps.add(
        responses.POST,
        URL + "/api/extra/tokencount",
        json={"value": 17, "ids": []},
        match=[matchers.json_params_matcher({"prompt": "hi"})],
    )
    rsps.add(responses.GET, URL + "/api/extra/true_max_context_length", json={"value": 8192})
    p = provider("kobold")
    assert p.count_tokens(req()) == 17
    assert p.context_length("any") == 8192


def test_lmstudio_loaded_window_and_capabilities(rsps: responses.RequestsMock) -> None:
    models = {
        "models": [
            {
                "key": "qwen3-8b",
                "max_context_length": 40960,
                "loaded_instances": [{"id": "qwen3-8b", "config": {"context_length": 8192}}],
                "capabilities": {"vision": False, "trained_for_tool_use": True, "reasoning": True},
            }
        ]
    }
    rsps.add(responses.GET, URL + "/api/v1/models", json=models)
    rsps.add(responses.GET, URL + "/api/v1/models", json=models)
    p = provider("lmstudio")
    assert p.context_length("qwen3-8b") == 8192  # the loaded window, not the maximum
    caps = p.model_capabilities("qwen3-8b")
    assert (caps.tool_calling, caps.vision, caps.thinking) == (True, False, True)


def test_generic_count_is_the_estimate() -> None:
    request = req(Message.user("x" * 41))
    assert provider().count_tokens(request) == approx_token_count(request) == 11
    assert provider().capabilities.token_counting is False


def test_request_text_covers_what_the_estimate_counts() -> None:
    call = ToolCall.from_arguments("c", "f", '{"a": 1}')
    request = req(
        Message.user("hello"), Message.assistant("", [call]), system_prompt="sys", tools=[WEATHER]
    )
    text = request_text(request)
    for piece in ("sys", "hello", "f", '{"a": 1}', "get_weather", "Current weather"):
        assert piece in text


# --------------------------------------------------------------------------- embeddings


def test_embed_batches_and_orders(rsps: responses.RequestsMock) -> None:
    texts = ["a", "b", "c", "d", "e"]
    for batch in (texts[:2], texts[2:4], texts[4:]):
        data = [
            {"object": "embedding", "index": i, "embedding": [float(ord(t)), 0.5]}
            for i, t in enumerate(batch)
        ][::-1]  # out of order on purpose
        rsps.add(
            responses.POST,
            URL + "/v1/embeddings",
            json={"object": "list", "data": data, "model": "e"},
            match=[matchers.json_params_matcher({"model": "e", "input": batch})],
        )
    result = provider(embed_batch_size=2).embed(texts, model="e")
    assert [v[0] for v in result.vectors] == [97.0, 98.0, 99.0, 100.0, 101.0]
    assert result.dimensions == 2 and result.model == "e"


def test_embed_wrong_count(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.POST, URL + "/v1/embeddings", json={"data": []})
    with pytest.raises(BadResponse):
        provider().embed(["a"], model="e")


def test_embed_needs_model_and_strings() -> None:
    with pytest.raises(ConfigError):
        provider().embed(["a"])
    with pytest.raises(ConfigError):
        provider().embed("abc", model="e")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- health


def test_health_llamacpp_ok(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/health", json={"status": "ok"})
    status = provider("llamacpp").health()
    assert status.ok and status.error is None and status.latency_ms is not None


def test_health_llamacpp_loading_vs_down(rsps: responses.RequestsMock) -> None:
    loading = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    rsps.add(responses.GET, URL + "/health", status=503, json=loading)
    status = provider("llamacpp").health()
    assert not status.ok and status.error is not None
    assert status.error.details and status.error.details["loading"] is True
    assert "loading" in status.error.message
    rsps.add(responses.GET, URL + "/health", body=requests.ConnectionError("refused"))
    down = provider("llamacpp").health()
    assert not down.ok and down.error is not None
    assert down.error.code == "CONNECTION_FAILED"
    assert "loading" not in (down.error.details or {})


def test_health_llamacpp_python_falls_back_to_models(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/health", status=404, json={"detail": "Not Found"})
    rsps.add(responses.GET, URL + "/v1/models", json={"data": []})
    assert provider("llamacpp").health().ok


def test_health_kobold_reads_version(rsps: responses.RequestsMock) -> None:
    rsps.add(
        responses.GET, URL + "/api/extra/version", json={"result": "KoboldCpp", "version": "1.82"}
    )
    status = provider("kobold").health()
    assert status.ok and status.version == "1.82"


def test_health_generic_never_raises(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/v1/models", status=500, body="<html>oops</html>")
    status = provider().health()
    assert not status.ok and status.error is not None and status.error.code == "LLM_HTTP_ERROR"


# --------------------------------------------------------------------------- pure mapping


def test_tool_call_assembler_keeps_first_id_and_name() -> None:
    asm = wire.ToolCallAssembler()
    asm.add({"index": 0, "id": "a", "function": {"name": "f", "arguments": "{"}})
    asm.add({"index": 0, "id": "a", "function": {"name": "f", "arguments": "}"}})
    asm.add("garbage")
    calls, problems = asm.calls()
    assert problems == [] and [(c.id, c.name, c.arguments) for c in calls] == [("a", "f", "{}")]


def test_tool_call_without_name_is_an_error_event() -> None:
    state = wire.ChatStreamState()
    fragment = {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "x"}]}}]}
    state.feed(SSEEvent(data=json.dumps(fragment)))
    state.feed(SSEEvent(data="[DONE]"))
    assert state.terminal is not None and state.terminal.type == "error"


def test_message_round_trip() -> None:
    call = ToolCall.from_arguments("c", "f", '{"a": 1}')
    for message in (
        Message.system("s"),
        Message.user("u", images=[ImagePart("QUJD", "image/jpeg")]),
        Message.assistant("t", [call]),
        Message("tool", [], tool_call_id="c"),
    ):
        back = wire.message_from_openai(wire.message_to_openai(message))
        assert back.role == message.role and back.text == message.text
        assert back.images == message.images and back.tool_calls == message.tool_calls
        assert back.tool_call_id == message.tool_call_id

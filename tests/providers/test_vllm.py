"""VllmProvider: typed extras in the body, guided decoding by server version, tokens, window.

Request shapes are checked with ``responses``; one loopback test replays a vLLM-shaped stream
with reasoning under the new field name and a tool call without ``arguments`` on the first
fragment.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import responses
from responses import matchers
from support.openai_support import (
    CHAT as CHAT_PATH,
    chunk,
    sse,
    tool_fragment,
    tools_chunk,
    usage_chunk,
)
from support.transport_support import serve, stream_script

from ollm_lite.errors import ConfigError
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.providers.vllm import VllmOptions, VllmProvider, parse_version
from ollm_lite.types import (
    FinishEvent,
    GenerationOptions,
    Message,
    ProviderRequest,
    ThinkingEvent,
    ToolCallEvent,
)

URL = "http://gpu.test:8000"
CHAT = URL + CHAT_PATH
SSE_OK = (
    b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
SCHEMA = {"type": "object", "properties": {"sentiment": {"enum": ["pos", "neg"]}}}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VLLM_HOST", "VLLM_API_KEY", "OPENAI_COMPATIBLE_HOST"):
        monkeypatch.delenv(name, raising=False)


def req(**kw: object) -> ProviderRequest:
    return ProviderRequest("Qwen/Qwen3-8B", [Message.user("hi")], **kw)  # type: ignore[arg-type]


def version(rsps: responses.RequestsMock, value: str | None) -> None:
    if value is None:
        rsps.add(responses.GET, URL + "/version", status=404, json={"detail": "Not Found"})
    else:
        rsps.add(responses.GET, URL + "/version", json={"version": value})


def body_of(rsps: responses.RequestsMock, index: int = -1) -> dict[str, object]:
    return json.loads(rsps.calls[index].request.body)  # type: ignore[no-any-return]


def stream_ok(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.POST, CHAT, body=SSE_OK, content_type="text/event-stream")


# --------------------------------------------------------------------------- configuration


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    p = VllmProvider()
    assert p.name == "vllm" and p.base_url == "http://localhost:8000"
    assert p.capabilities.guided_decoding is True and p.capabilities.token_counting is True
    monkeypatch.setenv("VLLM_HOST", "http://env.test:9/v1")
    assert VllmProvider().base_url == "http://env.test:9"
    assert VllmProvider(base_url="gpu:8001").base_url == "http://gpu:8001"


def test_key_from_environment_as_bearer(
    rsps: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "sk-canary-12345")
    rsps.add(
        responses.POST,
        CHAT,
        body=SSE_OK,
        content_type="text/event-stream",
        match=[matchers.header_matcher({"Authorization": "Bearer sk-canary-12345"})],
    )
    p = VllmProvider(base_url=URL, retries=0)
    list(p.chat_stream(req()))
    assert "sk-canary-12345" not in repr(p)


def test_bad_retries_is_config_error() -> None:
    with pytest.raises(ConfigError):
        VllmProvider(retries=-1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.11.2", (0, 11, 2)),
        ("0.12.0rc1.dev5+g1a2b3c", (0, 12, 0)),
        ("v0.6", (0, 6, 0)),
        ("nightly", None),
        (None, None),
    ],
)
def test_parse_version(text: object, expected: object) -> None:
    assert parse_version(text) == expected


# --------------------------------------------------------------------------- extras


def test_typed_extras_in_body(rsps: responses.RequestsMock) -> None:
    opts = VllmOptions(
        min_tokens=5,
        presence_penalty=0.3,
        frequency_penalty=0.1,
        best_of=2,
        use_beam_search=False,
        skip_special_tokens=False,
    )
    stream_ok(rsps)
    p = VllmProvider(base_url=URL, retries=0)
    list(p.chat_stream(req(options=opts.apply(GenerationOptions(temperature=0.0)))))
    body = body_of(rsps)
    assert body["min_tokens"] == 5 and body["best_of"] == 2
    assert body["use_beam_search"] is False and body["skip_special_tokens"] is False
    assert body["presence_penalty"] == 0.3 and body["frequency_penalty"] == 0.1
    assert body["temperature"] == 0.0
    assert body["stream_options"] == {"include_usage": True}


def test_provider_defaults_and_extra_body_verbatim(rsps: responses.RequestsMock) -> None:
    stream_ok(rsps)
    p = VllmProvider(base_url=URL, retries=0, options=VllmOptions(min_tokens=3, best_of=4))
    extra = {"min_tokens": 9, "chat_template_kwargs": {"enable_thinking": False}, "priority": 1}
    list(p.chat_stream(req(options=GenerationOptions(extra_body=extra))))
    body = body_of(rsps)
    assert body["min_tokens"] == 9  # per request wins over the provider default
    assert body["best_of"] == 4
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["priority"] == 1


@pytest.mark.parametrize(
    ("server", "guided", "structured"),
    [
        ("0.11.1", True, False),
        ("0.12.0", False, True),
        ("0.13.2", False, True),
        (None, True, True),
    ],
)
def test_guided_decoding_follows_server_version(
    rsps: responses.RequestsMock, server: str | None, guided: bool, structured: bool
) -> None:
    """Old servers get guided_*, 0.12+ structured_outputs, an unknown version both."""
    version(rsps, server)
    stream_ok(rsps)
    stream_ok(rsps)
    typed = VllmOptions(guided_choice=["pos", "neg"], guided_regex="[a-z]+")
    p = VllmProvider(base_url=URL, retries=0, options=typed)
    list(p.chat_stream(req()))
    list(p.chat_stream(req()))  # the version is read once
    body = body_of(rsps)
    assert ("guided_choice" in body) is guided and ("guided_regex" in body) is guided
    if structured:
        assert body["structured_outputs"] == {"choice": ["pos", "neg"], "regex": "[a-z]+"}
    else:
        assert "structured_outputs" not in body
    assert sum(c.request.url.endswith("/version") for c in rsps.calls) == 1


@pytest.mark.parametrize(("server", "key"), [("0.10.1", "guided_json"), ("0.12.1", "structured")])
def test_response_format_schema_mapped_by_version(
    rsps: responses.RequestsMock, server: str, key: str
) -> None:
    version(rsps, server)
    stream_ok(rsps)
    list(VllmProvider(base_url=URL, retries=0).chat_stream(req(response_format=SCHEMA)))
    body = body_of(rsps)
    assert "response_format" not in body
    if key == "guided_json":
        assert body["guided_json"] == SCHEMA and "structured_outputs" not in body
    else:
        assert body["structured_outputs"] == {"json": SCHEMA} and "guided_json" not in body


@pytest.mark.parametrize(("server", "structured"), [("0.11.1", False), ("0.12.0", True)])
def test_extra_body_is_sent_verbatim_and_guided_keys_also_as_structured_outputs(
    rsps: responses.RequestsMock, server: str, structured: bool
) -> None:
    """README, vLLM: extra_body goes into the body as written; a 0.12+ server also gets the
    structured_outputs form of its guided_* keys, so the constraint holds."""
    version(rsps, server)
    stream_ok(rsps)
    extra = {"guided_json": SCHEMA, "guided_decoding_backend": "xgrammar", "priority": 2}
    list(
        VllmProvider(base_url=URL, retries=0).chat_stream(
            req(options=GenerationOptions(extra_body=extra))
        )
    )
    body = body_of(rsps)
    assert {k: body[k] for k in extra} == extra
    if structured:
        assert body["structured_outputs"] == {"json": SCHEMA}
    else:
        assert "structured_outputs" not in body


def test_structured_outputs_in_extra_body_is_not_overridden(rsps: responses.RequestsMock) -> None:
    version(rsps, "0.12.0")
    stream_ok(rsps)
    mine = {"regex": "[0-9]+"}
    extra = {"guided_json": SCHEMA, "structured_outputs": mine}
    list(
        VllmProvider(base_url=URL, retries=0).chat_stream(
            req(options=GenerationOptions(extra_body=extra))
        )
    )
    body = body_of(rsps)
    assert body["structured_outputs"] == mine and body["guided_json"] == SCHEMA


@pytest.mark.parametrize(
    "fmt",
    [
        {"type": "json_object"},
        {"type": "text"},
        {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}},
    ],
)
def test_response_format_in_the_openai_wire_shape_is_passed_on(
    rsps: responses.RequestsMock, fmt: dict[str, Any]
) -> None:
    stream_ok(rsps)  # nothing guided: the server version is not even asked
    list(VllmProvider(base_url=URL, retries=0).chat_stream(req(response_format=fmt)))
    body = body_of(rsps)
    assert body["response_format"] == fmt
    assert "structured_outputs" not in body and "guided_json" not in body


def test_json_mode_stays_response_format(rsps: responses.RequestsMock) -> None:
    stream_ok(rsps)
    list(VllmProvider(base_url=URL, retries=0).chat_stream(req(response_format="json")))
    assert body_of(rsps)["response_format"] == {"type": "json_object"}


def test_version_unreachable_is_asked_again(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/version", body=requests.ConnectionError("refused"))
    version(rsps, "0.12.0")
    p = VllmProvider(base_url=URL, retries=0)
    assert p.server_version() is None
    assert p.server_version() == (0, 12, 0)


# --------------------------------------------------------------------------- tokens, window


def test_count_tokens_through_tokenize(rsps: responses.RequestsMock) -> None:
    rsps.add(
        responses.POST,
        URL + "/tokenize",
        json={"count": 6, "max_model_len": 40960, "tokens": [9707, 11, 1879, 0, 2585, 30]},
        match=[
            matchers.json_params_matcher(
                {
                    "model": "Qwen/Qwen3-8B",
                    "messages": [
                        {"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "hi"},
                    ],
                }
            )
        ],
    )
    assert VllmProvider(base_url=URL, retries=0).count_tokens(req(system_prompt="Be brief.")) == 6


MODELS = {
    "object": "list",
    "data": [
        {
            "id": "Qwen/Qwen3-8B",
            "object": "model",
            "owned_by": "vllm",
            "max_model_len": 40960,
            "root": "Qwen/Qwen3-8B",
            "parent": None,
        },
        {
            "id": "sql-lora",
            "object": "model",
            "owned_by": "vllm",
            "max_model_len": None,
            "root": "/adapters/sql-lora",
            "parent": "Qwen/Qwen3-8B",
        },
    ],
}


def test_context_length_from_max_model_len(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/v1/models", json=MODELS)
    rsps.add(responses.GET, URL + "/v1/models", json=MODELS)
    p = VllmProvider(base_url=URL, retries=0)
    assert p.context_length("Qwen/Qwen3-8B") == 40960
    assert p.context_length("sql-lora") == 40960  # a LoRA adapter inherits its base window
    assert p.context_length("Qwen/Qwen3-8B") == 40960  # cached


def test_list_models(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/v1/models", json=MODELS)
    models = VllmProvider(base_url=URL, retries=0).list_models()
    assert [(m.name, m.context_length) for m in models] == [
        ("Qwen/Qwen3-8B", 40960),
        ("sql-lora", None),
    ]
    assert models[1].details["parent"] == "Qwen/Qwen3-8B"


def test_health_reads_version(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, URL + "/health", body=b"")
    rsps.add(responses.GET, URL + "/version", json={"version": "0.12.1"})
    status = VllmProvider(base_url=URL, retries=0).health()
    assert status.ok and status.version == "0.12.1" and status.provider == "vllm"


def test_health_down() -> None:
    status = VllmProvider(base_url="http://127.0.0.1:9", retries=0).health()
    assert not status.ok and status.error is not None
    assert status.error.code == "CONNECTION_FAILED"


def test_vllm_is_a_configuration_of_the_openai_provider() -> None:
    assert isinstance(VllmProvider(), OpenAICompatibleProvider)


def test_vllm_stream_reasoning_and_tool_call() -> None:
    """vLLM shapes: delta.reasoning, first tool fragment without arguments, stop_reason."""
    objs = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning": "Need weather."}),
        tools_chunk(tool_fragment(0, id="chatcmpl-tool-4f1d", name="get_weather")),
        tools_chunk(tool_fragment(0, args='{"city": "')),
        tools_chunk(tool_fragment(0, args='Tokyo"}')),
        chunk({"content": ""}, "tool_calls", stop_reason=None),
        usage_chunk(19, 47),
    ]
    with serve({CHAT_PATH: stream_script(sse(objs))}) as server:
        events = list(VllmProvider(base_url=server.url, retries=0).chat_stream(req()))
    assert [e.value for e in events if isinstance(e, ThinkingEvent)] == ["Need weather."]
    call = next(e.value for e in events if isinstance(e, ToolCallEvent))
    assert (call.id, call.name, call.args) == (
        "chatcmpl-tool-4f1d",
        "get_weather",
        {"city": "Tokyo"},
    )
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "tool"
    assert events[-1].usage is not None and events[-1].usage.total_tokens == 66

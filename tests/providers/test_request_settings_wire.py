"""The per-call settings on every wire: think, keep_alive, headers, tool_choice, schemas.

Each provider is driven with ``responses`` and the body it sends is checked against the
vendor's documented field:

* Ollama ``/api/chat``: top-level ``think`` (bool or level) and ``keep_alive``, ``format``
  for a JSON Schema (docs/api.md "Generate a chat completion");
* OpenAI-compatible: ``tool_choice: "required"``, ``response_format`` ``json_schema``,
  ``reasoning_effort`` (OpenAI), ``chat_template_kwargs.enable_thinking`` (vLLM, llama.cpp
  server), LM Studio's ``ttl`` in seconds;
* vLLM: a schema as ``structured_outputs.json`` (0.12+) and the template switch;
* Gemini: ``generationConfig.thinkingConfig`` (``thinkingBudget``, ``thinkingLevel``,
  ``includeThoughts``), ``responseSchema``, ``functionCallingConfig.mode = "ANY"``;
* Anthropic's Messages API: ``thinking.budget_tokens`` with ``max_tokens`` the budget + 4096,
  ``tool_choice: {"type": "any"}``, a schema as a forced tool
  (https://platform.claude.com/docs/en/api/messages);

and the extra headers go on the request everywhere, also through ``connect().ask``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import responses

import ollm_lite
from ollm_lite import (
    AnthropicProvider,
    ConfigError,
    GeminiProvider,
    LocalProvider,
    Message,
    OpenAICompatibleProvider,
    ProviderRequest,
    ToolSchema,
    VllmProvider,
)
from ollm_lite.config import ENV_VARS
from ollm_lite.providers._openai_wire import keep_alive_seconds

ADD = ToolSchema("add", "Add.", {"type": "object", "properties": {"a": {"type": "number"}}})
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
OLLAMA = "http://ollama.test:11434"
OPENAI = "http://openai.test:1234"
VLLM = "http://vllm.test:8000"
GEMINI = "http://gemini.test"
ANTHROPIC = "http://anthropic.test:8080"

NDJSON_OK = (
    json.dumps({"message": {"role": "assistant", "content": "ok"}, "done": False})
    + "\n"
    + json.dumps(
        {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"}
    )
    + "\n"
)
SSE_OK = (
    b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
GEMINI_OK = (
    b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},'
    b'"finishReason":"STOP"}]}\n\n'
)
ANTHROPIC_OK = b"".join(
    b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n"
    for e in (
        {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    )
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No provider variables and no config file of the machine's own."""
    for name in (*ENV_VARS, "OLLM_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))


RSPS_STRICT = False  # every backend's answer is registered; each test uses one or two


@pytest.fixture(autouse=True)
def _answers(rsps: responses.RequestsMock) -> None:
    """One good answer per backend, in the shared ``rsps`` fixture."""
    rsps.post(f"{OLLAMA}/api/chat", body=NDJSON_OK, content_type="application/x-ndjson")
    rsps.post(f"{OPENAI}/v1/chat/completions", body=SSE_OK, content_type="text/event-stream")
    rsps.post(f"{VLLM}/v1/chat/completions", body=SSE_OK, content_type="text/event-stream")
    rsps.get(f"{VLLM}/version", json={"version": "0.12.0"})
    rsps.post(
        f"{GEMINI}/v1beta/models/m:streamGenerateContent",
        body=GEMINI_OK,
        content_type="text/event-stream",
    )
    rsps.post(f"{ANTHROPIC}/v1/messages", body=ANTHROPIC_OK, content_type="text/event-stream")


def req(**kw: Any) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], **kw)


def sent(rsps: responses.RequestsMock, path: str) -> tuple[dict[str, Any], Any]:
    call = [c for c in rsps.calls if c.request.url and path in c.request.url][-1]
    return json.loads(call.request.body or b"{}"), call.request.headers


def drain(provider: Any, request: ProviderRequest) -> list[str]:
    return [e.type for e in provider.chat_stream(request)]


# --------------------------------------------------------------------------- Ollama


@pytest.mark.parametrize("think", [True, False, "high"])
def test_ollama_think_keep_alive_and_headers(rsps: responses.RequestsMock, think: Any) -> None:
    provider = LocalProvider(base_url=OLLAMA)
    types = drain(provider, req(think=think, keep_alive="10m", headers={"X-Trace": "t1"}))
    assert types[-1] == "finish"
    body, headers = sent(rsps, "/api/chat")
    assert body["think"] == think
    assert body["keep_alive"] == "10m"
    assert headers["X-Trace"] == "t1"


def test_ollama_leaves_unset_settings_out(rsps: responses.RequestsMock) -> None:
    drain(LocalProvider(base_url=OLLAMA), req())
    body, _ = sent(rsps, "/api/chat")
    assert "think" not in body and "keep_alive" not in body and "format" not in body


def test_ollama_schema_is_format_and_required_sends_every_tool(
    rsps: responses.RequestsMock,
) -> None:
    drain(
        LocalProvider(base_url=OLLAMA),
        req(response_format=SCHEMA, tools=[ADD], tool_choice="required"),
    )
    body, _ = sent(rsps, "/api/chat")
    assert body["format"] == SCHEMA
    assert [t["function"]["name"] for t in body["tools"]] == ["add"]


# --------------------------------------------------------------------------- OpenAI-compatible


def test_openai_required_tool_choice_and_json_schema(rsps: responses.RequestsMock) -> None:
    provider = OpenAICompatibleProvider(base_url=OPENAI)
    drain(provider, req(tools=[ADD], tool_choice="required", response_format=SCHEMA))
    body, _ = sent(rsps, "/v1/chat/completions")
    assert body["tool_choice"] == "required"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": SCHEMA},
    }


def test_llamacpp_gets_the_schema_as_json_object_with_schema(rsps: responses.RequestsMock) -> None:
    """Both llama.cpp servers turn ``{"type": "json_object", "schema": ...}`` into a grammar;
    llama-cpp-python answers 500 to OpenAI's ``json_schema`` form."""
    drain(
        OpenAICompatibleProvider(base_url=OPENAI, backend="llamacpp"), req(response_format=SCHEMA)
    )
    body, _ = sent(rsps, "/v1/chat/completions")
    assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}


@pytest.mark.parametrize(
    ("backend", "think", "expected"),
    [
        ("generic", False, {"reasoning_effort": "none"}),
        ("generic", True, {}),
        ("generic", "high", {"reasoning_effort": "high"}),
        ("llamacpp", False, {"chat_template_kwargs": {"enable_thinking": False}}),
        ("llamacpp", True, {"chat_template_kwargs": {"enable_thinking": True}}),
        ("llamacpp", "low", {"reasoning_effort": "low"}),
    ],
)
def test_openai_think_the_backends_way(
    rsps: responses.RequestsMock, backend: str, think: Any, expected: dict[str, Any]
) -> None:
    drain(OpenAICompatibleProvider(base_url=OPENAI, backend=backend), req(think=think))
    body, _ = sent(rsps, "/v1/chat/completions")
    keys = ("reasoning_effort", "chat_template_kwargs")
    assert {k: body[k] for k in keys if k in body} == expected


@pytest.mark.parametrize(
    ("backend", "keep_alive", "expected"),
    [
        ("lmstudio", "5m", 300),
        ("lmstudio", 90, 90),
        ("lmstudio", "-1", None),
        ("generic", "5m", None),
    ],
)
def test_keep_alive_is_lm_studio_ttl_and_nothing_elsewhere(
    rsps: responses.RequestsMock, backend: str, keep_alive: Any, expected: int | None
) -> None:
    drain(OpenAICompatibleProvider(base_url=OPENAI, backend=backend), req(keep_alive=keep_alive))
    body, _ = sent(rsps, "/v1/chat/completions")
    assert body.get("ttl") == expected
    assert "keep_alive" not in body


def test_openai_headers_beside_the_auth_header(rsps: responses.RequestsMock) -> None:
    provider = OpenAICompatibleProvider(base_url=OPENAI, api_key="sk-test")
    drain(provider, req(headers={"X-Request-Id": "r1"}))
    _, headers = sent(rsps, "/v1/chat/completions")
    assert headers["X-Request-Id"] == "r1"
    assert headers["Authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300), ("1h30m", 5400), ("90s", 90), ("1.5s", 2), ("250ms", 1), ("0", 0), ("30", 30)],
)
def test_keep_alive_durations(text: str, seconds: int) -> None:
    assert keep_alive_seconds(text) == seconds


@pytest.mark.parametrize("bad", ["soon", "5 minutes", "", "m5", True])
def test_a_bad_keep_alive_is_a_config_error(bad: Any) -> None:
    with pytest.raises(ConfigError):
        keep_alive_seconds(bad)


# --------------------------------------------------------------------------- vLLM


def test_vllm_schema_as_structured_outputs_and_the_template_switch(
    rsps: responses.RequestsMock,
) -> None:
    drain(VllmProvider(base_url=VLLM), req(response_format=SCHEMA, think=False))
    body, _ = sent(rsps, "/v1/chat/completions")
    assert body["structured_outputs"] == {"json": SCHEMA}
    assert "guided_json" not in body and "response_format" not in body
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


# --------------------------------------------------------------------------- Gemini


@pytest.mark.parametrize(
    ("think", "config"),
    [
        (False, {"thinkingBudget": 0}),
        (True, {"thinkingBudget": -1, "includeThoughts": True}),
        ("low", {"thinkingLevel": "low", "includeThoughts": True}),
    ],
)
def test_gemini_thinking_config(
    rsps: responses.RequestsMock, think: Any, config: dict[str, Any]
) -> None:
    drain(GeminiProvider(api_key="k", base_url=GEMINI), req(think=think, keep_alive="5m"))
    body, _ = sent(rsps, "streamGenerateContent")
    assert body["generationConfig"]["thinkingConfig"] == config
    assert "keep_alive" not in json.dumps(body)


def test_gemini_schema_required_tools_and_headers(rsps: responses.RequestsMock) -> None:
    provider = GeminiProvider(api_key="k", base_url=GEMINI)
    drain(
        provider,
        req(response_format=SCHEMA, tools=[ADD], tool_choice="required", headers={"X-T": "1"}),
    )
    body, headers = sent(rsps, "streamGenerateContent")
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert body["generationConfig"]["responseSchema"]["required"] == ["city"]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert headers["X-T"] == "1"


# --------------------------------------------------------------------------- Anthropic


@pytest.mark.parametrize(
    ("think", "thinking", "max_tokens"),
    [
        (False, None, 4096),
        (True, {"type": "enabled", "budget_tokens": 4096}, 8192),
        ("low", {"type": "enabled", "budget_tokens": 1024}, 5120),
        ("high", {"type": "enabled", "budget_tokens": 16384}, 20480),
        (2000, {"type": "enabled", "budget_tokens": 2000}, 6096),
    ],
)
def test_anthropic_thinking_budget_and_max_tokens(
    rsps: responses.RequestsMock, think: Any, thinking: Any, max_tokens: int
) -> None:
    provider = AnthropicProvider(base_url=ANTHROPIC)
    assert drain(provider, req(think=think, keep_alive="5m")) == ["text", "finish"]
    body, headers = sent(rsps, "/v1/messages")
    assert body.get("thinking") == thinking and body["max_tokens"] == max_tokens
    assert "keep_alive" not in json.dumps(body)
    assert headers["anthropic-version"] == "2023-06-01" and "x-api-key" not in headers


def test_anthropic_schema_required_tools_and_headers(rsps: responses.RequestsMock) -> None:
    provider = AnthropicProvider(base_url=ANTHROPIC, api_key="sk-ant-k")
    drain(provider, req(tools=[ADD], tool_choice="required", headers={"X-T": "1"}))
    body, headers = sent(rsps, "/v1/messages")
    assert body["tool_choice"] == {"type": "any"}
    assert body["tools"] == [{"name": "add", "description": "Add.", "input_schema": ADD.parameters}]
    assert headers["X-T"] == "1" and headers["x-api-key"] == "sk-ant-k"
    drain(provider, req(response_format=SCHEMA))
    body, _ = sent(rsps, "/v1/messages")
    assert body["tool_choice"] == {"type": "tool", "name": "json_answer"}
    assert body["tools"][0]["input_schema"] == SCHEMA


# --------------------------------------------------------------------------- through connect()


def test_connect_ask_sends_the_options_on_the_wire(rsps: responses.RequestsMock) -> None:
    rsps.post(f"{OLLAMA}/api/show", status=404, json={"error": "model 'm' not found"})
    with ollm_lite.connect("ollama", host=OLLAMA, model="m", keep_alive="1h") as llm:
        assert llm.ask("hi", think=False, headers={"X-Job": "nightly"}, temperature=0) == "ok"
    body, headers = sent(rsps, "/api/chat")
    assert body["think"] is False and body["keep_alive"] == "1h"
    assert body["options"]["temperature"] == 0
    assert headers["X-Job"] == "nightly"


def test_connect_typed_answer_sends_format(rsps: responses.RequestsMock) -> None:
    rsps.replace(
        responses.POST,
        f"{OPENAI}/v1/chat/completions",
        body=SSE_OK.replace(b'"ok"', b'"{\\"city\\": \\"Oslo\\"}"'),
        content_type="text/event-stream",
    )
    llm = ollm_lite.connect("openai-compatible", host=OPENAI, model="m")
    assert llm.ask("Where?", schema=SCHEMA) == {"city": "Oslo"}
    body, _ = sent(rsps, "/v1/chat/completions")
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA


def test_connect_anthropic_typed_answer_is_the_forced_tool_input(
    rsps: responses.RequestsMock,
) -> None:
    """``connect("anthropic")``: a schema is asked through a forced tool and the answer is
    its ``input`` (the Messages API has no JSON mode)."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "json_answer", "input": {}}
    events = [
        {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 9}}},
        {"type": "content_block_start", "index": 0, "content_block": call},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    sse = b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n"
        for e in events
    )
    rsps.replace(
        responses.POST, f"{ANTHROPIC}/v1/messages", body=sse, content_type="text/event-stream"
    )
    with ollm_lite.connect("claude", host=ANTHROPIC, model="m") as llm:
        assert llm.ask("Where?", schema=SCHEMA, headers={"X-Job": "1"}) == {"city": "Oslo"}
    body, headers = sent(rsps, "/v1/messages")
    assert body["tool_choice"] == {"type": "tool", "name": "json_answer"}
    assert headers["X-Job"] == "1"

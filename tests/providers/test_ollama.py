"""LocalProvider (Ollama native API): request shapes, answer mapping, model management.

Pure mapping functions are tested directly; every request the provider sends is checked with
``responses`` (body by ``json_params_matcher``, headers by ``header_matcher``). Streaming over
a real socket lives in ``test_ollama_stream.py``.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import math
import pickle
import re

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
    OllmError,
)
from ollm_lite.providers import _ollama_wire as wire
from ollm_lite.providers.ollama import LocalProvider
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
    Usage,
)

URL = "http://ollama.test:11434"
PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E"
    "rkJggg=="
)
WEATHER = ToolSchema(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> LocalProvider:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    return LocalProvider(base_url=URL, retries=0)


def req(*messages: Message, **kw: object) -> ProviderRequest:
    return ProviderRequest("llama3.2", list(messages) or [Message.user("hi")], **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- host / constructor


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("", "http://127.0.0.1:11434"),
        (":11434", "http://127.0.0.1:11434"),
        (":8080", "http://127.0.0.1:8080"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:9000", "http://127.0.0.1:9000"),
        ("gpu-box", "http://gpu-box:11434"),
        ("gpu-box:9999", "http://gpu-box:9999"),
        ("localhost:11434", "http://localhost:11434"),
        ("http://gpu-box", "http://gpu-box"),  # a scheme brings its own default port (80)
        ("https://ollama.example.com", "https://ollama.example.com"),
        ("https://ollama.example.com:8443/", "https://ollama.example.com:8443"),
        ("http://localhost:11434", "http://localhost:11434"),
        ("example.com/ollama", "http://example.com:11434/ollama"),
        ("1.2.3.4", "http://1.2.3.4:11434"),
        ("[::1]:5000", "http://[::1]:5000"),
        ("::1", "http://[::1]:11434"),
        ("::", "http://[::1]:11434"),
        ("[::]:11434", "http://[::1]:11434"),
        ('"localhost:1234"', "http://localhost:1234"),
        ("  gpu-box:1  ", "http://gpu-box:1"),
    ],
)
def test_ollama_host_forms(value: str, url: str) -> None:
    """OLLAMA_HOST values are read as Ollama's own client reads them."""
    assert wire.parse_ollama_host(value) == url


@pytest.mark.parametrize(
    "value", ["ftp://box", "box:abc", "box:99999", "box:", "a b:1", "http//box", "box:0"]
)
def test_bad_ollama_host_is_config_error(value: str) -> None:
    """A host Ollama could not use either fails with CONFIG_INVALID, naming the value."""
    with pytest.raises(ConfigError) as info:
        wire.parse_ollama_host(value)
    assert info.value.code == "CONFIG_INVALID"
    assert value.strip() in info.value.message


def test_bad_ollama_host_message_hides_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        wire.parse_ollama_host("bob:secret-pw-1@box:abc")
    assert "secret-pw-1" not in info.value.message and "***@box:abc" in info.value.message


def test_base_url_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """Explicit base_url beats OLLAMA_HOST, which beats the default; /v1 and /api are dropped."""
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    assert LocalProvider().base_url == "http://localhost:11434"
    monkeypatch.setenv("OLLAMA_HOST", "0.0.0.0")
    assert LocalProvider().base_url == "http://127.0.0.1:11434"
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:9999")
    assert LocalProvider().base_url == "http://gpu-box:9999"
    assert LocalProvider(base_url="http://other:1234").base_url == "http://other:1234"
    assert LocalProvider(base_url="http://other:1234/v1").base_url == "http://other:1234"
    assert LocalProvider(base_url="http://other:1234/v1/").base_url == "http://other:1234"
    assert LocalProvider(base_url="http://other:1234/api").base_url == "http://other:1234"
    monkeypatch.setenv("OLLAMA_HOST", "")
    assert LocalProvider().base_url == "http://localhost:11434"


def test_env_read_at_construction_not_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """OLLAMA_HOST changes after import are honoured by new instances."""
    monkeypatch.setenv("OLLAMA_HOST", "first:1")
    a = LocalProvider()
    monkeypatch.setenv("OLLAMA_HOST", "second:2")
    assert (a.base_url, LocalProvider().base_url) == ("http://first:1", "http://second:2")


@pytest.mark.parametrize(
    "kw", [{"embed_batch_size": 0}, {"num_ctx": 0}, {"retries": -1}, {"timeout": -1}]
)
def test_bad_constructor_values(kw: dict[str, int]) -> None:
    """Nonsense settings fail at construction with CONFIG_INVALID."""
    with pytest.raises(ConfigError):
        LocalProvider(base_url=URL, **kw)  # type: ignore[arg-type]


def test_class_facts(provider: LocalProvider) -> None:
    """Name, wire format and provider-level capabilities are as the README's feature matrix says."""
    assert provider.name == "local" and provider.streaming_format == "ndjson"
    caps = provider.capabilities
    assert caps.model_management and caps.embeddings and caps.streaming
    assert caps.token_counting is False
    assert repr(provider) == f"LocalProvider(name='local', base_url='{URL}')"


# --------------------------------------------------------------------------- message mapping


def test_messages_map_to_ollama_shape() -> None:
    """System prompt first; images as the base64 list; tool calls and results round-trip."""
    call = ToolCall("call_1", "get_weather", {"city": "Oslo"}, '{"city":"Oslo"}')
    msgs = [
        Message.user("What is this?", images=[ImagePart(PNG, "image/png")]),
        Message.assistant("", tool_calls=[call]),
        Message.tool(ToolResult(ok=True, data={"c": 21}), call),
        Message.assistant("It is 21 °C."),
    ]
    assert wire.messages_to_ollama(msgs, "Be brief.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is this?", "images": [PNG]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_1", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
            ],
        },
        {
            "role": "tool",
            "content": '{"ok": true, "data": {"c": 21}}',
            "tool_name": "get_weather",
            "tool_call_id": "call_1",
        },
        {"role": "assistant", "content": "It is 21 °C."},
    ]


def test_data_url_images_are_sent_bare() -> None:
    """A data: URL image is sent as the bare base64 Ollama expects."""
    msg = Message("user", [ImagePart(f"data:image/png;base64,{PNG}", "image/png")])
    assert wire.message_to_ollama(msg)["images"] == [PNG]


def test_message_from_ollama_inverse() -> None:
    """Ollama messages come back as the internal messages they were made from."""
    call = ToolCall.from_arguments("call_1", "f", {"x": [1, 2]})
    msgs = [
        Message.system("sys"),
        Message.user("look", images=[ImagePart(PNG, "image/png")]),
        Message.assistant("", tool_calls=[call]),
        Message.tool(ToolResult(ok=False, error=None), call),
    ]
    back = [wire.message_from_ollama(wire.message_to_ollama(m)) for m in msgs]
    assert back == msgs


def test_message_from_ollama_foreign_history() -> None:
    """Histories written for Ollama load: upper-case roles, no ids, string arguments."""
    msg = wire.message_from_ollama(
        {
            "role": "ASSISTANT",
            "content": "",
            "tool_calls": [
                {"function": {"name": "a", "arguments": '{"k": 1}'}},
                {"function": {"name": "b", "arguments": {"k": 2}}},
            ],
        }
    )
    assert msg.role == "assistant" and msg.parts == []
    a, b = msg.tool_calls
    assert (a.name, a.args, a.arguments) == ("a", {"k": 1}, '{"k": 1}')
    assert (b.args, b.arguments) == ({"k": 2}, '{"k": 2}')
    assert re.fullmatch(r"call_[a-z0-9]{8}", a.id) and a.id != b.id
    jpeg = wire.message_from_ollama({"role": "user", "content": "", "images": ["/9j/4AAQ"]})
    assert jpeg.parts == [ImagePart("/9j/4AAQ", "image/jpeg")]


@pytest.mark.parametrize("bad", [None, "text", [], {"role": "wizard", "content": "x"}, {}])
def test_message_from_ollama_rejects_garbage(bad: object) -> None:
    """Something that is not an Ollama message is a BadResponse, not a crash."""
    with pytest.raises(BadResponse):
        wire.message_from_ollama(bad)


def test_canonical_message_merges_text_and_drops_stray_fields() -> None:
    """Interleaved parts merge into one text part followed by the images."""
    msg = Message(
        "user",
        [TextPart("a"), ImagePart(PNG, "image/jpeg"), TextPart("b")],
        name="bob",
        tool_call_id="x",
    )
    canon = wire.canonical_message(msg)
    assert canon == Message("user", [TextPart("ab"), ImagePart(PNG, "image/png")])
    assert wire.message_from_ollama(wire.message_to_ollama(msg)) == canon


def test_tools_map_to_function_format() -> None:
    """Tools keep name, description and parameters; missing parameters become an empty object."""
    assert wire.tools_to_ollama([WEATHER, ToolSchema("ping")]) == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER.parameters,
            },
        },
        {
            "type": "function",
            "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}},
        },
    ]


# --------------------------------------------------------------------------- request body


def test_options_mapping() -> None:
    """Only the options that are set are sent; max_tokens becomes num_predict."""
    opts = GenerationOptions(
        temperature=0.2,
        max_tokens=64,
        top_p=0.9,
        top_k=40,
        repeat_penalty=1.1,
        seed=7,
        stop=["\n\n"],
        presence_penalty=0.5,
        frequency_penalty=0.25,
    )
    assert wire.options_to_ollama(opts, num_ctx=8192) == {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "seed": 7,
        "repeat_penalty": 1.1,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
        "num_predict": 64,
        "num_ctx": 8192,
        "stop": ["\n\n"],
    }
    assert wire.options_to_ollama(GenerationOptions()) == {}
    assert wire.options_to_ollama(GenerationOptions(temperature=0.0, seed=0)) == {
        "temperature": 0.0,
        "seed": 0,
    }


def test_chat_body_full() -> None:
    """Every request field lands where Ollama reads it; extra_body merges last."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    request = req(
        Message.user("hi"),
        system_prompt="sys",
        tools=[WEATHER],
        options=GenerationOptions(
            temperature=0.1,
            max_tokens=10,
            extra_body={
                "think": True,
                "keep_alive": "10m",
                "options": {"num_ctx": 4096, "temperature": 0.3},
            },
        ),
        response_format=schema,
    )
    assert wire.chat_body(request, stream=True, num_ctx=2048) == {
        "model": "llama3.2",
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
        "stream": True,
        "options": {"temperature": 0.3, "num_predict": 10, "num_ctx": 4096},
        "tools": wire.tools_to_ollama([WEATHER]),
        "format": schema,
        "think": True,
        "keep_alive": "10m",
    }


def test_chat_body_minimal_has_required_fields() -> None:
    """model, messages, options and stream are always there; think/tools/format only when asked."""
    body = wire.chat_body(req(), stream=False)
    assert body == {
        "model": "llama3.2",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": False,
        "options": {},
    }
    assert wire.chat_body(req(response_format="json"))["format"] == "json"


def test_tool_choice() -> None:
    """'none' sends no tools; a forced tool sends only that one; an unknown one is an error."""
    ping = ToolSchema("ping", "p", {"type": "object", "properties": {}})
    assert "tools" not in wire.chat_body(req(tools=[WEATHER], tool_choice="none"))
    forced = wire.chat_body(req(tools=[WEATHER, ping], tool_choice={"name": "ping"}))
    assert [t["function"]["name"] for t in forced["tools"]] == ["ping"]
    assert "tools" not in wire.chat_body(req(tools=[]))
    with pytest.raises(ConfigError, match="nope"):
        wire.chat_body(req(tools=[WEATHER], tool_choice={"name": "nope"}))


# --------------------------------------------------------------------------- stream assembly


def _events(objs: list[object]) -> list[object]:
    state = wire.ChatStreamState(model="m", url=URL)
    out: list[object] = []
    for obj in objs:
        out += state.feed(obj)
        if state.terminal is not None:
            break
    return [*out, *state.end()]


DONE = {"message": {"role": "assistant", "content": ""}, "done": True}


@pytest.mark.parametrize("reason", ["stop", "load", "unload", "", None, "something_new"])
def test_done_reasons_that_mean_stop(reason: str | None) -> None:
    """stop, load, unload, absent and unknown done_reason values all finish with 'stop'."""
    final = dict(DONE)
    if reason is not None:
        final["done_reason"] = reason
    assert _events([final]) == [FinishEvent("stop", None)]


def test_length_and_tool_reasons() -> None:
    """'length' stays length; a turn with tool calls finishes with 'tool' (Ollama says stop)."""
    assert _events([{**DONE, "done_reason": "length"}])[-1] == FinishEvent("length")
    call = {
        "message": {
            "content": "",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}],
        }
    }
    events = _events([call, {**DONE, "done_reason": "stop"}])
    assert events == [ToolCallEvent(ToolCall("c", "f", {}, "{}")), FinishEvent("tool")]


def test_usage_mapping() -> None:
    """Counts map to Usage, durations go to extra; Ollama omits zero metrics (omitempty), so
    an absent count beside others is 0, and a chunk with no metric at all has no Usage."""
    full = {
        **DONE,
        **{"prompt_eval_count": 31, "eval_count": 30, "total_duration": 5, "eval_duration": 3},
    }
    assert wire.usage_from_chunk(full) == Usage(
        31, 30, 61, {"total_duration": 5, "eval_duration": 3}
    )
    cached = {**DONE, "eval_count": 4, "eval_duration": 9}  # prompt_eval_count omitted (omitempty)
    assert wire.usage_from_chunk(cached) == Usage(0, 4, 4, {"eval_duration": 9})
    assert wire.usage_from_chunk(DONE) is None
    assert wire.usage_from_chunk({**DONE, "eval_count": True}) is None


def test_thinking_and_text_in_one_chunk_stay_apart() -> None:
    """A chunk carrying both fields gives a ThinkingEvent then a TextEvent."""
    chunk = {"message": {"role": "assistant", "content": "A", "thinking": "T"}, "done": False}
    assert _events([chunk, DONE])[:2] == [ThinkingEvent("T"), TextEvent("A")]


def test_content_in_final_chunk_is_kept() -> None:
    """Text carried by the done chunk itself is emitted before the finish."""
    final = {
        "message": {"role": "assistant", "content": "whole"},
        "done": True,
        "done_reason": "stop",
    }
    assert _events([final]) == [TextEvent("whole"), FinishEvent("stop")]


def test_generate_shaped_lines_are_read() -> None:
    """Lines shaped like /api/generate (``response``) still yield their text."""
    events = _events([{"response": " Yes", "done": False}, {"error": "boom"}])
    assert events[0] == TextEvent(" Yes")
    assert isinstance(events[1], ErrorEvent) and "boom" in events[1].error.message


@pytest.mark.parametrize("bad", [[1, 2], "text", 3, None])
def test_non_object_line_is_bad_response(bad: object) -> None:
    """A JSON line that is not an object ends the stream with LLM_BAD_RESPONSE."""
    (event,) = _events([bad])
    assert isinstance(event, ErrorEvent) and event.error.code == "LLM_BAD_RESPONSE"


def test_nameless_tool_call_is_bad_response() -> None:
    """A tool call without a function name cannot be run: LLM_BAD_RESPONSE, nothing lost before."""
    events = _events(
        [
            {"message": {"content": "x"}},
            {"message": {"content": "", "tool_calls": [{"function": {}}]}},
        ]
    )
    assert events[0] == TextEvent("x")
    assert isinstance(events[1], ErrorEvent) and events[1].error.code == "LLM_BAD_RESPONSE"


def test_tool_call_argument_forms() -> None:
    """Object, JSON text, broken text, null and non-object arguments never crash."""
    tc = wire.tool_call_from_ollama
    assert tc({"id": "a", "function": {"name": "f", "arguments": {"b": 1, "a": 2}}}) == ToolCall(
        "a", "f", {"b": 1, "a": 2}, '{"b": 1, "a": 2}'
    )
    assert tc({"id": "a", "function": {"name": "f", "arguments": '{"x":1}'}}) == ToolCall(
        "a", "f", {"x": 1}, '{"x":1}'
    )
    assert tc({"id": "a", "function": {"name": "f", "arguments": "{oops"}}) == ToolCall(
        "a", "f", {}, "{oops"
    )
    assert tc({"id": "a", "function": {"name": "f"}}) == ToolCall("a", "f", {}, "")
    assert tc({"id": "a", "function": {"name": "f", "arguments": [1]}}) == ToolCall(
        "a", "f", {}, "[1]"
    )
    assert tc({"function": {"name": ""}}) is None and tc("x") is None


def test_generated_ids_are_unique() -> None:
    """Calls without an id get distinct call_xxxxxxxx ids, never one already taken."""
    ids = {wire.new_call_id() for _ in range(500)}
    assert len(ids) == 500 and all(re.fullmatch(r"call_[a-z0-9]{8}", i) for i in ids)
    taken = set(ids)
    assert wire.new_call_id(taken) not in taken


# --------------------------------------------------------------------------- models (pure)

SHOW = {
    "parameters": 'stop "<|eot_id|>"',
    "template": "{{ .Prompt }}",
    "details": {"format": "gguf", "family": "llama", "parameter_size": "3.2B"},
    "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
    "capabilities": ["completion", "tools"],
    "modified_at": "2025-05-04T17:37:44.706015396-07:00",
}


def test_model_info_from_show_sources() -> None:
    """context_length is num_ctx, else the loaded window, else the trained maximum — and says so."""
    trained = wire.model_info_from_show("llama3.2", SHOW)
    assert trained.context_length == 131072
    assert trained.details["context_length_source"] == "trained"
    assert trained.details["trained_context_length"] == 131072
    assert trained.details["architecture"] == "llama" and trained.kind == "chat"
    assert trained.capabilities == ["completion", "tools"]
    loaded = wire.model_info_from_show("llama3.2", SHOW, loaded_ctx=4096)
    assert (loaded.context_length, loaded.details["context_length_source"]) == (4096, "loaded")
    fixed = wire.model_info_from_show("llama3.2", SHOW, num_ctx=8192, loaded_ctx=4096)
    assert (fixed.context_length, fixed.details["context_length_source"]) == (8192, "num_ctx")
    bare = wire.model_info_from_show("x", {"model_info": {}})
    assert bare.context_length is None and bare.details["context_length_source"] is None


def test_ps_context_matches_latest_tag() -> None:
    """A model asked for without a tag matches its ':latest' entry in /api/ps."""
    ps = {
        "models": [{"name": "llama3.2:latest", "model": "llama3.2:latest", "context_length": 4096}]
    }
    assert wire.ps_context_length(ps, "llama3.2") == 4096
    assert wire.ps_context_length(ps, "llama3.2:latest") == 4096
    assert wire.ps_context_length(ps, "llama3.2:1b") is None
    assert wire.ps_context_length({"models": None}, "x") is None
    reg = {"models": [{"name": "reg.io:5000/ns/m:latest", "context_length": 1}]}
    assert wire.ps_context_length(reg, "reg.io:5000/ns/m") == 1


def test_capabilities_from_list() -> None:
    """tools/vision/thinking map to the flags; no list means unknown."""
    base = LocalProvider.capabilities
    caps = wire.capabilities_from_list(["completion", "vision", "thinking"], base)
    assert (caps.tool_calling, caps.vision, caps.thinking) == (False, True, True)
    unknown = wire.capabilities_from_list(None, base)
    assert (unknown.tool_calling, unknown.vision, unknown.thinking) == (None, None, None)
    assert unknown.model_management and unknown.embeddings and not unknown.token_counting


@pytest.mark.parametrize(
    ("message", "cls"),
    [
        ("pull model manifest: file does not exist", ModelNotFound),
        ("model 'x' not found", ModelNotFound),
        ("max retries exceeded: EOF", BadResponse),
    ],
)
def test_pull_error_mapping(message: str, cls: type[OllmError]) -> None:
    """A registry miss is MODEL_NOT_FOUND; other pull failures are LLM_BAD_RESPONSE."""
    err = wire.pull_error(message, model="nope", provider="local", url=URL)
    assert type(err) is cls and message in err.message and err.model == "nope"


# --------------------------------------------------------------------------- requests (responses)

NDJSON = {"content_type": "application/x-ndjson"}


def _ndjson(*objs: dict[str, object]) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def test_chat_stream_request_shape(provider: LocalProvider, rsps: responses.RequestsMock) -> None:
    """chat_stream POSTs the mapped body to /api/chat with stream true and no auth header."""
    request = req(
        Message.user("hi", images=[ImagePart(PNG, "image/png")]),
        system_prompt="sys",
        tools=[WEATHER],
        options=GenerationOptions(temperature=0.5, max_tokens=5, stop=["x"]),
    )
    expected = {
        "model": "llama3.2",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi", "images": [PNG]},
        ],
        "stream": True,
        "options": {"temperature": 0.5, "num_predict": 5, "stop": ["x"]},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": WEATHER.description,
                    "parameters": WEATHER.parameters,
                },
            }
        ],
    }
    rsps.post(
        f"{URL}/api/chat",
        body=_ndjson(
            {"message": {"role": "assistant", "content": "ok"}, "done": False},
            {**DONE, "done_reason": "stop"},
        ),
        match=[matchers.json_params_matcher(expected, strict_match=True)],
        **NDJSON,
    )
    events = list(provider.chat_stream(request))
    assert events == [TextEvent("ok"), FinishEvent("stop")]
    assert "Authorization" not in rsps.calls[0].request.headers


def test_num_ctx_is_sent(rsps: responses.RequestsMock) -> None:
    """A provider built with num_ctx asks for that window on every chat."""
    rsps.post(
        f"{URL}/api/chat",
        body=_ndjson({**DONE, "done_reason": "stop"}),
        match=[matchers.json_params_matcher({"options": {"num_ctx": 8192}}, strict_match=False)],
        **NDJSON,
    )
    p = LocalProvider(base_url=URL, num_ctx=8192)
    assert list(p.chat_stream(req())) == [FinishEvent("stop")]
    assert p.context_length("anything") == 8192  # no request: the window is fixed


def test_chat_non_streaming_tool_answer(
    provider: LocalProvider, rsps: responses.RequestsMock
) -> None:
    """chat() sends stream false and folds the single answer into a ChatResult."""
    answer = {
        "model": "llama3.2",
        "message": {
            "role": "assistant",
            "content": "",
            "thinking": "need weather",
            "tool_calls": [
                {
                    "id": "call_a",
                    "function": {"name": "get_weather", "arguments": {"city": "Tokyo"}},
                }
            ],
        },
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 10,
        "eval_count": 5,
    }
    rsps.post(
        f"{URL}/api/chat",
        json=answer,
        match=[matchers.json_params_matcher({"stream": False}, strict_match=False)],
    )
    result = provider.chat(req(tools=[WEATHER]))
    assert result.finish_reason == "tool_calls" and result.content is None
    assert result.tool_calls == [
        ToolCall("call_a", "get_weather", {"city": "Tokyo"}, '{"city": "Tokyo"}')
    ]
    assert result.thinking == "need weather"
    assert result.usage == Usage(10, 5, 15, {})
    assert result.to_openai()["tool_calls"][0]["function"]["arguments"] == '{"city": "Tokyo"}'


def test_chat_non_streaming_text_and_errors(
    provider: LocalProvider, rsps: responses.RequestsMock
) -> None:
    """Text answers fold; an error object or a missing model raise with their codes."""
    rsps.post(
        f"{URL}/api/chat",
        json={
            "message": {"role": "assistant", "content": "hello"},
            "done": True,
            "done_reason": "length",
        },
    )
    result = provider.chat(req())
    assert (result.content, result.finish_reason) == ("hello", "length")
    rsps.post(f"{URL}/api/chat", json={"error": "out of memory"})
    with pytest.raises(BadResponse, match="out of memory"):
        provider.chat(req())
    rsps.post(f"{URL}/api/chat", json={"error": "model 'llama9' not found"}, status=404)
    with pytest.raises(ModelNotFound) as info:
        provider.chat(ProviderRequest("llama9", [Message.user("hi")]))
    assert "ollm-lite models pull llama9" in info.value.message
    rsps.post(f"{URL}/api/chat", json={"message": {"content": "half"}, "done": False})
    with pytest.raises(BadResponse, match="ended early"):
        provider.chat(req())


def test_chat_stream_404_is_model_not_found(
    provider: LocalProvider, rsps: responses.RequestsMock
) -> None:
    """An unknown model ends the stream with MODEL_NOT_FOUND and the pull hint."""
    rsps.post(f"{URL}/api/chat", json={"error": "model 'llama9' not found"}, status=404)
    (event,) = list(provider.chat_stream(ProviderRequest("llama9", [Message.user("hi")])))
    assert isinstance(event, ErrorEvent)
    assert event.error.code == "MODEL_NOT_FOUND"
    assert "ollm-lite models pull llama9" in event.error.message
    assert "model 'llama9' not found" in event.error.message
    assert event.error.details and event.error.details["model"] == "llama9"


def test_chat_stream_400_keeps_server_message(
    provider: LocalProvider, rsps: responses.RequestsMock
) -> None:
    """A capability refusal comes back as LLM_HTTP_ERROR with Ollama's own words."""
    rsps.post(
        f"{URL}/api/chat",
        json={"error": "registry.ollama.ai/library/gemma:2b does not support tools"},
        status=400,
    )
    (event,) = list(provider.chat_stream(req(tools=[WEATHER])))
    assert isinstance(event, ErrorEvent) and event.error.code == "LLM_HTTP_ERROR"
    assert "does not support tools" in event.error.message


def test_bad_tool_choice_is_an_error_event(provider: LocalProvider) -> None:
    """A request that cannot be built ends the stream with CONFIG_INVALID, sending nothing."""
    (event,) = list(provider.chat_stream(req(tools=[WEATHER], tool_choice={"name": "zzz"})))
    assert isinstance(event, ErrorEvent) and event.error.code == "CONFIG_INVALID"


def test_count_tokens_is_the_char_estimate(provider: LocalProvider) -> None:
    """No tokenizer endpoint: ceil(chars / 4), and capabilities say so."""
    request = req(Message.user("x" * 10), system_prompt="abc")
    assert provider.count_tokens(request) == math.ceil(13 / 4)
    assert provider.capabilities.token_counting is False


# --------------------------------------------------------------------------- auth and secrets

CANARY = "sk-canary-12345"


def test_api_key_is_bearer_and_never_leaks(
    rsps: responses.RequestsMock, caplog: pytest.LogCaptureFixture
) -> None:
    """The key goes out as Authorization: Bearer and nowhere else (repr, errors, logs)."""
    caplog.set_level(logging.DEBUG)
    p = LocalProvider(base_url="https://ollama.com", api_key=CANARY, retries=0)
    rsps.get(
        "https://ollama.com/api/tags",
        json={"models": []},
        match=[matchers.header_matcher({"Authorization": f"Bearer {CANARY}"})],
    )
    rsps.post(
        "https://ollama.com/api/chat",
        json={"error": f"invalid key {CANARY}"},
        status=401,
        match=[matchers.header_matcher({"Authorization": f"Bearer {CANARY}"})],
    )
    assert p.list_models() == []
    (event,) = list(p.chat_stream(req()))
    assert isinstance(event, ErrorEvent) and event.error.code == "LLM_AUTH_FAILED"
    with pytest.raises(AuthenticationError) as info:
        rsps.post(
            "https://ollama.com/api/chat", json={"error": f"invalid key {CANARY}"}, status=401
        )
        p.chat(req())
    texts = [
        repr(p),
        str(p.__dict__.keys()),
        event.error.message,
        json.dumps(event.error.details),
        str(info.value),
        repr(info.value),
        str(pickle.loads(pickle.dumps(info.value))),
    ]
    texts += [r.getMessage() for r in caplog.records]
    assert not [t for t in texts if CANARY in t]


def test_api_key_from_environment(
    monkeypatch: pytest.MonkeyPatch, rsps: responses.RequestsMock
) -> None:
    """OLLAMA_API_KEY is used when no key is passed; an explicit key wins."""
    monkeypatch.setenv("OLLAMA_API_KEY", "env-key-0001")
    rsps.get(
        f"{URL}/api/tags",
        json={"models": []},
        match=[matchers.header_matcher({"Authorization": "Bearer env-key-0001"})],
    )
    rsps.get(
        f"{URL}/api/tags",
        json={"models": []},
        match=[matchers.header_matcher({"Authorization": "Bearer explicit-0002"})],
    )
    LocalProvider(base_url=URL).list_models()
    LocalProvider(base_url=URL, api_key="explicit-0002").list_models()


# --------------------------------------------------------------------------- model management

TAGS_V030 = {
    "models": [
        {
            "name": "llama3.2:latest",
            "model": "llama3.2:latest",
            "modified_at": "2025-05-04T17:37:44.706015396-07:00",
            "size": 2019393189,
            "digest": "a80c4f17acd5",
            "details": {
                "format": "gguf",
                "family": "llama",
                "families": ["llama"],
                "parameter_size": "3.2B",
                "quantization_level": "Q4_K_M",
                "context_length": 131072,
            },
            "capabilities": ["completion", "tools"],
        },
        {
            "name": "nomic-embed-text:latest",
            "model": "nomic-embed-text:latest",
            "size": 274302450,
            "details": {"family": "nomic-bert", "families": None},
            "capabilities": ["embedding"],
        },
    ]
}


def test_list_models(provider: LocalProvider, rsps: responses.RequestsMock) -> None:
    """/api/tags entries become ModelInfo (v0.30 context length and capabilities included)."""
    rsps.get(f"{URL}/api/tags", json=TAGS_V030)
    chat, embed = provider.list_models()
    assert (chat.name, chat.size_bytes, chat.context_length, chat.kind) == (
        "llama3.2:latest",
        2019393189,
        131072,
        "chat",
    )
    assert chat.modified_at == "2025-05-04T17:37:44.706015396-07:00"
    assert (
        chat.details["digest"] == "a80c4f17acd5" and chat.details["quantization_level"] == "Q4_K_M"
    )
    assert chat.capabilities == ["completion", "tools"]
    assert (embed.kind, embed.context_length, embed.capabilities) == (
        "embedding",
        None,
        ["embedding"],
    )


def test_list_models_old_server_and_empty(
    provider: LocalProvider, rsps: responses.RequestsMock
) -> None:
    """Entries without capabilities have unknown kind; null/absent lists are empty."""
    rsps.get(f"{URL}/api/tags", json={"models": [{"name": "m:latest", "size": 1, "details": {}}]})
    rsps.get(f"{URL}/api/tags", json={"models": None})
    rsps.get(f"{URL}/api/tags", json={"models": "nope"})
    (m,) = provider.list_models()
    assert (m.kind, m.capabilities, m.context_length) == (None, [], None)
    assert provider.list_models() == []
    with pytest.raises(BadResponse):
        provider.list_models()


def test_show_model_uses_ps_for_loaded_window(
    provider: LocalProvider, rsps: responses.RequestsMock
) -> None:
    """show_model posts {"model"} to /api/show and takes the loaded window from /api/ps."""
    rsps.post(
        f"{URL}/api/show",
        json=SHOW,
        match=[matchers.json_params_matcher({"model": "llama3.2"}, strict_match=True)],
    )
    rsps.get(
        f"{URL}/api/ps",
        json={
            "models": [
                {"name": "llama3.2:latest", "model": "llama3.2:latest", "context_length": 4096}
            ]
        },
    )
    info = provider.show_model("llama3.2")
    assert info.context_length == 4096 and info.details["context_length_source"] == "loaded"
    assert info.details["trained_context_length"] == 131072
    # cached: neither call is repeated
    assert provider.context_length("llama3.2") == 4096
    assert provider.model_capabilities("llama3.2").tool_calling is True
    assert len(rsps.calls) == 2


def test_context_length_trained_when_not_loaded_or_old_server(
    provider: LocalProvider, rsps: responses.RequestsMock
) -> None:
    """Without a loaded instance (or without /api/ps at all) the trained maximum is used."""
    rsps.post(f"{URL}/api/show", json=SHOW)
    rsps.get(f"{URL}/api/ps", json={"error": "404 page not found"}, status=404)
    assert provider.context_length("llama3.2") == 131072
    assert provider.context_length("llama3.2") == 131072
    assert len(rsps.calls) == 2


def test_show_missing_model(provider: LocalProvider, rsps: responses.RequestsMock) -> None:
    """show_model raises MODEL_NOT_FOUND; the advisory lookups answer 'unknown' instead."""
    for _ in range(3):
        rsps.post(f"{URL}/api/show", json={"error": "model 'zz' not found"}, status=404)
    with pytest.raises(ModelNotFound, match="ollm-lite models pull zz"):
        provider.show_model("zz")
    assert provider.context_length("zz") is None
    caps = provider.model_capabilities("zz")
    assert (caps.tool_calling, caps.vision, caps.thinking) == (None, None, None)


def test_model_capabilities_per_model(
    provider: LocalProvider, rsps: responses.RequestsMock
) -> None:
    """Capabilities follow /api/show per model and are asked once per model."""
    rsps.post(
        f"{URL}/api/show",
        json={**SHOW, "capabilities": ["completion", "vision", "thinking"]},
        match=[matchers.json_params_matcher({"model": "gemma3"})],
    )
    rsps.get(f"{URL}/api/ps", json={"models": []})
    rsps.post(
        f"{URL}/api/show",
        json={**SHOW, "capabilities": ["completion", "tools"]},
        match=[matchers.json_params_matcher({"model": "llama3.2"})],
    )
    rsps.get(f"{URL}/api/ps", json={"models": []})
    g = provider.model_capabilities("gemma3")
    assert (g.tool_calling, g.vision, g.thinking) == (False, True, True)
    ll = provider.model_capabilities("llama3.2")
    assert (ll.tool_calling, ll.vision, ll.thinking) == (True, False, False)
    assert provider.model_capabilities("gemma3") is g
    assert len(rsps.calls) == 4


def test_delete_model(provider: LocalProvider, rsps: responses.RequestsMock) -> None:
    """DELETE /api/delete with a JSON body; an unknown model is MODEL_NOT_FOUND."""
    rsps.delete(
        f"{URL}/api/delete",
        body="",
        status=200,
        match=[matchers.json_params_matcher({"model": "llama3:13b"}, strict_match=True)],
    )
    rsps.delete(f"{URL}/api/delete", json={"error": "model 'gone' not found"}, status=404)
    provider.delete_model("llama3:13b")
    with pytest.raises(ModelNotFound) as info:
        provider.delete_model("gone")
    assert info.value.code == "MODEL_NOT_FOUND" and "not installed" in info.value.message


def test_pull_request_shape(provider: LocalProvider, rsps: responses.RequestsMock) -> None:
    """pull_model posts {"model", "stream": true} and reports every line, ending at success."""
    rsps.post(
        f"{URL}/api/pull",
        body=_ndjson(
            {"status": "pulling manifest"},
            {"status": "pulling abc", "digest": "sha256:abc", "total": 10, "completed": 10},
            {"status": "success"},
        ),
        match=[
            matchers.json_params_matcher({"model": "llama3.2", "stream": True}, strict_match=True)
        ],
        **NDJSON,
    )
    seen = []
    provider.pull_model("llama3.2", on_progress=seen.append)
    assert [p.status for p in seen] == ["pulling manifest", "pulling abc", "success"]
    assert seen[1].fraction == 1.0 and seen[1].digest == "sha256:abc"


def test_pull_sends_the_base_url_credentials_too(
    monkeypatch: pytest.MonkeyPatch, rsps: responses.RequestsMock
) -> None:
    """A download runs on a transport of its own (longer silences allowed), which
    authenticates exactly like the chat transport: ``http://user:pw@host`` is Basic auth."""
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    token = base64.b64encode(b"bob:pw-canary").decode()
    rsps.post(
        f"{URL}/api/pull",
        body=_ndjson({"status": "success"}),
        match=[matchers.header_matcher({"Authorization": f"Basic {token}"})],
        **NDJSON,
    )
    provider = LocalProvider(base_url=URL.replace("http://", "http://bob:pw-canary@"), retries=0)
    provider.pull_model("llama3.2")
    provider.close()


# --------------------------------------------------------------------------- embeddings


def _embed_callback(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
    body = json.loads(request.body or b"{}")
    vectors = [[float(len(t)), float(i)] for i, t in enumerate(body["input"])]
    return 200, {}, json.dumps({"model": body["model"], "embeddings": vectors})


def test_embed_batches_in_order(rsps: responses.RequestsMock) -> None:
    """250 texts go out as 100 + 100 + 50 in order; vectors come back in input order."""
    p = LocalProvider(base_url=URL)
    for _ in range(3):
        rsps.add_callback(responses.POST, f"{URL}/api/embed", callback=_embed_callback)
    texts = ["x" * (i % 7 + 1) for i in range(250)]
    result = p.embed(texts, model="nomic-embed-text")
    inputs = [json.loads(c.request.body)["input"] for c in rsps.calls]
    assert [len(i) for i in inputs] == [100, 100, 50]
    assert list(itertools.chain.from_iterable(inputs)) == texts
    assert [v[0] for v in result.vectors] == [float(len(t)) for t in texts]
    assert (result.model, result.dimensions) == ("nomic-embed-text", 2)


def test_embed_batch_size_setting(rsps: responses.RequestsMock) -> None:
    """embed_batch_size sets the number of texts per request."""
    for _ in range(2):
        rsps.add_callback(responses.POST, f"{URL}/api/embed", callback=_embed_callback)
    p = LocalProvider(base_url=URL, embed_batch_size=2)
    assert len(p.embed(["a", "b", "c"], model="m").vectors) == 3
    assert [len(json.loads(c.request.body)["input"]) for c in rsps.calls] == [2, 1]


def test_embed_request_shape_and_errors(
    provider: LocalProvider, rsps: responses.RequestsMock
) -> None:
    """Body is {"model", "input": [...]}; wrong counts and mixed sizes are LLM_BAD_RESPONSE."""
    rsps.post(
        f"{URL}/api/embed",
        json={"embeddings": [[0.1, 0.2]]},
        match=[matchers.json_params_matcher({"model": "m", "input": ["a"]}, strict_match=True)],
    )
    assert provider.embed(["a"], model="m").vectors == [[0.1, 0.2]]
    rsps.post(f"{URL}/api/embed", json={"embeddings": [[0.1]]})
    with pytest.raises(BadResponse, match="1 vectors for 2 texts") as info:
        provider.embed(["a", "b"], model="m")
    assert info.value.model == "m" and info.value.provider == "local"
    rsps.post(f"{URL}/api/embed", json={"embeddings": [[0.1], [0.2, 0.3]]})
    with pytest.raises(BadResponse, match="different sizes"):
        provider.embed(["a", "b"], model="m")
    rsps.post(f"{URL}/api/embed", json={"embeddings": [["x"]]})
    with pytest.raises(BadResponse, match="not a list of numbers"):
        provider.embed(["a"], model="m")
    rsps.post(f"{URL}/api/embed", json={"error": "model 'm2' not found"}, status=404)
    with pytest.raises(ModelNotFound) as missing:
        provider.embed(["a"], model="m2")
    assert "m2" in missing.value.message and missing.value.provider == "local"


def test_embed_input_checks(provider: LocalProvider) -> None:
    """No model or a bare string is CONFIG_INVALID; no texts need no request."""
    with pytest.raises(ConfigError, match="nomic-embed-text"):
        provider.embed(["a"])
    with pytest.raises(ConfigError):
        provider.embed("abc", model="m")  # type: ignore[arg-type]
    empty = provider.embed([], model="m")
    assert (empty.vectors, empty.dimensions) == ([], 0)


# --------------------------------------------------------------------------- health


def test_health_ok(provider: LocalProvider, rsps: responses.RequestsMock) -> None:
    """GET /api/version gives ok, the version and a latency."""
    rsps.get(f"{URL}/api/version", json={"version": "0.12.10"})
    status = provider.health()
    assert status.ok and status.version == "0.12.10" and status.provider == "local"
    assert status.base_url == URL and status.latency_ms is not None and status.latency_ms >= 0
    assert status.checked_at.tzinfo is not None and status.error is None


def test_health_failures_never_raise(provider: LocalProvider, rsps: responses.RequestsMock) -> None:
    """A refused connection or an error status gives ok=False with the error, no exception."""
    rsps.get(f"{URL}/api/version", body=requests.ConnectionError("Connection refused"))
    down = provider.health()
    assert not down.ok and down.error is not None and down.error.code == "CONNECTION_FAILED"
    assert "ollama serve" in down.error.message and URL in down.error.message
    rsps.get(f"{URL}/api/version", json={"error": "boom"}, status=500)
    broken = provider.health()
    assert not broken.ok and broken.error is not None and broken.error.code == "LLM_HTTP_ERROR"
    assert len(rsps.calls) == 2  # health does not retry


def test_connection_refused_message(provider: LocalProvider, rsps: responses.RequestsMock) -> None:
    """CONNECTION_FAILED names the URL and says how to start Ollama."""
    rsps.post(f"{URL}/api/chat", body=requests.ConnectionError("[Errno 111] Connection refused"))
    (event,) = list(provider.chat_stream(req()))
    assert isinstance(event, ErrorEvent) and event.error.code == "CONNECTION_FAILED"
    assert URL in event.error.message and "start Ollama with `ollama serve`" in event.error.message
    rsps.get(f"{URL}/api/tags", body=requests.ConnectionError("[Errno 111] Connection refused"))
    with pytest.raises(ConnectionFailed):
        provider.list_models()

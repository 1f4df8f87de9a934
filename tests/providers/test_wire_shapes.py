"""Odd answers through the public providers: error bodies of any shape, chunks of the wrong
shape, several choices, refusals, secrets cut by a message limit (served by ``responses``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import responses

from ollm_lite.config import config_secrets, load_config, mask_secrets
from ollm_lite.errors import BadResponse, OllmError, RateLimited
from ollm_lite.http.transport import Transport
from ollm_lite.providers.anthropic import AnthropicProvider
from ollm_lite.providers.base import MAX_TOOL_ARGUMENTS, MAX_TOOL_CALLS, BaseProvider
from ollm_lite.providers.gemini import GeminiProvider
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.types import (
    ErrorEvent,
    FinishEvent,
    Message,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ToolCallEvent,
)

URL = "http://wire.test:9"
ANY_URL = re.compile(r"http://wire\.test:9/.*")
KEY = "sk-0123456789abcdefghij"


RSPS_STRICT = False  # answer() registers GET and POST; the code under test picks one


def answer(rsps: responses.RequestsMock, body: bytes, status: int = 200, ctype: str = "") -> None:
    for method in (responses.GET, responses.POST):
        rsps.add(method, ANY_URL, body=body, status=status, content_type=ctype or "text/plain")


def request() -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")])


def openai() -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(base_url=URL, retries=0, api_key=KEY)


def gemini() -> GeminiProvider:
    return GeminiProvider(base_url=URL, retries=0, api_key=KEY)


def ollama() -> LocalProvider:
    return LocalProvider(base_url=URL, retries=0, api_key=KEY)


def anthropic() -> AnthropicProvider:
    return AnthropicProvider(base_url=URL, retries=0, api_key=KEY)


def sse(*objs: Any, done: bool = True) -> bytes:
    body = b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs)
    return body + (b"data: [DONE]\n\n" if done else b"")


def stream(provider: BaseProvider) -> list[ProviderEvent]:
    return list(provider.chat_stream(request()))


# --------------------------------------------------------------------------- error bodies


ODD_ERROR_BODIES = [
    {"error": {"message": "quota", "details": 1}},
    {"error": {"message": "quota", "details": "x"}},
    {"error": {"message": "quota", "details": {"reason": "X"}}},
    {"error": ["quota"]},
    {"error": "quota"},
    {"error": None},
]


@pytest.mark.parametrize("body", ODD_ERROR_BODIES, ids=json.dumps)
@pytest.mark.parametrize(
    "make", [ollama, openai, gemini, anthropic], ids=["ollama", "openai", "gemini", "anthropic"]
)
def test_an_error_body_of_any_shape_maps_by_status(
    rsps: responses.RequestsMock, body: Any, make: Callable[[], BaseProvider]
) -> None:
    answer(rsps, json.dumps(body).encode(), 429, "application/json")
    provider = make()
    with pytest.raises(RateLimited):
        provider.list_models()
    with pytest.raises(RateLimited):
        provider.chat(request())
    [event] = stream(provider)
    assert isinstance(event, ErrorEvent) and event.error.code == "LLM_RATE_LIMITED"
    assert provider.health().ok is False


# --------------------------------------------------------------------------- chunk shapes


def ended_by_a_bad_response(events: list[ProviderEvent]) -> None:
    terminals = [e for e in events if isinstance(e, FinishEvent | ErrorEvent)]
    assert terminals == [events[-1]]
    assert isinstance(events[-1], ErrorEvent), events
    assert events[-1].error.code == "LLM_BAD_RESPONSE"


HI = {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}


@pytest.mark.parametrize(
    "bad",
    [
        {"choices": {"0": {"delta": {"content": "x"}}}},
        {"choices": True},
        {"choices": ["x"]},
        {"choices": [{"index": 0, "delta": ["x"]}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": ["stop"]}]},
    ],
    ids=json.dumps,
)
def test_an_openai_chunk_of_the_wrong_shape_ends_with_one_error(
    rsps: responses.RequestsMock, bad: Any
) -> None:
    answer(rsps, sse(HI, bad), ctype="text/event-stream")
    events = stream(openai())
    assert events[0] == TextEvent("Hi")  # the partial answer is kept
    ended_by_a_bad_response(events)
    with pytest.raises(BadResponse):
        openai().chat(request())


def gemini_text(text: str, **candidate: Any) -> dict[str, Any]:
    return {"candidates": [{"content": {"parts": [{"text": text}]}, "index": 0, **candidate}]}


@pytest.mark.parametrize(
    "bad",
    [
        {"candidates": ["x"]},
        {"candidates": {"0": {}}},
        {"candidates": [{"content": [{"text": "x"}]}]},
        {"candidates": [{"content": {"parts": {"text": "x"}}}]},
        {"candidates": [{"content": {"parts": []}, "finishReason": 3}]},
    ],
    ids=json.dumps,
)
def test_a_gemini_chunk_of_the_wrong_shape_ends_with_one_error(
    rsps: responses.RequestsMock, bad: Any
) -> None:
    answer(rsps, sse(gemini_text("Hi"), bad, done=False), ctype="text/event-stream")
    events = stream(gemini())
    assert events[0] == TextEvent("Hi")
    ended_by_a_bad_response(events)
    with pytest.raises(BadResponse):
        gemini().chat(request())


@pytest.mark.parametrize("key", ["prompt", "completion", "total", "extra"])
def test_an_unknown_gemini_usage_key_is_ignored(rsps: responses.RequestsMock, key: str) -> None:
    last = {**gemini_text("!", finishReason="STOP")}
    last["usageMetadata"] = {"promptTokenCount": 3, "candidatesTokenCount": 1, key: 7}
    answer(rsps, sse(gemini_text("Hi"), last, done=False), ctype="text/event-stream")
    events = stream(gemini())
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "stop"
    assert events[-1].usage is not None and events[-1].usage.prompt_tokens == 3


# --------------------------------------------------------------------------- several choices


def choice(index: int, **delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": index, "delta": delta}]}


def call_fragment(name: str, args: str) -> list[dict[str, Any]]:
    return [{"index": 0, "id": f"call_{name}", "function": {"name": name, "arguments": args}}]


def test_only_choice_zero_is_followed_when_several_are_streamed(
    rsps: responses.RequestsMock,
) -> None:
    body = sse(
        choice(0, content="Par"),
        choice(1, content="Lon"),
        {"choices": [{"index": 1, "delta": {"content": "don"}}, {"index": 0, "delta": {}}]},
        choice(0, content="is"),
        {"choices": [{"index": 1, "delta": {}, "finish_reason": "length"}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    answer(rsps, body, ctype="text/event-stream")
    events = stream(openai())
    assert events == [TextEvent("Par"), TextEvent("is"), FinishEvent("stop", None)]


def test_tool_call_fragments_of_other_choices_are_not_merged(
    rsps: responses.RequestsMock,
) -> None:
    body = sse(
        choice(0, tool_calls=call_fragment("a", '{"x": ')),
        choice(1, tool_calls=call_fragment("b", '{"y": ')),
        choice(0, tool_calls=[{"index": 0, "function": {"arguments": "1}"}}]),
        choice(1, tool_calls=[{"index": 0, "function": {"arguments": "2}"}}]),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    answer(rsps, body, ctype="text/event-stream")
    events = stream(openai())
    assert [e.value.name for e in events if isinstance(e, ToolCallEvent)] == ["a"]
    assert [e.value.args for e in events if isinstance(e, ToolCallEvent)] == [{"x": 1}]
    assert events[-1] == FinishEvent("tool", None)


def test_a_non_streamed_answer_takes_choice_zero(rsps: responses.RequestsMock) -> None:
    body = {
        "choices": [
            {"index": 1, "message": {"role": "assistant", "content": "London"}},
            {"index": 0, "message": {"role": "assistant", "content": "Paris"}},
        ]
    }
    answer(rsps, json.dumps(body).encode(), ctype="application/json")
    assert openai().chat(request()).content == "Paris"


# --------------------------------------------------------------------------- refusals


def test_a_streamed_refusal_is_text_ending_in_finish_refusal(
    rsps: responses.RequestsMock,
) -> None:
    # OpenAI's structured-output refusal: ``delta.refusal`` with ``content`` null, then
    # finish_reason "stop".
    body = sse(
        choice(0, role="assistant", content=None, refusal=""),
        choice(0, refusal="I can't "),
        choice(0, refusal="help with that."),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    answer(rsps, body, ctype="text/event-stream")
    events = stream(openai())
    assert events == [
        TextEvent("I can't "),
        TextEvent("help with that."),
        FinishEvent("refusal", None),
    ]


def test_a_non_streamed_refusal_is_the_content(rsps: responses.RequestsMock) -> None:
    message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    answer(rsps, json.dumps(body).encode(), ctype="application/json")
    result = openai().chat(request())
    assert result.content == "I can't help with that."
    assert result.finish_reason == "refusal"


# --------------------------------------------------------------------------- secrets and cuts


def no_part_of_the_key(text: str) -> None:
    for size in range(6, len(KEY) + 1):
        assert KEY[:size] not in text, text


@pytest.mark.parametrize(
    ("body", "ctype"),
    [
        (json.dumps({"error": {"message": "x" * 990 + KEY}}), "application/json"),
        ("y" * 290 + KEY, "text/plain"),
        ("<html><title>" + "z" * 190 + KEY + "</title></html>", "text/html"),
    ],
    ids=["json-1000", "text-300", "html-200"],
)
def test_a_key_straddling_the_cut_of_an_error_message_is_masked(
    rsps: responses.RequestsMock, body: str, ctype: str
) -> None:
    answer(rsps, body.encode(), 400, ctype)
    with pytest.raises(OllmError) as info:
        openai().chat(request())
    no_part_of_the_key(info.value.message)
    no_part_of_the_key(json.dumps(info.value.details))


def test_a_key_straddling_the_cut_of_a_mid_stream_error_is_masked(
    rsps: responses.RequestsMock,
) -> None:
    answer(rsps, sse(HI, {"error": "e" * 990 + KEY}), ctype="text/event-stream")
    events = stream(openai())
    assert isinstance(events[-1], ErrorEvent)
    no_part_of_the_key(events[-1].error.message)


@pytest.mark.parametrize("secret", ["abcd", "abcde", "abcdefgh"])
def test_one_redactor_masks_the_same_keys_in_config_and_transport(
    secret: str, tmp_path: Path
) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "OPENAI_COMPATIBLE_API_KEY": secret}
    config = load_config(env=env)
    text = f"the key {secret} was echoed"
    by_transport = Transport(URL, provider="p", secrets=[secret]).redact(text)
    by_config = mask_secrets(text, config_secrets(config))
    assert by_transport == by_config == "the key *** was echoed"


# --------------------------------------------------------------------------- bounded sizes


def test_tool_call_arguments_past_the_line_limit_end_the_stream(
    rsps: responses.RequestsMock,
) -> None:
    megabyte = "x" * (1024 * 1024)
    fragments = [choice(0, tool_calls=call_fragment("f", '{"a": "'))]
    fragments += [
        choice(0, tool_calls=[{"index": 0, "function": {"arguments": megabyte}}])
        for _ in range(MAX_TOOL_ARGUMENTS // len(megabyte) + 1)
    ]
    answer(rsps, sse(*fragments), ctype="text/event-stream")
    events = stream(openai())
    ended_by_a_bad_response(events)
    assert "longer than" in events[-1].error.message
    assert not any(isinstance(e, ToolCallEvent) for e in events)


def many_calls(wire: str) -> bytes:
    count = MAX_TOOL_CALLS + 1
    if wire == "openai":
        calls = [
            {"index": i, "id": f"c{i}", "function": {"name": "f", "arguments": "{}"}}
            for i in range(count)
        ]
        return sse(choice(0, tool_calls=calls))
    if wire == "gemini":
        parts = [{"functionCall": {"name": "f", "args": {}}} for _ in range(count)]
        return sse({"candidates": [{"content": {"parts": parts}, "index": 0}]}, done=False)
    if wire == "anthropic":
        events: list[dict[str, Any]] = [{"type": "message_start", "message": {"content": []}}]
        for i in range(count):
            block = {"type": "tool_use", "id": f"toolu_{i}", "name": "f", "input": {}}
            events += [
                {"type": "content_block_start", "index": i, "content_block": block},
                {"type": "content_block_stop", "index": i},
            ]
        return sse(*events, done=False)
    calls = [{"function": {"name": "f", "arguments": {}}} for _ in range(count)]
    line = {"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": calls}}
    return json.dumps(line).encode() + b"\n"


@pytest.mark.parametrize("wire", ["openai", "gemini", "ollama", "anthropic"])
def test_more_tool_calls_than_the_limit_end_the_stream(
    rsps: responses.RequestsMock, wire: str
) -> None:
    answer(rsps, many_calls(wire), ctype="text/event-stream")
    provider = {"openai": openai, "gemini": gemini, "ollama": ollama, "anthropic": anthropic}[
        wire
    ]()
    events = stream(provider)
    ended_by_a_bad_response(events)
    assert str(MAX_TOOL_CALLS) in events[-1].error.message
    assert sum(isinstance(e, ToolCallEvent) for e in events) <= MAX_TOOL_CALLS


def test_only_gemini_candidate_zero_is_followed(rsps: responses.RequestsMock) -> None:
    other = {"content": {"parts": [{"text": "London"}]}, "index": 1}
    first = gemini_text("Paris")
    first["candidates"].append(other)
    last = gemini_text("!", finishReason="STOP")
    last["candidates"].insert(0, {**other, "finishReason": "MAX_TOKENS"})
    answer(rsps, sse(first, last, done=False), ctype="text/event-stream")
    events = stream(gemini())
    assert events == [TextEvent("Paris"), TextEvent("!"), FinishEvent("stop", None)]

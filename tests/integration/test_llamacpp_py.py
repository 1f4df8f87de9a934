"""llama-cpp-python's server only: forced tool calls and what it does not report.

Which settings make SmolLM2-135M-Instruct call a tool on this server (``--chat_format
chatml-function-calling``), measured with ten prompts (five weather questions, five sums; two
tools offered; temperature 0; ``max_tokens`` 96):

* ``tool_choice`` absent (``auto``): 0 of 10 answers were tool calls (the model answers in text);
* ``tool_choice: "required"``: HTTP 500 for all 10 (this chat format does not implement it);
* ``tool_choice`` naming the tool: 10 of 10 calls to that tool, the arguments constrained by a
  grammar to the tool's schema (9 of 10 complete JSON objects; the tenth ran into max_tokens).

So the tool tests here force the call by name: the only setting under which a model this small
reliably calls a tool through this server.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import llamacpp  # scripts/, put on sys.path by conftest.py
import pytest

from ollm_lite.types import (
    FinishEvent,
    GenerationOptions,
    Message,
    ProviderRequest,
    ToolCallEvent,
    ToolSchema,
)

pytestmark = pytest.mark.integration

MODEL = llamacpp.MODEL_ALIAS
WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name."}},
        "required": ["city"],
    },
)


def _forced(**kw: Any) -> ProviderRequest:
    return ProviderRequest(
        model=MODEL,
        messages=[Message.user("What is the weather in Oslo?")],
        tools=[WEATHER],
        tool_choice={"name": "get_weather"},
        options=GenerationOptions(max_tokens=60, temperature=0.0),
        **kw,
    )


def _raw_tool_fragments(base_url: str) -> list[dict[str, Any]]:
    """The tool-call deltas the server streams for the same forced call (bypassing ollm_lite)."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
        "max_tokens": 60,
        "temperature": 0.0,
        "stream": True,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": WEATHER.name,
                    "description": WEATHER.description,
                    "parameters": WEATHER.parameters,
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }
    req = urllib.request.Request(
        base_url + "/v1/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    fragments = []
    with urllib.request.urlopen(req, timeout=60) as resp:
        for line in resp.read().decode().splitlines():
            if not line.startswith("data: {"):
                continue
            for choice in json.loads(line[6:]).get("choices") or ():
                fragments.extend((choice.get("delta") or {}).get("tool_calls") or ())
    return fragments


def test_forced_tool_call_streamed_in_fragments_is_assembled(llamacpp_py_server, make_provider):
    """tool_choice={"name": ...}: fragments on the wire, one complete ToolCallEvent out."""
    fragments = _raw_tool_fragments(llamacpp_py_server.base_url)
    assert len(fragments) > 2  # the server really streams the arguments piece by piece
    events = list(make_provider(llamacpp_py_server).chat_stream(_forced()))
    calls = [e.value for e in events if isinstance(e, ToolCallEvent)]
    assert len(calls) == 1, events
    (call,) = calls
    assert call.name == "get_weather"
    assert isinstance(call.args, dict) and isinstance(call.args.get("city"), str)
    assert json.loads(call.arguments) == call.args
    assert call.id
    assert events[-1] == FinishEvent("tool", events[-1].usage)
    assert isinstance(events[-2], ToolCallEvent)


def test_forced_tool_call_non_streaming(llamacpp_py_server, make_provider):
    """chat() returns the forced call with parsed args and finish_reason tool_calls."""
    result = make_provider(llamacpp_py_server).chat(_forced())
    assert result.finish_reason == "tool_calls"
    (call,) = result.tool_calls
    assert call.name == "get_weather" and isinstance(call.args.get("city"), str)
    wire = result.to_openai()["tool_calls"][0]
    assert wire["type"] == "function"
    assert json.loads(wire["function"]["arguments"]) == call.args


def test_streamed_usage_absent_is_none_not_invented(llamacpp_py_server, make_provider):
    """llama-cpp-python ignores stream_options.include_usage: usage is None, not zeros."""
    request = ProviderRequest(
        model=MODEL,
        messages=[Message.user("Hello! Who are you?")],
        options=GenerationOptions(max_tokens=8, temperature=0.0),
    )
    events = list(make_provider(llamacpp_py_server).chat_stream(request))
    assert isinstance(events[-1], FinishEvent)
    assert events[-1].usage is None


def test_token_counting_found_without_configuration(llamacpp_py_server, make_provider):
    """The preset discovers /extras/tokenize/count (no /props) and reports token_counting."""
    provider = make_provider(llamacpp_py_server)
    assert provider.capabilities.token_counting
    request = ProviderRequest(model=MODEL, messages=[Message.user("one two three")])
    assert provider.count_tokens(request) >= 3
    assert provider.capabilities.token_counting  # still true after discovery

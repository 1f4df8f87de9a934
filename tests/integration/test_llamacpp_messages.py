"""``AnthropicProvider`` against llama.cpp's own ``llama-server`` (``/v1/messages``).

llama.cpp serves the Messages API beside Chat Completions (``/v1/messages`` and
``/v1/messages/count_tokens``; its own tests, ``tools/server/tests/unit/test_compat_anthropic.py``,
drive them the same way: streamed and not, a conversation, ``count_tokens`` without
``max_tokens``, ``tool_result`` blocks with ``is_error``). The server is the ``native`` one of
``scripts/llamacpp.py`` (``-c 4096 --jinja``, SmolLM2-135M-Instruct).

Not tested here: the model *calling* a tool, or a structured answer through the forced tool.
With ``--jinja`` SmolLM2-135M-Instruct's template reports ``supports_tools: false`` and the
model answers in text (see ``test_llamacpp_native.py``); what is tested is that a history
with ``tool_use`` and ``tool_result`` blocks (``is_error`` included) is accepted and answered.
llama.cpp serves one model whatever ``model`` says, so ``MODEL_NOT_FOUND`` cannot happen here
either (the loopback tests cover it). llama-cpp-python's server (the quick start's) does not
serve the Messages API at all: its 404 is read as that, not as a missing model.
"""

from __future__ import annotations

from collections.abc import Iterator

import llamacpp  # scripts/, put on sys.path by conftest.py
import pytest

from ollm_lite.errors import HTTPStatusError
from ollm_lite.providers.anthropic import AnthropicProvider
from ollm_lite.types import (
    ErrorEvent,
    FinishEvent,
    GenerationOptions,
    Message,
    ProviderRequest,
    TextEvent,
    ToolCall,
    ToolResult,
)

pytestmark = pytest.mark.integration

MODEL = llamacpp.MODEL_ALIAS
REQUEST_TIMEOUT_S = 60.0


@pytest.fixture
def provider(llamacpp_native_server: llamacpp.ServerInfo) -> Iterator[AnthropicProvider]:
    made = AnthropicProvider(base_url=llamacpp_native_server.base_url, timeout=REQUEST_TIMEOUT_S)
    yield made
    made.close()


def ask(text: str, max_tokens: int = 8, **kw: object) -> ProviderRequest:
    opts = GenerationOptions(max_tokens=max_tokens, temperature=0.0)
    return ProviderRequest(MODEL, [Message.user(text)], options=opts, **kw)  # type: ignore[arg-type]


def test_streamed_answer_with_usage_and_the_servers_own_count(provider: AnthropicProvider) -> None:
    """Text events, then ``length`` at ``max_tokens``; the prompt's tokens in the usage are
    what ``/v1/messages/count_tokens`` says of the same request."""
    request = ask("Hello! Who are you?", system_prompt="You are brief.")
    events = list(provider.chat_stream(request))
    finish = events[-1]
    assert isinstance(finish, FinishEvent) and finish.reason == "length", events
    assert any(isinstance(e, TextEvent) and e.value for e in events)
    assert finish.usage is not None and finish.usage.completion_tokens == 8
    assert finish.usage.prompt_tokens == provider.count_tokens(request)


def test_whole_answer_equals_the_streamed_one(provider: AnthropicProvider) -> None:
    request = ask("Name a colour.", max_tokens=6)
    streamed = "".join(e.value for e in provider.chat_stream(request) if isinstance(e, TextEvent))
    whole = provider.chat(request)
    assert whole.content == streamed and whole.finish_reason == "length"


def test_a_session_keeps_the_conversation(llamacpp_native_server: llamacpp.ServerInfo) -> None:
    import ollm_lite

    provider = AnthropicProvider(
        base_url=llamacpp_native_server.base_url, timeout=REQUEST_TIMEOUT_S
    )
    with ollm_lite.connect(provider, model=MODEL, max_tokens=8, temperature=0.0) as llm:
        chat = llm.session(system="You are brief.")
        first = chat.ask("My name is Ada.")
        second = chat.ask("What is my name?")
    assert first and second
    assert [m.role for m in chat.messages] == ["user", "assistant", "user", "assistant"]


def test_tool_use_and_results_are_accepted(provider: AnthropicProvider) -> None:
    """A history with a ``tool_use`` turn and its results (one ``is_error``) is answered."""
    ok = ToolCall.from_arguments("toolu_1", "get_weather", {"location": "Paris"})
    bad = ToolCall.from_arguments("toolu_2", "get_weather", {"location": "Atlantis"})
    history = [
        Message.user("What's the weather in Paris and Atlantis?"),
        Message.assistant("", [ok, bad]),
        Message.tool(ToolResult(True, "sunny, 25 C"), ok),
        Message.tool(ToolResult(False), bad),
    ]
    opts = GenerationOptions(max_tokens=8, temperature=0.0)
    events = list(provider.chat_stream(ProviderRequest(MODEL, history, options=opts)))
    assert isinstance(events[-1], FinishEvent), events


def test_models_and_health(provider: AnthropicProvider) -> None:
    names = [m.name for m in provider.list_models()]
    assert MODEL in names
    assert provider.show_model(MODEL).name == MODEL
    assert provider.context_length(MODEL) in (None, 4096)  # n_ctx_train is not the window
    health = provider.health()
    assert health.ok and health.error is None


def test_a_refused_request_is_an_error_event_with_the_servers_message(
    provider: AnthropicProvider,
) -> None:
    """llama-server is permissive (a ``messages`` that is no list is answered), but a
    content that is neither text nor blocks is refused: 400 ``invalid_request_error``."""
    refused = {"messages": [{"role": "user", "content": 5}]}
    opts = GenerationOptions(max_tokens=8, extra_body=refused)
    bad = ProviderRequest(MODEL, [Message.user("x")], options=opts)
    [error] = list(provider.chat_stream(bad))
    assert isinstance(error, ErrorEvent) and error.error.code == "LLM_HTTP_ERROR", error
    assert error.error.details and error.error.details["status"] == 400
    assert "content" in error.error.details["server_message"]
    with pytest.raises(HTTPStatusError) as caught:
        provider.chat(bad)
    assert caught.value.message == error.error.message


def test_a_prompt_past_the_context_is_refused_with_the_servers_figures(
    provider: AnthropicProvider,
) -> None:
    """``-c 4096``: a longer prompt is refused before any text (400
    ``exceed_context_size_error``), the server's message quoted."""
    [error] = list(provider.chat_stream(ask("llama " * 6000)))
    assert isinstance(error, ErrorEvent) and error.error.code == "LLM_HTTP_ERROR", error
    assert "context" in error.error.message and error.error.details
    assert error.error.details["status"] == 400


def test_llama_cpp_pythons_server_does_not_serve_the_messages_api(
    llamacpp_py_server: llamacpp.ServerInfo,
) -> None:
    """Its 404 for ``/v1/messages`` is LLM_HTTP_ERROR saying so, never MODEL_NOT_FOUND."""
    provider = AnthropicProvider(base_url=llamacpp_py_server.base_url, timeout=REQUEST_TIMEOUT_S)
    try:
        [error] = list(provider.chat_stream(ask("Hello")))
    finally:
        provider.close()
    assert isinstance(error, ErrorEvent) and error.error.code == "LLM_HTTP_ERROR", error
    assert "does not serve the Messages API" in error.error.message
    assert error.error.details and error.error.details["status"] == 404


def test_health_of_a_stopped_server_does_not_raise() -> None:
    health = AnthropicProvider(base_url="http://127.0.0.1:9", retries=0).health()
    assert not health.ok and health.error is not None
    assert health.error.code == "CONNECTION_FAILED"

"""llama.cpp's own ``llama-server`` only: usage with timings, loading vs down, the real window.

The token-limit tests use a second server started with ``-c 512`` and prompts of digits: Gemma's
tokenizer spends one token per digit, so ceil(chars / 4) would put these prompts at a quarter
of their real size. The warning and the stop can only come from the real tokenizer.

No tool-call test runs here: with ``--jinja`` SmolLM2-135M-Instruct's own template reports
``supports_tools: false`` in ``/props``, and in ten prompts (two tools offered, temperature 0)
it answered in text ten times out of ten both with ``tool_choice`` absent and with
``"required"``. The tool tests use llama-cpp-python's server, whose grammar forces a named call.
"""

from __future__ import annotations

import math
import time

import llamacpp  # scripts/, put on sys.path by conftest.py
import pytest

from ollm_lite.chat import ChatClient
from ollm_lite.providers.base import approx_token_count
from ollm_lite.tokens import TokenCounter
from ollm_lite.types import (
    ChatFinishEvent,
    ErrorEvent,
    FinishEvent,
    GenerationOptions,
    Message,
    ProviderRequest,
    TextEvent,
    WarningEvent,
)

pytestmark = pytest.mark.integration

MODEL = llamacpp.MODEL_ALIAS
#: The small-window server's model (see the module docstring).
GEMMA = llamacpp.GEMMA3.alias


def test_stream_usage_with_timings(llamacpp_native_server, make_provider):
    """include_usage: Usage on the FinishEvent, the server's timings in Usage.extra."""
    request = ProviderRequest(
        model=MODEL,
        messages=[Message.user("Hello! Who are you?")],
        options=GenerationOptions(max_tokens=8, temperature=0.0),
    )
    provider = make_provider(llamacpp_native_server)
    events = list(provider.chat_stream(request))
    finish = events[-1]
    assert isinstance(finish, FinishEvent) and finish.usage is not None, events
    usage = finish.usage
    assert usage.completion_tokens == 8
    assert usage.prompt_tokens == provider.count_tokens(request)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    timings = usage.extra["timings"]
    assert timings["predicted_n"] == 8
    assert timings["predicted_per_second"] > 0


def test_capabilities_from_props(llamacpp_native_server, make_provider):
    """/props says this model's template has no tool support: the runtime will use ReAct."""
    caps = make_provider(llamacpp_native_server).model_capabilities(MODEL)
    assert caps.tool_calling is False
    assert caps.token_counting


def test_health_down_is_connection_failed(make_provider):
    """A closed port: ok False with CONNECTION_FAILED (not 'loading')."""
    port = llamacpp.free_port()
    status = make_provider(base_url=f"http://127.0.0.1:{port}").health()
    assert not status.ok
    assert status.error is not None and status.error.code == "CONNECTION_FAILED"
    assert not (status.error.details or {}).get("loading")


def test_health_tells_loading_from_down_and_ready(llamacpp_native_server, make_provider):
    """A server loading its model (503) is reported as loading, then ok once loaded."""
    root = llamacpp.cache_root()
    info = llamacpp.start_server("native", ctx=1024, wait=False, root=root)
    try:
        provider = make_provider(base_url=info.base_url)
        seen: list[str] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = provider.health()
            if status.ok:
                seen.append("ok")
                break
            assert status.error is not None
            state = "loading" if (status.error.details or {}).get("loading") else "down"
            if state == "down":
                assert status.error.code == "CONNECTION_FAILED", status.error
            if not seen or seen[-1] != state:
                seen.append(state)
            time.sleep(0.01)
        # The port opens before the model loads (about a second here): 503 "loading".
        assert "loading" in seen, seen
        assert seen[-1] == "ok", seen
        assert seen.index("loading") < seen.index("ok")
    finally:
        llamacpp.stop_server(info.pid, root=root)


def _digits_request(n: int) -> ProviderRequest:
    digits = ("1234567890" * (n // 10 + 1))[:n]
    return ProviderRequest(model=GEMMA, messages=[Message.user(digits)])


def _digits_for(provider, target: int) -> tuple[int, int]:
    """A digit count whose request counts ``target`` tokens (+-2), and that exact count."""
    base = provider.count_tokens(_digits_request(10))
    n = max(10, target - (base - 10))
    for _ in range(4):
        tokens = provider.count_tokens(_digits_request(n))
        if abs(tokens - target) <= 2:
            return n, tokens
        n += target - tokens
    raise AssertionError(f"could not size a prompt to {target} tokens (last {tokens})")


def test_token_limit_warning_from_real_tokenizer(llamacpp_native_small_ctx_server, make_provider):
    """At >= 90 % of the real 512-token window the chat warns, then still answers."""
    provider = make_provider(llamacpp_native_small_ctx_server)
    assert provider.context_length(GEMMA) == 512
    n, tokens = _digits_for(provider, 480)  # 94 % of 512
    request = _digits_request(n)
    assert 0.9 * 512 <= tokens <= 512
    assert approx_token_count(request) < 0.9 * 512 / 2  # the estimate would not have warned
    check = TokenCounter(provider).check(request)
    assert (check.tokens, check.limit, check.exact) == (tokens, 512, True)
    client = ChatClient(provider, model=GEMMA)
    options = GenerationOptions(max_tokens=4, temperature=0.0)
    events = list(client.chat(request.messages[0].text, options=options))
    warnings = [e for e in events if isinstance(e, WarningEvent)]
    warnings = [e for e in warnings if e.code == "TOKEN_LIMIT_WARNING"]
    assert len(warnings) == 1, events
    assert f"{tokens} of 512" in warnings[0].message
    assert isinstance(events[-1], ChatFinishEvent) and events[-1].reason == "complete", events
    assert any(isinstance(e, TextEvent) for e in events)


def test_token_limit_stop_from_real_tokenizer(llamacpp_native_small_ctx_server, make_provider):
    """Over the real 512-token window the chat sends nothing and stops with token_limit."""
    provider = make_provider(llamacpp_native_small_ctx_server)
    n, tokens = _digits_for(provider, 560)
    request = _digits_request(n)
    assert tokens > 512
    assert approx_token_count(request) == math.ceil(n / 4) < 512  # the estimate would send it
    client = ChatClient(provider, model=GEMMA)
    events = list(client.chat(request.messages[0].text, options=GenerationOptions(max_tokens=4)))
    assert not any(isinstance(e, TextEvent) for e in events)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1, events
    assert errors[0].error.code == "TOKEN_LIMIT_EXCEEDED"
    assert errors[0].error.details == {"tokens": tokens, "limit": 512, "exact": True}
    assert events[-1] == ChatFinishEvent("token_limit", None)

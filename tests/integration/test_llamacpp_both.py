"""One ``backend="llamacpp"`` preset against both real servers (llama-cpp-python and llama.cpp).

Every test here runs twice, once per server, through the public API only. The model is Gemma 3
270M: tiny, so answers are nonsense, but the wire behaviour is the servers' own.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.request
from typing import Any

import llamacpp  # scripts/, put on sys.path by conftest.py
import pytest

from ollm_lite.chat import ChatClient
from ollm_lite.providers.base import approx_token_count
from ollm_lite.types import (
    ChatFinishEvent,
    ErrorEvent,
    FinishEvent,
    GenerationOptions,
    Message,
    ProviderRequest,
    TextEvent,
)

pytestmark = pytest.mark.integration

MODEL = llamacpp.MODEL_ALIAS

PROMPT = "Hello! Who are you?"
#: Digits and Cyrillic: Gemma's tokenizer spends about one token per digit, far more than
#: ceil(chars / 4) guesses.
TOKEN_SAMPLE = "1234567890 0987654321 Привет, мир! 3.14159265358979"


def _request(text: str, max_tokens: int = 16, **kw: Any) -> ProviderRequest:
    return ProviderRequest(
        model=MODEL,
        messages=[Message.user(text)],
        options=GenerationOptions(max_tokens=max_tokens, temperature=0.0),
        **kw,
    )


def _post_json(url: str, body: dict[str, Any]) -> Any:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_streamed_text(llamacpp_server, make_provider):
    """chat_stream yields text deltas as they arrive and ends with one FinishEvent."""
    provider = make_provider(llamacpp_server)
    events = list(provider.chat_stream(_request(PROMPT, max_tokens=24)))
    texts = [e.value for e in events if isinstance(e, TextEvent)]
    assert len(texts) >= 2, events  # streamed in pieces, not one block
    assert "".join(texts).strip()
    assert isinstance(events[-1], FinishEvent)
    assert events[-1].reason in ("stop", "length")
    assert not any(isinstance(e, (FinishEvent, ErrorEvent)) for e in events[:-1])


def test_non_streaming_chat_with_usage(llamacpp_server, make_provider):
    """chat() returns the whole answer and the server's token usage."""
    provider = make_provider(llamacpp_server)
    result = provider.chat(_request(PROMPT, max_tokens=12))
    assert result.content and result.content.strip()
    assert result.finish_reason in ("stop", "length")
    assert result.usage is not None
    assert result.usage.prompt_tokens and result.usage.prompt_tokens > 0
    assert result.usage.completion_tokens and 0 < result.usage.completion_tokens <= 12
    assert result.to_openai()["content"] == result.content


def test_list_models(llamacpp_server, make_provider):
    """/v1/models lists the one model under its alias."""
    models = make_provider(llamacpp_server).list_models()
    assert [m.name for m in models] == [MODEL]


def test_health_ok(llamacpp_server, make_provider):
    """health() is ok on a ready server (llama-cpp-python has no /health: /v1/models answers)."""
    status = make_provider(llamacpp_server).health()
    assert status.ok, status.error
    assert status.error is None
    assert status.latency_ms is not None and status.latency_ms >= 0
    assert status.base_url == llamacpp_server.base_url


def test_count_tokens_is_exact_not_estimated(llamacpp_server, make_provider):
    """count_tokens uses the server's tokenizer, which differs from ceil(chars / 4)."""
    provider = make_provider(llamacpp_server)
    request = _request(TOKEN_SAMPLE)
    counted = provider.count_tokens(request)
    estimate = approx_token_count(request)
    assert estimate == math.ceil(len(TOKEN_SAMPLE) / 4)
    assert counted > estimate * 1.5, (counted, estimate)
    if llamacpp_server.server == "native":
        # The templated prompt's count is what the server then really processes.
        usage = provider.chat(_request(TOKEN_SAMPLE, max_tokens=1)).usage
        assert usage is not None and counted == usage.prompt_tokens
    else:
        tokens = _post_json(llamacpp_server.base_url + "/extras/tokenize", {"input": TOKEN_SAMPLE})
        assert counted == len(tokens["tokens"])


def test_context_length_is_what_the_server_says(llamacpp_server, make_provider):
    """native: the -c it runs with (4096, not SmolLM2's trained 8192); py: what it says or None."""
    provider = make_provider(llamacpp_server)
    length = provider.context_length(MODEL)
    (info,) = provider.list_models()
    if llamacpp_server.server == "native":
        assert length == 4096 == llamacpp_server.ctx
        assert info.context_length == 4096
        assert info.details["meta"]["n_ctx_train"] == 8192  # SmolLM2-135M's GGUF metadata
    else:
        # llama-cpp-python 0.3.x has no /props and no n_ctx in /v1/models: it does not say.
        meta = info.details.get("meta")
        reported = meta.get("n_ctx") if isinstance(meta, dict) else None
        assert length == reported
        assert info.context_length == reported


def test_cancel_mid_generation(llamacpp_server, make_provider):
    """Cancelling a long generation ends it promptly, keeps the text, frees the server."""
    provider = make_provider(llamacpp_server)
    # Asked to repeat a long list, SmolLM2 answers at length on both servers; what it writes
    # varies, so the test keeps what was streamed before the cancel and compares with that.
    text = "Repeat these words: " + " ".join(f"word{i}" for i in range(150))
    cancel = threading.Event()
    stream = provider.chat_stream(_request(text, max_tokens=1500, cancel=cancel))
    pieces: list[str] = []
    cancelled_at = 0.0
    events = []
    for event in stream:
        events.append(event)
        if isinstance(event, TextEvent):
            pieces.append(event.value)
            if len(pieces) == 5:
                cancelled_at = time.monotonic()
                cancel.set()
    latency = time.monotonic() - cancelled_at
    assert cancelled_at, events
    assert events[-1] == FinishEvent("cancelled")
    assert latency < 2.0, latency
    assert len(pieces) >= 5 and "".join(pieces).strip()  # the partial answer is kept
    started = time.monotonic()
    after = provider.chat(_request(PROMPT, max_tokens=4))
    # 1500 tokens would take the server well over 10 s: it stopped generating.
    assert time.monotonic() - started < 10.0
    assert after.usage is not None and after.usage.completion_tokens


def test_chat_client_end_to_end(llamacpp_server, make_provider):
    """ChatClient over the real server: text streams and the chat completes."""
    client = ChatClient(make_provider(llamacpp_server), model=MODEL)
    options = GenerationOptions(max_tokens=12, temperature=0.0)
    events = list(client.chat(PROMPT, options=options))
    assert any(isinstance(e, TextEvent) and e.value for e in events)
    assert isinstance(events[-1], ChatFinishEvent)
    assert events[-1].reason == "complete", events

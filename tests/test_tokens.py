"""TokenCounter: the provider's tokenizer or ceil(chars / 4), and the model's context window.

Providers here are small ``BaseProvider`` subclasses that record what they were asked (the
counter is the code under test, they only play the server), plus the real ``LocalProvider``
asking a loopback Ollama stand-in for a model's context length.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, strategies as st
from support.ollama_support import json_answer, not_found, refuse_port, serve

from ollm_lite.errors import ConfigError, ConnectionFailed, OllmError
from ollm_lite.providers.base import BaseProvider, approx_token_count
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.tokens import TokenCheck, TokenCounter, estimate_tokens
from ollm_lite.types import (
    Message,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
    ToolCall,
    ToolSchema,
)


class Provider(BaseProvider):
    """A provider answering token counts and context lengths from a script."""

    name = "fake"

    def __init__(
        self,
        *,
        tokenizer: bool = False,
        count: Any = 7,
        context: dict[str, Any] | None = None,
        fail_context: BaseException | None = None,
    ) -> None:
        self.capabilities = ProviderCapabilities(token_counting=tokenizer)
        self._count = count
        self._context = context or {}
        self._fail_context = fail_context
        self.counted: list[ProviderRequest] = []
        self.asked: list[str] = []

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        raise AssertionError("the counter never sends a request")

    def count_tokens(self, request: ProviderRequest) -> int:
        self.counted.append(request)
        if isinstance(self._count, BaseException):
            raise self._count
        return self._count  # type: ignore[no-any-return]

    def context_length(self, model: str) -> int | None:
        self.asked.append(model)
        if self._fail_context is not None:
            raise self._fail_context
        return self._context.get(model)  # type: ignore[no-any-return]


def request(text: str = "hello world", model: str = "m", **kw: Any) -> ProviderRequest:
    return ProviderRequest(model=model, messages=[Message.user(text)], **kw)


# --------------------------------------------------------------------------- estimate


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2)])
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_estimate_covers_system_prompt_messages_tool_calls_and_schemas() -> None:
    schema = ToolSchema("get_weather", "Weather.", {"type": "object"})
    call = ToolCall.from_arguments("c1", "get_weather", {"city": "Oslo"})
    req = ProviderRequest(
        model="m",
        messages=[Message.user("x" * 10), Message.assistant("y" * 5, [call])],
        system_prompt="s" * 20,
        tools=[schema],
    )
    chars = 20 + 10 + 5 + len("get_weather") + len(call.arguments)
    chars += len("get_weather") + len("Weather.") + len('{"type":"object"}')
    assert TokenCounter(Provider()).count(req) == (math.ceil(chars / 4), False)


def test_count_is_at_least_one() -> None:
    assert TokenCounter(Provider()).count(ProviderRequest("m", [])) == (1, False)


# --------------------------------------------------------------------------- tokenizer


def test_provider_tokenizer_is_used_when_it_has_one() -> None:
    provider = Provider(tokenizer=True, count=1234)
    req = request("x" * 400)
    assert TokenCounter(provider).count(req) == (1234, True)
    assert provider.counted == [req]


def test_count_tokens_is_not_called_without_the_capability() -> None:
    provider = Provider(tokenizer=False, count=1234)
    assert TokenCounter(provider).count(request("x" * 40)) == (10, False)
    assert provider.counted == []


@pytest.mark.parametrize(
    "answer",
    [
        ConnectionFailed("down", url="http://x"),
        OllmError("odd"),
        RuntimeError("bug"),
        -1,
        "12",
        True,
        None,
        3.5,
    ],
)
def test_failing_or_odd_tokenizer_falls_back_to_the_estimate(answer: Any) -> None:
    provider = Provider(tokenizer=True, count=answer)
    assert TokenCounter(provider).count(request("x" * 40)) == (10, False)
    assert len(provider.counted) == 1


def test_zero_from_the_tokenizer_is_not_trusted() -> None:
    """The count is a positive integer; no real request is zero tokens long."""
    assert TokenCounter(Provider(tokenizer=True, count=0)).count(request("x" * 40)) == (10, False)


def test_an_adapter_without_capabilities_is_estimated() -> None:
    class Bare:
        name = "bare"

    assert TokenCounter(Bare()).count(request("x" * 40)) == (10, False)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- limits


def test_limit_precedence() -> None:
    provider = Provider(context={"big": 32768, "small": 2048})
    counter = TokenCounter(provider, context_limits={"big": 8192}, default_limit=1000)
    assert counter.limit("big") == 8192  # explicit configuration wins
    assert counter.limit("small") == 2048  # then the provider
    assert counter.limit("unknown") == 1000  # then the default
    assert "big" not in provider.asked


def test_default_limit_is_4096() -> None:
    assert TokenCounter.DEFAULT_LIMIT == 4096 and TokenCounter.WARNING_RATIO == 0.9
    assert TokenCounter(Provider()).limit("m") == 4096


def test_provider_limit_is_asked_once_per_model() -> None:
    provider = Provider(context={"a": 100})
    counter = TokenCounter(provider)
    assert [counter.limit("a"), counter.limit("a"), counter.limit("b"), counter.limit("b")] == [
        100,
        100,
        4096,
        4096,
    ]
    assert provider.asked == ["a", "b"]


@pytest.mark.parametrize("error", [ConnectionFailed("down"), RuntimeError("bug")])
def test_provider_limit_errors_are_ignored_and_asked_again(error: BaseException) -> None:
    provider = Provider(fail_context=error)
    counter = TokenCounter(provider)
    assert counter.limit("a") == 4096 and counter.limit("a") == 4096
    assert provider.asked == ["a", "a"]


@pytest.mark.parametrize("odd", [0, -5, True, "8192", 1.5])
def test_odd_provider_limits_are_ignored(odd: Any) -> None:
    assert TokenCounter(Provider(context={"m": odd})).limit("m") == 4096


@pytest.mark.parametrize(
    "kwargs",
    [
        {"context_limits": {"m": 0}},
        {"context_limits": {"m": -1}},
        {"context_limits": {"m": "4096"}},
        {"context_limits": {"m": True}},
        {"default_limit": 0},
        {"default_limit": 1.5},
    ],
)
def test_bad_configuration(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        TokenCounter(Provider(), **kwargs)
    assert info.value.code == "CONFIG_INVALID"


# --------------------------------------------------------------------------- checks


@pytest.mark.parametrize(
    ("tokens", "limit", "warning", "exceeded"),
    [
        (0, 100, False, False),
        (89, 100, False, False),
        (90, 100, True, False),
        (100, 100, True, False),
        (101, 100, True, True),
        (3687, 4096, True, False),  # 90.01 %
        (3686, 4096, False, False),  # 89.99 %
    ],
)
def test_token_check_thresholds(tokens: int, limit: int, warning: bool, exceeded: bool) -> None:
    check = TokenCheck(tokens=tokens, limit=limit, exact=False)
    assert (check.warning, check.exceeded) == (warning, exceeded)
    assert check.ratio == tokens / limit


def test_check_combines_count_and_limit() -> None:
    provider = Provider(tokenizer=True, count=950, context={"m": 1000})
    assert TokenCounter(provider).check(request()) == TokenCheck(950, 1000, True)
    assert TokenCounter(Provider(), context_limits={"m": 3}).check(request("x" * 16)) == (
        TokenCheck(4, 3, False)
    )


def test_counter_is_thread_safe() -> None:
    provider = Provider(context={f"m{i}": 100 + i for i in range(20)})
    counter = TokenCounter(provider)
    results: list[int] = []

    def work(i: int) -> None:
        results.append(counter.limit(f"m{i % 20}"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(set(results)) == [100 + i for i in range(20)]


def test_nothing_is_sent_while_counting() -> None:
    """Counting and checking never starts a chat request (Provider.chat_stream would fail)."""
    counter = TokenCounter(Provider(tokenizer=True, count=5))
    assert counter.check(request()).tokens == 5


# --------------------------------------------------------------------------- a real provider


SHOW = {
    "modelfile": "",
    "details": {"family": "llama", "parameter_size": "3.2B"},
    "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
    "capabilities": ["completion", "tools"],
}


def test_limit_from_a_loopback_ollama() -> None:
    """LocalProvider reads the window from /api/show; the counter asks once and estimates."""
    routes = {
        ("POST", "/api/show"): json_answer(SHOW),
        ("GET", "/api/ps"): json_answer({"models": []}),
    }
    with serve(routes) as server:
        provider = LocalProvider(base_url=server.url)
        counter = TokenCounter(provider)
        req = request("x" * 4000, model="llama3.2")
        check = counter.check(req)
        assert check == TokenCheck(tokens=approx_token_count(req), limit=131072, exact=False)
        assert counter.check(req).limit == 131072
        shows = [s for s in server.seen if s.path == "/api/show"]
        assert len(shows) == 1 and shows[0].json == {"model": "llama3.2"}
        assert all(s.path != "/api/chat" for s in server.seen)


def test_limit_when_the_model_is_missing_or_the_server_down() -> None:
    with serve({("POST", "/api/show"): not_found}) as server:
        assert TokenCounter(LocalProvider(base_url=server.url)).limit("nope") == 4096
    down = LocalProvider(base_url=f"http://127.0.0.1:{refuse_port()}", retries=0)
    assert TokenCounter(down, default_limit=2048).limit("m") == 2048


# --------------------------------------------------------------------------- last lines that fit


def _scripted(limit: int, per_char: bool = False) -> ScriptedProvider:
    """A provider with a window of ``limit`` whose tokenizer counts characters (or estimates)."""
    counter = (lambda r: sum(len(m.text or "") for m in r.messages)) if per_char else None
    return ScriptedProvider([], context_length=limit, token_counter=counter)


@given(
    lines=st.lists(st.text(alphabet="abc xyz\t", max_size=30).map(lambda t: t + "\n"), max_size=40),
    limit=st.integers(min_value=1, max_value=400),
    reserve=st.integers(min_value=0, max_value=50),
    per_char=st.booleans(),
)
def test_last_lines_that_fit_keeps_the_longest_tail_that_fits(
    lines: list[str], limit: int, reserve: int, per_char: bool
) -> None:
    """The kept tail fits with ``reserve`` to spare; one line more would not."""
    counter = TokenCounter(_scripted(limit, per_char))

    def make(text: str) -> ProviderRequest:
        return request("Summarise:\n" + text)

    fitted = counter.last_lines_that_fit(lines, make, reserve=reserve)
    assert fitted.total == len(lines) and fitted.kept + fitted.dropped == len(lines)
    assert fitted.text == ("".join(lines[len(lines) - fitted.kept :]) if fitted.kept else "")
    if fitted.kept:
        assert fitted.check is not None
        assert fitted.check.tokens + reserve <= limit
        assert fitted.check == counter.check(make(fitted.text))
    else:
        assert fitted.check is None
    if fitted.kept < len(lines):
        one_more = counter.check(make("".join(lines[len(lines) - fitted.kept - 1 :])))
        assert one_more.tokens + reserve > limit


def test_last_lines_that_fit_uses_the_providers_tokenizer_and_window() -> None:
    """1 000 lines of 10 characters in a 2 000-token window with a 500-token reserve."""
    counter = TokenCounter(_scripted(2000, per_char=True))
    lines = [f"{i:09d}\n" for i in range(1000)]
    fitted = counter.last_lines_that_fit(lines, lambda t: request(t), reserve=500)
    assert fitted.kept == 150 and fitted.text.startswith("000000850\n")
    assert fitted.check is not None and fitted.check.exact and fitted.check.tokens == 1500


def test_last_lines_that_fit_nothing_fits_and_bad_reserve() -> None:
    counter = TokenCounter(_scripted(10, per_char=True))
    fitted = counter.last_lines_that_fit(["x" * 50 + "\n"], lambda t: request(t))
    assert (fitted.text, fitted.kept, fitted.dropped, fitted.check) == ("", 0, 1, None)
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError) as info:
            counter.last_lines_that_fit([], lambda t: request(t), reserve=bad)  # type: ignore[arg-type]
        assert info.value.code == "CONFIG_INVALID"

"""What every HTTP provider shares through ``HTTPProvider``: the same checks of the arguments
they all take, and the same ``repr`` that names the server but never the key."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from support.transport_support import serve, silent

from ollm_lite.errors import ConfigError, RequestTimeout
from ollm_lite.http.policy import Timeouts
from ollm_lite.providers import (
    AnthropicProvider,
    GeminiProvider,
    LocalProvider,
    OpenAICompatibleProvider,
    VllmProvider,
)
from ollm_lite.providers._http import HTTPProvider
from ollm_lite.types import Message, ProviderRequest

URL = "http://127.0.0.1:9"

FACTORIES: dict[str, Callable[..., HTTPProvider]] = {
    "local": lambda **kw: LocalProvider(base_url=URL, **kw),
    "openai-compatible": lambda **kw: OpenAICompatibleProvider(base_url=URL, **kw),
    "vllm": lambda **kw: VllmProvider(base_url=URL, **kw),
    "gemini": lambda **kw: GeminiProvider(base_url=URL, **kw),
    "anthropic": lambda **kw: AnthropicProvider(base_url=URL, **kw),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("retries", [-1, "2", 1.5, True])
def test_every_provider_checks_retries_the_same_way(name: str, retries: Any) -> None:
    with pytest.raises(ConfigError) as info:
        FACTORIES[name](retries=retries)
    assert info.value.code == "CONFIG_INVALID"
    assert "retries" in info.value.message


@pytest.mark.parametrize("name", ["local", "openai-compatible", "vllm"])
@pytest.mark.parametrize("size", [0, -3, "8", True])
def test_embed_batch_size_must_be_a_positive_integer(name: str, size: Any) -> None:
    with pytest.raises(ConfigError) as info:
        FACTORIES[name](embed_batch_size=size)
    assert "embed_batch_size" in info.value.message


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_valid_arguments_are_accepted(name: str) -> None:
    provider = FACTORIES[name](retries=0, api_key="sk-secret-value-123")
    assert provider.base_url == URL
    assert provider.name == name
    assert "sk-secret" not in repr(provider)
    assert URL in repr(provider)
    provider.close()


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("keyword", ["idle_timeout", "timeout"])
def test_idle_timeout_bounds_the_wait_for_the_server_and_timeout_is_its_older_name(
    name: str, keyword: str
) -> None:
    """A server that accepts and never answers: the idle limit given either way ends the wait."""
    cls = {
        "local": LocalProvider,
        "openai-compatible": OpenAICompatibleProvider,
        "vllm": VllmProvider,
        "gemini": GeminiProvider,
        "anthropic": AnthropicProvider,
    }[name]
    with serve({}, fallback=silent) as server:
        provider: HTTPProvider = cls(base_url=server.url, api_key="k", retries=0, **{keyword: 0.3})
        with pytest.raises(RequestTimeout) as info:
            provider.chat(ProviderRequest("m", [Message.user("hi")]))
        provider.close()
    assert info.value.details["idle_timeout"] == 0.3


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_timeout_and_idle_timeout_may_both_be_given_only_when_they_agree(name: str) -> None:
    for timeout in (30, 30.0, Timeouts(connect=1.0, idle=30.0)):
        FACTORIES[name](timeout=timeout, idle_timeout=30).close()
    for timeout in (10, Timeouts(idle=10.0)):
        with pytest.raises(ConfigError) as info:
            FACTORIES[name](timeout=timeout, idle_timeout=30)
        assert info.value.code == "CONFIG_INVALID"
        assert "timeout (10 s idle)" in info.value.message
        assert "idle_timeout (30 s)" in info.value.message


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("idle", [0, -1.5, "5", True, math.inf, math.nan])
def test_idle_timeout_must_be_a_positive_number_of_seconds(name: str, idle: Any) -> None:
    with pytest.raises(ConfigError) as info:
        FACTORIES[name](idle_timeout=idle)
    assert info.value.message.startswith("idle_timeout must be a positive number of seconds")

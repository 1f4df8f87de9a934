"""What every HTTP provider shares through ``HTTPProvider``: the same checks of the arguments
they all take, and the same ``repr`` that names the server but never the key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ollm_lite.errors import ConfigError
from ollm_lite.providers import (
    GeminiProvider,
    LocalProvider,
    OpenAICompatibleProvider,
    VllmProvider,
)
from ollm_lite.providers._http import HTTPProvider

URL = "http://127.0.0.1:9"

FACTORIES: dict[str, Callable[..., HTTPProvider]] = {
    "local": lambda **kw: LocalProvider(base_url=URL, **kw),
    "openai-compatible": lambda **kw: OpenAICompatibleProvider(base_url=URL, **kw),
    "vllm": lambda **kw: VllmProvider(base_url=URL, **kw),
    "gemini": lambda **kw: GeminiProvider(base_url=URL, **kw),
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

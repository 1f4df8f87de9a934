"""Backends are strategies: the OpenAI-compatible provider asks its backend, by no name.

A backend the provider has never heard of (a subclass written here) decides token counting,
context length, per-model capabilities and the model list all the same; the configuration
accepts exactly the presets of the one backend table, under their own names and aliases.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import get_args

import pytest

from ollm_lite.config import BACKENDS as CONFIG_BACKENDS, PROVIDER_ALIASES
from ollm_lite.errors import BadResponse, ConfigError
from ollm_lite.providers._backend_base import Backend, Question
from ollm_lite.providers.backends import BACKENDS, OPENAI_COMPATIBLE_BACKENDS, BackendName
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.providers.vllm import VllmProvider
from ollm_lite.registry import OPENAI_COMPATIBLE_PRESETS
from ollm_lite.types import Message, ModelInfo, ProviderCapabilities, ProviderRequest

REQUEST = ProviderRequest(model="m", messages=[Message.user("hello")])


class Recording(Backend):
    """A backend no provider knows by name; it answers from memory and records each Ask."""

    __slots__ = ()
    token_counting = True
    asked: list[tuple[str, threading.Event | None]] = []  # noqa: RUF012 (shared on purpose)

    def count_tokens(self, ask: Question, request: ProviderRequest) -> int:
        self.asked.append(("count_tokens", ask.cancel))
        return 42

    def context_length(self, ask: Question, model: str) -> int | None:
        self.asked.append(("context_length", ask.cancel))
        if model == "broken":
            raise BadResponse("the server said nonsense")
        return 8192

    def model_capabilities(self, ask: Question, model: str) -> ProviderCapabilities:
        self.asked.append(("model_capabilities", ask.cancel))
        return replace(ask.host.capabilities, vision=True)

    def annotate_models(self, ask: Question, models: list[ModelInfo]) -> None:
        for info in models:
            info.details["annotated"] = True


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> OpenAICompatibleProvider:
    Recording.asked.clear()
    backend = Recording(name="recording", title="Recording", default_base_url="http://x.test")
    p = OpenAICompatibleProvider(base_url="http://x.test", retries=0)
    p.backend = backend
    monkeypatch.setattr(p, "_json", lambda *a, **k: {"data": [{"id": "m"}]})
    return p


def test_the_provider_asks_its_backend_and_passes_cancel(
    provider: OpenAICompatibleProvider,
) -> None:
    cancel = threading.Event()
    assert provider.count_tokens(REQUEST, cancel=cancel) == 42
    assert provider.context_length("m", cancel=cancel) == 8192
    assert provider.model_capabilities("m", cancel=cancel).vision is True
    assert Recording.asked == [
        ("count_tokens", cancel),
        ("context_length", cancel),
        ("model_capabilities", cancel),
    ]


def test_count_tokens_without_cancel_uses_the_requests_own(
    provider: OpenAICompatibleProvider,
) -> None:
    own = threading.Event()
    provider.count_tokens(replace(REQUEST, cancel=own))
    assert Recording.asked == [("count_tokens", own)]


def test_windows_are_cached_and_failures_are_not(provider: OpenAICompatibleProvider) -> None:
    assert provider.context_length("m") == provider.context_length("m") == 8192
    assert provider.context_length("broken") is None
    assert provider.context_length("broken") is None
    assert [name for name, _ in Recording.asked] == ["context_length"] * 3


def test_the_backend_completes_the_model_list(provider: OpenAICompatibleProvider) -> None:
    [info] = provider.list_models()
    assert info.name == "m" and info.details["annotated"] is True


def test_capabilities_come_from_the_backends_facts() -> None:
    for name in OPENAI_COMPATIBLE_BACKENDS:
        backend = BACKENDS[name]
        caps = OpenAICompatibleProvider(backend=name).capabilities
        assert caps.token_counting is type(backend).token_counting
        assert caps.thinking is backend.thinking
        assert caps.guided_decoding is backend.guided_decoding


def test_the_backend_names_are_the_tables() -> None:
    """The names a type checker accepts, and the ``backend=`` choices of the generic
    provider, are the table's: every preset but the one with a provider of its own."""
    assert set(get_args(BackendName)) == set(BACKENDS)
    assert (
        tuple(name for name, backend in BACKENDS.items() if not backend.own_provider)
        == OPENAI_COMPATIBLE_BACKENDS
    )
    assert [name for name, backend in BACKENDS.items() if backend.own_provider] == ["vllm"]
    assert VllmProvider().backend is BACKENDS["vllm"]
    for name in OPENAI_COMPATIBLE_BACKENDS:
        assert OpenAICompatibleProvider(backend=name).backend is BACKENDS[name]
    with pytest.raises(ConfigError) as info:
        OpenAICompatibleProvider(backend="vllm")
    assert info.value.details["valid"] == list(OPENAI_COMPATIBLE_BACKENDS)


def test_configuration_reads_the_one_table() -> None:
    assert CONFIG_BACKENDS == OPENAI_COMPATIBLE_BACKENDS
    assert set(OPENAI_COMPATIBLE_PRESETS) == set(OPENAI_COMPATIBLE_BACKENDS) - {"generic"}
    expected = {
        alias: ("openai-compatible", name)
        for name in OPENAI_COMPATIBLE_PRESETS
        for alias in (name, *BACKENDS[name].aliases)
    }
    presets = {k: v for k, v in PROVIDER_ALIASES.items() if v[1] is not None}
    assert presets == expected
    assert PROVIDER_ALIASES["koboldcpp"] == ("openai-compatible", "kobold")
    assert PROVIDER_ALIASES["llama.cpp"] == ("openai-compatible", "llamacpp")

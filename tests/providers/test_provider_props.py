"""Optional method presence, model-management half, over the real providers.

A provider that supports model management defines the methods to list, pull, delete and show
models. In this library every built-in provider defines
all four (the ``ProviderAdapter`` protocol has them); a provider whose capabilities say
``model_management=False`` answers the ones it cannot do with ``UnsupportedOperation``
(``UNSUPPORTED_OPERATION``, also a ``NotImplementedError``) — never ``AttributeError`` — and
decides that before sending anything.

Every provider points at a loopback port nobody listens on: had one sent a request, the answer
would be ``CONNECTION_FAILED``, not ``UNSUPPORTED_OPERATION``, and the test would fail. The
token-counting half is in tests/providers/test_scripted.py.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable

import pytest
from hypothesis import given, settings, strategies as st

from ollm_lite.errors import UnsupportedOperation
from ollm_lite.providers.anthropic import AnthropicProvider
from ollm_lite.providers.backends import OPENAI_COMPATIBLE_BACKENDS
from ollm_lite.providers.base import BaseProvider, ProviderAdapter
from ollm_lite.providers.gemini import GeminiProvider
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.providers.vllm import VllmProvider
from ollm_lite.types import PullProgress

MODEL_METHODS = ("list_models", "show_model", "pull_model", "delete_model")
# What no provider without model management can do: change the server's set of models.
MANAGING_METHODS = ("pull_model", "delete_model")


@functools.cache
def closed_url() -> str:
    """A loopback URL with nothing listening (the port was just free)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


FACTORIES: dict[str, Callable[[], BaseProvider]] = {
    "local": lambda: LocalProvider(base_url=closed_url(), retries=0, timeout=2),
    "vllm": lambda: VllmProvider(base_url=closed_url(), retries=0, timeout=2),
    **{
        f"openai-compatible/{backend}": functools.partial(
            OpenAICompatibleProvider, base_url=closed_url(), backend=backend, retries=0, timeout=2
        )
        for backend in OPENAI_COMPATIBLE_BACKENDS
    },
    "gemini": lambda: GeminiProvider(
        api_key="dummy-key-for-tests", base_url=closed_url(), retries=0, timeout=2
    ),
    "anthropic": lambda: AnthropicProvider(
        api_key="dummy-key-for-tests", base_url=closed_url(), retries=0, timeout=2
    ),
    "scripted": ScriptedProvider,
}


@functools.cache
def provider(key: str) -> BaseProvider:
    return FACTORIES[key]()


@pytest.mark.parametrize("key", sorted(FACTORIES))
def test_every_provider_defines_the_model_methods(key: str) -> None:
    """Optional method presence: all four model methods exist on every provider,
    and a provider reporting ``model_management`` implements each itself."""
    p = provider(key)
    assert isinstance(p, ProviderAdapter)
    for method in MODEL_METHODS:
        assert callable(getattr(p, method)), (key, method)  # never AttributeError
    if p.capabilities.model_management:
        inherited = [m for m in MODEL_METHODS if getattr(type(p), m) is getattr(BaseProvider, m)]
        assert inherited == [], key


def test_model_management_is_reported_where_it_exists() -> None:
    """Ollama manages models; the OpenAI-style servers, Gemini, the Messages API and the
    script do not."""
    managing = {key for key in FACTORIES if provider(key).capabilities.model_management}
    assert managing == {"local"}


model_names = st.text(min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(sorted(k for k in FACTORIES if k != "local")),
    st.sampled_from(MODEL_METHODS),
    model_names,
)
def test_unsupported_model_methods_raise_unsupported_operation(
    key: str, method: str, name: str
) -> None:
    """Without ``model_management``, pulling and deleting (and listing/showing
    where the provider has no such endpoint) raise ``UnsupportedOperation`` naming the
    provider, before any request."""
    p = provider(key)
    assert not p.capabilities.model_management
    supported = getattr(type(p), method) is not getattr(BaseProvider, method)
    if method in MANAGING_METHODS:
        assert not supported, (key, method)
    if supported:
        return  # a real read of the server (e.g. GET /v1/models): not this property's concern
    progress: list[PullProgress] = []
    call: Callable[[], object] = {
        "list_models": lambda: p.list_models(),
        "show_model": lambda: p.show_model(name),
        "pull_model": lambda: p.pull_model(name, on_progress=progress.append),
        "delete_model": lambda: p.delete_model(name),
    }[method]
    with pytest.raises(UnsupportedOperation) as info:
        call()
    assert info.value.code == "UNSUPPORTED_OPERATION"
    assert isinstance(info.value, NotImplementedError)
    assert info.value.provider == p.name
    assert p.name in str(info.value)
    assert progress == []

"""Provider adapters: one module per backend, all behind :class:`ProviderAdapter`.

``from ollm_lite.providers import LocalProvider`` works for every adapter; each module loads on
first use, so importing this package costs nothing until a provider is needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name → the module (in this package) that defines it.
_EXPORTS: dict[str, str] = {
    "AnthropicProvider": "anthropic",
    "ProviderAdapter": "base",
    "LocalProvider": "ollama",
    "OpenAICompatibleProvider": "openai_compat",
    "VllmProvider": "vllm",
    "GeminiProvider": "gemini",
    "ScriptedProvider": "scripted",
    "ScriptedTurn": "scripted",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ollm_lite.providers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from .anthropic import AnthropicProvider as AnthropicProvider
    from .base import ProviderAdapter as ProviderAdapter
    from .gemini import GeminiProvider as GeminiProvider
    from .ollama import LocalProvider as LocalProvider
    from .openai_compat import OpenAICompatibleProvider as OpenAICompatibleProvider
    from .scripted import ScriptedProvider as ScriptedProvider, ScriptedTurn as ScriptedTurn
    from .vllm import VllmProvider as VllmProvider

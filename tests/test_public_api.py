"""The public surface: every name in __all__ resolves, sorted, and importing is cheap."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest

import ollm_lite

#: Every name the package root promises (the README's API sections and ``ollm_lite.__all__``).
API_NAMES = str.split("""
Role Part TextPart ImagePart Message ToolSchema ToolCall ToolResult GenerationOptions
ProviderRequest Usage ErrorInfo ModelInfo PullProgress HealthStatus ProviderCapabilities
ChatResult EmbeddingResult TextEvent ThinkingEvent ToolCallEvent FinishEvent ErrorEvent
ProviderEvent ChatEvent ToolCallStartEvent ToolCallResultEvent TurnCompleteEvent WarningEvent
ChatFinishEvent RunResult ProviderAdapter LocalProvider VllmProvider OpenAICompatibleProvider
GeminiProvider AnthropicProvider ScriptedProvider iter_sse iter_ndjson SSEEvent ProviderRegistry
default_registry
tool Tool ToolRegistry ChatClient Conversation TokenCounter ReActToolHandler OllmError
ConnectionFailed RequestTimeout HTTPStatusError AuthenticationError RateLimited ModelNotFound
BadResponse Cancelled ConfigError ProviderNotFound TokenLimitExceeded UnsupportedOperation
load_config validate_config Config ConfigIssue
open_log CallLog LoggedCall CallStats
""")
PROVIDER_NAMES = [
    "ProviderAdapter",
    "LocalProvider",
    "VllmProvider",
    "OpenAICompatibleProvider",
    "GeminiProvider",
    "AnthropicProvider",
    "ScriptedProvider",
]


def test_all_is_sorted_casefold() -> None:
    """httpx's guard: __all__ is sorted so additions are reviewed in one place."""
    assert ollm_lite.__all__ == sorted(ollm_lite.__all__, key=str.casefold)


def test_every_exported_name_resolves() -> None:
    """Each name in __all__ is importable from the package root."""
    for name in ollm_lite.__all__:
        value = getattr(ollm_lite, name)
        assert value is not None, name
        if typing.get_origin(value) is None:  # type aliases (Role, Part, ...) live in typing
            module = getattr(value, "__module__", "ollm_lite")
            assert module.startswith("ollm_lite"), (name, module)


def test_every_name_of_the_api_contract_is_exported() -> None:
    missing = sorted(set(API_NAMES) - set(ollm_lite.__all__))
    assert not missing


@pytest.mark.parametrize("name", PROVIDER_NAMES)
def test_providers_are_importable_from_the_providers_package(name: str) -> None:
    """``ollm_lite.providers`` is public (README, Providers): ``from ollm_lite.providers import X``
    works."""
    code = (
        f"from ollm_lite.providers import {name}; import ollm_lite; "
        f"print({name} is ollm_lite.{name})"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "True"


def test_importing_the_providers_package_loads_no_provider() -> None:
    code = (
        "import sys, ollm_lite.providers as p; "
        "print(sorted(m for m in sys.modules if m.startswith('ollm_lite.providers.')), "
        "'requests' in sys.modules, sorted(p.__all__) == sorted(dir(p)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[] False True"


def test_unknown_attribute_is_attribute_error() -> None:
    """A missing name raises AttributeError, not ImportError."""
    try:
        ollm_lite.does_not_exist  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_import_runs_nothing_heavy() -> None:
    """`import ollm_lite` loads neither requests nor any provider until one is used."""
    code = (
        "import sys, ollm_lite; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('requests', 'urllib3', 'ollm_lite')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "requests" not in out and "urllib3" not in out
    assert "ollm_lite.providers" not in out

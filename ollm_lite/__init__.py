"""ollm_lite: a small, synchronous client for local and hosted LLM servers.

One interface to Ollama, vLLM, OpenAI-compatible servers (LM Studio, llama.cpp, LocalAI,
KoboldCpp) and Google Gemini: blocking generators for streaming, a ``threading.Event`` for
cancellation, dataclasses for data.

Every public name is listed in ``__all__`` and resolved on first use (``_EXPORTS`` says from
which module), so ``import ollm_lite`` stays cheaper than importing ``requests`` itself: the
HTTP stack loads only when a provider is first used. Nothing else runs at import time.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

#: Public name → the module that defines it.
_EXPORTS: dict[str, str] = {
    # data
    "ChatFinishEvent": "types",
    "ChatResult": "types",
    "EmbeddingResult": "types",
    "ErrorEvent": "types",
    "ErrorInfo": "types",
    "FinishEvent": "types",
    "GenerationOptions": "types",
    "HealthStatus": "types",
    "ImagePart": "types",
    "Message": "types",
    "ModelInfo": "types",
    "ProviderCapabilities": "types",
    "ProviderRequest": "types",
    "PullProgress": "types",
    "RunResult": "types",
    "TextEvent": "types",
    "TextPart": "types",
    "ThinkingEvent": "types",
    "ToolCall": "types",
    "ToolCallEvent": "types",
    "ToolCallResultEvent": "types",
    "ToolCallStartEvent": "types",
    "ToolResult": "types",
    "ToolSchema": "types",
    "TurnCompleteEvent": "types",
    "Usage": "types",
    "WarningEvent": "types",
    # errors
    "AuthenticationError": "errors",
    "BadResponse": "errors",
    "Cancelled": "errors",
    "ConfigError": "errors",
    "ConnectionFailed": "errors",
    "HTTPStatusError": "errors",
    "ModelNotFound": "errors",
    "OllmError": "errors",
    "ProviderNotFound": "errors",
    "RateLimited": "errors",
    "RequestTimeout": "errors",
    "TokenLimitExceeded": "errors",
    "UnsupportedOperation": "errors",
    # wire
    "SSEEvent": "streams",
    "iter_ndjson": "streams",
    "iter_sse": "streams",
    "RetryPolicy": "transport",
    "Timeouts": "transport",
    # providers
    "ProviderAdapter": "providers.base",
    "LocalProvider": "providers.ollama",
    "OpenAICompatibleProvider": "providers.openai_compat",
    "VllmProvider": "providers.vllm",
    "GeminiProvider": "providers.gemini",
    "ScriptedProvider": "providers.scripted",
    "ScriptedTurn": "providers.scripted",
    # runtime
    "ProviderRegistry": "registry",
    "default_registry": "registry",
    "Tool": "tools",
    "ToolDefinitionError": "tools",
    "ToolRegistry": "tools",
    "tool": "tools",
    "ReActToolHandler": "react",
    "TokenCounter": "tokens",
    "ChatClient": "chat",
    "Conversation": "chat",
    "Turn": "chat",
    # configuration
    "Config": "config",
    "ConfigIssue": "config",
    "ProviderConfig": "config",
    "load_config": "config",
    "validate_config": "config",
}

__all__ = sorted([*_EXPORTS, "__version__"], key=str.casefold)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ollm_lite' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # explicit imports for type checkers and IDEs
    from .chat import ChatClient, Conversation, Turn
    from .config import Config, ConfigIssue, ProviderConfig, load_config, validate_config
    from .errors import (
        AuthenticationError,
        BadResponse,
        Cancelled,
        ConfigError,
        ConnectionFailed,
        HTTPStatusError,
        ModelNotFound,
        OllmError,
        ProviderNotFound,
        RateLimited,
        RequestTimeout,
        TokenLimitExceeded,
        UnsupportedOperation,
    )
    from .providers.base import ProviderAdapter
    from .providers.gemini import GeminiProvider
    from .providers.ollama import LocalProvider
    from .providers.openai_compat import OpenAICompatibleProvider
    from .providers.scripted import ScriptedProvider, ScriptedTurn
    from .providers.vllm import VllmProvider
    from .react import ReActToolHandler
    from .registry import ProviderRegistry, default_registry
    from .streams import SSEEvent, iter_ndjson, iter_sse
    from .tokens import TokenCounter
    from .tools import Tool, ToolDefinitionError, ToolRegistry, tool
    from .transport import RetryPolicy, Timeouts
    from .types import (
        ChatFinishEvent,
        ChatResult,
        EmbeddingResult,
        ErrorEvent,
        ErrorInfo,
        FinishEvent,
        GenerationOptions,
        HealthStatus,
        ImagePart,
        Message,
        ModelInfo,
        ProviderCapabilities,
        ProviderRequest,
        PullProgress,
        RunResult,
        TextEvent,
        TextPart,
        ThinkingEvent,
        ToolCall,
        ToolCallEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
        ToolResult,
        ToolSchema,
        TurnCompleteEvent,
        Usage,
        WarningEvent,
    )

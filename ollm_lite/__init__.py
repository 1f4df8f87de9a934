"""ollm_lite: a small, synchronous client for local and hosted LLM servers.

One interface to Ollama, vLLM, OpenAI-compatible servers (LM Studio, llama.cpp, LocalAI,
KoboldCpp), Google Gemini and Anthropic's Messages API (Claude, and the local servers that
speak it): blocking generators for streaming, a ``threading.Event`` for
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
    "ChatEvent": "types",
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
    "Part": "types",
    "ProviderCapabilities": "types",
    "ProviderEvent": "types",
    "ProviderRequest": "types",
    "PullProgress": "types",
    "Role": "types",
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
    "BudgetExceeded": "errors",
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
    "RetryPolicy": "http.policy",
    "Timeouts": "http.policy",
    # providers
    "ProviderAdapter": "providers.base",
    "LocalProvider": "providers.ollama",
    "OpenAICompatibleProvider": "providers.openai_compat",
    "VllmProvider": "providers.vllm",
    "GeminiProvider": "providers.gemini",
    "AnthropicProvider": "providers.anthropic",
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
    # the script API
    "Client": "client",
    "Reply": "client._run_call",
    "Session": "client._session",
    "ask": "client",
    "connect": "client",
    "load_session": "client",
    "stream": "client",
    "Conversation": "chat",
    "Turn": "chat",
    # configuration
    "Config": "config",
    "ConfigIssue": "config",
    "ProviderConfig": "config",
    "load_config": "config",
    "validate_config": "config",
    # tools from MCP servers
    "McpAuth": "mcp",
    "McpServer": "mcp",
    "mcp_tools": "mcp",
    # batches and fleets
    "BatchSummary": "batch",
    "run_batch": "batch",
    # the call log
    "CallLog": "call_log",
    "CallStats": "call_log",
    "LoggedCall": "call_log",
    "open_log": "call_log",
    # costs, budgets and rate limits
    "Budget": "gate",
    "RateLimit": "gate",
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


if TYPE_CHECKING:  # explicit re-exports (``X as X``) for type checkers and IDEs
    from .batch import (
        BatchSummary as BatchSummary,
        run_batch as run_batch,
    )
    from .call_log import (
        CallLog as CallLog,
        CallStats as CallStats,
        LoggedCall as LoggedCall,
        open_log as open_log,
    )
    from .chat import (
        ChatClient as ChatClient,
        Conversation as Conversation,
        Turn as Turn,
    )
    from .client import (
        Client as Client,
        ask as ask,
        connect as connect,
        load_session as load_session,
        stream as stream,
    )
    from .client._run_call import (
        Reply as Reply,
    )
    from .client._session import (
        Session as Session,
    )
    from .config import (
        Config as Config,
        ConfigIssue as ConfigIssue,
        ProviderConfig as ProviderConfig,
        load_config as load_config,
        validate_config as validate_config,
    )
    from .errors import (
        AuthenticationError as AuthenticationError,
        BadResponse as BadResponse,
        BudgetExceeded as BudgetExceeded,
        Cancelled as Cancelled,
        ConfigError as ConfigError,
        ConnectionFailed as ConnectionFailed,
        HTTPStatusError as HTTPStatusError,
        ModelNotFound as ModelNotFound,
        OllmError as OllmError,
        ProviderNotFound as ProviderNotFound,
        RateLimited as RateLimited,
        RequestTimeout as RequestTimeout,
        TokenLimitExceeded as TokenLimitExceeded,
        UnsupportedOperation as UnsupportedOperation,
    )
    from .gate import (
        Budget as Budget,
        RateLimit as RateLimit,
    )
    from .http.policy import (
        RetryPolicy as RetryPolicy,
        Timeouts as Timeouts,
    )
    from .mcp import (
        McpAuth as McpAuth,
        McpServer as McpServer,
        mcp_tools as mcp_tools,
    )
    from .providers.anthropic import (
        AnthropicProvider as AnthropicProvider,
    )
    from .providers.base import (
        ProviderAdapter as ProviderAdapter,
    )
    from .providers.gemini import (
        GeminiProvider as GeminiProvider,
    )
    from .providers.ollama import (
        LocalProvider as LocalProvider,
    )
    from .providers.openai_compat import (
        OpenAICompatibleProvider as OpenAICompatibleProvider,
    )
    from .providers.scripted import (
        ScriptedProvider as ScriptedProvider,
        ScriptedTurn as ScriptedTurn,
    )
    from .providers.vllm import (
        VllmProvider as VllmProvider,
    )
    from .react import (
        ReActToolHandler as ReActToolHandler,
    )
    from .registry import (
        ProviderRegistry as ProviderRegistry,
        default_registry as default_registry,
    )
    from .streams import (
        SSEEvent as SSEEvent,
        iter_ndjson as iter_ndjson,
        iter_sse as iter_sse,
    )
    from .tokens import (
        TokenCounter as TokenCounter,
    )
    from .tools import (
        Tool as Tool,
        ToolDefinitionError as ToolDefinitionError,
        ToolRegistry as ToolRegistry,
        tool as tool,
    )
    from .types import (
        ChatEvent as ChatEvent,
        ChatFinishEvent as ChatFinishEvent,
        ChatResult as ChatResult,
        EmbeddingResult as EmbeddingResult,
        ErrorEvent as ErrorEvent,
        ErrorInfo as ErrorInfo,
        FinishEvent as FinishEvent,
        GenerationOptions as GenerationOptions,
        HealthStatus as HealthStatus,
        ImagePart as ImagePart,
        Message as Message,
        ModelInfo as ModelInfo,
        Part as Part,
        ProviderCapabilities as ProviderCapabilities,
        ProviderEvent as ProviderEvent,
        ProviderRequest as ProviderRequest,
        PullProgress as PullProgress,
        Role as Role,
        RunResult as RunResult,
        TextEvent as TextEvent,
        TextPart as TextPart,
        ThinkingEvent as ThinkingEvent,
        ToolCall as ToolCall,
        ToolCallEvent as ToolCallEvent,
        ToolCallResultEvent as ToolCallResultEvent,
        ToolCallStartEvent as ToolCallStartEvent,
        ToolResult as ToolResult,
        ToolSchema as ToolSchema,
        TurnCompleteEvent as TurnCompleteEvent,
        Usage as Usage,
        WarningEvent as WarningEvent,
    )

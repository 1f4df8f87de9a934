"""What one model call carries and returns: ``ProviderRequest`` and the results.

Public through :mod:`ollm_lite.types`, which re-exports every name here: the request
(``GenerationOptions``, ``ProviderRequest``), what providers answer (``Usage``, ``ChatResult``,
``ModelInfo``, ``PullProgress``, ``HealthStatus``, ``ProviderCapabilities``,
``EmbeddingResult``) and where a conversation stopped (``RunResult``). Pure values.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

from ._messages import ErrorInfo, Message, ToolCall, ToolSchema

__all__ = [
    "ChatResult",
    "EmbeddingResult",
    "GenerationOptions",
    "HealthStatus",
    "ModelInfo",
    "ProviderCapabilities",
    "ProviderRequest",
    "PullProgress",
    "RunResult",
    "Think",
    "ToolChoice",
    "Usage",
]

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | dict[str, str]
Think: TypeAlias = bool | str | int


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True, slots=True)
class GenerationOptions:
    """Sampling options common to every backend; ``None`` means "the server's default"."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    repeat_penalty: float | None = None
    seed: int | None = None
    stop: list[str] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Merged verbatim into the backend's request body (last, so it wins)."""


@dataclass(slots=True)
class ProviderRequest:
    """Everything one model call needs."""

    model: str
    messages: list[Message]
    system_prompt: str | None = None
    tools: list[ToolSchema] | None = None
    tool_choice: ToolChoice = "auto"
    """``"auto"``, ``"none"``, ``"required"`` (some tool) or ``{"name": tool_name}`` (that one)."""
    options: GenerationOptions = field(default_factory=GenerationOptions)
    response_format: Literal["json"] | dict[str, Any] | None = None
    """``"json"`` for any JSON object, a dict for a JSON Schema (structured output)."""
    cancel: threading.Event | None = None
    timeout: float | None = None
    """Total deadline for this request in seconds (``None``: the provider's default)."""
    think: Think | None = None
    """Reasoning switch: ``True``/``False``, an effort level (``"low"``, ``"medium"``,
    ``"high"``) or a budget in tokens (the Messages API's ``budget_tokens``); ``None`` leaves
    the server's default. Each wire sends it its own way (a wire without budgets refuses an
    ``int`` with ``CONFIG_INVALID``)."""
    keep_alive: str | float | None = None
    """How long the server keeps the model loaded after this request (Ollama ``"5m"`` or
    seconds); servers that do not unload models ignore it."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra HTTP headers for this request only."""

    def __repr__(self) -> str:
        """Every field; header values are secrets, shown (and masked where quoted) as ``***``."""
        from ..http.secrets import headers_masked_repr

        return headers_masked_repr(self)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported by the backend; ``None`` when it did not say."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend-specific figures such as timings."""


@dataclass(slots=True)
class ModelInfo:
    """A model as a backend describes it."""

    name: str
    size_bytes: int | None = None
    modified_at: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    context_length: int | None = None
    capabilities: list[str] = field(default_factory=list)
    kind: Literal["chat", "embedding"] | None = None


@dataclass(frozen=True, slots=True)
class PullProgress:
    """One progress report of a model download."""

    status: str
    completed: int | None = None
    total: int | None = None
    digest: str | None = None

    @property
    def fraction(self) -> float | None:
        """Completed share in ``[0, 1]`` when both numbers are known."""
        if self.total and self.completed is not None:
            return min(1.0, self.completed / self.total)
        return None


@dataclass(frozen=True, slots=True)
class HealthStatus:
    """The result of a health check; never an exception."""

    ok: bool
    provider: str
    base_url: str
    checked_at: datetime
    latency_ms: float | None
    version: str | None = None
    error: ErrorInfo | None = None


@dataclass(frozen=True, slots=True)
class ProviderCapabilities:
    """What a provider (or one model on it) can do; ``None`` means unknown."""

    streaming: bool = True
    tool_calling: bool | None = None
    model_management: bool = False
    embeddings: bool = False
    token_counting: bool = False
    guided_decoding: bool = False
    vision: bool | None = None
    thinking: bool | None = None


@dataclass(slots=True)
class ChatResult:
    """The whole answer of a non-streaming call."""

    content: str | None
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter", "refusal"]
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    thinking: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """The result in OpenAI's chat-completion message shape."""
        usage = None
        if self.usage is not None:
            usage = {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "total_tokens": self.usage.total_tokens,
            }
        return {
            "content": self.content,
            "finish_reason": self.finish_reason,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments or json.dumps(c.args)},
                }
                for c in self.tool_calls
            ],
            "usage": usage,
        }


@dataclass(frozen=True, slots=True)
class EmbeddingResult:
    """Embedding vectors in the order of the input texts."""

    vectors: list[list[float]]
    model: str
    dimensions: int


@dataclass(frozen=True, slots=True)
class RunResult:
    """Where :meth:`Conversation.run` stopped."""

    phase: Literal["completed", "waiting_user", "failed", "cancelled"]
    text: str | None
    error: ErrorInfo | None
    turns: int
    usage: Usage | None

"""Plain data: messages, tool calls, options, results and the events a stream yields.

Everything here is a value: slotted dataclasses with no I/O and no behaviour beyond small,
pure helpers (``Message.user``, ``ToolResult.to_json``, ``ChatResult.to_openai``). Two values
with the same content are equal. Events carry a class-level ``type`` string so callers can
match either on the class or on ``event.type``.

Invariants:

* ``ToolCall.args`` is always a dict and ``ToolCall.arguments`` always the JSON text of the
  call as the model produced it (or ``json.dumps(args)`` when the wire carried an object).
  Unparseable arguments never raise: ``args == {}`` and ``arguments`` keeps the raw text.
* A provider stream ends with exactly one :class:`FinishEvent` or one :class:`ErrorEvent`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal, TypeAlias

from ._safe_text import safe_str

__all__ = [
    "ChatEvent",
    "ChatFinishEvent",
    "ChatFinishReason",
    "ChatResult",
    "EmbeddingResult",
    "ErrorEvent",
    "ErrorInfo",
    "FinishEvent",
    "FinishReason",
    "GenerationOptions",
    "HealthStatus",
    "ImagePart",
    "Message",
    "ModelInfo",
    "Part",
    "ProviderCapabilities",
    "ProviderEvent",
    "ProviderRequest",
    "PullProgress",
    "Role",
    "RunResult",
    "TextEvent",
    "TextPart",
    "ThinkingEvent",
    "ToolCall",
    "ToolCallEvent",
    "ToolCallResultEvent",
    "ToolCallStartEvent",
    "Think",
    "ToolChoice",
    "ToolResult",
    "ToolSchema",
    "TurnCompleteEvent",
    "Usage",
    "WarningEvent",
    "parse_tool_arguments",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
_ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")
FinishReason: TypeAlias = Literal[
    "stop", "length", "tool", "cancelled", "content_filter", "refusal"
]
ChatFinishReason: TypeAlias = Literal[
    "complete", "max_turns", "cancelled", "loop_detected", "token_limit", "error", "tool_calls"
]
ToolChoice: TypeAlias = Literal["auto", "none", "required"] | dict[str, str]
Think: TypeAlias = bool | str


# --------------------------------------------------------------------------- message parts


@dataclass(frozen=True, slots=True)
class TextPart:
    """A piece of text inside a message."""

    text: str
    type: ClassVar[Literal["text"]] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image inside a message, as base64 data (no ``data:`` URL prefix)."""

    data: str
    mime_type: str = "image/png"
    type: ClassVar[Literal["image"]] = "image"


Part: TypeAlias = TextPart | ImagePart


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a tool requested by the model, complete (never a fragment)."""

    id: str
    """Identifier the tool result must echo (generated when the backend sends none)."""
    name: str
    """Name of the tool to run."""
    args: dict[str, Any]
    """Parsed arguments; ``{}`` when the model's JSON could not be parsed."""
    arguments: str
    """The raw JSON text of the arguments, as the model produced it."""

    @classmethod
    def from_arguments(cls, id: str, name: str, arguments: str | dict[str, Any] | None) -> ToolCall:
        """Build a call from wire arguments given as JSON text or as an already-parsed object."""
        if isinstance(arguments, dict):
            return cls(id=id, name=name, args=arguments, arguments=json.dumps(arguments))
        text = arguments or ""
        return cls(id=id, name=name, args=parse_tool_arguments(text), arguments=text)


def parse_tool_arguments(text: str) -> dict[str, Any]:
    """Parse a tool call's JSON arguments; anything that is not a JSON object gives ``{}``."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(slots=True)
class Message:
    """One message of a conversation in the library's internal format."""

    role: Role
    parts: list[Part] = field(default_factory=list)
    name: str | None = None
    """For ``tool`` messages: the name of the tool that produced the result."""
    tool_call_id: str | None = None
    """For ``tool`` messages: the id of the call this message answers."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """For ``assistant`` messages: the tool calls the model made in this turn."""

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"Message role must be one of {', '.join(_ROLES)}, not {self.role!r}")

    @property
    def text(self) -> str:
        """All text parts joined, without separators."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def images(self) -> list[ImagePart]:
        """The image parts of the message."""
        return [p for p in self.parts if isinstance(p, ImagePart)]

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls("system", [TextPart(text)])

    @classmethod
    def user(cls, text: str, images: Iterable[ImagePart] = ()) -> Message:
        """A user message with optional images."""
        parts: list[Part] = [TextPart(text)] if text else []
        parts.extend(images)
        return cls("user", parts)

    @classmethod
    def assistant(cls, text: str, tool_calls: Sequence[ToolCall] = ()) -> Message:
        """An assistant message, with the tool calls it made (if any)."""
        return cls("assistant", [TextPart(text)] if text else [], tool_calls=list(tool_calls))

    @classmethod
    def tool(cls, result: ToolResult, call: ToolCall) -> Message:
        """The message that returns ``result`` for ``call`` to the model."""
        return cls("tool", [TextPart(result.to_json())], name=call.name, tool_call_id=call.id)


# --------------------------------------------------------------------------- tools


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool as the model sees it: its name, description and JSON Schema parameters."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """A failure as data: a human message, a stable code and optional details."""

    message: str
    code: str
    details: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form ``{"code", "message", "details"?}``."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of running a tool: ``ok`` with ``data``, or not ``ok`` with ``error``."""

    ok: bool
    data: Any = None
    error: ErrorInfo | None = None

    def to_json(self) -> str:
        """``{"ok": true, "data": ...}`` or ``{"ok": false, "error": {...}}`` as JSON text.

        Never raises: data that JSON cannot encode is written as its ``str()`` (its type name
        when even that fails).
        """
        err = self.error if isinstance(self.error, ErrorInfo) else None
        err = err or ErrorInfo("tool failed", "TOOL_ERROR")
        payload: dict[str, Any] = (
            {"ok": True, "data": self.data} if self.ok else {"ok": False, "error": err.to_dict()}
        )
        try:
            return json.dumps(payload, ensure_ascii=False, default=safe_str)
        except Exception:  # circular, too deep, NaN, non-str keys, a hook that raises ...
            if self.ok:
                payload["data"] = safe_str(self.data)
            else:
                payload["error"] = {"code": safe_str(err.code), "message": safe_str(err.message)}
            return json.dumps(payload, ensure_ascii=False, default=safe_str)


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
    """Reasoning switch: ``True``/``False``, or an effort level (``"low"``, ``"medium"``,
    ``"high"``); ``None`` leaves the server's default. Each wire sends it its own way."""
    keep_alive: str | float | None = None
    """How long the server keeps the model loaded after this request (Ollama ``"5m"`` or
    seconds); servers that do not unload models ignore it."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra HTTP headers for this request only."""


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


# --------------------------------------------------------------------------- provider events


@dataclass(frozen=True, slots=True)
class TextEvent:
    """A piece of the answer's text."""

    value: str
    type: ClassVar[Literal["text"]] = "text"


@dataclass(frozen=True, slots=True)
class ThinkingEvent:
    """A piece of the model's reasoning, kept apart from the answer."""

    value: str
    type: ClassVar[Literal["thinking"]] = "thinking"


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """A complete tool call (fragments are assembled before this is emitted)."""

    value: ToolCall
    type: ClassVar[Literal["tool_call"]] = "tool_call"


@dataclass(frozen=True, slots=True)
class FinishEvent:
    """The normal end of a stream."""

    reason: FinishReason
    usage: Usage | None = None
    type: ClassVar[Literal["finish"]] = "finish"


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """The end of a stream by failure; text yielded before it stays valid."""

    error: ErrorInfo
    exception: BaseException | None = field(default=None, compare=False, repr=False, kw_only=True)
    """The exception behind the failure when there was one (for tracebacks, ``--debug``);
    not part of the event's value: equality, ``repr`` and ``error`` ignore it."""
    type: ClassVar[Literal["error"]] = "error"


ProviderEvent: TypeAlias = TextEvent | ThinkingEvent | ToolCallEvent | FinishEvent | ErrorEvent


# --------------------------------------------------------------------------- chat events


@dataclass(frozen=True, slots=True)
class ToolCallStartEvent:
    """The chat loop is about to run a tool call."""

    tool_call: ToolCall
    type: ClassVar[Literal["tool_call_start"]] = "tool_call_start"


@dataclass(frozen=True, slots=True)
class ToolCallResultEvent:
    """A tool call finished (successfully or not)."""

    tool_call: ToolCall
    result: ToolResult
    type: ClassVar[Literal["tool_call_result"]] = "tool_call_result"


@dataclass(frozen=True, slots=True)
class TurnCompleteEvent:
    """One model turn (a request and its tool calls) is done."""

    turn_number: int
    type: ClassVar[Literal["turn_complete"]] = "turn_complete"


@dataclass(frozen=True, slots=True)
class WarningEvent:
    """Something the caller should know that does not stop the chat."""

    code: str
    message: str
    type: ClassVar[Literal["warning"]] = "warning"


@dataclass(frozen=True, slots=True)
class ChatFinishEvent:
    """The end of a whole chat (all turns)."""

    reason: ChatFinishReason
    usage: Usage | None = None
    type: ClassVar[Literal["chat_finish"]] = "chat_finish"


ChatEvent: TypeAlias = (
    TextEvent
    | ThinkingEvent
    | ToolCallStartEvent
    | ToolCallResultEvent
    | TurnCompleteEvent
    | WarningEvent
    | ChatFinishEvent
    | ErrorEvent
)


@dataclass(frozen=True, slots=True)
class RunResult:
    """Where :meth:`Conversation.run` stopped."""

    phase: Literal["completed", "waiting_user", "failed", "cancelled"]
    text: str | None
    error: ErrorInfo | None
    turns: int
    usage: Usage | None

"""Plain data: messages, tool calls, options, results and the events a stream yields.

Everything here is a value: slotted dataclasses with no I/O and no behaviour beyond small,
pure helpers (``Message.user``, ``ToolResult.to_json``, ``ChatResult.to_openai``). Two values
with the same content are equal. Events carry a class-level ``type`` string so callers can
match either on the class or on ``event.type``.

The definitions live in modules of this package, one concern each (messages and tool values, a
model call's request and results, stream events). Import the names from here or from the
package root.

Invariants:

* ``ToolCall.args`` is always a dict and ``ToolCall.arguments`` always the JSON text of the
  call as the model produced it (or ``json.dumps(args)`` when the wire carried an object).
  Unparseable arguments never raise: ``args == {}`` and ``arguments`` keeps the raw text.
* A provider stream ends with exactly one :class:`FinishEvent` or one :class:`ErrorEvent`.
"""

from __future__ import annotations

from ._events import (
    ChatEvent as ChatEvent,
    ChatFinishEvent as ChatFinishEvent,
    ChatFinishReason as ChatFinishReason,
    ErrorEvent as ErrorEvent,
    FinishEvent as FinishEvent,
    FinishReason as FinishReason,
    ProviderEvent as ProviderEvent,
    TextEvent as TextEvent,
    ThinkingEvent as ThinkingEvent,
    ToolCallEvent as ToolCallEvent,
    ToolCallResultEvent as ToolCallResultEvent,
    ToolCallStartEvent as ToolCallStartEvent,
    TurnCompleteEvent as TurnCompleteEvent,
    WarningEvent as WarningEvent,
)
from ._messages import (
    ErrorInfo as ErrorInfo,
    ImagePart as ImagePart,
    Message as Message,
    Part as Part,
    ProviderBlock as ProviderBlock,
    Role as Role,
    TextPart as TextPart,
    ToolCall as ToolCall,
    ToolResult as ToolResult,
    ToolSchema as ToolSchema,
    parse_tool_arguments as parse_tool_arguments,
)
from ._requests import (
    ChatResult as ChatResult,
    EmbeddingResult as EmbeddingResult,
    GenerationOptions as GenerationOptions,
    HealthStatus as HealthStatus,
    ModelInfo as ModelInfo,
    ProviderCapabilities as ProviderCapabilities,
    ProviderRequest as ProviderRequest,
    PullProgress as PullProgress,
    RunResult as RunResult,
    Think as Think,
    ToolChoice as ToolChoice,
    Usage as Usage,
)

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
    "ProviderBlock",
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

"""The events a stream yields: a provider's (``TextEvent`` ... ``FinishEvent``/``ErrorEvent``)
and a chat's (the same text events, plus tool, turn, warning and ``ChatFinishEvent`` events).

Public through :mod:`ollm_lite.types`, which re-exports every name here. Each event carries a
class-level ``type`` string, so callers can match either on the class or on ``event.type``.
Invariant: a provider stream ends with exactly one :class:`FinishEvent` or one
:class:`ErrorEvent`; a chat's with one :class:`ChatFinishEvent`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypeAlias

from ._messages import ErrorInfo, ProviderBlock, ToolCall, ToolResult
from ._requests import Usage

__all__ = [
    "ChatEvent",
    "ChatFinishEvent",
    "ChatFinishReason",
    "ErrorEvent",
    "FinishEvent",
    "FinishReason",
    "ProviderEvent",
    "TextEvent",
    "ThinkingEvent",
    "ToolCallEvent",
    "ToolCallResultEvent",
    "ToolCallStartEvent",
    "TurnCompleteEvent",
    "WarningEvent",
]

FinishReason: TypeAlias = Literal[
    "stop", "length", "tool", "cancelled", "content_filter", "refusal"
]
ChatFinishReason: TypeAlias = Literal[
    "complete", "max_turns", "cancelled", "loop_detected", "token_limit", "error", "tool_calls"
]


# --------------------------------------------------------------------------- provider events


@dataclass(frozen=True, slots=True)
class TextEvent:
    """A piece of the answer's text."""

    value: str
    """The text as it arrived (a token, a word or more); the pieces joined are the answer."""
    type: ClassVar[Literal["text"]] = "text"


@dataclass(frozen=True, slots=True)
class ThinkingEvent:
    """A piece of the model's reasoning, kept apart from the answer."""

    value: str
    """Reasoning text as it arrived; never part of the answer's text."""
    type: ClassVar[Literal["thinking"]] = "thinking"


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """A complete tool call (fragments are assembled before this is emitted)."""

    value: ToolCall
    """The call, its arguments both parsed (``args``) and as the model wrote them."""
    type: ClassVar[Literal["tool_call"]] = "tool_call"


@dataclass(frozen=True, slots=True)
class FinishEvent:
    """The normal end of a stream."""

    reason: FinishReason
    """Why the model stopped: ``tool`` means calls for the caller to run."""
    usage: Usage | None = None
    """The request's token counts, when the backend reported them."""
    provider_blocks: tuple[ProviderBlock, ...] = field(
        default=(), compare=False, repr=False, kw_only=True
    )
    """What the server needs back with this turn when it is sent again (Anthropic's thinking
    blocks, Gemini's thought signatures): the chat runtime puts them on the turn's assistant
    :class:`~ollm_lite.types.Message`. Not part of the event's value: equality and ``repr``
    ignore it."""
    type: ClassVar[Literal["finish"]] = "finish"


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """The end of a stream by failure; text yielded before it stays valid."""

    error: ErrorInfo
    """What failed, with the stable code of the matching exception."""
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
    """The call about to run."""
    type: ClassVar[Literal["tool_call_start"]] = "tool_call_start"


@dataclass(frozen=True, slots=True)
class ToolCallResultEvent:
    """A tool call finished (successfully or not)."""

    tool_call: ToolCall
    """The call that ran."""
    result: ToolResult
    """What it returned, or the error it ended with."""
    type: ClassVar[Literal["tool_call_result"]] = "tool_call_result"


@dataclass(frozen=True, slots=True)
class TurnCompleteEvent:
    """One model turn (a request and its tool calls) is done."""

    turn_number: int
    """Which turn of the chat this was, counting from 1."""
    type: ClassVar[Literal["turn_complete"]] = "turn_complete"


@dataclass(frozen=True, slots=True)
class WarningEvent:
    """Something the caller should know that does not stop the chat."""

    code: str
    """Stable code: ``TOKEN_LIMIT_WARNING`` or ``MAX_TOKENS_REACHED``."""
    message: str
    """What happened, for people."""
    type: ClassVar[Literal["warning"]] = "warning"


@dataclass(frozen=True, slots=True)
class ChatFinishEvent:
    """The end of a whole chat (all turns)."""

    reason: ChatFinishReason
    """Why the chat stopped (``complete`` when the model gave its answer)."""
    usage: Usage | None = None
    """Token counts summed over the chat's turns (``None`` when no backend reported any)."""
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

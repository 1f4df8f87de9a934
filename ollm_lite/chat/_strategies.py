"""How the chat loop offers tools to a model and reads its turns: two strategies, one interface.

:class:`NativeTools` sends the tool schemas in the request and reads the calls the provider
reports. :class:`ReActTools` is the fallback for models without native tool calling: it
writes the tools into the system prompt, stops generation at ``Observation:``, parses
Thought / Action / Action Input / Final Answer from the text and asks the model to correct a
malformed step.

Both answer the loop's two questions the same way: :meth:`~ToolStrategy.prepare` turns the
loop's plain request into what this strategy sends, :meth:`~ToolStrategy.interpret` says what
a finished turn amounts to — an :class:`Answer`, :class:`Calls` to run, a :class:`Retry`
(a correction request) or :class:`GiveUp` — and :meth:`~ToolStrategy.observations` turns
tool results into the messages the model reads next.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..errors import OllmError
from ..providers.base import ProviderAdapter, call_with_cancel
from ..types import (
    ChatEvent,
    ErrorInfo,
    Message,
    ProviderBlock,
    ProviderRequest,
    TextEvent,
    TextPart,
    ThinkingEvent,
    ToolCall,
    ToolResult,
    ToolSchema,
    Usage,
    WarningEvent,
)

__all__ = [
    "Answer",
    "Calls",
    "GiveUp",
    "NativeTools",
    "ReActTools",
    "Retry",
    "ToolStrategy",
    "Turn",
    "choose_strategy",
]


@dataclass(slots=True)
class Turn:
    """One model turn: what the model said and did, and what its tools returned.

    Attributes:
        number: 1 for the first turn of a chat.
        text: The answer text of this turn (for ReAct: the final answer, if any).
        thinking: Reasoning text, kept apart.
        tool_calls: The calls the model made, in order.
        results: One result per call, in the same order.
        finish_reason: The provider's reason (``stop``, ``tool``, ``length`` …), or ``None``
            when the turn ended in an error.
        usage: Token usage the provider reported for this turn.
        provider_blocks: What the server needs back with this turn (thinking blocks,
            thought signatures), from its ``FinishEvent``.
    """

    number: int
    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    provider_blocks: tuple[ProviderBlock, ...] = ()


@dataclass(frozen=True, slots=True)
class Answer:
    """The model is done: ``text`` is its answer; ``events`` go out before the turn ends."""

    text: str
    events: tuple[ChatEvent, ...] = ()


@dataclass(frozen=True, slots=True)
class Calls:
    """Tools to run: ``message`` (the assistant's, carrying ``calls``) joins the history."""

    calls: list[ToolCall]
    message: Message
    events: tuple[ChatEvent, ...] = ()


@dataclass(frozen=True, slots=True)
class Retry:
    """Ask again: ``messages`` (the bad turn and a correction request) join the history."""

    messages: tuple[Message, ...]
    events: tuple[ChatEvent, ...] = ()


@dataclass(frozen=True, slots=True)
class GiveUp:
    """The model cannot be brought back on track: the chat ends with ``error``."""

    error: ErrorInfo
    events: tuple[ChatEvent, ...] = ()


Step = Answer | Calls | Retry | GiveUp


class ToolStrategy(Protocol):
    """What the chat loop needs from a way of offering tools."""

    #: Whether the model's text is the answer as it streams (ReAct text is parsed first).
    forwards_text: bool

    def prepare(self, request: ProviderRequest) -> ProviderRequest:
        """The request to send, from the loop's plain one (history, system prompt, options)."""
        ...

    def interpret(self, turn: Turn) -> Step:
        """What the finished ``turn`` amounts to."""
        ...

    def observations(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Message]:
        """The messages that give the model its tools' results."""
        ...


class NativeTools:
    """Tools as the provider's own tool-calling API offers them (also: no tools at all)."""

    forwards_text = True

    def __init__(self, schemas: list[ToolSchema]) -> None:
        self._schemas = schemas

    def prepare(self, request: ProviderRequest) -> ProviderRequest:
        if not self._schemas:  # no tools: nothing to choose between
            if request.tools is None and request.tool_choice == "auto":
                return request  # the usual turn without tools: no copy to make
            return replace(request, tools=None, tool_choice="auto")
        return replace(request, tools=list(self._schemas))

    def interpret(self, turn: Turn) -> Step:
        if not turn.tool_calls:
            cut = turn.finish_reason == "length"
            warning = WarningEvent(
                "MAX_TOKENS_REACHED", "the answer was cut at the max_tokens limit"
            )
            return Answer(turn.text, (warning,) if cut else ())
        calls = unique_ids(turn.tool_calls, turn.number)
        return Calls(calls, assistant_message(turn.text, calls, turn.provider_blocks))

    def observations(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Message]:
        return [Message.tool(result, call) for call, result in zip(calls, results, strict=True)]


class ReActTools:
    """Tools described in the prompt, calls parsed from the model's text (ReAct)."""

    forwards_text = False

    def __init__(self, schemas: list[ToolSchema]) -> None:
        from ..react import ReActToolHandler  # here: only models without tool calling need it

        self._react = ReActToolHandler(schemas)
        self._corrections = 0  # correction requests in a row

    def prepare(self, request: ProviderRequest) -> ProviderRequest:
        from ..react import STOP_SEQUENCES

        react = self._react.instructions()
        system = f"{request.system_prompt}\n\n{react}" if request.system_prompt else react
        stops = list(request.options.stop or [])
        stops += [s for s in STOP_SEQUENCES if s not in stops]
        options = replace(request.options, stop=stops)
        return replace(
            request, system_prompt=system, options=options, tools=None, tool_choice="auto"
        )

    def interpret(self, turn: Turn) -> Step:
        react = self._react
        step = react.parse(turn.text)
        events: tuple[ChatEvent, ...] = (ThinkingEvent(step.thought),) if step.thought else ()
        said = assistant_message(step.raw or turn.text)
        if step.error is not None and not react.is_final(step):
            self._corrections += 1
            if self._corrections > react.max_corrections:
                message = f"the model kept sending an invalid Action Input: {step.error}"
                return GiveUp(ErrorInfo(message, "LLM_BAD_RESPONSE"), events)
            return Retry((said, Message.user(react.correction_message(step))), events)
        self._corrections = 0
        if react.is_final(step) or step.action is None:
            answer = step.final_answer if step.final_answer is not None else turn.text
            turn.text = answer  # the turn's text is the answer, not the whole ReAct step
            return Answer(answer, events + ((TextEvent(answer),) if answer else ()))
        call = react.to_tool_call(step, f"react_{turn.number}")
        return Calls([call], said, events)

    def observations(self, calls: list[ToolCall], results: list[ToolResult]) -> list[Message]:
        return [Message.user(self._react.format_observation(result)) for result in results]


def choose_strategy(
    adapter: ProviderAdapter,
    model: str,
    schemas: list[ToolSchema],
    tool_mode: str,
    cancel: threading.Event,
) -> ToolStrategy:
    """Native tool calling where the model or provider supports it, else ReAct.

    ``tool_mode`` ``"native"`` or ``"react"`` decides alone; ``"auto"`` asks the model's
    capabilities (which may ask the server), then the provider's, and tries native tool
    calling when neither knows. Without tools there is nothing to choose.
    """
    if not schemas or tool_mode == "native":
        return NativeTools(schemas)
    if tool_mode == "react":
        return ReActTools(schemas)
    known: bool | None = None
    try:
        # may ask the server (Ollama: /api/show)
        known = call_with_cancel(adapter, "model_capabilities", model, cancel=cancel).tool_calling
    except (OllmError, AttributeError, NotImplementedError):
        known = None  # a custom adapter may not implement the optional methods
    if known is None:
        capabilities = getattr(adapter, "capabilities", None)
        known = getattr(capabilities, "tool_calling", None)
    # unknown: try native, most servers accept tools
    return ReActTools(schemas) if known is False else NativeTools(schemas)


def assistant_message(
    text: str, tool_calls: Iterable[ToolCall] = (), blocks: tuple[ProviderBlock, ...] = ()
) -> Message:
    """An assistant message that always has a part (an empty text beside tool calls), with
    the ``blocks`` the server needs back with it."""
    return Message(
        "assistant", [TextPart(text)], tool_calls=list(tool_calls), provider_blocks=blocks
    )


def unique_ids(calls: list[ToolCall], turn: int) -> list[ToolCall]:
    """Give every call an id of its own (models repeat or omit them)."""
    seen: set[str] = set()
    out = []
    for i, call in enumerate(calls):
        if not call.id or call.id in seen:
            call = replace(call, id=f"call_{turn}_{i}")
        seen.add(call.id)
        out.append(call)
    return out

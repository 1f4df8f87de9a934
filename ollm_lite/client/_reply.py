"""``Reply``: everything a script-level call produced, built from one fold of its events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import OllmError
from ..types import Message, ToolCall, ToolResult, Usage

__all__ = ["Reply"]


@dataclass(slots=True)
class Reply:
    """The result of ``Client.run`` (and of each prompt of ``Client.map``).

    ``str(reply)`` is ``reply.text``.
    """

    text: str
    """The final model turn's answer (``""`` when it gave none)."""
    thinking: str | None
    """The model's reasoning over every turn, kept apart (``None`` when there was none)."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Every tool call the model made, in order (those for the caller to run included)."""
    tool_results: list[ToolResult] = field(default_factory=list)
    """The results of the calls that ran here, in call order."""
    usage: Usage | None = None
    """Token usage summed over every model turn."""
    finish: str = "complete"
    """``complete``, ``max_turns``, ``loop_detected``, ``token_limit``, ``cancelled``,
    ``error``, or ``tool_calls`` (the model called a tool without a handler here)."""
    turns: int = 0
    """Model turns used."""
    messages: list[Message] = field(default_factory=list)
    """The whole conversation (the prompt's messages first, without ``system=``), to
    continue it: ``llm.run(reply.messages + [...])``."""
    error: OllmError | None = None
    """The exception, for a failed item (``finish == "error"``)."""
    value: Any = None
    """The validated object when a ``schema`` was given."""

    def __str__(self) -> str:
        return self.text

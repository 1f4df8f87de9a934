"""One fold of an event stream into a result: text, thinking, tool calls, usage, the end.

:class:`EventFold` reads the chat runtime's events (``ChatClient.chat``, the script API's
``events``) and a provider's own stream (``chat_stream``) alike, so the script API's
``Reply``, the CLI's answer and ``BaseProvider.chat`` can all be built from the same rules:

* ``text`` is the answer of the last model turn: a ``TurnCompleteEvent`` closes a turn, and
  text after the last one (a turn cut short by an error or a cancel) wins when there is any;
* ``thinking`` joins the reasoning of every turn;
* ``tool_calls`` are the calls in the order the model made them (``ToolCallStartEvent`` or a
  provider's ``ToolCallEvent``), ``tool_results`` the results of the calls that ran, in the
  order they were reported (the chat runtime reports them in call order);
* ``usage`` is the chat's total (``ChatFinishEvent``) or, for a provider stream, the turn's;
* ``finish`` is the reason of the terminal event (``None`` when the stream had none) and
  ``error`` the ``ErrorInfo`` of an ``ErrorEvent``.

Pure data in, pure data out: no I/O, never raises for any event sequence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from . import (
    ChatFinishEvent,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolResult,
    TurnCompleteEvent,
    Usage,
    WarningEvent,
)

__all__ = ["EventFold", "Folded", "add_usage", "fold_events"]


@dataclass(slots=True)
class Folded:
    """What a stream of events amounted to.

    Attributes:
        text: The last turn's answer (``""`` when there was none).
        thinking: Every turn's reasoning joined (``""`` when there was none).
        tool_calls: Every call the model made, in order.
        tool_results: The results of the calls that ran, in call order.
        usage: Token usage (summed over the turns of a chat).
        finish: The terminal event's reason, ``None`` without one (or after an error).
        error: The failure an ``ErrorEvent`` reported.
        exception: The exception behind it, when the event carried one.
        turns: Model turns seen: completed ones plus a last one cut short.
        warnings: ``WarningEvent`` values, in order.
    """

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    usage: Usage | None = None
    finish: str | None = None
    error: ErrorInfo | None = None
    exception: BaseException | None = None
    turns: int = 0
    warnings: list[WarningEvent] = field(default_factory=list)


class EventFold:
    """Accumulates events one by one; :meth:`result` says what they amount to so far."""

    __slots__ = (
        "_calls",
        "_current",
        "_error",
        "_exception",
        "_finish",
        "_last",
        "_pending",
        "_results",
        "_thinking",
        "_turns",
        "_usage",
        "_warnings",
    )

    def __init__(self) -> None:
        self._current: list[str] = []
        self._last = ""
        self._thinking: list[str] = []
        self._calls: list[ToolCall] = []
        self._results: list[tuple[ToolCall, ToolResult]] = []
        self._usage: Usage | None = None
        self._finish: str | None = None
        self._error: ErrorInfo | None = None
        self._exception: BaseException | None = None
        self._turns = 0
        self._pending = False  # something of a turn arrived after the last TurnCompleteEvent
        self._warnings: list[WarningEvent] = []

    def add(self, event: object) -> None:
        """Fold one event in (unknown objects are ignored)."""
        if isinstance(event, TextEvent):
            self._current.append(event.value)
            self._pending = True
        elif isinstance(event, ThinkingEvent):
            self._thinking.append(event.value)
            self._pending = True
        elif isinstance(event, ToolCallStartEvent | ToolCallEvent):
            call = event.tool_call if isinstance(event, ToolCallStartEvent) else event.value
            self._pending = True
            self._calls.append(call)
        elif isinstance(event, ToolCallResultEvent):
            self._results.append((event.tool_call, event.result))
        elif isinstance(event, TurnCompleteEvent):
            self._last = "".join(self._current)
            self._current = []
            self._turns += 1
            self._pending = False
        elif isinstance(event, WarningEvent):
            self._warnings.append(event)
        elif isinstance(event, ErrorEvent):
            self._error = event.error
            self._exception = event.exception
        elif isinstance(event, ChatFinishEvent | FinishEvent):
            self._finish = event.reason
            if event.usage is not None or isinstance(event, ChatFinishEvent):
                self._usage = event.usage

    def result(self) -> Folded:
        """The fold so far (a new value each time; the fold can go on)."""
        current = "".join(self._current)
        return Folded(
            text=current if current or self._pending else self._last,
            thinking="".join(self._thinking),
            tool_calls=list(self._calls),
            tool_results=[result for _, result in self._results],
            usage=self._usage,
            finish=self._finish,
            error=self._error,
            exception=self._exception,
            turns=self._turns + (1 if self._pending else 0),
            warnings=list(self._warnings),
        )


def fold_events(events: Iterable[object]) -> Folded:
    """Fold a whole stream (consumes ``events``)."""
    fold = EventFold()
    for event in events:
        fold.add(event)
    return fold.result()


def add_usage(total: Usage | None, more: Usage | None) -> Usage | None:
    """Two usages summed field by field (``None`` counts as unknown, not zero)."""
    if more is None:
        return total
    if total is None:
        return more

    def add(a: int | None, b: int | None) -> int | None:
        return b if a is None else a if b is None else a + b

    return Usage(
        add(total.prompt_tokens, more.prompt_tokens),
        add(total.completion_tokens, more.completion_tokens),
        add(total.total_tokens, more.total_tokens),
        {**total.extra, **more.extra},
    )

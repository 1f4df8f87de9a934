"""One model turn: a provider's event stream read into a :class:`~ollm_lite.chat._strategies.Turn`.

:func:`read_turn` forwards thinking (and, when asked, text) as it arrives, collects tool calls,
and always closes the stream — also when the caller stops early — so the connection goes back
to its pool (or closes) at once. It ends at the first terminal event and says how the turn
ended in the :mod:`internal vocabulary <ollm_lite.types._finish_reasons>`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterable

from ..types import (
    ChatEvent,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    ProviderEvent,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
)
from ..types._finish_reasons import Ending
from ._strategies import Turn

__all__ = ["read_turn"]

_NO_FINISH = "the provider's stream ended without a finish event"


def read_turn(
    stream: Iterable[ProviderEvent],
    turn: Turn,
    *,
    forward: bool,
    cancel: threading.Event,
    error: Callable[[ErrorEvent], ErrorEvent] | None = None,
) -> Generator[ChatEvent, None, Ending | None]:
    """Read ``stream`` into ``turn``: ``None`` when it finished, else how it ended.

    Args:
        stream: The provider's events for one request.
        turn: Receives the text, thinking, tool calls, usage and finish reason.
        forward: Whether text events go out as they arrive (ReAct holds them back).
        error: Turns the stream's error event into the one the chat shows (``None``: as
            it is).
        cancel: Checked between events, for an adapter that does not watch it itself.
    """
    text: list[str] = []
    thinking: list[str] = []
    ending: Ending | None = "failed"
    try:
        for event in stream:
            if cancel.is_set():  # an adapter that does not watch request.cancel
                ending = "cancelled"
                break
            if isinstance(event, TextEvent):
                text.append(event.value)
                if forward:
                    yield event
            elif isinstance(event, ThinkingEvent):
                thinking.append(event.value)
                yield event
            elif isinstance(event, ToolCallEvent):
                turn.tool_calls.append(event.value)
            elif isinstance(event, FinishEvent):
                turn.usage = event.usage
                turn.finish_reason = event.reason
                turn.provider_blocks = event.provider_blocks
                ending = "cancelled" if event.reason == "cancelled" else None
                break
            elif isinstance(event, ErrorEvent):
                if event.error.code == "CANCELLED" or cancel.is_set():
                    ending = "cancelled"
                else:
                    yield event if error is None else error(event)
                break
        else:  # the provider broke its contract: no terminal event
            yield ErrorEvent(ErrorInfo(_NO_FINISH, "LLM_BAD_RESPONSE"))
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        turn.text = "".join(text)
        turn.thinking = "".join(thinking)
    if ending is None and cancel.is_set() and turn.tool_calls:
        ending = "cancelled"  # do not start tools after a cancel
    return ending

"""A logged answer read back: the one way from a turn's ``answer`` to what its reader needs.

The cache answers a turn with its logged events, ``ScriptedProvider.from_log`` replays them,
and a batch line answered from the log is their fold (``collect_result``, as a provider's own
``chat()`` is the fold of its stream). All three read an answer with :func:`answer_events`.
"""

from __future__ import annotations

from typing import Any, get_args

from ..types import (
    ChatResult,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    FinishReason,
    ProviderEvent,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
)
from ..types._event_fold import EventFold
from ._records import blocks_from_list, tool_call_from_dict, usage_from_dict

__all__ = ["answer_events", "answer_result"]

_REASONS = frozenset(get_args(FinishReason))


def answer_events(answer: dict[str, Any], *, spent: bool) -> list[ProviderEvent]:
    """The provider events a logged ``answer`` stands for.

    ``spent``: the answer's usage goes with its finish (a replay: what the model reported);
    else the finish carries none (a cache hit: nothing was spent).
    """
    events: list[ProviderEvent] = []
    if answer.get("thinking"):
        events.append(ThinkingEvent(str(answer["thinking"])))
    if answer.get("text"):
        events.append(TextEvent(str(answer["text"])))
    events.extend(ToolCallEvent(tool_call_from_dict(c)) for c in answer.get("tool_calls") or ())
    error = answer.get("error")
    if isinstance(error, dict):
        info = ErrorInfo(str(error.get("message", "")), str(error.get("code", "")))
        events.append(ErrorEvent(info))
        return events
    finish = answer.get("finish")
    reason: Any = finish if finish in _REASONS else ("tool" if answer.get("tool_calls") else "stop")
    usage = usage_from_dict(answer.get("usage")) if spent else None
    blocks = blocks_from_list(answer.get("provider_blocks"))
    events.append(FinishEvent(reason, usage, provider_blocks=blocks))
    return events


def answer_result(answer: dict[str, Any]) -> ChatResult:
    """A logged answer (text, thinking, tool calls, usage) as a :class:`ChatResult`: the fold
    of :func:`answer_events`, whatever the answer's ending (for counting its tokens)."""
    fold = EventFold()
    for event in answer_events(answer, spent=True):
        fold.add(event)
    folded = fold.result()
    calls = folded.tool_calls
    return ChatResult(
        folded.text, "tool_calls" if calls else "stop", calls, folded.usage, folded.thinking or None
    )

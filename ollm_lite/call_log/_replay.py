"""Logged calls as a script: what ``ScriptedProvider.from_log`` replays."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..types import (
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    ProviderEvent,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
)
from ._records import LoggedCall, tool_call_from_dict, usage_from_dict

__all__ = ["replay_turns"]

_FINISH = frozenset({"stop", "length", "tool", "cancelled", "content_filter", "refusal"})


def replay_turns(calls: Iterable[LoggedCall]) -> list[list[ProviderEvent]]:
    """Every model turn of ``calls``, oldest call first (whatever order they are given in),
    as the provider events the model sent."""
    ordered = sorted(calls, key=lambda c: c.id or "")  # a damaged id: first
    return [_events(turn.get("answer") or {}) for call in ordered for turn in call.turns]


def _events(answer: dict[str, Any]) -> list[ProviderEvent]:
    events: list[ProviderEvent] = []
    if answer.get("thinking"):
        events.append(ThinkingEvent(str(answer["thinking"])))
    if answer.get("text"):
        events.append(TextEvent(str(answer["text"])))
    events.extend(ToolCallEvent(tool_call_from_dict(c)) for c in answer.get("tool_calls") or ())
    error = answer.get("error")
    if isinstance(error, dict):
        events.append(
            ErrorEvent(ErrorInfo(str(error.get("message", "")), str(error.get("code", ""))))
        )
        return events
    finish = answer.get("finish")
    reason: Any = finish if finish in _FINISH else ("tool" if answer.get("tool_calls") else "stop")
    events.append(FinishEvent(reason, usage_from_dict(answer.get("usage"))))
    return events

"""Logged calls as a script: what ``ScriptedProvider.from_log`` replays."""

from __future__ import annotations

from collections.abc import Iterable

from ..types import ProviderEvent
from ._answers import answer_events
from ._records import LoggedCall

__all__ = ["replay_turns"]


def replay_turns(calls: Iterable[LoggedCall]) -> list[list[ProviderEvent]]:
    """Every model turn of ``calls``, oldest call first (whatever order they are given in),
    as the provider events the model sent."""
    ordered = sorted(calls, key=lambda c: c.id)
    return [
        answer_events(turn.get("answer") or {}, spent=True)
        for call in ordered
        for turn in call.turns
    ]

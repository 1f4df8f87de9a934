"""How something ends: one internal vocabulary, mapped at the edges to the public values.

Inside the library an ending is an :data:`Ending`. The public values are part of the
public types and differ per surface, so each surface gets its value from one function here:

============  ==================  =====================  ===================  ==============
Ending        ``FinishEvent``     ``ChatResult``         ``ChatFinishEvent``  ``RunResult``
============  ==================  =====================  ===================  ==============
answered      ``stop``            ``stop``               ``complete``         ``completed``
truncated     ``length``          ``length``             ``complete``         ``completed``
filtered      ``content_filter``  ``content_filter``     ``complete``         ``completed``
refused       ``refusal``         ``refusal``            ``complete``         ``completed``
tool_calls    ``tool``            ``tool_calls``         ``tool_calls``       —
cancelled     ``cancelled``       (raises ``Cancelled``) ``cancelled``        ``cancelled``
max_turns     —                   —                      ``max_turns``        ``failed``
loop          —                   —                      ``loop_detected``    ``failed``
token_limit   —                   —                      ``token_limit``      ``failed``
failed        —                   (raises)               ``error``            ``failed``
============  ==================  =====================  ===================  ==============

(``RunResult`` says ``waiting_user`` instead of ``completed`` when the caller's
``is_complete`` check says the answer is not the end. A chat ends with ``tool_calls`` when the
model called a tool offered without a handler, for the caller to run; the script API's
``Reply.finish`` says so.)
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from . import ChatFinishReason, ErrorInfo, FinishReason

__all__ = [
    "Ending",
    "Phase",
    "ResultReason",
    "chat_reason",
    "ending_of",
    "result_reason",
    "run_phase",
    "stop_error",
]

Ending: TypeAlias = Literal[
    "answered",
    "truncated",
    "filtered",
    "refused",
    "tool_calls",
    "cancelled",
    "max_turns",
    "loop",
    "token_limit",
    "failed",
]
Phase: TypeAlias = Literal["completed", "waiting_user", "failed", "cancelled"]
ResultReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter", "refusal"]

_OF_FINISH: dict[str, Ending] = {
    "stop": "answered",
    "length": "truncated",
    "content_filter": "filtered",
    "refusal": "refused",
    "tool": "tool_calls",
    "cancelled": "cancelled",
}
_RESULT: dict[Ending, ResultReason] = {
    "answered": "stop",
    "truncated": "length",
    "filtered": "content_filter",
    "refused": "refusal",
    "tool_calls": "tool_calls",
}
_CHAT: dict[Ending, ChatFinishReason] = {
    "answered": "complete",
    "truncated": "complete",
    "filtered": "complete",
    "refused": "complete",
    "tool_calls": "tool_calls",
    "cancelled": "cancelled",
    "max_turns": "max_turns",
    "loop": "loop_detected",
    "token_limit": "token_limit",
    "failed": "error",
}
_STOP_ERRORS: dict[str, tuple[str, str]] = {
    "max_turns": ("the chat used all its turns without finishing", "MAX_TURNS"),
    "loop_detected": ("the same failing tool call was repeated", "LOOP_DETECTED"),
    "token_limit": ("the conversation no longer fits the context window", "TOKEN_LIMIT_EXCEEDED"),
}


def ending_of(reason: FinishReason | str | None) -> Ending:
    """The ending a provider's ``FinishEvent`` reason stands for (``None``: ``failed``)."""
    return _OF_FINISH.get(reason or "", "failed")


def result_reason(ending: Ending, *, has_calls: bool) -> ResultReason:
    """The ``ChatResult.finish_reason`` of one response (any call makes it ``tool_calls``)."""
    return "tool_calls" if has_calls else _RESULT.get(ending, "stop")


def chat_reason(ending: Ending) -> ChatFinishReason:
    """The ``ChatFinishEvent`` reason of a chat that ended this way."""
    return _CHAT.get(ending, "error")


def run_phase(reason: ChatFinishReason | str | None, *, done: bool) -> Phase:
    """The ``RunResult`` phase of a chat that finished with ``reason``.

    ``done``: whether a complete answer is the end (the caller's ``is_complete`` check).
    """
    if reason == "complete":
        return "completed" if done else "waiting_user"
    return "cancelled" if reason == "cancelled" else "failed"


def stop_error(reason: ChatFinishReason | str | None) -> ErrorInfo:
    """The error a ``failed`` run reports when no ``ErrorEvent`` said what went wrong."""
    message, code = _STOP_ERRORS.get(reason or "", (f"stopped: {reason}", "LLM_ERROR"))
    return ErrorInfo(message, code)

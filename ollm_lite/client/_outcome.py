"""How a script-level call ends: its events folded into a ``Reply``, and what it raises.

:func:`reply_of` builds the :class:`~ollm_lite._reply.Reply` from the one fold of the chat's
events (:mod:`~ollm_lite._fold`); :func:`raise_for` applies the script API's rules: a failed
chat raises its typed error, a cancelled one ``Cancelled``, and ``ask``/``stream`` raise
``TokenLimitExceeded`` for a prompt that does not fit.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import Cancelled, OllmError, TokenLimitExceeded, error_from_code
from ..types import ChatEvent, ChatFinishEvent, ErrorEvent, ErrorInfo, Message
from ..types._event_fold import EventFold, Folded
from ._reply import Reply

__all__ = ["drain", "failed", "failure", "raise_for", "reply_of"]


def drain(events: Iterator[ChatEvent]) -> Folded:
    fold = EventFold()
    for event in events:
        fold.add(event)
    return fold.result()


def reply_of(folded: Folded, history: list[Message], turns: int) -> Reply:
    finish = folded.finish or "error"
    error = None
    if finish == "error":
        error = failure(folded)
    return Reply(
        text=folded.text,
        thinking=folded.thinking or None,
        tool_calls=folded.tool_calls,
        tool_results=folded.tool_results,
        usage=folded.usage,
        finish=finish,
        turns=max(turns, folded.turns),
        messages=list(history),
        error=error,
    )


def failure(folded: Folded) -> OllmError:
    """The exception a failed chat raises: the one behind its ``ErrorEvent`` when that is an
    ``OllmError`` (class, code, details and traceback kept), else one rebuilt from the code,
    chained to whatever the event carried."""
    if isinstance(folded.exception, OllmError):
        return folded.exception
    info = folded.error or ErrorInfo("the chat ended without an answer", "LLM_BAD_RESPONSE")
    error = error_from_code(info)
    error.__cause__ = folded.exception
    return error


def raise_for(reply: Reply, folded: Folded, *, token_limit: bool) -> None:
    """Raise what a finished call must raise (see the module docstring)."""
    if reply.error is not None:
        raise reply.error
    if reply.finish == "cancelled":
        raise Cancelled("the call was cancelled")
    if token_limit and reply.finish == "token_limit":
        info = folded.error
        raise TokenLimitExceeded(
            info.message if info else "the prompt does not fit the model's context window",
            details=dict(info.details or {}) if info else None,
        )


def failed(exc: OllmError) -> Iterator[ChatEvent]:
    yield ErrorEvent(exc.to_info(), exception=exc)
    yield ChatFinishEvent("error")

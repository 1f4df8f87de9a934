"""A prepared call run on the chat runtime, and how it ends: its events, its text pieces, or
its :class:`Reply`.

Shared by ``Client``, ``Session`` and ``Client.map``: :func:`started` sets the call's
deadline (once, an absolute time), :func:`way_in` opens the call's way through the client's
gate (:mod:`ollm_lite.gate`), and :func:`call_events` resolves the model (asking the server
once when none is configured) and runs the chat loop on it; :func:`call_pieces` and
:func:`call_reply` fold those events into what ``stream`` yields and ``ask``/``run``
return. :func:`call_reply` also validates a typed answer, asking again (with the validation
errors) up to ``client.schema_retries`` times. The loop
appends to ``call.history`` as it runs.

:func:`reply_of` builds the :class:`Reply` from the one fold of the chat's events;
:func:`raise_for` applies the script API's rules: a failed chat raises its typed error, a
cancelled one ``Cancelled``, and ``ask``/``stream`` raise ``TokenLimitExceeded`` for a prompt
that does not fit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from .._cancel_link import LinkedEvent
from ..chat._loop import ChatCall, ChatLoop
from ..errors import BadResponse, Cancelled, OllmError, TokenLimitExceeded, error_from_code
from ..types import (
    ChatEvent,
    ChatFinishEvent,
    ErrorEvent,
    ErrorInfo,
    Message,
    TextEvent,
    ToolCall,
    ToolResult,
    Usage,
)
from ..types._event_fold import EventFold, Folded, add_usage
from ._prepare import Call
from ._typed import AnswerSpec, correction_prompt, parse_answer

if TYPE_CHECKING:
    from ..chat import ChatClient, Turn
    from ..gate import Gate, GatedCall

__all__ = [
    "Reply",
    "Runner",
    "call_events",
    "call_pieces",
    "call_reply",
    "call_stream",
    "drain",
    "failed",
    "error_of",
    "raise_for",
    "reply_of",
    "started",
    "way_in",
]

logger = logging.getLogger(__name__)


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
    cost: float | None = None
    """What the call cost, summed over its model turns, by the prices the client was given
    (per million tokens, in their currency): ``None`` when a turn's model has no price or a
    priced turn's server reported no usage; 0 when every turn came from the cache."""

    def __str__(self) -> str:
        return self.text


class Runner(Protocol):
    """What runs a prepared call (a ``Client``): its chat runtime, the model it uses and how
    often a typed answer is asked again."""

    @property
    def _chat(self) -> ChatClient: ...

    @property
    def schema_retries(self) -> int: ...

    @property
    def gate(self) -> Gate | None: ...

    def _model(self, model: str | None, cancel: threading.Event | None = None) -> str: ...


def started(call: Call) -> Call:
    """``call`` with its deadline set: ``timeout`` seconds from now, as the one
    ``time.monotonic()`` value every turn, tool, retry and request of the call reads."""
    settings = call.settings
    if settings.deadline is not None or settings.timeout is None:
        return call
    deadline = time.monotonic() + settings.timeout
    return replace(call, settings=replace(settings, deadline=deadline))


def way_in(client: Runner, call: Call) -> GatedCall | None:
    """The call's way in through the client's gate (``None``: the client has none)."""
    gate = client.gate
    if gate is None:
        return None
    return gate.call(call.source, call, session_id=call.session_id)


def call_events(
    client: Runner,
    call: Call,
    cancel: threading.Event | None,
    turns: list[Turn],
    *,
    response_format: Any = None,
    way: GatedCall | None = None,
) -> Generator[ChatEvent, None, None]:
    """The chat runtime's events for ``call`` (started); never raises (failures are events).
    Its model requests go through ``way`` when the client has a gate."""
    settings = call.settings
    try:
        # may list the server's models: inside the call's deadline, like every request of it
        model = client._model(call.model, LinkedEvent(cancel, deadline=settings.deadline))
    except Cancelled:
        yield ChatFinishEvent("cancelled")
        return
    except OllmError as exc:
        yield from failed(exc)
        return
    settings = replace(settings, response_format=response_format)
    keywords = call.loop | ChatCall(model=model, cancel=cancel, settings=settings)
    if way is not None:
        keywords["provider"] = way
    loop = ChatLoop(client._chat, call.history, turns, **keywords)
    events = loop.run(call.prompt, ())
    try:
        yield from events
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


def call_stream(
    client: Runner, call: Call, cancel: threading.Event | None
) -> Generator[ChatEvent, None, None]:
    """``events``: the call's chat events, the call ending (in the log) when they end or are
    closed; never raises."""
    call = started(call)
    way = way_in(client, call)
    events = call_events(client, call, cancel, [], way=way)
    if way is not None:
        events = way.watch(events)
    try:
        yield from events
    finally:
        events.close()


def call_pieces(client: Runner, call: Call, cancel: threading.Event | None) -> Iterator[str]:
    """The answer's text pieces; ends quietly when cancelled, raises the typed error after."""
    fold = EventFold()
    events = call_stream(client, call, cancel)
    try:
        for event in events:
            fold.add(event)
            if isinstance(event, TextEvent) and event.value:
                yield event.value
    finally:  # the caller stopped early: stop the request now, not at garbage collection
        events.close()
    folded = fold.result()
    if folded.finish == "cancelled":
        return
    raise_for(reply_of(folded, [], 0), folded, token_limit=True)


def call_reply(
    client: Runner, call: Call, cancel: threading.Event | None, spec: AnswerSpec | None
) -> tuple[Reply, Folded]:
    """Drive the call to its end; never raises for the chat's own outcome."""
    call = started(call)
    way = way_in(client, call)
    reply, folded = _drive(client, call, cancel, spec, way)
    if way is not None:  # the call ends at the gate: logged, its spend settled
        way.finish(reply)
    return reply, folded


def _drive(
    client: Runner,
    call: Call,
    cancel: threading.Event | None,
    spec: AnswerSpec | None,
    way: GatedCall | None,
) -> tuple[Reply, Folded]:
    schema = spec.schema if spec is not None else None
    turns: list[Turn] = []
    folded = drain(call_events(client, call, cancel, turns, response_format=schema, way=way))
    reply = reply_of(folded, call.history, len(turns))
    if spec is None or reply.finish != "complete":
        return reply, folded
    usage = reply.usage
    for attempt in range(client.schema_retries + 1):
        value, errors = parse_answer(reply.text, spec)
        if not errors:
            reply.value = value
            return reply, folded
        if attempt == client.schema_retries:
            break
        logger.debug("typed answer did not validate (%s); asking again", "; ".join(errors))
        retry = replace(call, prompt=Message.user(correction_prompt(errors, spec)))
        folded = drain(call_events(client, retry, cancel, turns, response_format=schema, way=way))
        usage = add_usage(usage, folded.usage)
        reply = reply_of(folded, call.history, len(turns))
        reply.usage = usage
        if reply.finish != "complete":
            return reply, folded
    attempts = client.schema_retries + 1
    reply.error = BadResponse(
        f"the answer did not match {spec.name} after {attempts} "
        f"attempt{'s' if attempts > 1 else ''}: {'; '.join(errors[:5])}",
        details={"raw": reply.text, "errors": errors, "attempts": attempts},
    )
    reply.finish = "error"
    return reply, folded


# --------------------------------------------------------------------------- how it ends


def drain(events: Iterator[ChatEvent]) -> Folded:
    fold = EventFold()
    for event in events:
        fold.add(event)
    return fold.result()


def reply_of(folded: Folded, history: list[Message], turns: int) -> Reply:
    finish = folded.finish or "error"
    error = None
    if finish == "error":
        error = error_of(folded)
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


def error_of(folded: Folded) -> OllmError:
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

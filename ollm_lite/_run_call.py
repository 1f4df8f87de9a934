"""A prepared call run on the chat runtime: its events, its text pieces, or its ``Reply``.

Shared by ``Client``, ``Session`` and ``Client.map``: :func:`call_events` resolves the model
(asking the server once when none is configured), starts the total deadline of ``timeout``
and runs the :class:`~ollm_lite._chat_loop.ChatLoop`; :func:`call_pieces` and
:func:`call_reply` fold those events into what ``stream`` yields and ``ask``/``run`` return.
:func:`call_reply` also validates a typed answer, asking again (with the validation errors)
up to ``client.schema_retries`` times. The loop appends to ``call.history`` as it runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._chat_loop import ChatCall, ChatLoop
from ._fold import EventFold, Folded, add_usage
from ._linked_event import LinkedEvent
from ._outcome import drain, failed, raise_for, reply_of
from ._prepare import Call
from ._reply import Reply
from ._typed import AnswerSpec, correction_prompt, parse_answer
from .call_log._hooks import finish, watch
from .errors import BadResponse, Cancelled, OllmError
from .types import ChatEvent, ChatFinishEvent, Message, TextEvent

if TYPE_CHECKING:
    from .chat import Turn
    from .client import Client

__all__ = ["call_events", "call_pieces", "call_reply"]

logger = logging.getLogger(__name__)


def call_events(
    client: Client,
    call: Call,
    cancel: threading.Event | None,
    turns: list[Turn],
    *,
    response_format: Any = None,
    deadline: float | None = None,
) -> Generator[ChatEvent, None, None]:
    """The chat runtime's events for ``call``; never raises (failures are events)."""
    settings = call.settings
    if deadline is None and settings.timeout is not None:
        deadline = time.monotonic() + settings.timeout
    try:
        # may list the server's models: inside the call's deadline, like every request of it
        model = client._model(call.model, LinkedEvent(cancel, deadline=deadline))
    except Cancelled:
        yield ChatFinishEvent("cancelled")
        return
    except OllmError as exc:
        yield from failed(exc)
        return
    settings = replace(settings, response_format=response_format, deadline=deadline)
    keywords = call.loop | ChatCall(model=model, cancel=cancel, settings=settings)
    loop = ChatLoop(client._chat, call.history, turns, **keywords)
    events = loop.run(call.prompt, ())
    try:
        yield from events
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


def call_pieces(client: Client, call: Call, cancel: threading.Event | None) -> Iterator[str]:
    """The answer's text pieces; ends quietly when cancelled, raises the typed error after."""
    fold = EventFold()
    events = watch(call, call_events(client, call, cancel, []))
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
    client: Client, call: Call, cancel: threading.Event | None, spec: AnswerSpec | None
) -> tuple[Reply, Folded]:
    """Drive the call to its end; never raises for the chat's own outcome."""
    reply, folded = _drive(client, call, cancel, spec)
    finish(call, reply)  # the call log, when the call is logged
    return reply, folded


def _drive(
    client: Client, call: Call, cancel: threading.Event | None, spec: AnswerSpec | None
) -> tuple[Reply, Folded]:
    timeout = call.settings.timeout
    deadline = None if timeout is None else time.monotonic() + timeout
    schema = spec.schema if spec is not None else None
    turns: list[Turn] = []
    folded = drain(
        call_events(client, call, cancel, turns, response_format=schema, deadline=deadline)
    )
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
        folded = drain(
            call_events(client, retry, cancel, turns, response_format=schema, deadline=deadline)
        )
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

"""The gate: one way in for every model request a client makes.

A :class:`Gate` is a layer around a provider, the way httpx puts its transports around one
interface: every model request of every surface — ``ask``, ``stream``, ``run``'s turns,
``events``, ``map``, batch lines and the CLI's ``chat`` — passes it, and nothing reaches the
server around it. Each call opens a :class:`GatedCall` (:meth:`Gate.call`), itself
provider-shaped: the chat loop streams the call's turns through it as through any provider.
A request passes, in this order:

1. the cache (``cache=True``): an identical logged turn answers and nothing is sent;
2. the server;

and its answer comes back through the call log (the call's row is committed when the call
ends). A client with none of these on has no gate: its requests go straight to the provider.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._cancel_link import deadline_for
from ..errors import Cancelled, OllmError
from ..types import (
    ChatEvent,
    ChatResult,
    ErrorEvent,
    FinishEvent,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
)

if TYPE_CHECKING:
    from ..call_log._recorder import CallLogger, Recorder
    from ..client._prepare import Call
    from ..client._run_call import Reply
    from ..providers.base import ProviderAdapter
    from ..types._event_fold import EventFold

__all__ = ["Gate", "GatedCall", "batch_gate", "chat_line", "gate_for"]

#: A batch line's ending as a ``Reply.finish``.
_LINE_FINISH = {"stop": "complete", "length": "complete", "tool_calls": "tool_calls"}


def gate_for(provider: ProviderAdapter, *, log: CallLogger | None) -> Gate | None:
    """The gate of a client on ``provider`` (``None``: nothing to pass, the provider is
    called directly)."""
    if log is None:
        return None
    return Gate(provider, log=log)


class Gate:
    """A provider with the call log, the cache (and what else a client sets) around it.

    Everything but the model requests is the provider's own (``name``, ``embed``,
    ``list_models`` …): the gate passes those through.

    Args:
        provider: The provider the requests go to.
        log: The client's call log (``None``: not logged).
        source: What a request made on the gate itself is logged as (a batch run's
            ``batch:<file>``).
    """

    def __init__(
        self, provider: ProviderAdapter, *, log: CallLogger | None, source: str = "ask"
    ) -> None:
        self.inner = provider
        self.log = log
        self.source = source

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"Gate({self.inner!r}, log={self.log!r})"

    def with_source(self, source: str) -> Gate:
        """The same gate (same log and counters), its own requests logged as ``source``."""
        other = object.__new__(Gate)
        other.__dict__.update(self.__dict__)
        other.source = source
        return other

    def call(
        self,
        source: str,
        call: Call | None = None,
        *,
        session_id: str | None = None,
        custom_id: str | None = None,
        model: str | None = None,
        deadline: float | None = None,
        headers: Sequence[str] = (),
    ) -> GatedCall:
        """The way in of one call (``call``: a script call, prepared; the CLI's ``chat`` and
        a batch line give their ``model``, ``deadline`` and header values instead)."""
        record = None
        if self.log is not None:
            record = self.log.begin(
                source,
                call,
                session_id=session_id,
                custom_id=custom_id,
                model=model,
                deadline=deadline,
                headers=headers,
            )
        return GatedCall(self, record)

    def line(self, request: ProviderRequest, custom_id: str, cancel: threading.Event) -> ChatResult:
        """One batch line: a call of its own, one whole (non-streamed) request.

        Raises:
            OllmError: the line's failure (the call is logged first).
        """
        way = self.call(
            self.source,
            custom_id=custom_id,
            model=request.model,
            deadline=deadline_for(request.timeout, cancel),
            headers=list(request.headers.values()),
        )
        return way.line(replace(request, cancel=cancel))


class GatedCall:
    """One call's way in: a provider whose model requests pass the gate and are noted in the
    call's record; everything else is the provider's."""

    def __init__(self, gate: Gate, record: Recorder | None) -> None:
        self.gate = gate
        self.inner = gate.inner
        self.record = record

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"GatedCall({self.inner!r})"

    # ------------------------------------------------------------------ requests

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """The events of one model turn: from the cache, else from the server."""
        record = self.record
        turn = record.open_turn(request) if record is not None else None
        if turn is not None and record is not None:
            found = record.cached(turn)
            if found is not None:
                from ..call_log._answers import answer_events

                yield from answer_events(found, spent=False)
                return
        yield from self._noted(self.inner.chat_stream(request), turn)

    def chat(self, request: ProviderRequest) -> ChatResult:
        """One whole model turn (as ``provider.chat``), through the gate."""
        from ..providers.base import collect_result

        return collect_result(self.chat_stream(request))

    def _noted(
        self, events: Iterator[ProviderEvent], turn: dict[str, Any] | None
    ) -> Iterator[ProviderEvent]:
        if turn is None:
            yield from events
            return
        record = self.record
        answer = turn["answer"]
        text: list[str] = []
        thinking: list[str] = []
        try:
            for event in events:
                if isinstance(event, TextEvent | ThinkingEvent | ToolCallEvent):
                    if record is not None:
                        record.note_first_token()
                    if isinstance(event, TextEvent):
                        text.append(event.value)
                    elif isinstance(event, ThinkingEvent):
                        thinking.append(event.value)
                    else:
                        answer["tool_calls"].append(_tool_call_dict(event))
                elif isinstance(event, FinishEvent):
                    answer["finish"] = event.reason
                    answer["usage"] = _usage_dict(event)
                elif isinstance(event, ErrorEvent):
                    answer["finish"] = "error"
                    answer["error"] = {"code": event.error.code, "message": event.error.message}
                answer["text"] = "".join(text)
                answer["thinking"] = "".join(thinking)
                yield event
        finally:
            answer["text"] = "".join(text)
            answer["thinking"] = "".join(thinking)
            if answer["finish"] is None:
                answer["finish"] = "cancelled"

    def line(self, request: ProviderRequest) -> ChatResult:
        """A batch line's one whole request (``provider.chat``, not streamed), logged as a
        call of its own when it ends.

        Raises:
            OllmError: the line's failure.
        """
        from ..client._run_call import Reply

        record = self.record
        turn = record.open_turn(request) if record is not None else None
        found = record.cached(turn) if turn is not None and record is not None else None
        if found is not None:
            from ..call_log._answers import answer_events
            from ..providers.base import collect_result

            result = collect_result(answer_events(found, spent=False))
        else:
            try:
                result = self.inner.chat(request)
            except OllmError as exc:
                cancelled = isinstance(exc, Cancelled)
                if turn is not None:
                    turn["answer"]["finish"] = "cancelled" if cancelled else "error"
                    if not cancelled:
                        turn["answer"]["error"] = {"code": exc.code, "message": exc.message}
                finish = "cancelled" if cancelled else "error"
                self.finish(
                    Reply("", None, finish=finish, turns=1, error=None if cancelled else exc)
                )
                raise
            if turn is not None:
                turn["answer"].update(_result_answer(result))
        self.finish(
            Reply(
                result.content or "",
                result.thinking,
                tool_calls=list(result.tool_calls),
                usage=result.usage if found is None else None,
                finish=_LINE_FINISH.get(result.finish_reason, result.finish_reason),
                turns=1,
            )
        )
        return result

    # ------------------------------------------------------------------ the end

    def watch(self, events: Generator[ChatEvent, None, None]) -> Generator[ChatEvent, None, None]:
        """``events`` passed through; the call ends when they end or are closed."""
        from ..types._event_fold import EventFold

        fold = EventFold()
        completed = False
        try:
            for event in events:
                fold.add(event)
                yield event
            completed = True
        finally:
            events.close()
            self.finish_fold(fold, cancelled=not completed)

    def finish_fold(self, fold: EventFold, *, cancelled: bool) -> None:
        """End the call from the events it produced (``cancelled``: closed early)."""
        if self.record is not None:
            self.record.finish_fold(fold, cancelled=cancelled)

    def finish(self, reply: Reply) -> None:
        """End the call: its row is committed before the call returns."""
        if self.record is not None:
            self.record.finish(reply)


def _tool_call_dict(event: ToolCallEvent) -> dict[str, Any]:
    from ..call_log._records import tool_call_dict

    return tool_call_dict(event.value)


def _usage_dict(event: FinishEvent) -> dict[str, Any] | None:
    from ..call_log._records import usage_dict

    return usage_dict(event.usage)


def _result_answer(result: ChatResult) -> dict[str, Any]:
    from ..call_log._records import tool_call_dict, usage_dict

    return {
        "text": result.content or "",
        "thinking": result.thinking or "",
        "tool_calls": [tool_call_dict(c) for c in result.tool_calls],
        "finish": "tool" if result.finish_reason == "tool_calls" else result.finish_reason,
        "usage": usage_dict(result.usage),
    }


# --------------------------------------------------------------------------- batch lines


def batch_gate(client: Any, input_path: Any) -> Any:
    """The provider a batch on ``client`` runs on: the client's gate (its lines logged as
    ``batch:<input file's base name>``), else the client's provider."""
    gate: Gate | None = getattr(client, "gate", None)
    if gate is None:
        return client.provider
    return gate.with_source(_batch_source(input_path))


def cli_batch_gate(provider: Any, config: Any, input_path: Any) -> Any:
    """``provider`` for ``ollm-lite batch run``, behind a gate when ``OLLM_LOG`` or the
    config file turn on what it passes."""
    from ..call_log._hooks import client_logger

    gate = gate_for(provider, log=client_logger(None, None, config, provider))
    return provider if gate is None else gate.with_source(_batch_source(input_path))


def _batch_source(input_path: Any) -> str:
    return f"batch:{os.path.basename(str(input_path))}"


def chat_line(
    provider: Any, request: ProviderRequest, custom_id: str, cancel: threading.Event
) -> ChatResult:
    """One batch line's answer: through the gate when the batch has one."""
    if isinstance(provider, Gate):
        return provider.line(request, custom_id, cancel)
    result: ChatResult = provider.chat(replace(request, cancel=cancel))
    return result

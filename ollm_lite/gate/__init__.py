"""The gate: one way in for every model request a client makes.

A :class:`Gate` is a layer around a provider, the way httpx puts its transports around one
interface: every model request of every surface — ``ask``, ``stream``, ``run``'s turns,
``events``, ``map``, batch lines and the CLI's ``chat`` — passes it, and nothing reaches the
server around it. Each call opens a :class:`GatedCall` (:meth:`Gate.call`), itself
provider-shaped: the chat loop streams the call's turns through it as through any provider.
A request passes, in this order:

1. the cache (``cache=True``): an identical logged turn answers and nothing is sent, spent,
   refused or delayed;
2. the budget (:mod:`~ollm_lite.gate._budget`): at or past a limit the request is not sent
   (``BudgetExceeded``);
3. the rate limit (:mod:`~ollm_lite.gate._rate`): the request waits for its turn, within the
   call's deadline; one that waited is checked against the budget again;
4. the server;

and its answer comes back through the call log (the call's row is committed when the call
ends) and the spend counters: each turn's tokens and its cost from the client's prices
(:mod:`~ollm_lite.gate._prices`). A client with none of these on has no gate: its requests
go straight to the provider.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._cancel_link import deadline_for
from ..errors import BudgetExceeded, Cancelled, ConfigError, OllmError
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
    Usage,
)
from ._budget import Budget, Spending, Spent
from ._prices import Price, turn_cost
from ._rate import RateLimit, RateLimiter

if TYPE_CHECKING:
    from ..call_log._recorder import CallLogger, Recorder
    from ..client._prepare import Call
    from ..client._run_call import Reply
    from ..providers.base import ProviderAdapter
    from ..types._event_fold import EventFold

__all__ = [
    "Budget",
    "Gate",
    "GatedCall",
    "RateLimit",
    "batch_gate",
    "chat_line",
    "cli_batch_gate",
    "configured_gate",
    "gate_for",
]

#: A batch line's ending as a ``Reply.finish``.
_LINE_FINISH = {"stop": "complete", "length": "complete", "tool_calls": "tool_calls"}


def gate_for(
    provider: ProviderAdapter,
    *,
    log: CallLogger | None,
    prices: Mapping[str, Price] | None = None,
    budget: Budget | None = None,
    rate: RateLimit | None = None,
) -> Gate | None:
    """The gate of a client on ``provider`` (``None``: nothing to pass, the provider is
    called directly)."""
    if log is None and not prices and budget is None and rate is None:
        return None
    return Gate(provider, log=log, prices=prices, budget=budget, rate=rate)


class Gate:
    """A provider with the call log, the cache (and what else a client sets) around it.

    Everything but the model requests is the provider's own (``name``, ``embed``,
    ``list_models`` …): the gate passes those through.

    Args:
        provider: The provider the requests go to.
        log: The client's call log (``None``: not logged).
        prices: Prices per million tokens by model name (a turn of another model has no
            cost).
        budget: Limits on what the client spends (``per`` a day or a month: counted from
            ``log``, which it needs).
        rate: Requests and tokens per minute, for every thread of the client.
        source: What a request made on the gate itself is logged as (a batch run's
            ``batch:<file>``).
    """

    def __init__(
        self,
        provider: ProviderAdapter,
        *,
        log: CallLogger | None,
        prices: Mapping[str, Price] | None = None,
        budget: Budget | None = None,
        rate: RateLimit | None = None,
        source: str = "ask",
    ) -> None:
        if budget is not None and budget.from_log and log is None:
            raise ConfigError(f"a per={budget.per!r} budget is counted from the call log")
        self.inner = provider
        self.log = log
        self.prices = dict(prices or {})
        self.budget = budget
        self.spending = Spending(budget, log.file if log is not None else None)
        self.limiter = RateLimiter(rate) if rate is not None else None
        self.source = source

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"Gate({self.inner!r}, log={self.log!r})"

    def release(self) -> None:
        """Close what the gate itself holds open (the budget's read connection to the log);
        the provider is its owner's to close. A later request opens it again."""
        self.spending.close()

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
        self.costs: list[float | None] = []
        """Each model turn's cost (0 for one answered from the cache)."""
        self.spent = Spent()
        """What this call spent (settled with the client's counters once it is logged)."""
        self._lock = threading.Lock()

    @property
    def cost(self) -> float | None:
        """The call's cost: the sum over its model turns; ``None`` when a turn's model has
        no price or a priced turn came without usage (or no turn was made)."""
        with self._lock:
            costs = list(self.costs)
        if not costs or any(c is None for c in costs):
            return None
        return float(sum(c for c in costs if c is not None))

    def _admit(self, request: ProviderRequest) -> None:
        """Let the request go to the server, or refuse it.

        Raises:
            BudgetExceeded: a limit is reached (nothing was sent nor counted).
            RequestTimeout: the rate limit's next turn comes after the call's deadline.
            Cancelled: the call was cancelled while it waited for its turn.
        """
        spending, limiter = self.gate.spending, self.gate.limiter
        wait = self.record.write_budget() if self.record is not None else 5.0
        spending.check(reserve=True, budget_seconds=wait)  # refused at once, not after a wait
        if limiter is not None:
            try:
                deadline = deadline_for(request.timeout, request.cancel)
                slot, waited = limiter.acquire(request.cancel, deadline)
            except OllmError:
                spending.sent(-1)
                raise
            if waited:  # what others spent meanwhile counts: checked again (less its own)
                try:
                    spending.check(reserve=False, budget_seconds=wait, own=1)
                except BudgetExceeded:
                    limiter.release(slot)
                    spending.sent(-1)
                    raise
        with self._lock:
            self.spent.requests += 1

    def _spent(self, request: ProviderRequest, usage: Usage | None) -> None:
        """A turn's answer arrived: its tokens and cost are counted."""
        cost = turn_cost(self.gate.prices.get(request.model), usage)
        tokens = 0
        if usage is not None:
            tokens = (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
        with self._lock:
            self.costs.append(cost)
            self.spent.tokens += tokens
            self.spent.cost += cost or 0.0
        self.gate.spending.answered(tokens, cost)
        if self.gate.limiter is not None:
            self.gate.limiter.answered(tokens)

    def _refused(self, turn: dict[str, Any] | None) -> None:
        if turn is not None and self.record is not None:
            self.record.drop_turn(turn)

    def _from_cache(self) -> None:
        with self._lock:
            self.costs.append(0.0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"GatedCall({self.inner!r})"

    # ------------------------------------------------------------------ requests

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """The events of one model turn: from the cache, else from the server."""
        record = self.record
        turn = record.open_turn(request, self.inner) if record is not None else None
        if turn is not None and record is not None:
            found = record.cached(turn)
            if found is not None:
                from ..call_log._answers import answer_events

                self._from_cache()
                yield from answer_events(found, spent=False)
                return
        try:
            self._admit(request)
        except OllmError as exc:
            self._refused(turn)
            if isinstance(exc, Cancelled):
                yield FinishEvent("cancelled")
            else:
                yield ErrorEvent(exc.to_info(), exception=exc)
            return
        yield from self._noted(request, self.inner.chat_stream(request), turn)

    def chat(self, request: ProviderRequest) -> ChatResult:
        """One whole model turn (as ``provider.chat``), through the gate."""
        from ..providers.base import collect_result

        return collect_result(self.chat_stream(request))

    def _noted(
        self,
        request: ProviderRequest,
        events: Iterator[ProviderEvent],
        turn: dict[str, Any] | None,
    ) -> Iterator[ProviderEvent]:
        """``events`` passed on, the answer noted: its cost and, when logged, its record."""
        usage: Usage | None = None
        noted = events if turn is None else self._recorded(events, turn)
        try:
            for event in noted:
                if isinstance(event, FinishEvent):
                    usage = event.usage
                yield event
        finally:
            for stream in (noted, events):  # stopped early: ended now, not at GC
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
            self._spent(request, usage)

    def _recorded(
        self, events: Iterator[ProviderEvent], turn: dict[str, Any]
    ) -> Iterator[ProviderEvent]:
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
                    if event.provider_blocks:  # thinking blocks, signatures: replayed as sent
                        answer["provider_blocks"] = _blocks(event)
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
        turn = record.open_turn(request, self.inner) if record is not None else None
        found = record.cached(turn) if turn is not None and record is not None else None
        if found is not None:
            from ..call_log._answers import answer_events
            from ..providers.base import collect_result

            result = collect_result(answer_events(found, spent=False))
            self._from_cache()
        else:
            try:
                try:
                    self._admit(request)
                except OllmError:
                    self._refused(turn)
                    turn = None
                    raise
                try:
                    result = self.inner.chat(request)
                except OllmError:
                    self._spent(request, None)
                    raise
            except OllmError as exc:
                cancelled = isinstance(exc, Cancelled)
                if turn is not None:
                    turn["answer"]["finish"] = "cancelled" if cancelled else "error"
                    if not cancelled:
                        turn["answer"]["error"] = {"code": exc.code, "message": exc.message}
                finish = "cancelled" if cancelled else "error"
                sent = self.spent.requests
                self.finish(
                    Reply("", None, finish=finish, turns=sent, error=None if cancelled else exc)
                )
                raise
            self._spent(request, result.usage)
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
        from ..client._run_call import reply_of

        folded = fold.result()
        reply = reply_of(folded, [], len(self.costs))
        if cancelled and folded.finish is None:
            reply.finish = "cancelled"
            reply.error = None
        self.finish(reply)

    def finish(self, reply: Reply) -> None:
        """End the call: ``reply.cost`` set, the row committed before the call returns (from
        then on the log counts what it spent)."""
        reply.cost = self.cost
        if self.record is not None and self.record.finish(reply):
            with self._lock:
                spent = Spent(self.spent.requests, self.spent.tokens, self.spent.cost)
            self.gate.spending.logged(spent)


def _tool_call_dict(event: ToolCallEvent) -> dict[str, Any]:
    from ..call_log._records import tool_call_dict

    return tool_call_dict(event.value)


def _usage_dict(event: FinishEvent) -> dict[str, Any] | None:
    from ..call_log._records import usage_dict

    return usage_dict(event.usage)


def _blocks(event: FinishEvent) -> list[dict[str, Any]]:
    from ..call_log._records import blocks_to_list

    return blocks_to_list(event.provider_blocks)


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


def configured_gate(provider: Any, config: Any, log: bool | None = None) -> Gate | None:
    """The gate of the command line on ``provider``: what ``OLLM_LOG`` and the config file
    (``[log]``, ``[prices."MODEL"]``, ``[budget]``, ``[rate]``) turn on, ``log`` (``chat
    --log/--no-log``) first; a day or month budget turns the log on.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a day or month budget with ``--no-log``.
    """
    from ..call_log._hooks import client_logger
    from ._budget import budget_from
    from ._prices import prices_from
    from ._rate import rate_from

    budget = budget_from(None, getattr(config, "budget", None))
    if budget is not None and budget.from_log:
        if log is False:
            raise ConfigError(f"the per={budget.per!r} budget is counted from the call log")
        log = True
    return gate_for(
        provider,
        log=client_logger(log, None, config, provider),
        prices=prices_from(None, getattr(config, "prices", None)),
        budget=budget,
        rate=rate_from(None, getattr(config, "rate", None)),
    )


def cli_batch_gate(provider: Any, config: Any, input_path: Any) -> Any:
    """``provider`` for ``ollm-lite batch run``, behind the configured gate, if any."""
    gate = configured_gate(provider, config)
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

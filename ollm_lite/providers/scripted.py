"""A provider that replays a script: ``ScriptedProvider``.

For your own tests and for offline demos. It is a real :class:`ProviderAdapter`: it streams
events with the same guarantees as the HTTP providers (exactly one terminal event, prompt
cancellation) and records every request it receives, so a test can assert what the chat
runtime sent.

    provider = ScriptedProvider([
        [ToolCallEvent(ToolCall.from_arguments("c1", "add", {"a": 1})), FinishEvent("tool")],
        "The sum is 3.",
    ])

A ``str`` turn is that text followed by ``FinishEvent("stop")``. When the script runs out, the
next request ends with an ``ErrorEvent`` (``LLM_BAD_RESPONSE``, "script exhausted").
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from .._cancel_link import deadline_for
from ..errors import ConfigError
from ..types import (
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    ModelInfo,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
)
from .base import BaseProvider, approx_token_count

if TYPE_CHECKING:
    from ..call_log import LoggedCall

__all__ = ["ScriptedProvider", "ScriptedTurn"]

_TERMINAL = (FinishEvent, ErrorEvent)


@dataclass(slots=True)
class ScriptedTurn:
    """One scripted model response.

    Attributes:
        events: What the model "streams", in order. Without a terminal event at the end, a
            ``FinishEvent("stop")`` (or ``"tool"`` after tool calls) is added.
        delay: Seconds to wait before each event (cancellable).
        hang: After the events, block until the request's cancel event is set, like a server
            that stops talking (a request without a cancel event then ends with an error).
        check: Called with the request the turn answers: ``None`` to play the turn, else
            what is wrong with the request, and the turn ends at once with that
            ``ConfigError`` (``CONFIG_INVALID``) instead (a strict :meth:`~ScriptedProvider.
            from_log` replay checks each request against its logged turn so).

    Like the HTTP providers, a turn honours ``request.timeout`` and the call's deadline its
    cancel event carries: when its delays or its hang outlast them, the turn ends with an
    ``ErrorEvent`` (``LLM_TIMEOUT``).
    """

    events: list[ProviderEvent] = field(default_factory=list)
    delay: float = 0.0
    hang: bool = False
    check: Callable[[ProviderRequest], str | None] | None = field(default=None, repr=False)


TurnLike = ScriptedTurn | list[ProviderEvent] | str


def _as_turn(turn: TurnLike) -> ScriptedTurn:
    if isinstance(turn, ScriptedTurn):
        return turn
    if isinstance(turn, str):
        return ScriptedTurn([TextEvent(turn), FinishEvent("stop")])
    if isinstance(turn, list):
        return ScriptedTurn(list(turn))
    raise TypeError(f"a scripted turn is a ScriptedTurn, a list of events or a str, not {turn!r}")


class ScriptedProvider(BaseProvider):
    """Replays scripted turns, one per request; records every request.

    Args:
        turns: The responses, in order (``ScriptedTurn``, a list of events, or plain text).
        name: The provider name it reports (and registers under).
        capabilities: What it claims to support (default: native tool calling, streaming).
        context_length: What :meth:`context_length` answers (``None``: unknown).
        token_counter: When given, :meth:`count_tokens` uses it and ``token_counting`` is on.

    Attributes:
        requests: Every request received, in order.
    """

    name: str = "scripted"  # type: ignore[misc]  # per instance, unlike the HTTP providers
    streaming_format: ClassVar[str] = "memory"
    #: Whether the config file's ``[log]`` or ``OLLM_LOG`` alone turn the call log on for a
    #: client of this provider: not for a script, so a test never writes into the real log
    #: (``connect(log=...)`` and ``cache=`` still do).
    log_from_settings: ClassVar[bool] = False

    def __init__(
        self,
        turns: Iterable[TurnLike] = (),
        *,
        name: str = "scripted",
        capabilities: ProviderCapabilities | None = None,
        context_length: int | None = None,
        token_counter: Callable[[ProviderRequest], int] | None = None,
    ) -> None:
        self.name = name
        self.capabilities = capabilities or ProviderCapabilities(
            streaming=True,
            tool_calling=True,
            model_management=False,
            embeddings=False,
            token_counting=token_counter is not None,
            guided_decoding=False,
            vision=None,
            thinking=None,
        )
        self._context_length = context_length
        self._token_counter = token_counter
        self._turns: deque[ScriptedTurn] = deque(_as_turn(t) for t in turns)
        self._lock = threading.Lock()
        self.requests: list[ProviderRequest] = []

    def __repr__(self) -> str:
        return f"ScriptedProvider(name={self.name!r}, turns_left={len(self._turns)})"

    @classmethod
    def from_log(
        cls, calls: Iterable[LoggedCall], *, strict: bool = True, **keywords: Any
    ) -> ScriptedProvider:
        """A provider that replays the model turns of logged calls, offline.

        Turns last night's logged run into a test of the script: each model turn of
        ``calls`` (``open_log().calls(...)``), oldest call first whatever order they are
        given in, answers one request as the model did.

        Args:
            calls: :class:`~ollm_lite.call_log.LoggedCall` values.
            strict: Each request must be the one its logged turn answered: the same
                messages, system prompt, tools, schema, ``tool_choice``, ``think`` and
                generation options (the cache's identity of a request, less provider, base
                URL and model); else that call fails with ``ConfigError`` naming the first
                difference. ``False``: the turns answer by order alone.
            **keywords: As the constructor takes them (``name``, ``capabilities`` …).
        """
        from ..call_log._replay import RequestCheck, logged_requests, replay_turns

        calls = list(calls)
        turns = replay_turns(calls)
        if not strict:
            return cls(turns, **keywords)
        requests = logged_requests(calls)
        return cls(
            [
                ScriptedTurn(events, check=RequestCheck(request, number))
                for number, (events, request) in enumerate(zip(turns, requests, strict=True), 1)
            ],
            **keywords,
        )

    def enqueue(self, turn: TurnLike) -> None:
        """Add a turn at the end of the script."""
        with self._lock:
            self._turns.append(_as_turn(turn))

    @property
    def remaining(self) -> int:
        """Turns not yet played."""
        return len(self._turns)

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """Play the next turn of the script.

        Yields:
            The turn's events, ending with exactly one ``FinishEvent`` or ``ErrorEvent``;
            ``FinishEvent("cancelled")`` as soon as ``request.cancel`` is set.
        """
        with self._lock:
            self.requests.append(request)
            turn = self._turns.popleft() if self._turns else None
        wrong = turn.check(request) if turn is not None and turn.check is not None else None
        if wrong is not None:
            error = ConfigError(wrong)
            return iter([ErrorEvent(error.to_info(), exception=error)])
        return self._play(turn, request.cancel, deadline_for(request.timeout, request.cancel))

    @staticmethod
    def _play(
        turn: ScriptedTurn | None, cancel: threading.Event | None, deadline: float | None
    ) -> Iterator[ProviderEvent]:
        if cancel is not None and cancel.is_set():
            yield FinishEvent("cancelled")
            return
        if turn is None:
            yield ErrorEvent(
                ErrorInfo("script exhausted: no scripted turn left", "LLM_BAD_RESPONSE")
            )
            return
        saw_tool = False
        for event in turn.events:
            if turn.delay > 0:
                waited = _wait(cancel, turn.delay, deadline)
                if waited != "done":
                    yield _ended(waited)
                    return
            if cancel is not None and cancel.is_set():
                yield FinishEvent("cancelled")
                return
            yield event
            if isinstance(event, _TERMINAL):
                return
            saw_tool = saw_tool or event.type == "tool_call"
        if turn.hang:
            if cancel is None and deadline is None:
                yield ErrorEvent(
                    ErrorInfo("scripted hang without a cancel event to end it", "LLM_TIMEOUT")
                )
                return
            yield _ended(_wait(cancel, None, deadline))
            return
        yield FinishEvent("tool" if saw_tool else "stop")

    def count_tokens(
        self, request: ProviderRequest, *, cancel: threading.Event | None = None
    ) -> int:
        """Tokens by the ``token_counter`` given, else the ceil(chars / 4) estimate (at least 1)."""
        if self._token_counter is None:
            return max(1, approx_token_count(request))
        return self._token_counter(request)

    def list_models(self, *, cancel: threading.Event | None = None) -> list[ModelInfo]:
        """One chat model named like the provider, so a client without a model still works."""
        return [ModelInfo(name=self.name, kind="chat")]

    def context_length(self, model: str, *, cancel: threading.Event | None = None) -> int | None:
        """The ``context_length`` given at construction."""
        return self._context_length

    def model_capabilities(
        self, model: str, *, cancel: threading.Event | None = None
    ) -> ProviderCapabilities:
        """The provider's capabilities (the same for every model)."""
        return self.capabilities


def _wait(
    cancel: threading.Event | None, seconds: float | None, deadline: float | None
) -> Literal["done", "cancelled", "timeout"]:
    """Sleep ``seconds`` (``None``: until cancelled), cut short by ``cancel`` or ``deadline``."""
    end = None if seconds is None else time.monotonic() + seconds
    outcome: Literal["done", "timeout"] = "done"
    if deadline is not None and (end is None or deadline < end):
        end, outcome = deadline, "timeout"
    event = cancel if cancel is not None else threading.Event()
    if event.wait(None if end is None else max(0.0, end - time.monotonic())):
        return "cancelled"
    return outcome


def _ended(outcome: str) -> ProviderEvent:
    if outcome == "cancelled":
        return FinishEvent("cancelled")
    return ErrorEvent(
        ErrorInfo("the scripted turn did not finish within its timeout", "LLM_TIMEOUT")
    )

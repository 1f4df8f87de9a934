"""The turn loop behind ``ChatClient.chat`` and ``Conversation.send``.

:class:`ChatLoop` holds the state of one chat call. Its loop is the same for every way of
offering tools: before each request it checks the token budget, it streams one turn (read by
:mod:`ollm_lite.chat._turn`), and the :mod:`tool strategy <ollm_lite.chat._strategies>`
says what the turn amounts to — an answer (the chat is complete), calls (run by
:mod:`ollm_lite.chat._parallel_tools`, results back into the history, next turn), or a
correction request. Each step says how it ended in the
:mod:`internal vocabulary <ollm_lite.types._finish_reasons>`; :meth:`ChatLoop.run` maps that
to the ``ChatFinishEvent`` it always yields last.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Generator, Iterable, Iterator
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, TypeVar, Unpack

from .._cancel_link import LinkedEvent
from .._safe_text import exception_text
from ..errors import ConfigError, OllmError, ProviderNotFound, RequestTimeout, check_positive_int
from ..providers.base import ProviderAdapter
from ..tokens import TokenCheck, TokenCounter
from ..types import (
    ChatEvent,
    ChatFinishEvent,
    ErrorEvent,
    ErrorInfo,
    GenerationOptions,
    ImagePart,
    Message,
    Part,
    ProviderRequest,
    TextPart,
    ToolCall,
    ToolSchema,
    TurnCompleteEvent,
    Usage,
    WarningEvent,
)
from ..types._event_fold import add_usage
from ..types._finish_reasons import Ending, chat_reason
from ._call_settings import CallSettings
from ._strategies import (
    Answer,
    Calls,
    GiveUp,
    Retry,
    ToolStrategy,
    Turn,
    assistant_message,
    choose_strategy,
)
from ._turn import read_turn
from ._vision import refuse_images_without_vision

if TYPE_CHECKING:
    from ..registry import ProviderRegistry
    from ..tools import ToolRegistry

__all__ = ["ChatCall", "ChatLoop", "ToolMode", "call_deadline_error", "tool_registry"]

logger = logging.getLogger("ollm_lite.chat")

ToolMode = Literal["auto", "native", "react"]
_TOOL_MODES: tuple[ToolMode, ...] = ("auto", "native", "react")

_T = TypeVar("_T")

#: The same failing call in this many turns ends the chat with ``loop_detected``.
LOOP_LIMIT = 3

#: The call settings every request carries as they are: those ``ProviderRequest`` has too,
#: but for the two set per turn.
_PER_REQUEST = tuple(
    f.name
    for f in fields(CallSettings)
    if f.name in ProviderRequest.__dataclass_fields__ and f.name not in ("tool_choice", "timeout")
)


class ChatCall(TypedDict, total=False):
    """What one chat call may set; a key left out or ``None`` takes the client's default."""

    provider: str | ProviderAdapter | None
    """A provider's name in the client's registry, or the provider itself (the gate's view
    of this call: every model request of the call goes through it)."""
    model: str | None
    system_prompt: str | None
    tools: ToolRegistry | Iterable[Any] | None
    options: GenerationOptions | None
    max_turns: int | None
    cancel: threading.Event | None
    tool_mode: ToolMode
    settings: CallSettings | None


class LoopClient(Protocol):
    """What the loop reads of the client it runs for (a ``ChatClient``): its defaults, its
    providers and one token counter per provider."""

    @property
    def registry(self) -> ProviderRegistry: ...
    @property
    def tools(self) -> ToolRegistry | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def max_turns(self) -> int: ...
    @property
    def max_parallel_tools(self) -> int: ...
    @property
    def tool_timeout(self) -> float | None: ...
    @property
    def system_prompt(self) -> str | None: ...
    @property
    def options(self) -> GenerationOptions: ...
    def _counter(self, adapter: ProviderAdapter) -> TokenCounter: ...


class ChatLoop:
    """The state of one chat call; :meth:`run` is its event stream."""

    def __init__(
        self,
        client: LoopClient,
        history: list[Message],
        turns: list[Turn],
        **call: Unpack[ChatCall],
    ) -> None:
        self.client = client
        self.history = history
        self.turns = turns
        self.provider = call.get("provider")
        self.model = call.get("model") or client.model
        self.system_prompt = _given(call.get("system_prompt"), client.system_prompt)
        self.given_tools = _given(call.get("tools"), client.tools)
        self.tools: ToolRegistry | None = None
        self.options = call.get("options") or client.options
        self.max_turns = _given(call.get("max_turns"), client.max_turns)
        # Our own event, set when the caller's is: leaving the loop early sets only ours.
        self.tool_mode = call.get("tool_mode", "auto")
        self.settings = call.get("settings") or CallSettings()
        # It carries the call's deadline to every request made for the call (look-ups too).
        self.cancel = LinkedEvent(call.get("cancel"), deadline=self.settings.deadline)
        self.usage: Usage | None = None
        self.failures: Counter[tuple[str, str]] = Counter()

    def run(self, prompt: str | Message, images: Iterable[ImagePart]) -> Iterator[ChatEvent]:
        """The chat's events; never raises, always ends with one ``ChatFinishEvent``."""
        closed_early = True
        try:
            ending = yield from self._chat(prompt, images)
            closed_early = False
            yield ChatFinishEvent(chat_reason(ending), self.usage)
        except Exception as exc:  # a provider or tool hook bug must not escape chat()
            logger.debug("chat loop failed", exc_info=True)
            info = (
                exc.to_info()
                if isinstance(exc, OllmError)
                else ErrorInfo(exception_text(exc), "LLM_BAD_RESPONSE")
            )
            closed_early = False
            yield ErrorEvent(info, exception=exc)
            yield ChatFinishEvent("error", self.usage)
        finally:
            if closed_early:  # the caller stopped iterating: stop whatever still runs
                self.cancel.set()  # our own event only, never the caller's

    def _chat(
        self, prompt: str | Message, images: Iterable[ImagePart]
    ) -> Generator[ChatEvent, None, Ending]:
        adapter, model, strategy = self._setup(prompt, images)
        number = 0
        while True:
            ending = yield from self._may_start(number, model)
            if ending is not None:
                return ending
            number += 1
            request = strategy.prepare(self._request(model, number))
            ending = yield from self._check_budget(adapter, request, model)
            if ending is not None:
                return ending
            turn = Turn(number)
            self.turns.append(turn)
            ending = yield from self._stream(adapter, request, turn, strategy.forwards_text)
            if ending is not None:
                self._keep_partial(turn)
                return ending
            step = strategy.interpret(turn)
            yield from step.events
            if isinstance(step, GiveUp):
                yield ErrorEvent(step.error)
                return "failed"
            after: Ending | None = None  # how the tools ended the chat, if they did
            if isinstance(step, Retry):
                self.history.extend(step.messages)
            elif isinstance(step, Answer):
                self.history.append(assistant_message(step.text, (), turn.provider_blocks))
            else:
                after = yield from self._act(strategy, turn, step)
                if after == "cancelled":
                    return after
            yield TurnCompleteEvent(number)
            if isinstance(step, Answer):
                return "answered"
            if after is not None:  # calls left for the caller to run
                return after
            if isinstance(step, Calls) and self._looping(turn):
                return "loop"

    # ------------------------------------------------------------------ steps

    def _setup(
        self, prompt: str | Message, images: Iterable[ImagePart]
    ) -> tuple[ProviderAdapter, str, ToolStrategy]:
        """Check the call's arguments, then add the prompt to the history.

        Raises:
            OllmError: a bad argument, an unknown provider, no model (the history unchanged).
        """
        user = user_message(prompt, images)
        if self.given_tools is not None:
            self.tools = tool_registry(self.given_tools)
        check_positive_int("max_turns", self.max_turns)
        if self.tool_mode not in _TOOL_MODES:
            raise ConfigError(
                f"tool_mode must be one of {', '.join(_TOOL_MODES)}, not {self.tool_mode!r}"
            )
        adapter = self._adapter()
        if not self.model:
            raise ConfigError("no model given: pass model= to ChatClient or to chat()")
        refuse_images_without_vision(adapter, self.model, user, self.cancel)
        self.history.append(user)
        schemas = self._schemas()
        strategy = choose_strategy(adapter, self.model, schemas, self.tool_mode, self.cancel)
        return adapter, self.model, strategy

    def _schemas(self) -> list[ToolSchema]:
        """The tools offered: ours, then the caller's own (no handler here) not named alike."""
        schemas = self.tools.schemas() if self.tools is not None and len(self.tools) else []
        handled = {s.name for s in schemas}
        return schemas + [s for s in self.settings.external_tools if s.name not in handled]

    def _is_external(self, call: ToolCall) -> bool:
        """A call for the caller to run: to a tool offered without a handler here."""
        external = {t.name for t in self.settings.external_tools}
        return call.name in external and (self.tools is None or call.name not in self.tools)

    def _adapter(self) -> ProviderAdapter:
        if self.provider is not None and not isinstance(self.provider, str):
            return self.provider
        registry = self.client.registry
        adapter = registry.get(self.provider)
        if adapter is not None:
            return adapter
        if self.provider is None:
            raise ProviderNotFound("no default provider is set in the registry")
        raise ProviderNotFound(
            f"no provider named {self.provider!r}; registered: "
            f"{', '.join(registry.list()) or 'none'}",
            provider=self.provider,
        )

    def _may_start(self, turns_done: int, model: str) -> Generator[ChatEvent, None, Ending | None]:
        """Whether another turn may start: not after a cancel, past ``max_turns`` or the
        call's deadline."""
        if self.cancel.is_set():
            return "cancelled"
        if turns_done >= self.max_turns:
            return "max_turns"
        remaining = self.settings.remaining()
        if remaining is not None and remaining <= 0:
            late = call_deadline_error(self.settings.timeout, model)
            yield ErrorEvent(late.to_info(), exception=late)
            return "failed"
        return None

    def _request(self, model: str, number: int) -> ProviderRequest:
        """The plain request of turn ``number``; the tool strategy adds its part. The call's
        deadline goes with it on the cancel event (``deadline_of(request.cancel)``), as the
        absolute time it is, to every layer down to the socket."""
        settings = self.settings
        return ProviderRequest(
            model,
            list(self.history),
            system_prompt=self.system_prompt,
            tool_choice=settings.tool_choice_for(number),
            options=self.options,
            cancel=self.cancel,
            **{name: _fresh(getattr(settings, name)) for name in _PER_REQUEST},
        )

    def _check_budget(
        self, adapter: ProviderAdapter, request: ProviderRequest, model: str
    ) -> Generator[ChatEvent, None, Ending | None]:
        """Warn before every request that is close to the context window; stop one over it."""
        # the window and a tokenizer may be asked over HTTP
        check = self.client._counter(adapter).check(request, cancel=self.cancel)
        if self.cancel.is_set():  # those calls fall back quietly when cancelled
            return "cancelled"
        remaining = self.settings.remaining()
        if remaining is not None and remaining <= 0:  # ... or when the deadline passed
            late = call_deadline_error(self.settings.timeout, model)
            yield ErrorEvent(late.to_info(), exception=late)
            return "failed"
        if check.exceeded:
            yield ErrorEvent(_too_long(check, model))
            return "token_limit"
        if check.warning:
            yield WarningEvent(
                "TOKEN_LIMIT_WARNING",
                f"{check.tokens} of {check.limit} context tokens used "
                f"({check.ratio:.0%}){'' if check.exact else ' (estimated)'}",
            )
        return None

    def _stream(
        self, adapter: ProviderAdapter, request: ProviderRequest, turn: Turn, forward: bool
    ) -> Generator[ChatEvent, None, Ending | None]:
        """Stream one response into ``turn`` (``None`` when it finished, else how it ended);
        its usage joins the chat's."""
        stream = adapter.chat_stream(request)

        def in_call_terms(event: ErrorEvent) -> ErrorEvent:
            return self._in_call_terms(event, request.model)

        try:
            return (
                yield from read_turn(
                    stream, turn, forward=forward, cancel=self.cancel, error=in_call_terms
                )
            )
        finally:
            self.usage = add_usage(self.usage, turn.usage)

    def _in_call_terms(self, event: ErrorEvent, model: str) -> ErrorEvent:
        """A request's ``LLM_TIMEOUT`` met at the call's deadline as the call's own: named by
        the ``timeout`` the caller gave, not by the seconds that request had left."""
        if event.error.code != "LLM_TIMEOUT":
            return event
        left = self.settings.remaining()
        if left is None or left > 0:  # the request's own limit, not the call's
            return event
        late = call_deadline_error(self.settings.timeout, model)
        return ErrorEvent(late.to_info(), exception=late)

    def _keep_partial(self, turn: Turn) -> None:
        """A turn that ended early keeps the text already shown, never half tool calls."""
        if turn.text:
            self.history.append(assistant_message(turn.text))

    def _act(
        self, strategy: ToolStrategy, turn: Turn, step: Calls
    ) -> Generator[ChatEvent, None, Ending | None]:
        """Run the turn's calls; their results join the history, in call order.

        Returns ``"cancelled"``, ``"tool_calls"`` when some calls are the caller's to run
        (every call is announced, only ours run), or ``None`` to go on.
        """
        turn.tool_calls = step.calls
        self.history.append(step.message)
        from ..tools import ToolRegistry
        from ._parallel_tools import (
            run_tool_calls,  # here: a chat whose model calls no tool never needs it
        )

        ours = [call for call in step.calls if not self._is_external(call)]
        registry = self.tools or ToolRegistry()
        timeout = self.client.tool_timeout or registry.timeout
        remaining = self.settings.remaining()
        if remaining is not None:  # the call's deadline bounds its tools too
            timeout = max(0.001, remaining if timeout is None else min(timeout, remaining))
        results = yield from run_tool_calls(
            registry,
            ours,
            self.cancel,
            width=self.client.max_parallel_tools,
            timeout=timeout,
            announce=step.calls,
        )
        self.history.extend(strategy.observations(ours, results))
        left = len(ours) < len(step.calls)
        if not left:
            turn.results = results
        if self.cancel.is_set():
            return "cancelled"
        return "tool_calls" if left else None

    def _looping(self, turn: Turn) -> bool:
        """Count this turn's failing calls, each distinct call once: a repeat is a loop only
        across turns (three identical calls made in parallel are one attempt the model has
        not yet seen the answer to)."""
        failed = {
            (call.name, canonical_arguments(call.args, call.arguments))
            for call, result in zip(turn.tool_calls, turn.results, strict=True)
            if not result.ok
        }
        for key in failed:
            self.failures[key] += 1
        return any(self.failures[key] >= LOOP_LIMIT for key in failed)


def call_deadline_error(limit: float | None, model: str | None) -> RequestTimeout:
    """``LLM_TIMEOUT`` for a call past its deadline, named by the timeout the caller gave
    (not by the seconds left to whichever request met it)."""
    return RequestTimeout(
        f"the call did not finish within its {limit:g} s timeout"
        if limit is not None
        else "the call passed its deadline",
        model=model,
        details={"timeout": limit},
    )


def _too_long(check: TokenCheck, model: str) -> ErrorInfo:
    return ErrorInfo(
        f"the request needs about {check.tokens} tokens but {model} has a "
        f"context window of {check.limit}: nothing was sent",
        "TOKEN_LIMIT_EXCEEDED",
        {"tokens": check.tokens, "limit": check.limit, "exact": check.exact},
    )


def canonical_arguments(args: dict[str, Any], raw: str) -> str:
    """The loop-detection key of a call's arguments: canonical JSON of ``args``.

    Unparseable arguments arrive as ``args == {}`` beside the raw text; that text is then the
    key, so two different garbled calls stay different while ``"{}"`` and ``"{ }"`` are one.
    """
    if not args and raw.strip():
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            return raw.strip()
        if not isinstance(parsed, dict):
            return raw.strip()
        args = parsed
    try:
        return json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(args)


def user_message(prompt: str | Message, images: Iterable[ImagePart]) -> Message:
    """The prompt as a user message; ``ConfigError`` for one that carries nothing."""
    if isinstance(prompt, Message):
        message = prompt
    elif isinstance(prompt, str):
        parts: list[Part] = [TextPart(prompt)] if prompt else []
        for image in images:
            if not isinstance(image, ImagePart):
                raise ConfigError(f"images must be ImagePart values, not {type(image).__name__}")
            parts.append(image)
        message = Message("user", parts)
    else:
        raise ConfigError(f"the prompt must be a str or a Message, not {type(prompt).__name__}")
    if not message.parts:
        raise ConfigError("the prompt is empty: give some text or an image")
    return message


def tool_registry(tools: ToolRegistry | Iterable[Any]) -> ToolRegistry:
    """A registry from a registry or from a list of tools and plain functions."""
    from ..tools import ToolRegistry  # here: a chat without tools never needs it

    if isinstance(tools, ToolRegistry):
        return tools
    if isinstance(tools, str | bytes) or not isinstance(tools, Iterable):
        raise ConfigError(
            f"tools must be a ToolRegistry or a list of tools, not {type(tools).__name__}"
        )
    return ToolRegistry(tools)  # ToolDefinitionError for an item that is no tool


def _given(value: _T | None, default: _T) -> _T:
    return default if value is None else value


def _fresh(value: _T) -> _T:
    """``value``, or a copy of it when it is a dict (each request owns its own)."""
    return dict(value) if isinstance(value, dict) else value  # type: ignore[return-value]

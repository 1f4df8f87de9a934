"""The chat runtime: ``ChatClient``, ``Conversation`` and the turn loop.

One *turn* streams one provider response: text and thinking are forwarded as they arrive, tool
calls are collected; then the calls run in parallel on a bounded pool of daemon threads, their
results go back to the model as ``tool`` messages in call order, and the next turn starts. The
loop ends at the first stop point:

* ``complete`` — the model answered without tool calls;
* ``max_turns`` — ``max_turns`` model turns were used;
* ``loop_detected`` — the same failing call (tool name + canonical JSON of its arguments)
  failed in three turns (identical calls within one turn count once);
* ``token_limit`` — the next request would not fit the model's context window (nothing sent);
* ``cancelled`` — the ``cancel`` event was set (the HTTP read in progress is interrupted,
  queued tool calls are not started, running ones receive the event);
* ``error`` — the provider failed (an ``ErrorEvent`` comes first).

Invariants:

* :meth:`ChatClient.chat` never raises (``KeyboardInterrupt``/``SystemExit`` aside); it ends
  with exactly one ``ChatFinishEvent``.
* History only ever holds whole exchanges: an assistant message with tool calls is followed by
  one ``tool`` message per call; a failed turn adds nothing but the text already streamed.
* No thread outlives the chat except a tool that ignores the cancel event (Python cannot stop
  a thread): it runs on as a daemon thread and its result is dropped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ._call_settings import CallSettings
from ._cancel_scope import LinkedEvent, cancel_scope
from ._history_format import json_kind, message_from_dict, message_to_dict, optional_str
from ._safe_text import exception_text, type_name
from .errors import ConfigError, OllmError, ProviderNotFound, RequestTimeout
from .providers.base import ProviderAdapter
from .react import STOP_SEQUENCES, ReActToolHandler
from .registry import ProviderRegistry
from .tokens import TokenCounter
from .tools import ToolRegistry
from .types import (
    ChatEvent,
    ChatFinishEvent,
    ChatFinishReason,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    GenerationOptions,
    ImagePart,
    Message,
    Part,
    ProviderRequest,
    RunResult,
    TextEvent,
    TextPart,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolResult,
    ToolSchema,
    TurnCompleteEvent,
    Usage,
    WarningEvent,
)

__all__ = ["ChatClient", "Conversation", "ToolMode", "Turn"]

logger = logging.getLogger(__name__)

ToolMode = Literal["auto", "native", "react"]
_TOOL_MODES: tuple[ToolMode, ...] = ("auto", "native", "react")

#: The same failing call in this many turns ends the chat with ``loop_detected``.
LOOP_LIMIT = 3
_POLL_S = 0.02  # how often a wait for tool results looks at the cancel event


@dataclass(slots=True)
class Turn:
    """One model turn: what the model said and did, and what its tools returned.

    Attributes:
        number: 1 for the first turn of a chat.
        text: The answer text of this turn (for ReAct: the final answer, if any).
        thinking: Reasoning text, kept apart.
        tool_calls: The calls the model made, in order.
        results: One result per call, in the same order.
        finish_reason: The provider's reason (``stop``, ``tool``, ``length`` …), or ``None``
            when the turn ended in an error.
        usage: Token usage the provider reported for this turn.
    """

    number: int
    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None


# --------------------------------------------------------------------------- client


class ChatClient:
    """Runs chats with tools over any provider of a registry.

    Args:
        registry: Where providers come from; a single adapter is accepted too.
        tools: The tools the model may call (``None``: none).
        model: The default model.
        max_turns: Default limit of model turns per chat.
        max_parallel_tools: Most tool calls run at once.
        tool_timeout: Per-call wall-clock limit in seconds (default: ``tools.timeout``);
            a call over it gets a ``TOOL_TIMEOUT`` result.
        context_limits: Context windows by model name (they win over what the server says).
        system_prompt: The default system prompt.
        options: Default generation options.

    Example:
        client = ChatClient(default_registry(), tools=ToolRegistry([get_weather]), model="llama3.2")
        for event in client.chat("Weather in Oslo?"):
            if isinstance(event, TextEvent):
                print(event.value, end="")
    """

    def __init__(
        self,
        registry: ProviderRegistry | ProviderAdapter,
        tools: ToolRegistry | Iterable[Any] | None = None,
        model: str | None = None,
        max_turns: int = 10,
        *,
        max_parallel_tools: int = 8,
        tool_timeout: float | None = None,
        context_limits: Mapping[str, int] | None = None,
        system_prompt: str | None = None,
        options: GenerationOptions | None = None,
    ) -> None:
        if not isinstance(registry, ProviderRegistry):
            single = ProviderRegistry()
            single.register(registry)
            single.set_default(registry.name)
            registry = single
        _check_positive_int("max_turns", max_turns)
        _check_positive_int("max_parallel_tools", max_parallel_tools)
        self.registry = registry
        self.tools = None if tools is None else _tool_registry(tools)
        self.model = model
        self.max_turns = max_turns
        self.max_parallel_tools = max_parallel_tools
        self.tool_timeout = tool_timeout
        self.context_limits = dict(context_limits or {})
        self.system_prompt = system_prompt
        self.options = options or GenerationOptions()
        self._counters: dict[int, TokenCounter] = {}
        self._lock = threading.Lock()
        _build_default_provider(registry)

    def __repr__(self) -> str:
        return f"ChatClient(model={self.model!r}, providers={self.registry.list()!r})"

    def chat(
        self,
        prompt: str | Message,
        provider: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        tools: ToolRegistry | Iterable[Any] | None = None,
        options: GenerationOptions | None = None,
        max_turns: int | None = None,
        cancel: threading.Event | None = None,
        tool_mode: ToolMode = "auto",
        *,
        images: Iterable[ImagePart] = (),
    ) -> Iterator[ChatEvent]:
        """Answer one prompt, running tools until the model is done (no history kept).

        Setting ``cancel`` stops the chat; the library only reads it. Leaving the loop early
        (``break``, ``close()``) stops this chat's own work without setting ``cancel``, so other
        chats sharing the event go on.

        Yields:
            Chat events; the last is always a ``ChatFinishEvent``.
        """
        history: list[Message] = []
        return self._run(
            history,
            prompt,
            images,
            provider=provider,
            model=model,
            system_prompt=system_prompt,
            tools=tools,
            options=options,
            max_turns=max_turns,
            cancel=cancel,
            tool_mode=tool_mode,
        )

    def conversation(self, system_prompt: str | None = None) -> Conversation:
        """A conversation that keeps its history across :meth:`Conversation.send` calls."""
        return Conversation(self, system_prompt=system_prompt)

    # ------------------------------------------------------------------ the loop

    def _run(
        self,
        history: list[Message],
        prompt: str | Message,
        images: Iterable[ImagePart],
        *,
        provider: str | None,
        model: str | None,
        system_prompt: str | None,
        tools: ToolRegistry | Iterable[Any] | None,
        options: GenerationOptions | None,
        max_turns: int | None,
        cancel: threading.Event | None,
        tool_mode: ToolMode,
        turns: list[Turn] | None = None,
        settings: CallSettings | None = None,
    ) -> Iterator[ChatEvent]:
        loop = _Loop(
            client=self,
            history=history,
            provider_name=provider,
            model=model or self.model,
            system_prompt=system_prompt if system_prompt is not None else self.system_prompt,
            tools=self.tools if tools is None else tools,
            options=options or self.options,
            max_turns=self.max_turns if max_turns is None else max_turns,
            cancel=cancel,
            tool_mode=tool_mode,
            turns=turns if turns is not None else [],
            settings=settings or CallSettings(),
        )
        return loop.run(prompt, images)

    def _counter(self, adapter: ProviderAdapter) -> TokenCounter:
        with self._lock:
            counter = self._counters.get(id(adapter))
            if counter is None or counter.provider is not adapter:
                counter = TokenCounter(adapter, context_limits=self.context_limits)
                self._counters[id(adapter)] = counter
            return counter


class _Loop:
    """The state of one chat call."""

    def __init__(
        self,
        *,
        client: ChatClient,
        history: list[Message],
        provider_name: str | None,
        model: str | None,
        system_prompt: str | None,
        tools: ToolRegistry | Iterable[Any] | None,
        options: GenerationOptions,
        max_turns: int,
        cancel: threading.Event | None,
        tool_mode: ToolMode,
        turns: list[Turn],
        settings: CallSettings,
    ) -> None:
        self.client = client
        self.history = history
        self.provider_name = provider_name
        self.model = model
        self.system_prompt = system_prompt
        self._given_tools = tools
        self.tools: ToolRegistry | None = None
        self.options = options
        self.max_turns = max_turns
        # Our own event, set when the caller's is: leaving the loop early sets only ours.
        self.cancel = LinkedEvent(cancel)
        self.tool_mode = tool_mode
        self.turns = turns
        self.settings = settings
        self.external = {t.name for t in settings.external_tools}
        self.usage: Usage | None = None
        self.failures: Counter[tuple[str, str]] = Counter()

    def run(self, prompt: str | Message, images: Iterable[ImagePart]) -> Iterator[ChatEvent]:
        closed_early = True
        try:
            yield from self._loop(prompt, images)
            closed_early = False
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

    def _finish(self, reason: ChatFinishReason) -> ChatFinishEvent:
        return ChatFinishEvent(reason, self.usage)

    def _loop(self, prompt: str | Message, images: Iterable[ImagePart]) -> Iterator[ChatEvent]:
        cancel = self.cancel
        try:  # bad arguments end the chat before the history changes
            user = _user_message(prompt, images)
            if self._given_tools is not None:
                self.tools = _tool_registry(self._given_tools)
            _check_positive_int("max_turns", self.max_turns)
            if self.tool_mode not in _TOOL_MODES:
                raise ConfigError(
                    f"tool_mode must be one of {', '.join(_TOOL_MODES)}, not {self.tool_mode!r}"
                )
            adapter = self._adapter()
            model = self._model()
        except OllmError as exc:
            yield ErrorEvent(exc.to_info(), exception=exc)
            yield self._finish("error")
            return
        self.history.append(user)
        schemas = self.tools.schemas() if self.tools is not None and len(self.tools) else []
        handled = {s.name for s in schemas}
        schemas += [s for s in self.settings.external_tools if s.name not in handled]
        react = None
        if schemas:
            with cancel_scope(cancel):  # may ask the server (Ollama: /api/show)
                native = self._native(adapter, model)
            if not native:
                react = ReActToolHandler(schemas)
        corrections = 0
        number = 0
        while True:
            if cancel.is_set():
                yield self._finish("cancelled")
                return
            if number >= self.max_turns:
                yield self._finish("max_turns")
                return
            remaining = self.settings.remaining()
            if remaining is not None and remaining <= 0:
                late = self._deadline_error(model)
                yield ErrorEvent(late.to_info(), exception=late)
                yield self._finish("error")
                return
            number += 1
            request = self._request(model, schemas, react, number)
            with cancel_scope(cancel):  # the window and a tokenizer may be asked over HTTP
                check = self.client._counter(adapter).check(request)
            if cancel.is_set():  # those calls fall back quietly when cancelled
                yield self._finish("cancelled")
                return
            if check.exceeded:
                yield ErrorEvent(
                    ErrorInfo(
                        f"the request needs about {check.tokens} tokens but {model} has a "
                        f"context window of {check.limit}: nothing was sent",
                        "TOKEN_LIMIT_EXCEEDED",
                        {"tokens": check.tokens, "limit": check.limit, "exact": check.exact},
                    )
                )
                yield self._finish("token_limit")
                return
            if check.warning:  # before every request that is this close (API.md §6)
                yield WarningEvent(
                    "TOKEN_LIMIT_WARNING",
                    f"{check.tokens} of {check.limit} context tokens used "
                    f"({check.ratio:.0%}){'' if check.exact else ' (estimated)'}",
                )
            turn = Turn(number)
            self.turns.append(turn)
            outcome = yield from self._stream(adapter, request, turn, forward=react is None)
            if outcome == "error":
                self._keep_partial(turn)
                yield self._finish("error")
                return
            if outcome == "cancelled":
                self._keep_partial(turn)
                yield self._finish("cancelled")
                return
            if react is not None:
                step = react.parse(turn.text)
                if step.thought:
                    yield ThinkingEvent(step.thought)
                if step.error is not None and not react.is_final(step):
                    corrections += 1
                    if corrections > react.max_corrections:
                        yield ErrorEvent(
                            ErrorInfo(
                                f"the model kept sending an invalid Action Input: {step.error}",
                                "LLM_BAD_RESPONSE",
                            )
                        )
                        yield self._finish("error")
                        return
                    self.history.append(_assistant(step.raw or turn.text))
                    self.history.append(Message.user(react.correction_message(step)))
                    yield TurnCompleteEvent(number)
                    continue
                corrections = 0
                if react.is_final(step) or step.action is None:
                    answer = step.final_answer if step.final_answer is not None else turn.text
                    turn.text = answer
                    if answer:
                        yield TextEvent(answer)
                    self.history.append(_assistant(answer))
                    yield TurnCompleteEvent(number)
                    yield self._finish("complete")
                    return
                call = react.to_tool_call(step, f"react_{number}")
                turn.tool_calls = [call]
                self.history.append(_assistant(step.raw or turn.text))
            else:
                if not turn.tool_calls:
                    self.history.append(_assistant(turn.text))
                    if turn.finish_reason == "length":
                        yield WarningEvent(
                            "MAX_TOKENS_REACHED", "the answer was cut at the max_tokens limit"
                        )
                    yield TurnCompleteEvent(number)
                    yield self._finish("complete")
                    return
                turn.tool_calls = _unique_ids(turn.tool_calls, number)
                self.history.append(_assistant(turn.text, turn.tool_calls))
            if any(self._is_external(c.name) for c in turn.tool_calls):
                yield from self._stop_for_caller(turn, react)
                return
            results = yield from self._run_tools(turn.tool_calls)
            turn.results = results
            for call, result in zip(turn.tool_calls, results, strict=True):
                if react is not None:
                    self.history.append(Message.user(react.format_observation(result)))
                else:
                    self.history.append(Message.tool(result, call))
            if cancel.is_set():
                yield self._finish("cancelled")
                return
            yield TurnCompleteEvent(number)
            if self._looping(turn):
                yield self._finish("loop_detected")
                return

    # ------------------------------------------------------------------ pieces

    def _adapter(self) -> ProviderAdapter:
        registry = self.client.registry
        adapter = registry.get(self.provider_name)
        if adapter is None:
            if self.provider_name is None:
                raise ProviderNotFound("no default provider is set in the registry")
            raise ProviderNotFound(
                f"no provider named {self.provider_name!r}; registered: "
                f"{', '.join(registry.list()) or 'none'}",
                provider=self.provider_name,
            )
        return adapter

    def _model(self) -> str:
        if not self.model:
            raise ConfigError("no model given: pass model= to ChatClient or to chat()")
        return self.model

    def _native(self, adapter: ProviderAdapter, model: str) -> bool:
        if self.tool_mode == "native":
            return True
        if self.tool_mode == "react":
            return False
        known: bool | None = None
        try:
            known = adapter.model_capabilities(model).tool_calling
        except (OllmError, AttributeError, NotImplementedError):
            known = None  # a custom adapter may not implement the optional methods
        if known is None:
            capabilities = getattr(adapter, "capabilities", None)
            known = getattr(capabilities, "tool_calling", None)
        return known is not False  # unknown: try native, most servers accept tools

    def _is_external(self, name: str) -> bool:
        return name in self.external and (self.tools is None or name not in self.tools)

    def _stop_for_caller(self, turn: Turn, react: ReActToolHandler | None) -> Iterator[ChatEvent]:
        """A call to a tool without a handler: run the handled calls, then stop the chat.

        Every call is announced; the handled ones run and their results join the history, the
        others are left for the caller (``finish == "tool_calls"``).
        """
        ours = [c for c in turn.tool_calls if not self._is_external(c.name)]
        results = yield from self._run_tools(ours, announce=turn.tool_calls)
        for call, result in zip(ours, results, strict=True):
            if react is not None:
                self.history.append(Message.user(react.format_observation(result)))
            else:
                self.history.append(Message.tool(result, call))
        if self.cancel.is_set():
            yield self._finish("cancelled")
            return
        yield TurnCompleteEvent(turn.number)
        yield self._finish("tool_calls")

    def _deadline_error(self, model: str | None) -> RequestTimeout:
        limit = self.settings.timeout
        return RequestTimeout(
            f"the call did not finish within its {limit:g} s timeout"
            if limit is not None
            else "the call passed its deadline",
            model=model,
            details={"timeout": limit},
        )

    def _request(
        self,
        model: str,
        schemas: list[ToolSchema],
        react: ReActToolHandler | None,
        number: int,
    ) -> ProviderRequest:
        system = self.system_prompt
        options = self.options
        settings = self.settings
        tools: list[ToolSchema] | None = schemas or None
        tool_choice = settings.tool_choice_for(number) if tools else "auto"
        if react is not None:
            system = f"{system}\n\n{react.instructions()}" if system else react.instructions()
            stops = list(options.stop or [])
            stops += [s for s in STOP_SEQUENCES if s not in stops]
            options = replace(options, stop=stops)
            tools = None
            tool_choice = "auto"
        remaining = settings.remaining()
        return ProviderRequest(
            model,
            list(self.history),
            system_prompt=system,
            tools=tools,
            tool_choice=tool_choice,
            options=options,
            response_format=settings.response_format,
            cancel=self.cancel,
            timeout=None if remaining is None else max(remaining, 0.001),
            think=settings.think,
            keep_alive=settings.keep_alive,
            headers=dict(settings.headers),
        )

    def _stream(
        self, adapter: ProviderAdapter, request: ProviderRequest, turn: Turn, *, forward: bool
    ) -> Generator[ChatEvent, None, str]:
        """Stream one response into ``turn``; returns "ok", "error" or "cancelled"."""
        text: list[str] = []
        thinking: list[str] = []
        stream = adapter.chat_stream(request)
        outcome = "error"
        cancel = self.cancel
        try:
            for event in stream:
                if cancel.is_set():  # an adapter that does not watch request.cancel
                    outcome = "cancelled"
                    break
                if isinstance(event, TextEvent):
                    text.append(event.value)
                    if forward:
                        yield event
                elif isinstance(event, ThinkingEvent):
                    thinking.append(event.value)
                    yield event
                elif isinstance(event, ToolCallEvent):
                    turn.tool_calls.append(event.value)
                elif isinstance(event, FinishEvent):
                    self._add_usage(event.usage)
                    turn.usage = event.usage
                    turn.finish_reason = event.reason
                    outcome = "cancelled" if event.reason == "cancelled" else "ok"
                    break
                elif isinstance(event, ErrorEvent):
                    if event.error.code == "CANCELLED" or self.cancel.is_set():
                        outcome = "cancelled"
                    else:
                        yield event
                    break
            else:  # the provider broke its contract: no terminal event
                yield ErrorEvent(
                    ErrorInfo(
                        "the provider's stream ended without a finish event", "LLM_BAD_RESPONSE"
                    )
                )
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
            turn.text = "".join(text)
            turn.thinking = "".join(thinking)
        if outcome == "ok" and self.cancel.is_set() and turn.tool_calls:
            outcome = "cancelled"  # do not start tools after a cancel
        return outcome

    def _keep_partial(self, turn: Turn) -> None:
        """A turn that ended early keeps the text already shown, never half tool calls."""
        if turn.text:
            self.history.append(_assistant(turn.text))

    def _add_usage(self, usage: Usage | None) -> None:
        if usage is None:
            return
        if self.usage is None:
            self.usage = usage
            return

        def add(a: int | None, b: int | None) -> int | None:
            return b if a is None else a if b is None else a + b

        self.usage = Usage(
            add(self.usage.prompt_tokens, usage.prompt_tokens),
            add(self.usage.completion_tokens, usage.completion_tokens),
            add(self.usage.total_tokens, usage.total_tokens),
            {**self.usage.extra, **usage.extra},
        )

    def _run_tools(
        self, calls: list[ToolCall], announce: list[ToolCall] | None = None
    ) -> Generator[ChatEvent, None, list[ToolResult]]:
        """Run ``calls`` in parallel; yield start/result events; return results in call order.

        ``announce``: the calls to yield start events for (default ``calls``), in order.
        """
        registry = self.tools or ToolRegistry()
        timeout = self.client.tool_timeout or registry.timeout
        remaining = self.settings.remaining()
        if remaining is not None:  # the call's deadline bounds its tools too
            timeout = max(0.001, remaining if timeout is None else min(timeout, remaining))
        # Started before the start events go out: a slow consumer does not hold the tools back.
        batch = _ToolBatch(registry, calls, self.cancel, self.client.max_parallel_tools, timeout)
        for call in calls if announce is None else announce:
            yield ToolCallStartEvent(call)
        results: list[ToolResult] = []
        for call, result in zip(calls, batch.results_in_order(), strict=True):
            results.append(result)
            yield ToolCallResultEvent(call, result)
        return results

    def _looping(self, turn: Turn) -> bool:
        """Count this turn's failing calls, each distinct call once: a repeat is a loop only
        across turns (three identical calls made in parallel are one attempt the model has
        not yet seen the answer to)."""
        failed = {
            (call.name, _canonical(call.args, call.arguments))
            for call, result in zip(turn.tool_calls, turn.results, strict=True)
            if not result.ok
        }
        for key in failed:
            self.failures[key] += 1
        return any(self.failures[key] >= LOOP_LIMIT for key in failed)


# --------------------------------------------------------------------------- tool execution


class _ToolBatch:
    """The tool calls of one turn on ``width`` daemon threads; queued calls wait their turn.

    Each call gets a cancel event of its own, set when the chat is cancelled and when that
    call runs past the timeout: a tool that takes ``cancel`` (an MCP server's tool among
    them) learns that its result is no longer wanted and can stop its work.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        calls: list[ToolCall],
        cancel: threading.Event,
        width: int,
        timeout: float | None,
    ) -> None:
        self._registry = registry
        self._calls = calls
        self._cancel = cancel
        self._timeout = timeout
        self._results: list[ToolResult | None] = [None] * len(calls)
        self._started: list[float | None] = [None] * len(calls)
        self._done = [threading.Event() for _ in calls]
        self._call_cancel = [threading.Event() for _ in calls]
        self._next = 0
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []
        for _ in range(min(width, len(calls))):
            self._start_worker()
        if calls:
            threading.Thread(
                target=self._relay_cancel, name="ollm-tool-cancel", daemon=True
            ).start()

    def _relay_cancel(self) -> None:
        """Set every call's event once the chat's is set, even when nobody reads the results."""
        while not all(done.is_set() for done in self._done):
            if self._cancel.wait(_POLL_S):
                for event in self._call_cancel:
                    event.set()
                return

    def _start_worker(self) -> None:
        worker = threading.Thread(target=self._work, name="ollm-tool", daemon=True)
        self._workers.append(worker)
        worker.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                index = self._next
                if index >= len(self._calls) or self._cancel.is_set():
                    return
                self._next += 1
                self._started[index] = time.monotonic()
            call = self._calls[index]
            result: ToolResult | None = None
            try:
                answer: object = self._registry.execute(call, self._call_cancel[index])
                # A registry subclass may break its contract: check rather than trust.
                result = (
                    answer
                    if isinstance(answer, ToolResult)
                    else _failure(
                        "TOOL_RESULT_INVALID",
                        f"tool {call.name!r} gave a {type_name(answer)}, not a ToolResult",
                    )
                )
            except BaseException as exc:  # even KeyboardInterrupt: this thread must answer
                result = _failure(
                    "TOOL_EXECUTION_FAILED",
                    f"tool {call.name!r} raised {exception_text(exc)}",
                    {"exception": type_name(exc)},
                )
            finally:  # whatever happened above, the call gets an answer and its waiter wakes
                self._settle(index, result or _stopped(call))
                self._done[index].set()

    def results_in_order(self) -> Iterator[ToolResult]:
        for index, call in enumerate(self._calls):
            yield self._wait(index, call)

    def _wait(self, index: int, call: ToolCall) -> ToolResult:
        done = self._done[index]
        while not done.wait(_POLL_S):
            if self._cancel.is_set():
                for event in self._call_cancel:
                    event.set()
                return self._settle(index, _failure("CANCELLED", f"tool {call.name!r} cancelled"))
            if not any(worker.is_alive() for worker in self._workers) and not done.is_set():
                with self._lock:  # every worker is gone: run what is queued, answer the rest
                    queued = self._next <= index
                if not queued:
                    return self._settle(index, _stopped(call))
                self._start_worker()
                continue
            started = self._started[index]
            if (
                self._timeout is not None
                and started is not None
                and time.monotonic() - started > self._timeout
            ):
                timed_out = self._settle(
                    index,
                    _failure(
                        "TOOL_TIMEOUT",
                        f"tool {call.name!r} did not finish within {self._timeout:g} s",
                        {"timeout": self._timeout},
                    ),
                )
                self._call_cancel[index].set()
                with self._lock:
                    queued = self._next < len(self._calls)
                if queued:  # its thread is still stuck in the tool: the queue needs another
                    self._start_worker()
                return timed_out
        result = self._results[index]
        assert result is not None
        return result

    def _settle(self, index: int, result: ToolResult) -> ToolResult:
        with self._lock:
            if self._results[index] is None:
                self._results[index] = result
            final = self._results[index]
        assert final is not None
        return final


def _failure(code: str, message: str, details: dict[str, Any] | None = None) -> ToolResult:
    return ToolResult(ok=False, error=ErrorInfo(message, code, details))


def _stopped(call: ToolCall) -> ToolResult:
    return _failure("TOOL_EXECUTION_FAILED", f"tool {call.name!r} stopped without a result")


def _unique_ids(calls: list[ToolCall], turn: int) -> list[ToolCall]:
    """Give every call an id of its own (models repeat or omit them)."""
    seen: set[str] = set()
    out = []
    for i, call in enumerate(calls):
        if not call.id or call.id in seen:
            call = replace(call, id=f"call_{turn}_{i}")
        seen.add(call.id)
        out.append(call)
    return out


def _canonical(args: dict[str, Any], raw: str) -> str:
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


def _assistant(text: str, tool_calls: Iterable[ToolCall] = ()) -> Message:
    """An assistant message that always has a part (an empty text beside tool calls)."""
    return Message("assistant", [TextPart(text)], tool_calls=list(tool_calls))


def _user_message(prompt: str | Message, images: Iterable[ImagePart]) -> Message:
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


def _build_default_provider(registry: ProviderRegistry) -> None:
    """Build the registry's default provider now, with the HTTP library it imports.

    A lazily registered provider would otherwise be built, and ``requests`` imported, inside
    the first chat, before that chat can look at its cancel event: on a busy machine that
    import alone takes seconds. A provider that cannot be built is left to the chat, which
    reports why as an ``ErrorEvent`` (the same error, at the same place as before).
    """
    with contextlib.suppress(OllmError):
        registry.get()


def _tool_registry(tools: ToolRegistry | Iterable[Any]) -> ToolRegistry:
    """A registry from a registry or from a list of tools and plain functions."""
    if isinstance(tools, ToolRegistry):
        return tools
    if isinstance(tools, str | bytes) or not isinstance(tools, Iterable):
        raise ConfigError(
            f"tools must be a ToolRegistry or a list of tools, not {type(tools).__name__}"
        )
    return ToolRegistry(tools)  # ToolDefinitionError for an item that is no tool


def _check_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, not {value!r}")


# --------------------------------------------------------------------------- conversation


class Conversation:
    """A chat that remembers: every :meth:`send` continues the same history.

    Attributes:
        history: The messages so far (user, assistant, tool), without the system prompt.
        turns: Every model turn so far.
        system_prompt: Sent with every request.
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        system_prompt: str | None = None,
        history: Iterable[Message] = (),
    ) -> None:
        self.client = client
        self.system_prompt = system_prompt
        self.history: list[Message] = list(history)
        self.turns: list[Turn] = []

    def __repr__(self) -> str:
        return f"Conversation(messages={len(self.history)}, turns={len(self.turns)})"

    def send(
        self,
        prompt: str | Message,
        *,
        provider: str | None = None,
        model: str | None = None,
        tools: ToolRegistry | Iterable[Any] | None = None,
        options: GenerationOptions | None = None,
        max_turns: int | None = None,
        cancel: threading.Event | None = None,
        tool_mode: ToolMode = "auto",
        images: Iterable[ImagePart] = (),
    ) -> Iterator[ChatEvent]:
        """Send a user message and run the loop; the history grows as turns complete.

        Yields:
            Chat events; the last is always a ``ChatFinishEvent``.
        """
        return self.client._run(
            self.history,
            prompt,
            images,
            provider=provider,
            model=model,
            system_prompt=self.system_prompt,
            tools=tools,
            options=options,
            max_turns=max_turns,
            cancel=cancel,
            tool_mode=tool_mode,
            turns=self.turns,
        )

    def run(
        self,
        prompt: str | Message,
        *,
        is_complete: Callable[[str], bool] | None = None,
        on_event: Callable[[ChatEvent], None] | None = None,
        **kwargs: Any,
    ) -> RunResult:
        """Drive the loop to a stop point without streaming.

        Args:
            prompt: The user message.
            is_complete: Decides, from the final answer, between ``completed`` (True) and
                ``waiting_user`` (False) when the model stops without tool calls.
                ``None``: always ``completed``.
            on_event: Called with every event (progress reporting).
            **kwargs: As :meth:`send`.

        Returns:
            The phase (``completed``, ``waiting_user``, ``failed``, ``cancelled``), the final
            text, the error (for ``failed``), the number of turns and the usage.
        """
        first_turn = len(self.turns)
        error: ErrorInfo | None = None
        finish: ChatFinishEvent | None = None
        for event in self.send(prompt, **kwargs):
            if on_event is not None:
                on_event(event)
            if isinstance(event, ErrorEvent):
                error = event.error
            elif isinstance(event, ChatFinishEvent):
                finish = event
        turns = self.turns[first_turn:]
        text = turns[-1].text if turns else None
        usage = finish.usage if finish is not None else None
        reason = finish.reason if finish is not None else "error"
        if reason == "complete":
            done = True if is_complete is None else bool(is_complete(text or ""))
            phase: Literal["completed", "waiting_user", "failed", "cancelled"] = (
                "completed" if done else "waiting_user"
            )
        elif reason == "cancelled":
            phase = "cancelled"
        else:
            phase = "failed"
            if error is None:
                error = ErrorInfo(*_STOP_ERRORS.get(reason, (f"stopped: {reason}", "LLM_ERROR")))
        return RunResult(phase, text, error if phase == "failed" else None, len(turns), usage)

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """The conversation as JSON-ready data (``version``, ``system_prompt``, ``messages``)."""
        return {
            "version": 1,
            "system_prompt": self.system_prompt,
            "messages": [message_to_dict(m) for m in self.history],
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the history as JSON (atomically: a crash never leaves half a file)."""
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=1), "utf-8")
        tmp.replace(target)

    @classmethod
    def load(cls, path: str | os.PathLike[str], client: ChatClient) -> Conversation:
        """Read a conversation written by :meth:`save`.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when the file is unreadable, is not JSON, or any
                part of it is not what :meth:`save` writes (nothing else escapes).
        """
        try:
            data = json.loads(Path(path).read_text("utf-8"))
            if not isinstance(data, dict):
                raise ValueError(f"expected a JSON object, found {json_kind(data)}")
            if data.get("version", 1) != 1:
                raise ValueError(f"unsupported version {data.get('version')!r} (expected 1)")
            raw_messages = data.get("messages")
            if not isinstance(raw_messages, list):
                raise ValueError(f"'messages' must be a list, found {json_kind(raw_messages)}")
            messages = [message_from_dict(m) for m in raw_messages]
            system_prompt = optional_str(data, "system_prompt")
        except (OSError, ValueError, TypeError, RecursionError) as exc:
            raise ConfigError(
                f"cannot load a conversation from {path}: {exception_text(exc)}",
                details={"path": str(path)},
            ) from exc
        return cls(client, system_prompt=system_prompt, history=messages)


_STOP_ERRORS = {
    "max_turns": ("the chat used all its turns without finishing", "MAX_TURNS"),
    "loop_detected": ("the same failing tool call was repeated", "LOOP_DETECTED"),
    "token_limit": ("the conversation no longer fits the context window", "TOKEN_LIMIT_EXCEEDED"),
}

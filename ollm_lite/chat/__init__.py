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
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import OllmError, check_positive_int
from ..providers.base import ProviderAdapter
from ..registry import ProviderRegistry
from ..tokens import TokenCounter
from ..types import ChatEvent, GenerationOptions, ImagePart, Message, RunResult
from ..types._event_fold import EventFold
from ..types._finish_reasons import run_phase, stop_error
from ._history_file import (
    conversation_to_dict,
    message_from_dict,
    message_to_dict,
    read_history,
    write_history,
)
from ._loop import ChatLoop, ToolMode, tool_registry
from ._strategies import Turn

if TYPE_CHECKING:  # loaded by the chat only when it is given tools or the model calls some
    from ..tools import ToolRegistry

__all__ = ["ChatClient", "Conversation", "ToolMode", "Turn", "message_from_dict", "message_to_dict"]


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
        check_positive_int("max_turns", max_turns)
        check_positive_int("max_parallel_tools", max_parallel_tools)
        self.registry = registry
        self.tools = None if tools is None else tool_registry(tools)
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
        *,
        provider: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        tools: ToolRegistry | Iterable[Any] | None = None,
        options: GenerationOptions | None = None,
        max_turns: int | None = None,
        cancel: threading.Event | None = None,
        tool_mode: ToolMode = "auto",
        images: Iterable[ImagePart] = (),
    ) -> Iterator[ChatEvent]:
        """Answer one prompt, running tools until the model is done (no history kept).

        Setting ``cancel`` stops the chat; the library only reads it. Leaving the loop early
        (``break``, ``close()``) stops this chat's own work without setting ``cancel``, so other
        chats sharing the event go on.

        Yields:
            Chat events; the last is always a ``ChatFinishEvent``.
        """
        return Conversation(self, system_prompt=system_prompt).send(
            prompt,
            provider=provider,
            model=model,
            tools=tools,
            options=options,
            max_turns=max_turns,
            cancel=cancel,
            tool_mode=tool_mode,
            images=images,
        )

    def conversation(self, system_prompt: str | None = None) -> Conversation:
        """A conversation that keeps its history across :meth:`Conversation.send` calls."""
        return Conversation(self, system_prompt=system_prompt)

    def _counter(self, adapter: ProviderAdapter) -> TokenCounter:
        # A layer around a provider (the gate's view of one call) names what it wraps
        # ``inner``: the counter, and what it learnt of the model's window, stay that one's.
        inner = getattr(adapter, "inner", None)
        if inner is not None:
            adapter = inner
        with self._lock:
            counter = self._counters.get(id(adapter))
            if counter is None or counter.provider is not adapter:
                counter = TokenCounter(adapter, context_limits=self.context_limits)
                self._counters[id(adapter)] = counter
            return counter


class Conversation:
    """A chat that remembers: every :meth:`send` continues the same history.

    Attributes:
        history: The messages so far (user, assistant, tool), without the system prompt.
        turns: Every model turn so far.
        system_prompt: Sent with every request (``None``: the client's).
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

        Arguments left ``None`` take the client's defaults.

        Yields:
            Chat events; the last is always a ``ChatFinishEvent``.
        """
        loop = ChatLoop(
            self.client,
            self.history,
            self.turns,
            provider=provider,
            model=model,
            system_prompt=self.system_prompt,
            tools=tools,
            options=options,
            max_turns=max_turns,
            cancel=cancel,
            tool_mode=tool_mode,
        )
        return loop.run(prompt, images)

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
        fold = EventFold()
        for event in self.send(prompt, **kwargs):
            if on_event is not None:
                on_event(event)
            fold.add(event)
        folded = fold.result()
        turns = self.turns[first_turn:]
        text = turns[-1].text if turns else None
        reason = folded.finish or "error"
        done = reason == "complete" and (is_complete is None or bool(is_complete(text or "")))
        phase = run_phase(reason, done=done)
        error = (folded.error or stop_error(reason)) if phase == "failed" else None
        return RunResult(phase, text, error, len(turns), folded.usage)

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """The conversation as JSON-ready data (``version``, ``system_prompt``, ``messages``)."""
        return conversation_to_dict(self.system_prompt, self.history)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the history as JSON (atomically: a crash never leaves half a file).

        Raises:
            ConfigError: ``CONFIG_INVALID`` when the file cannot be written.
        """
        write_history(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike[str], client: ChatClient) -> Conversation:
        """Read a conversation written by :meth:`save`.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when the file is unreadable, is not JSON, or any
                part of it is not what :meth:`save` writes (nothing else escapes).
        """
        saved = read_history(path)
        return cls(client, system_prompt=saved.system, history=saved.messages)


def _build_default_provider(registry: ProviderRegistry) -> None:
    """Build the registry's default provider now, with the HTTP library it imports.

    A lazily registered provider would otherwise be built, and ``requests`` imported, inside
    the first chat, before that chat can look at its cancel event: on a busy machine that
    import alone takes seconds. A provider that cannot be built is left to the chat, which
    reports why as an ``ErrorEvent`` (the same error, at the same place as before).
    """
    with contextlib.suppress(OllmError):
        registry.get()

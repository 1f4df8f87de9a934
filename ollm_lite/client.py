"""The script API: ``connect``, ``Client``, ``Session``, ``Reply`` and the ``ask``/``stream``
shortcuts — the short path for scripts and cron jobs.

One call gets a string (:meth:`Client.ask`), one streams strings (:meth:`Client.stream`), one
runs the whole tool loop (:meth:`Client.run` → :class:`Reply`), one yields every event
(:meth:`Client.events`, which never raises). Everything runs on the chat runtime
(:class:`~ollm_lite.chat.ChatClient`); this layer only turns inputs as people hold them into
requests and the event stream into results:

* ``ask``, ``stream`` and ``run`` raise the typed :class:`~ollm_lite.errors.OllmError`
  subclass (with its ``.code``) when the chat ends in ``error``; ``stream`` simply ends when
  ``cancel`` is set, ``ask``/``run`` raise ``Cancelled``; ``ask``/``stream`` raise
  ``TokenLimitExceeded`` for ``token_limit``; ``run`` returns its ``Reply`` for every other
  ending.
* Options are keyword arguments (:class:`~ollm_lite._options.Options`); an unknown keyword is
  a ``TypeError`` naming it, raised at the call (also for ``stream``/``events``, before the
  generator starts). Options given to :func:`connect` are defaults for every call.
* ``timeout`` is the total deadline of the whole call: every model turn, every tool, and the
  corrective retry of a typed answer.
* Nothing the caller passes is changed: messages are copied, options are read.

Example::

    import ollm_lite
    print(ollm_lite.ask("Why is the sky blue?"))
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Unpack

from ._cancel_scope import cancel_scope
from ._connect import build_provider, client_config, require_valid, resolve_model
from ._fold import EventFold, Folded, add_usage
from ._options import Options, check_names, resolve
from ._outcome import drain, failed, raise_for, reply_of
from ._prepare import Call, prepare_call
from ._reply import Reply
from ._session import Session
from ._typed import AnswerSpec, answer_spec, correction_prompt, parse_answer
from .chat import ChatClient, ToolMode, Turn
from .config import PROVIDER_ALIASES, PROVIDERS, canonical_provider
from .errors import (
    BadResponse,
    Cancelled,
    ConfigError,
    OllmError,
    ProviderNotFound,
)
from .providers.base import ProviderAdapter
from .types import (
    ChatEvent,
    ChatFinishEvent,
    Message,
    TextEvent,
)

if TYPE_CHECKING:
    from .config import Config

__all__ = [
    "Client",
    "Options",
    "Reply",
    "Session",
    "ask",
    "connect",
    "load_session",
    "stream",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_TURNS = 10


class Client:
    """A connection to one provider with defaults for every call; use :func:`connect`.

    Args:
        provider: The adapter every request goes to.
        model: The model (``None``: the server's only chat model, asked on first use).
        options: Default options for every call (as :class:`Options`).
        context_limits: Context windows by model name (they win over what the server says).
        max_turns: Default limit of model turns for ``run``/``events``.
        schema_retries: Corrective retries of a typed answer that does not validate.

    Attributes:
        provider: The :class:`~ollm_lite.providers.base.ProviderAdapter`.
        model: The model in use (filled in once resolved).
        options: The default options.
        context_limits: Context windows by model name, from the configuration.
        schema_retries: As above; may be changed.

    A client is thread-safe; use it as a context manager (``with connect() as llm:``) or call
    :meth:`close` to release its connections (a later call opens new ones).
    """

    def __init__(
        self,
        provider: ProviderAdapter,
        *,
        model: str | None = None,
        options: Mapping[str, Any] | None = None,
        context_limits: Mapping[str, int] | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        schema_retries: int = 1,
    ) -> None:
        defaults = dict(options or {})
        check_names(defaults, "Client")
        resolve(defaults)  # a bad default fails here, not at the first call
        if isinstance(schema_retries, bool) or not isinstance(schema_retries, int):
            raise ConfigError(f"schema_retries must be an integer >= 0, not {schema_retries!r}")
        if schema_retries < 0:
            raise ConfigError(f"schema_retries must be an integer >= 0, not {schema_retries!r}")
        self.provider = provider
        self.model = model
        self.options = defaults
        self.schema_retries = schema_retries
        self.context_limits = dict(context_limits or {})
        self._chat = ChatClient(provider, max_turns=max_turns, context_limits=self.context_limits)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Client(provider={getattr(self.provider, 'name', '?')!r}, model={self.model!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the provider's pooled connections; a later call opens new ones."""
        close = getattr(self.provider, "close", None)
        if callable(close):
            close()

    # ------------------------------------------------------------------ public calls

    def ask(
        self,
        prompt: str | Message | Sequence[Message | Mapping[str, Any]],
        *,
        system: str | None = None,
        model: str | None = None,
        schema: Any = None,
        images: Iterable[Any] | None = None,
        cancel: threading.Event | None = None,
        **options: Unpack[Options],
    ) -> Any:
        """The model's answer as a string, or as a validated ``schema`` value.

        Args:
            prompt: A ``str``, a ``Message``, or a list of messages (``Message`` or
                ``{"role", "content"}`` dicts).
            system: The system prompt.
            model: The model for this call.
            schema: A dataclass, ``TypedDict`` or JSON Schema ``dict``: the answer is
                requested as structured output, validated and returned as that type (a
                dataclass instance; a ``dict`` for the others).
            images: Paths, ``bytes`` or ``ImagePart`` values added to the (last) user message.
            cancel: Setting it stops the call (``Cancelled`` is raised).
            **options: See :class:`~ollm_lite._options.Options`.

        Returns:
            The final answer's text, or the validated value when ``schema`` is given.

        Raises:
            TypeError: an unknown keyword.
            OllmError: the typed error with its ``.code`` — ``CONNECTION_FAILED``,
                ``MODEL_NOT_FOUND``, ``LLM_TIMEOUT``, ``CONFIG_INVALID`` …;
                ``CANCELLED`` when ``cancel`` was set; ``TOKEN_LIMIT_EXCEEDED`` when the
                prompt does not fit the model's window; ``LLM_BAD_RESPONSE`` (with
                ``.details["raw"]``) for a typed answer that still does not validate after
                the corrective retry.
        """
        check_names(options, "ask")
        call = self._prepare(prompt, system=system, model=model, images=images, options=options)
        reply, folded = self._reply(
            call, cancel, answer_spec(schema) if schema is not None else None
        )
        raise_for(reply, folded, token_limit=True)
        return reply.value if schema is not None else reply.text

    def stream(
        self,
        prompt: str | Message | Sequence[Message | Mapping[str, Any]],
        *,
        system: str | None = None,
        model: str | None = None,
        images: Iterable[Any] | None = None,
        cancel: threading.Event | None = None,
        **options: Unpack[Options],
    ) -> Iterator[str]:
        """The answer's text, piece by piece as it arrives.

        The arguments are checked at the call (a ``TypeError`` or ``ConfigError`` is raised
        before iteration starts). Closing the iterator early stops the request.

        Yields:
            Text pieces; the iteration simply ends when ``cancel`` is set.

        Raises:
            OllmError: the typed error (after the pieces already yielded) when the call
                fails; ``TOKEN_LIMIT_EXCEEDED`` when the prompt does not fit.
        """
        check_names(options, "stream")
        call = self._prepare(prompt, system=system, model=model, images=images, options=options)
        return self._pieces(call, cancel)

    def run(
        self,
        prompt: str | Message | Sequence[Message | Mapping[str, Any]],
        *,
        tools: Any = None,
        system: str | None = None,
        model: str | None = None,
        max_turns: int | None = None,
        tool_mode: ToolMode = "auto",
        images: Iterable[Any] | None = None,
        cancel: threading.Event | None = None,
        **options: Unpack[Options],
    ) -> Reply:
        """Run the whole tool loop and return what it produced.

        Args:
            tools: ``@tool`` functions, plain typed functions, a ``ToolRegistry``, or
                OpenAI-format dicts / ``ToolSchema`` values. A tool without a handler here
                stops the run with ``finish="tool_calls"`` when the model calls it (calls to
                handled tools of the same turn still run).
            max_turns: Most model turns (default 10).
            tool_mode: ``"auto"``, ``"native"`` or ``"react"``.
            (others as :meth:`ask`)

        Returns:
            The :class:`Reply` (``finish``: ``complete``, ``max_turns``, ``loop_detected``,
            ``token_limit`` or ``tool_calls``).

        Raises:
            OllmError: the typed error when the chat ends in ``error``; ``Cancelled`` when
                ``cancel`` was set.
        """
        check_names(options, "run")
        call = self._prepare(
            prompt,
            system=system,
            model=model,
            images=images,
            options=options,
            tools=tools,
            max_turns=max_turns,
            tool_mode=tool_mode,
        )
        reply, folded = self._reply(call, cancel, None)
        raise_for(reply, folded, token_limit=False)
        return reply

    def events(
        self,
        prompt: str | Message | Sequence[Message | Mapping[str, Any]],
        *,
        tools: Any = None,
        system: str | None = None,
        model: str | None = None,
        max_turns: int | None = None,
        tool_mode: ToolMode = "auto",
        images: Iterable[Any] | None = None,
        cancel: threading.Event | None = None,
        **options: Unpack[Options],
    ) -> Iterator[ChatEvent]:
        """Every chat event of the tool loop; never raises (failures are ``ErrorEvent``).

        Yields:
            Chat events, ending with exactly one ``ChatFinishEvent``.

        Raises:
            TypeError: an unknown keyword (at the call, the one exception).
        """
        check_names(options, "events")
        try:
            call = self._prepare(
                prompt,
                system=system,
                model=model,
                images=images,
                options=options,
                tools=tools,
                max_turns=max_turns,
                tool_mode=tool_mode,
            )
        except OllmError as exc:
            return failed(exc)
        return self._events(call, cancel, [])

    def map(
        self,
        prompts: Iterable[Any],
        *,
        concurrency: int | None = None,
        **ask_keywords: Any,
    ) -> list[Reply]:
        """Ask every prompt, ``concurrency`` at a time, and return the replies in input order.

        Each prompt is one :meth:`ask` with ``ask_keywords`` (``system``, ``model``,
        ``schema``, ``images``, ``cancel`` and the options). A failed prompt does not stop the
        others: its :class:`Reply` has ``error`` set and ``finish == "error"``; with a
        ``schema``, ``reply.value`` holds the validated object.

        Args:
            prompts: Prompts as :meth:`ask` takes them.
            concurrency: Calls in flight (default: the fleet's capacity, else 4).

        Raises:
            TypeError: an unknown keyword.
            ConfigError: ``CONFIG_INVALID`` for a bad ``concurrency``.
        """
        from .batch._map import map_replies

        return map_replies(self, prompts, concurrency=concurrency, keywords=ask_keywords)

    def map_unordered(
        self,
        prompts: Iterable[Any],
        *,
        concurrency: int | None = None,
        **ask_keywords: Any,
    ) -> Iterator[tuple[int, Reply]]:
        """Like :meth:`map`, yielding ``(index, reply)`` as each answer finishes.

        Prompts are taken from the iterable only as calls finish, so it may be a long
        generator; closing the iterator early cancels the calls in flight.
        """
        from .batch._map import map_unordered

        return map_unordered(self, prompts, concurrency=concurrency, keywords=ask_keywords)

    def session(self, system: str | None = None, tools: Any = None) -> Session:
        """A conversation that keeps its history across calls (see :class:`Session`)."""
        return Session(self, system=system, tools=tools)

    # ------------------------------------------------------------------ internals

    def _prepare(self, prompt: Any, **kwargs: Any) -> Call:
        """:func:`~ollm_lite._prepare.prepare_call` with this client's option defaults."""
        return prepare_call(self.options, prompt, **kwargs)

    def resolved_model(self) -> str:
        """The model calls use: the configured one, else the server's only chat model (asked
        once, then kept in :attr:`model`).

        Raises:
            ConfigError: ``CONFIG_INVALID`` when none is configured and the server lists none
                or several.
            OllmError: a failure asking the server (``CONNECTION_FAILED`` …).
        """
        return self._model(None)

    def _model(self, model: str | None) -> str:
        if model:
            return model
        with self._lock:
            if not self.model:
                self.model = resolve_model(None, self.provider)
            return self.model

    def _events(
        self,
        call: Call,
        cancel: threading.Event | None,
        turns: list[Turn],
        *,
        response_format: Any = None,
        deadline: float | None = None,
    ) -> Generator[ChatEvent, None, None]:
        """The chat runtime's events for ``call`` (the loop appends to ``call.history``)."""
        try:
            with cancel_scope(cancel):  # listing the server's models may ask over HTTP
                model = self._model(call.model)
        except Cancelled:
            yield ChatFinishEvent("cancelled")
            return
        except OllmError as exc:
            yield from failed(exc)
            return
        settings = call.settings
        if deadline is None and settings.timeout is not None:
            deadline = time.monotonic() + settings.timeout
        settings = replace(settings, response_format=response_format, deadline=deadline)
        events = self._chat._run(
            call.history,
            call.prompt,
            (),
            provider=None,
            model=model,
            system_prompt=call.system,
            tools=call.tools,
            options=call.options,
            max_turns=call.max_turns,
            cancel=cancel,
            tool_mode=call.tool_mode,
            turns=turns,
            settings=settings,
        )
        try:
            yield from events
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()

    def _pieces(self, call: Call, cancel: threading.Event | None) -> Iterator[str]:
        fold = EventFold()
        events = self._events(call, cancel, [])
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

    def _reply(
        self, call: Call, cancel: threading.Event | None, spec: AnswerSpec | None
    ) -> tuple[Reply, Folded]:
        """Drive the call to its end; never raises for the chat's own outcome."""
        timeout = call.settings.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        schema = spec.schema if spec is not None else None
        turns: list[Turn] = []
        folded = drain(self._events(call, cancel, turns, response_format=schema, deadline=deadline))
        reply = reply_of(folded, call.history, len(turns))
        if spec is None or reply.finish != "complete":
            return reply, folded
        usage = reply.usage
        for attempt in range(self.schema_retries + 1):
            value, errors = parse_answer(reply.text, spec)
            if not errors:
                reply.value = value
                return reply, folded
            if attempt == self.schema_retries:
                break
            logger.debug("typed answer did not validate (%s); asking again", "; ".join(errors))
            retry = replace(call, prompt=Message.user(correction_prompt(errors, spec)))
            folded = drain(
                self._events(retry, cancel, turns, response_format=schema, deadline=deadline)
            )
            usage = add_usage(usage, folded.usage)
            reply = reply_of(folded, call.history, len(turns))
            reply.usage = usage
            if reply.finish != "complete":
                return reply, folded
        attempts = self.schema_retries + 1
        reply.error = BadResponse(
            f"the answer did not match {spec.name} after {attempts} "
            f"attempt{'s' if attempts > 1 else ''}: {'; '.join(errors[:5])}",
            details={"raw": reply.text, "errors": errors, "attempts": attempts},
        )
        reply.finish = "error"
        return reply, folded


# --------------------------------------------------------------------------- connect


def connect(
    provider: str | ProviderAdapter | None = None,
    *,
    host: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    config: str | os.PathLike[str] | Config | None = None,
    hosts: Sequence[str] | None = None,
    per_host: int | None = None,
    **options: Unpack[Options],
) -> Client:
    """A client configured the way ``ollm-lite`` is: config file, environment, then arguments.

    Args:
        provider: A provider name or alias (``"local"``/``"ollama"``, ``"vllm"``,
            ``"openai-compatible"``, ``"lmstudio"``, ``"llamacpp"``, ``"gemini"`` …) or a
            provider object (e.g. ``ScriptedProvider`` to test a script offline).
            ``None``: the configured provider (default ``local``).
        host: Base URL of the provider's server.
        model: The model (``None``: the configured one, else the server's only model).
        api_key: API key (prefer the environment variables).
        config: A TOML file or a loaded ``Config`` (``None``: ``$OLLM_CONFIG``, else
            ``~/.config/ollm/config.toml`` when it exists).
        hosts: Several base URLs of the same provider.
        per_host: Requests in flight per host (with ``hosts``).
        **options: Defaults for every call (see :class:`~ollm_lite._options.Options`).

    Returns:
        A :class:`Client`. No request is sent until the first call.

    Raises:
        TypeError: an unknown keyword.
        ConfigError: ``CONFIG_INVALID`` for an unreadable or invalid configuration.
        ProviderNotFound: ``PROVIDER_NOT_FOUND`` for an unknown provider name.
    """
    check_names(options, "connect")
    given = None if provider is None or isinstance(provider, str) else provider
    if given is not None and not callable(getattr(given, "chat_stream", None)):
        raise ConfigError(f"provider must be a name or a provider object, not {provider!r}")
    if given is not None and (host is not None or api_key is not None or hosts is not None):
        raise ConfigError(
            "host=, hosts= and api_key= configure a provider by name; the provider object "
            "given is configured already"
        )
    if isinstance(provider, str) and canonical_provider(provider)[0] not in PROVIDERS:
        raise ProviderNotFound(
            f"no provider named {provider!r}; choose from {', '.join(PROVIDERS)} or an alias "
            f"({', '.join(sorted(PROVIDER_ALIASES))})",
            provider=provider,
        )
    settings = client_config(
        config,
        provider=provider if isinstance(provider, str) else None,
        host=host,
        api_key=api_key,
        model=model,
    )
    if given is None:
        require_valid(settings)
    adapter = build_provider(settings, given, hosts=hosts, per_host=per_host)
    return Client(
        adapter,
        model=settings.model,
        options=options,
        context_limits=settings.context_limits,
    )


# --------------------------------------------------------------------------- shortcuts

_default: Client | None = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The process's default client (``connect()``), created on first use, thread-safe."""
    global _default
    with _default_lock:
        if _default is None:
            _default = connect()
        return _default


def ask(
    prompt: str | Message | Sequence[Message | Mapping[str, Any]],
    *,
    system: str | None = None,
    model: str | None = None,
    schema: Any = None,
    images: Iterable[Any] | None = None,
    cancel: threading.Event | None = None,
    **options: Unpack[Options],
) -> Any:
    """:meth:`Client.ask` on the default client (``connect()``, created once per process)."""
    check_names(options, "ask")
    return default_client().ask(
        prompt, system=system, model=model, schema=schema, images=images, cancel=cancel, **options
    )


def stream(
    prompt: str | Message | Sequence[Message | Mapping[str, Any]],
    *,
    system: str | None = None,
    model: str | None = None,
    images: Iterable[Any] | None = None,
    cancel: threading.Event | None = None,
    **options: Unpack[Options],
) -> Iterator[str]:
    """:meth:`Client.stream` on the default client (``connect()``, created once per process)."""
    check_names(options, "stream")
    return default_client().stream(
        prompt, system=system, model=model, images=images, cancel=cancel, **options
    )


def load_session(path: str | os.PathLike[str], client: Client | None = None) -> Session:
    """A :class:`Session` saved with :meth:`Session.save`, on ``client`` (default: the
    default client).

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the file is unreadable or no saved session.
    """
    from ._session import load

    return load(path, client if client is not None else default_client())

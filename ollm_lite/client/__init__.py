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
* Options are keyword arguments (the ``GenerationOptions`` fields, ``think``, ``keep_alive``,
  ``timeout``, ``tool_choice``, ``headers``); an unknown keyword is a ``TypeError`` naming it,
  raised at the call (also for ``stream``/``events``, before the generator starts). Options
  given to :func:`connect` are defaults for every call.
* ``timeout`` is the total deadline of the whole call: every model turn, every tool, and the
  corrective retry of a typed answer.
* Nothing the caller passes is changed: messages are copied, options are read.

Example::

    import ollm_lite
    print(ollm_lite.ask("Why is the sky blue?"))
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from ..call_log._hooks import client_logger
from ..chat import ChatClient
from ..config._connect import (
    build_provider,
    call_defaults,
    client_config,
    given_provider,
    require_valid,
    resolve_model,
)
from ..errors import ConfigError
from ..providers.base import ProviderAdapter
from ._calls import ScriptCalls
from ._options import Options, check_names, resolve
from ._prepare import Call, CallInputs, prepare_call
from ._run_call import Reply
from ._session import Session

if TYPE_CHECKING:
    from ..call_log._recorder import CallLogger
    from ..config import Config
    from ..gate import Budget, Gate, RateLimit

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

DEFAULT_MAX_TURNS = 10


class Client(ScriptCalls):
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
        call_log: Where calls are logged (``None``: not logged); set by :func:`connect`.
        gate: The one way in every model request of the client passes (the call log and its
            cache, prices, budget, rate limit); ``None`` when nothing is set to pass (see
            :mod:`ollm_lite.gate`).

    The calls — :meth:`ask`, :meth:`stream`, :meth:`run`, :meth:`events` — are the same on a
    :class:`Session`, which continues one conversation.

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
        if (
            isinstance(schema_retries, bool)
            or not isinstance(schema_retries, int)
            or schema_retries < 0
        ):
            raise ConfigError(f"schema_retries must be an integer >= 0, not {schema_retries!r}")
        self.provider = provider
        self.model = model
        self.options = defaults
        self.schema_retries = schema_retries
        self.context_limits = dict(context_limits or {})
        self._chat = ChatClient(provider, max_turns=max_turns, context_limits=self.context_limits)
        self._lock = threading.Lock()
        self.call_log: CallLogger | None = None
        self.gate: Gate | None = None

    def __repr__(self) -> str:
        return f"Client(provider={getattr(self.provider, 'name', '?')!r}, model={self.model!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the provider's pooled connections and the call log's; a later call opens new
        ones."""
        close = getattr(self.provider, "close", None)
        if callable(close):
            close()
        if self.gate is not None:
            self.gate.release()
        if self.call_log is not None:
            self.call_log.close()

    # ------------------------------------------------------------------ calls

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
        from ..batch._map import map_replies

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
        from ..batch._map import map_unordered

        return map_unordered(self, prompts, concurrency=concurrency, keywords=ask_keywords)

    def session(self, system: str | None = None, tools: Any = None) -> Session:
        """A conversation that keeps its history across calls (see :class:`Session`)."""
        return Session(self, system=system, tools=tools)

    # ------------------------------------------------------------------ internals

    def _begin(self, inputs: CallInputs) -> Call:
        return prepare_call(self.options, inputs)

    def _runner(self) -> Client:
        return self

    def resolved_model(self) -> str:
        """The model calls use: the configured one, else the server's only chat model (asked
        once, then kept in :attr:`model`).

        Raises:
            ConfigError: ``CONFIG_INVALID`` when none is configured and the server lists none
                or several.
            OllmError: a failure asking the server (``CONNECTION_FAILED`` …).
        """
        return self._model(None)

    def _model(self, model: str | None, cancel: threading.Event | None = None) -> str:
        if model:
            return model
        with self._lock:
            if not self.model:
                self.model = resolve_model(None, self.provider, cancel=cancel)
            return self.model


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
    log: bool | str | os.PathLike[str] | None = None,
    cache: bool | None = None,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    budget: Budget | None = None,
    rate: RateLimit | None = None,
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
        log: Keep every call in the call log (``True``, or the log file's path; ``False``:
            not even when the environment or the config file asks; ``None``: as they say).
            See :mod:`ollm_lite.call_log`.
        cache: Answer a model turn identical to a logged one from the log (implies the log).
        prices: Prices per million tokens by exact model name, ``{"MODEL": {"input": ...,
            "output": ..., "cached_input": ...}}`` (``cached_input`` optional), over the
            config file's ``[prices."MODEL"]`` tables: ``Reply.cost`` and the log's costs.
            See docs/costs.md.
        budget: Limits on what the client spends (a :class:`~ollm_lite.Budget`), over the
            config file's ``[budget]``: a request at or past one is not sent
            (``BudgetExceeded``). ``per="day"``/``"month"`` count from the call log, and
            turn it on (with ``log=False``: ``ConfigError``).
        rate: Requests and tokens per minute (a :class:`~ollm_lite.RateLimit`), over the
            config file's ``[rate]``, shared by the client's threads, ``map`` and batch lines.
        **options: Defaults for every call: the per-call options of :meth:`Client.ask`;
            they win over the configuration's ``[options]`` table, which applies beneath them.

    Returns:
        A :class:`Client`. No request is sent until the first call.

    Raises:
        TypeError: an unknown keyword.
        ConfigError: ``CONFIG_INVALID`` for an unreadable or invalid configuration,
            ``cache=True`` or a day/month budget with ``log=False``, or bad prices.
        ProviderNotFound: ``PROVIDER_NOT_FOUND`` for an unknown provider name.
    """
    check_names(options, "connect")
    by_name = host is not None or api_key is not None or hosts is not None
    given = given_provider(provider, configured_by_name=by_name)
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
    client = Client(
        adapter,
        model=settings.model,
        options=call_defaults(settings, options),
        context_limits=settings.context_limits,
    )
    from ..gate import gate_for
    from ..gate._budget import budget_from
    from ..gate._prices import prices_from
    from ..gate._rate import rate_from

    priced = prices_from(prices, settings.prices)
    limits = budget_from(budget, settings.budget)
    per_minute = rate_from(rate, settings.rate)
    if limits is not None and limits.from_log:  # counted from the log: it must be on
        if log is False:
            raise ConfigError(
                f"a per={limits.per!r} budget is counted from the call log: "
                "it cannot go with log=False"
            )
        if log is None and (budget is not None or getattr(adapter, "log_from_settings", True)):
            log = True  # given in code, or a provider the config file's settings apply to
    client.call_log = client_logger(log, cache, settings, adapter)
    if limits is not None and limits.from_log and client.call_log is None:
        limits = None  # the config file's budget, on a script it does not log (a test)
    client.gate = gate_for(
        adapter, log=client.call_log, prices=priced, budget=limits, rate=per_minute
    )
    return client


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


class _DefaultClientCalls(ScriptCalls):
    """The script calls on the default client, connected when a call first needs it (after
    its keywords are checked)."""

    def _begin(self, inputs: CallInputs) -> Call:
        return default_client()._begin(inputs)

    def _runner(self) -> Client:
        return default_client()


_on_default_client = _DefaultClientCalls()
ask = _on_default_client.ask
stream = _on_default_client.stream


def load_session(path: str | os.PathLike[str], client: Client | None = None) -> Session:
    """A :class:`Session` saved with :meth:`Session.save`, on ``client`` (default: the
    default client).

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the file is unreadable or no saved session.
    """
    from ._session import load

    return load(path, client if client is not None else default_client())

"""What every HTTP provider shares: :class:`HTTPProvider` and the :class:`WireState` protocol.

A provider is a wire (an I/O-free module turning requests into bodies and decoded stream items
into events) plus this base, which owns the I/O: one :class:`~ollm_lite.http.transport.Transport`,
the stream skeleton (:meth:`HTTPProvider._stream`) that every ``chat_stream`` runs, the fold of
a whole answer (:meth:`HTTPProvider._fold`), the health probe, batched embeddings, the
validation of the constructor arguments every provider takes, and a thread-safe
once-per-instance memo for what a provider finds out about its server.

Every wire's stream state implements :class:`WireState` the same way, so the skeleton's
promises hold for all of them: exactly one terminal event (``FinishEvent`` or ``ErrorEvent``)
ends every stream; text already yielded stays valid when an error ends it; a set ``cancel`` ends
it with ``FinishEvent("cancelled")``; closing the generator early releases the connection; an
error a server reports inside a 200 stream is redacted like one in an error status.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from ..errors import BadResponse, Cancelled, ConfigError, OllmError
from ..http.policy import RetryPolicy, Timeouts
from ..http.response import Decoder, StreamResponse
from ..http.secrets import Redactor
from ..http.transport import Transport
from ..types import (
    ChatResult,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    HealthStatus,
    ProviderEvent,
    ProviderRequest,
)
from .base import BaseProvider, collect_result

__all__ = ["HTTPProvider", "WireState", "check_retries", "time_limits", "version_of"]

T = TypeVar("T")

logger = logging.getLogger(__name__)


class WireState(Protocol):
    """The events of one answer, built from its decoded stream items (I/O free).

    :meth:`feed` is called with every decoded item in order and returns the events the item
    completes (never a terminal one). Once :attr:`terminal` is set, nothing more needs to be
    read. :meth:`end` is called exactly once, after the last item (or after the read stopped
    because ``terminal`` was set) and returns the remaining events, the terminal event last.
    """

    @property
    def terminal(self) -> FinishEvent | ErrorEvent | None:
        """The event that ended the answer, once the stream has said so."""
        ...

    def feed(self, item: Any) -> Sequence[ProviderEvent]:
        """The non-terminal events that ``item`` completes."""
        ...

    def end(self) -> Sequence[ProviderEvent]:
        """The remaining events, ending with exactly one ``FinishEvent`` or ``ErrorEvent``."""
        ...


def check_retries(retries: Any) -> None:
    """Raises ``CONFIG_INVALID`` unless ``retries`` is ``None`` or an integer >= 0."""
    if retries is not None and (
        not isinstance(retries, int) or isinstance(retries, bool) or retries < 0
    ):
        raise ConfigError(f"retries must be an integer >= 0, got {retries!r}")


def time_limits(timeout: float | Timeouts | None, idle_timeout: float | None) -> Timeouts:
    """A provider's :class:`Timeouts` from its ``idle_timeout`` and the older ``timeout``.

    ``timeout`` is the same idle limit under its first name (or a whole ``Timeouts``); given
    both, they must name the same idle limit.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an idle limit that is not a positive number of
            seconds, or a ``timeout`` and an ``idle_timeout`` that disagree.
    """
    limits = Timeouts.of(timeout)
    if idle_timeout is None:
        return limits
    if (
        isinstance(idle_timeout, bool)
        or not isinstance(idle_timeout, (int, float))
        or not 0 < idle_timeout < math.inf
    ):
        raise ConfigError(
            f"idle_timeout must be a positive number of seconds, got {idle_timeout!r}"
        )
    if timeout is not None and limits.idle != idle_timeout:
        raise ConfigError(
            f"timeout ({limits.idle:g} s idle) and idle_timeout ({idle_timeout:g} s) disagree: "
            "timeout is the older name of idle_timeout; give one of them"
        )
    return limits if timeout is not None else Timeouts.of(idle_timeout)


def version_of(raw: bytes) -> str | None:
    """``version`` of a JSON answer (health probes), or ``None``."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    version = obj.get("version") if isinstance(obj, dict) else None
    return version if isinstance(version, str) else None


class HTTPProvider(BaseProvider):
    """The base of the built-in HTTP providers (Ollama, OpenAI-compatible, vLLM, Gemini).

    Subclasses call :meth:`_connect` from their constructor, build bodies with their wire, and
    run :meth:`_stream` / :meth:`_fold`; they implement :meth:`_probe` for :meth:`health`.
    """

    _transport: Transport
    #: Another transport to the same server with the same settings but other timeouts (a
    #: model download goes silent for longer than a chat may).
    _open_transport: Callable[[Timeouts], Transport]
    #: How a 404 on the chat path reads: the model is missing (``"model"``), or the path
    #: (``"route"``, for a provider that tells the two apart from the server's message).
    chat_not_found: ClassVar[Literal["model", "route"]] = "model"

    def _connect(
        self,
        url: str,
        *,
        headers: dict[str, str],
        secret: str | None,
        timeout: float | Timeouts | None,
        retries: int | None,
        start_hint: str,
        model_hint: str,
    ) -> None:
        """Validate the shared arguments and open the transport.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for bad ``retries`` or a bad URL.
        """
        check_retries(retries)
        self._retry = RetryPolicy() if retries is None else RetryPolicy(retries=retries)

        def open_transport(timeouts: Timeouts) -> Transport:
            return Transport(
                url,
                provider=self.name,
                headers=headers,
                secrets=[secret] if secret else [],
                timeouts=timeouts,
                retry=self._retry,
                start_hint=start_hint,
                model_hint=model_hint,
            )

        self._open_transport = open_transport
        self._transport = open_transport(Timeouts.of(timeout))
        self._lock = threading.Lock()
        self._memo_lock = threading.Lock()  # held while the server is asked: its own lock
        self._memo: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

    def _fail_fast(self) -> None:
        """Retry nothing from now on: a fleet member, whose failures the fleet routes (see
        :func:`ollm_lite.config._connect.fleet_member`; only for a provider the library built)."""
        self._retry = RetryPolicy(retries=0)
        self._transport.retry = self._retry

    @property
    def base_url(self) -> str:
        """The server root every request goes to (without credentials, and without the API's
        prefix such as ``/v1`` or ``/v1beta``)."""
        return self._transport.base_url

    def close(self) -> None:
        """Close pooled connections (the provider stays usable)."""
        self._transport.close()

    def _once(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()`` once per instance (thread safe); a raised error is not remembered."""
        if key in self._memo:
            return self._memo[key]  # type: ignore[no-any-return]
        with self._memo_lock:
            if key not in self._memo:
                self._memo[key] = compute()
            return self._memo[key]  # type: ignore[no-any-return]

    def _quietly(self, what: str, model: str, ask: Callable[[], T], default: T) -> T:
        """``ask()``, or ``default`` when the server cannot tell ``what`` about ``model`` (the
        reason is logged at DEBUG): for the questions that never raise."""
        try:
            return ask()
        except OllmError as exc:
            logger.debug("%s: no %s for %s (%s)", self.name, what, model, exc.code)
            return default

    def _shown_context(self, model: str, cancel: threading.Event | None) -> int | None:
        """``show_model(model).context_length``, or ``None`` when the server cannot say."""
        return self._quietly(
            "context length",
            model,
            lambda: self.show_model(model, cancel=cancel).context_length,
            None,
        )

    def _json(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        cancel: threading.Event | None = None,
        model: str | None = None,
        params: dict[str, str] | None = None,
        allow_empty: bool = False,
    ) -> Any:
        """The decoded JSON answer of one request; with ``model``, a 404 means that model."""
        return self._transport.request_json(
            method,
            path,
            json_body=body,
            params=params,
            cancel=cancel,
            model=model,
            not_found="model" if model is not None else "route",
            allow_empty=allow_empty,
        )

    def _redact_for(self, request: ProviderRequest) -> Redactor:
        """The transport's redactor plus the values of ``request``'s own headers (secrets
        too: a server echoing them in its answer must not show them)."""
        return self._transport.redact.plus((request.headers or {}).values())

    def _bad_response(self, message: str, *, model: str | None = None) -> BadResponse:
        """``LLM_BAD_RESPONSE`` naming this provider and its server, secrets masked."""
        text = self._transport.redact(f"{self.name} at {self.base_url}: {message}")
        return BadResponse(text, provider=self.name, model=model)

    # ------------------------------------------------------------------ chat

    def _chat_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of a chat request (built by the wire).

        Raises:
            OllmError: ``CONFIG_INVALID`` for a request the wire cannot express, or what keeps
                the provider from sending it.
        """
        raise NotImplementedError

    def _stream(
        self,
        request: ProviderRequest,
        path: str,
        decoder: Decoder[Any],
        state: WireState,
        *,
        params: dict[str, str] | None = None,
    ) -> Iterator[ProviderEvent]:
        """``POST path`` with :meth:`_chat_body` and the events of its streamed answer, read
        with ``decoder`` into ``state``: the skeleton of every ``chat_stream``.

        A body that cannot be built, and transport failures before or during the stream, end
        it with their ``ErrorEvent``; a set ``request.cancel`` ends it with
        ``FinishEvent("cancelled")``.
        """
        try:
            body = self._chat_body(request, stream=True)
        except OllmError as exc:
            yield ErrorEvent(exc.to_info(), exception=exc)
            return
        logger.debug(
            "%s chat_stream model=%s messages=%d tools=%d",
            self.name,
            request.model,
            len(request.messages),
            len(request.tools or ()),
        )
        feed = state.feed
        try:
            with self._open_chat(request, path, body, params) as resp:
                # A list of items per HTTP chunk, looped over here: one generator step per
                # chunk instead of one per item (the per-token hot path).
                for items in resp.iter_batches(decoder):
                    for item in items:
                        out = feed(item)
                        if out:
                            yield from out
                        if state.terminal is not None:
                            break
                    else:
                        continue
                    break
        except Cancelled:
            if state.terminal is None:
                yield FinishEvent("cancelled")
                return
        except OllmError as exc:
            if state.terminal is None:
                yield ErrorEvent(exc.to_info(), exception=exc)
                return
        finally:
            self._stream_ended(state)
        yield from map(self._redact_for(request).event, state.end())

    def _stream_ended(self, state: Any) -> None:
        """Called once a stream is over, however it ended (for what a wire learnt)."""

    def _fold(
        self,
        state: WireState,
        items: Iterable[Any],
        feed: Callable[[Any], Sequence[ProviderEvent]] | None = None,
    ) -> ChatResult:
        """The result of a whole answer's ``items`` fed to ``state`` (by ``feed``, default
        ``state.feed``), as :meth:`_stream` would have yielded it.

        Raises:
            OllmError: the error the answer carried.
        """
        feed = feed or state.feed
        events: list[ProviderEvent] = []
        for item in items:
            events += feed(item)
            if state.terminal is not None:
                break
        self._stream_ended(state)
        events += map(self._transport.redact.event, state.end())
        return collect_result(events)

    def _open_chat(
        self,
        request: ProviderRequest,
        path: str,
        body: dict[str, Any],
        params: dict[str, str] | None = None,
    ) -> StreamResponse:
        """``POST path`` for ``request`` (its cancel, deadline and model), the answer open."""
        return self._transport.open_stream(
            "POST",
            path,
            params=params,
            json_body=body,
            cancel=request.cancel,
            timeout=request.timeout,
            headers=request.headers or None,
            model=request.model,
            not_found=self.chat_not_found,
        )

    def _post_whole(self, request: ProviderRequest, path: str, body: dict[str, Any]) -> bytes:
        """The raw body of a non-streamed answer to ``POST path``."""
        with self._open_chat(request, path, body) as resp:
            return resp.read_body()

    # ------------------------------------------------------------------ health

    def health(self, *, cancel: threading.Event | None = None) -> HealthStatus:
        """Whether the server answers, with its version where it says; never raises."""
        started = time.perf_counter()
        try:
            version = self._probe(cancel)
        except OllmError as exc:
            return self._health_status(False, None, error=self._health_error(exc))
        latency = (time.perf_counter() - started) * 1000
        return self._health_status(True, latency, version=version)

    def _probe(self, cancel: threading.Event | None) -> str | None:
        """Ask the server whether it is up; its version, where it says.

        Raises:
            OllmError: when it is not.
        """
        raise NotImplementedError

    def _health_error(self, exc: OllmError) -> ErrorInfo:
        return exc.to_info()

    def _health_status(
        self,
        ok: bool,
        latency: float | None,
        *,
        version: str | None = None,
        error: ErrorInfo | None = None,
    ) -> HealthStatus:
        return HealthStatus(
            ok=ok,
            provider=self.name,
            base_url=self.base_url,
            checked_at=datetime.now(UTC),
            latency_ms=latency,
            version=version,
            error=error,
        )

    def _get_raw(self, path: str, cancel: threading.Event | None, limit: int) -> bytes:
        """At most ``limit`` bytes of ``GET path``, without retries (for health probes)."""
        with self._transport.open_stream("GET", path, retry=False, cancel=cancel) as resp:
            return resp.read_body(limit)

    # ------------------------------------------------------------------ embeddings

    def _embedding_model(self, model: str | None) -> str:
        """The model to embed with.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when none is given.
        """
        if not model:
            raise ConfigError(f"embed() needs an embedding model name for {self.name}")
        return model

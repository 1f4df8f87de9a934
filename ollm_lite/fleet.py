"""A fleet: one provider over several servers of the same kind serving the same model.

:class:`Fleet` wraps one provider per base URL and is itself a
:class:`~ollm_lite.providers.base.ProviderAdapter`, so ``chat``, ``chat_stream``, ``embed``, the
chat runtime, the script API and batches all use it unchanged.

Routing rules:

* A request goes to the endpoint with the fewest requests in flight (ties: the one used least
  recently), never past that endpoint's limit: ``per_host``, else the server's own figure
  where it gives one (llama.cpp's ``GET /props`` ``total_slots``), else
  :data:`DEFAULT_PER_HOST`. When every endpoint is full or resting, the request waits.
* An endpoint that refuses the connection, cannot be reached, or answers 5xx is *ejected*: it
  gets no requests for a backoff (1 s, doubling per consecutive failure up to 30 s), and the
  request that failed goes to another endpoint. A 429 with ``Retry-After`` rests that one
  endpoint for the time the server asked (at most 60 s), not the others.
* Only failures *before* any answer reached the caller move a request: once a stream has
  yielded its first event, an error ends that stream as usual and is never replayed
  elsewhere (a second server would answer differently, and the caller already has text).
* A request that failed on an endpoint waits for the others rather than trying that one again;
  it raises the last error once every endpoint failed it and ``max(3, endpoints + 1)`` tries
  were made.

Members should not retry on their own (``retries=0``): a member's retries wait on the same
failing server, while the fleet moves on at once. :func:`fleet_from_hosts` builds them so.

Ejections and returns are logged at WARNING / INFO (logger ``ollm_lite.fleet``);
:meth:`Fleet.status` and :meth:`Fleet.health_note` feed progress displays.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from ._cancel_scope import ambient_cancel_events
from .errors import (
    Cancelled,
    ConfigError,
    ConnectionFailed,
    HTTPStatusError,
    OllmError,
    RateLimited,
    RequestTimeout,
    error_from_code,
)
from .providers.base import ProviderAdapter
from .types import (
    ChatResult,
    EmbeddingResult,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    HealthStatus,
    ModelInfo,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
    PullProgress,
)

__all__ = ["DEFAULT_PER_HOST", "EndpointStatus", "Fleet", "fleet_from_hosts"]

logger = logging.getLogger(__name__)

#: Requests in flight per endpoint when neither ``per_host`` nor the server says.
DEFAULT_PER_HOST = 4
#: Longest rest a ``Retry-After`` may impose on one endpoint.
MAX_RETRY_AFTER_S = 60.0
_WAIT_SLICE_S = 0.05

_T = TypeVar("_T")
Failover = Literal["down", "busy"]


@dataclass(frozen=True, slots=True)
class EndpointStatus:
    """One endpoint of a fleet, as seen right now."""

    url: str
    in_flight: int
    limit: int | None
    """Requests allowed in flight (``None`` until the first request found it out)."""
    up: bool
    """Not resting after a failure."""
    resting_for: float
    """Seconds until it takes requests again (0 when up)."""
    failures: int
    """Consecutive failures (0 after a success)."""
    served: int
    """Requests answered through it."""


class _Endpoint:
    __slots__ = (
        "failures",
        "in_flight",
        "last_pick",
        "limit",
        "provider",
        "rest_until",
        "served",
        "url",
    )

    def __init__(self, provider: ProviderAdapter, limit: int | None) -> None:
        self.provider = provider
        self.url = str(getattr(provider, "base_url", "") or repr(provider))
        self.limit = limit
        self.in_flight = 0
        self.rest_until = 0.0
        self.failures = 0
        self.served = 0
        self.last_pick = 0


def failover_reason(error: OllmError) -> Failover | None:
    """Whether ``error`` (raised before any answer) should move the request elsewhere."""
    if isinstance(error, RateLimited):
        return "busy"
    if isinstance(error, ConnectionFailed):
        return "down"
    status = error.details.get("status")
    if isinstance(error, HTTPStatusError | RequestTimeout) and isinstance(status, int):
        return "down" if status >= 500 else None
    if isinstance(error, RequestTimeout) and not error.details:
        return "down"  # the connection could not be opened in time; nothing was sent
    return None


class Fleet:
    """A :class:`ProviderAdapter` spreading requests over several servers of the same kind.

    Args:
        providers: One provider per server, all of the same kind (same ``name``).
        per_host: Requests in flight per endpoint; ``None``: the server's own figure where
            it gives one (``parallel_slots()``), else :data:`DEFAULT_PER_HOST`.
        backoff: First rest after a failure, in seconds (doubles per consecutive failure).
        max_backoff: Longest rest after failures.
        clock: Monotonic seconds (injectable for tests).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for no providers, providers of different kinds, or a
            ``per_host`` below 1.
    """

    def __init__(
        self,
        providers: Sequence[ProviderAdapter],
        *,
        per_host: int | None = None,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        members = list(providers)
        if not members:
            raise ConfigError("a fleet needs at least one provider")
        kinds = sorted({m.name for m in members})
        if len(kinds) > 1:
            raise ConfigError(f"a fleet's providers must be of one kind, got {', '.join(kinds)}")
        if per_host is not None and (
            isinstance(per_host, bool) or not isinstance(per_host, int) or per_host < 1
        ):
            raise ConfigError(f"per_host must be a positive integer, got {per_host!r}")
        self._endpoints = [_Endpoint(m, per_host) for m in members]
        self._per_host = per_host
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._clock = clock
        self._cond = threading.Condition()
        self._limits_lock = threading.Lock()
        self._picks = 0
        self.max_attempts = max(3, len(members) + 1)

    # ------------------------------------------------------------------ identity

    @property
    def name(self) -> str:
        """The members' provider name."""
        return self._endpoints[0].provider.name

    @property
    def streaming_format(self) -> str:
        """The members' wire format."""
        return self._endpoints[0].provider.streaming_format

    @property
    def capabilities(self) -> ProviderCapabilities:
        """The first member's capabilities (all serve the same model)."""
        return self._endpoints[0].provider.capabilities

    @property
    def providers(self) -> list[ProviderAdapter]:
        """The member providers, in the order given."""
        return [e.provider for e in self._endpoints]

    @property
    def base_url(self) -> str:
        """Every member's base URL, comma separated (for messages)."""
        return ", ".join(e.url for e in self._endpoints)

    def __repr__(self) -> str:
        return f"Fleet(name={self.name!r}, endpoints=[{self.base_url}])"

    @property
    def capacity(self) -> int:
        """Requests the whole fleet takes at once (the sum of the endpoints' limits)."""
        self._ensure_limits()
        return sum(e.limit or DEFAULT_PER_HOST for e in self._endpoints)

    def status(self) -> list[EndpointStatus]:
        """Every endpoint's load and health, in the order given."""
        now = self._clock()
        with self._cond:
            return [
                EndpointStatus(
                    url=e.url,
                    in_flight=e.in_flight,
                    limit=e.limit,
                    up=e.rest_until <= now,
                    resting_for=max(0.0, e.rest_until - now),
                    failures=e.failures,
                    served=e.served,
                )
                for e in self._endpoints
            ]

    def health_note(self) -> str:
        """``"hosts 2/3 up"`` (for progress lines)."""
        states = self.status()
        return f"hosts {sum(s.up for s in states)}/{len(states)} up"

    def close(self) -> None:
        """Close every member's connections (the fleet stays usable)."""
        for endpoint in self._endpoints:
            close = getattr(endpoint.provider, "close", None)
            if callable(close):
                close()

    # ------------------------------------------------------------------ limits

    def _ensure_limits(self) -> None:
        if all(e.limit is not None for e in self._endpoints):
            return
        with self._limits_lock:
            unknown = [e for e in self._endpoints if e.limit is None]
            if not unknown:
                return
            with ThreadPoolExecutor(max_workers=len(unknown)) as pool:
                found = list(pool.map(_server_slots, [e.provider for e in unknown]))
            with self._cond:
                for endpoint, slots in zip(unknown, found, strict=True):
                    endpoint.limit = slots or DEFAULT_PER_HOST
                    logger.debug("fleet: %s takes %d at a time", endpoint.url, endpoint.limit)
                self._cond.notify_all()

    # ------------------------------------------------------------------ routing

    def _acquire(
        self,
        cancel: threading.Event | None,
        *,
        bounded: bool = True,
        avoid: set[_Endpoint] | None = None,
    ) -> _Endpoint:
        """A slot on the least busy endpoint, waiting while none is free.

        ``avoid``: endpoints that already failed this request; used again only once every
        endpoint has (a request waits for a busy good server rather than re-trying a dead one
        whose rest just ended).
        """
        self._ensure_limits()
        pool = [e for e in self._endpoints if not avoid or e not in avoid] or self._endpoints
        watched = tuple(e for e in (cancel, *ambient_cancel_events()) if e is not None)
        with self._cond:
            while True:
                if any(e.is_set() for e in watched):
                    raise Cancelled("the request was cancelled", provider=self.name)
                now = self._clock()
                ready = [
                    e
                    for e in pool
                    if e.rest_until <= now
                    and (not bounded or e.in_flight < (e.limit or DEFAULT_PER_HOST))
                ]
                if ready:
                    chosen = min(ready, key=lambda e: (e.in_flight, e.last_pick))
                    self._picks += 1
                    chosen.last_pick = self._picks
                    chosen.in_flight += 1
                    return chosen
                waits = [e.rest_until - now for e in pool if e.rest_until > now]
                timeout = min([_WAIT_SLICE_S, *waits]) if watched or waits else None
                self._cond.wait(timeout=None if timeout is None else max(timeout, 0.001))

    def _release(self, endpoint: _Endpoint, error: OllmError | None) -> Failover | None:
        """Free the slot; rest the endpoint when ``error`` says it is down or busy."""
        reason = failover_reason(error) if error is not None else None
        with self._cond:
            endpoint.in_flight -= 1
            now = self._clock()
            if reason is None:
                if error is None:
                    endpoint.served += 1
                if endpoint.failures and error is None:
                    logger.info("fleet: %s answers again", endpoint.url)
                    endpoint.failures = 0
            elif reason == "busy":
                assert isinstance(error, RateLimited)
                rest = min(MAX_RETRY_AFTER_S, error.retry_after or self._backoff)
                endpoint.rest_until = max(endpoint.rest_until, now + rest)
                logger.warning("fleet: %s is rate limiting; resting it %.1f s", endpoint.url, rest)
            else:
                endpoint.failures += 1
                rest = min(self._max_backoff, self._backoff * 2 ** (endpoint.failures - 1))
                endpoint.rest_until = max(endpoint.rest_until, now + rest)
                assert error is not None
                logger.warning(
                    "fleet: %s ejected for %.1f s after %s (%d in a row)",
                    endpoint.url, rest, error.code, endpoint.failures,
                )  # fmt: skip
            self._cond.notify_all()
        return reason

    def _call(
        self,
        fn: Callable[[ProviderAdapter], _T],
        cancel: threading.Event | None = None,
        *,
        bounded: bool = True,
    ) -> _T:
        """``fn(member)`` on the least busy endpoint, moving on while it fails before answering.

        ``bounded=False`` (quick metadata calls) does not wait for a free slot: a model's
        context length should not queue behind long generations.
        """
        failed: set[_Endpoint] = set()
        attempt = 0
        while True:
            attempt += 1
            endpoint = self._acquire(cancel, bounded=bounded, avoid=failed)
            try:
                value = fn(endpoint.provider)
            except OllmError as exc:
                if self._release(endpoint, exc) is None or self._spent(attempt, failed, endpoint):
                    raise
                logger.debug("fleet: moving a request off %s (%s)", endpoint.url, exc.code)
                continue
            except BaseException:
                self._release(endpoint, None)
                raise
            self._release(endpoint, None)
            return value

    def _spent(self, attempt: int, failed: set[_Endpoint], endpoint: _Endpoint) -> bool:
        """Record that ``endpoint`` failed this request; whether the request must give up.

        It gives up once every endpoint failed it and ``max_attempts`` were made.
        """
        failed.add(endpoint)
        return attempt >= self.max_attempts and len(failed) == len(self._endpoints)

    # ------------------------------------------------------------------ chat

    def chat(self, request: ProviderRequest) -> ChatResult:
        """One whole answer from the least busy endpoint (moved on while endpoints fail).

        Raises:
            OllmError: the last endpoint's error once attempts are exhausted, or at once for
                errors that another server would repeat (``MODEL_NOT_FOUND``, 4xx …).
            Cancelled: ``CANCELLED`` when ``request.cancel`` was set.
        """
        return self._call(lambda p: p.chat(request), request.cancel)

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """Stream one answer; a failure before the first event moves it to another endpoint.

        Once an event was yielded, the stream belongs to that endpoint: a later error ends it
        with the member's ``ErrorEvent`` and is never replayed elsewhere.
        """
        failed: set[_Endpoint] = set()
        attempt = 0
        while True:
            attempt += 1
            try:
                endpoint = self._acquire(request.cancel, avoid=failed)
            except Cancelled:
                yield FinishEvent("cancelled")
                return
            error: OllmError | None = None
            stream: Iterator[ProviderEvent] = iter(())
            try:
                stream = endpoint.provider.chat_stream(request)
                first = next(stream, None)
                if isinstance(first, ErrorEvent):
                    error = error_from_code(first.error)
                    if failover_reason(error) is not None and not self._spent(
                        attempt, failed, endpoint
                    ):
                        continue  # nothing reached the caller: the finally rests it
                if first is None:
                    error = error_from_code(
                        ErrorInfo("the stream ended without a finish", "LLM_BAD_RESPONSE")
                    )
                    yield ErrorEvent(error.to_info())
                    return
                yield first
                yield from stream
                return
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
                self._release(endpoint, error)

    # ------------------------------------------------------------------ the rest

    def embed(self, texts: list[str], model: str | None = None) -> EmbeddingResult:
        """Embedding vectors from the least busy endpoint."""
        return self._call(lambda p: p.embed(texts, model))

    def count_tokens(self, request: ProviderRequest) -> int:
        """Tokens ``request`` uses (asked of one endpoint)."""
        return self._call(lambda p: p.count_tokens(request), request.cancel, bounded=False)

    def context_length(self, model: str) -> int | None:
        """The model's context window (asked of one endpoint)."""
        return self._call(lambda p: p.context_length(model), bounded=False)

    def list_models(self) -> list[ModelInfo]:
        """The models one endpoint lists (all serve the same ones)."""
        return self._call(lambda p: p.list_models(), bounded=False)

    def show_model(self, name: str) -> ModelInfo:
        """One model's details (asked of one endpoint)."""
        return self._call(lambda p: p.show_model(name), bounded=False)

    def model_capabilities(self, model: str) -> ProviderCapabilities:
        """What ``model`` can do (asked of one endpoint)."""
        return self._call(lambda p: p.model_capabilities(model), bounded=False)

    def pull_model(
        self,
        name: str,
        on_progress: Callable[[PullProgress], None] | None = None,
        cancel: Any = None,
    ) -> None:
        """Download ``name`` on every endpoint, one after the other."""
        for endpoint in self._endpoints:
            endpoint.provider.pull_model(name, on_progress, cancel)

    def delete_model(self, name: str) -> None:
        """Delete ``name`` on every endpoint."""
        for endpoint in self._endpoints:
            endpoint.provider.delete_model(name)

    def health(self) -> HealthStatus:
        """Healthy when at least one endpoint is; never raises."""
        with ThreadPoolExecutor(max_workers=len(self._endpoints)) as pool:
            checks = list(pool.map(lambda e: e.provider.health(), self._endpoints))
        good = [c for c in checks if c.ok]
        best = min(good, key=lambda c: c.latency_ms or 0.0) if good else checks[0]
        error = None
        if not good:
            reasons = "; ".join(c.error.message for c in checks if c.error)
            error = ErrorInfo(
                f"no endpoint of the fleet answers ({reasons})",
                "CONNECTION_FAILED",
                {"endpoints": [c.base_url for c in checks]},
            )
        return HealthStatus(
            ok=bool(good),
            provider=self.name,
            base_url=self.base_url,
            checked_at=datetime.now(UTC),
            latency_ms=best.latency_ms,
            version=best.version,
            error=error,
        )


def _server_slots(provider: ProviderAdapter) -> int | None:
    slots = getattr(provider, "parallel_slots", None)
    if not callable(slots):
        return None
    try:
        value = slots()
    except OllmError as exc:
        logger.debug("fleet: %r did not say its slots (%s)", provider, exc.code)
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def fleet_from_hosts(
    build: Callable[[str], ProviderAdapter],
    hosts: Sequence[str],
    *,
    per_host: int | None = None,
) -> Fleet:
    """A :class:`Fleet` of ``build(url)`` for each of ``hosts`` (duplicates dropped).

    ``build`` should make members that do not retry on their own (``retries=0``).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an empty ``hosts`` or a bad ``per_host``.
    """
    if isinstance(hosts, str):
        hosts = [hosts]
    unique = list(dict.fromkeys(h for h in hosts))
    if not unique:
        raise ConfigError("hosts must name at least one base URL")
    return Fleet([build(url) for url in unique], per_host=per_host)

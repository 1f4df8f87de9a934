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
  request that failed goes to another endpoint at once. A 429 or 5xx with ``Retry-After``
  rests that one endpoint for the time the server asked (at most 60 s), not the others.
* When every endpoint rests (a fleet of one), the request waits for the first to come back,
  ``Retry-After`` included, but only while the call's deadline allows: a rest that ends past
  it gives the last endpoint's error at once.
* Only failures *before* any answer reached the caller move a request: once a stream has
  yielded its first event, an error ends that stream as usual and is never replayed
  elsewhere (a second server would answer differently, and the caller already has text).
* A request that failed on an endpoint waits for the others rather than trying that one again;
  it raises the last error once every endpoint failed it and ``max(3, endpoints + 1)`` tries
  were made.

Members should not retry on their own (``retries=0``): a member's retries wait on the same
failing server (a 503's ``Retry-After`` included), while the fleet moves on at once.
``connect(hosts=...)`` and ``ollm-lite batch run --host ...`` build their members so.

Ejections and returns are logged at WARNING / INFO (logger ``ollm_lite.fleet``);
:meth:`Fleet.status` and :meth:`Fleet.health_note` feed progress displays.

This module is the provider facade; each endpoint's load and health (when it is ejected, for
how long), and the choice of an endpoint and the moving of a failed request, live in modules
of their own in this package.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import ConfigError
from ..providers.base import ProviderAdapter, call_with_cancel
from ..types import (
    ChatResult,
    EmbeddingResult,
    HealthStatus,
    ModelInfo,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
    PullProgress,
)
from ._endpoints import (
    DEFAULT_PER_HOST,
    MAX_RETRY_AFTER_S as MAX_RETRY_AFTER_S,
    Endpoint,
    EndpointStatus,
    Failover as Failover,
    failover_reason as failover_reason,
    health_of,
)
from ._routing import Router

__all__ = ["DEFAULT_PER_HOST", "EndpointStatus", "Fleet", "fleet_from_hosts"]

logger = logging.getLogger(__name__)


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
        self._router = Router(
            [Endpoint(m, per_host) for m in members],
            backoff=backoff,
            max_backoff=max_backoff,
            clock=clock,
        )
        self._endpoints = self._router.endpoints

    @property
    def max_attempts(self) -> int:
        """Tries a request gets before it raises (once every endpoint failed it)."""
        return self._router.max_attempts

    @max_attempts.setter
    def max_attempts(self, value: int) -> None:
        self._router.max_attempts = value

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
        return self._router.capacity()

    def status(self) -> list[EndpointStatus]:
        """Every endpoint's load and health, in the order given."""
        return self._router.status()

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

    # ------------------------------------------------------------------ chat

    def chat(self, request: ProviderRequest) -> ChatResult:
        """One whole answer from the least busy endpoint (moved on while endpoints fail).

        Raises:
            OllmError: the last endpoint's error once attempts are exhausted, or at once for
                errors that another server would repeat (``MODEL_NOT_FOUND``, 4xx …).
            Cancelled: ``CANCELLED`` when ``request.cancel`` was set.
        """
        return self._router.call(lambda p: p.chat(request), request.cancel, timeout=request.timeout)

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """Stream one answer; a failure before the first event moves it to another endpoint.

        Once an event was yielded, the stream belongs to that endpoint: a later error ends it
        with the member's ``ErrorEvent`` and is never replayed elsewhere.
        """
        return self._router.stream(request)

    # ------------------------------------------------------------------ the rest

    def _ask(
        self, method: str, *args: Any, cancel: threading.Event | None, bounded: bool = False
    ) -> Any:
        """``member.<method>(*args)`` on the least busy endpoint (unbounded: metadata calls)."""
        return self._router.call(
            lambda p: call_with_cancel(p, method, *args, cancel=cancel), cancel, bounded=bounded
        )

    def embed(
        self,
        texts: list[str],
        model: str | None = None,
        *,
        cancel: threading.Event | None = None,
    ) -> EmbeddingResult:
        """Embedding vectors from the least busy endpoint."""
        answer: EmbeddingResult = self._ask("embed", texts, model, cancel=cancel, bounded=True)
        return answer

    def count_tokens(
        self, request: ProviderRequest, *, cancel: threading.Event | None = None
    ) -> int:
        """Tokens ``request`` uses (asked of one endpoint)."""
        answer: int = self._ask("count_tokens", request, cancel=cancel or request.cancel)
        return answer

    def context_length(self, model: str, *, cancel: threading.Event | None = None) -> int | None:
        """The model's context window (asked of one endpoint)."""
        answer: int | None = self._ask("context_length", model, cancel=cancel)
        return answer

    def list_models(self, *, cancel: threading.Event | None = None) -> list[ModelInfo]:
        """The models one endpoint lists (all serve the same ones)."""
        answer: list[ModelInfo] = self._ask("list_models", cancel=cancel)
        return answer

    def show_model(self, name: str, *, cancel: threading.Event | None = None) -> ModelInfo:
        """One model's details (asked of one endpoint)."""
        answer: ModelInfo = self._ask("show_model", name, cancel=cancel)
        return answer

    def model_capabilities(
        self, model: str, *, cancel: threading.Event | None = None
    ) -> ProviderCapabilities:
        """What ``model`` can do (asked of one endpoint)."""
        answer: ProviderCapabilities = self._ask("model_capabilities", model, cancel=cancel)
        return answer

    def pull_model(
        self,
        name: str,
        on_progress: Callable[[PullProgress], None] | None = None,
        cancel: Any = None,
    ) -> None:
        """Download ``name`` on every endpoint, one after the other."""
        for endpoint in self._endpoints:
            endpoint.provider.pull_model(name, on_progress, cancel)

    def delete_model(self, name: str, *, cancel: threading.Event | None = None) -> None:
        """Delete ``name`` on every endpoint."""
        for endpoint in self._endpoints:
            call_with_cancel(endpoint.provider, "delete_model", name, cancel=cancel)

    def health(self, *, cancel: threading.Event | None = None) -> HealthStatus:
        """Healthy when at least one endpoint is; never raises."""
        with ThreadPoolExecutor(max_workers=len(self._endpoints)) as pool:
            checks = list(
                pool.map(
                    lambda e: call_with_cancel(e.provider, "health", cancel=cancel),
                    self._endpoints,
                )
            )
        return health_of(checks, provider=self.name, base_url=self.base_url)


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

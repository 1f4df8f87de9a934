"""A fleet's routing: which endpoint takes a request, and moving a request that failed.

:class:`Router` picks the endpoint with the fewest requests in flight (ties: the one used least
recently) that is not resting and below its limit, waiting while none is; it learns each
endpoint's limit once (``per_host``, else the server's ``parallel_slots()``, else
:data:`~ollm_lite.fleet._endpoints.DEFAULT_PER_HOST`). :meth:`Router.call` moves a request
that failed before answering to another endpoint, and never back to one that failed it while
another has not; it gives up after ``max_attempts`` once every endpoint failed it.
:meth:`Router.stream` does the same for a stream until its first event, never after. The health
bookkeeping itself is :mod:`ollm_lite.fleet._endpoints`'s job.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .._cancel_link import deadline_of, past_deadline
from ..errors import Cancelled, OllmError, RequestTimeout, error_from_code
from ..providers.base import ProviderAdapter, call_with_cancel
from ..types import ErrorEvent, ErrorInfo, FinishEvent, ProviderEvent, ProviderRequest
from ._endpoints import (
    DEFAULT_PER_HOST,
    Endpoint,
    EndpointStatus,
    Failover,
    failover_reason,
    logger,
)

__all__ = ["Router"]

_WAIT_SLICE_S = 0.05

_T = TypeVar("_T")


class Router:
    """Load and health of a fleet's endpoints behind one lock; see the module docstring.

    Args:
        endpoints: The endpoints, in the order given (limits ``None`` where not yet known).
        backoff: First rest after a failure, in seconds (doubles per consecutive failure).
        max_backoff: Longest rest after failures.
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        *,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoints = list(endpoints)
        self.max_attempts = max(3, len(self.endpoints) + 1)
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._clock = clock
        self._cond = threading.Condition()
        self._limits_lock = threading.Lock()
        self._picks = 0

    def status(self) -> list[EndpointStatus]:
        """Every endpoint's load and health, in the order given."""
        now = self._clock()
        with self._cond:
            return [e.status(now) for e in self.endpoints]

    def capacity(self) -> int:
        """Requests all endpoints take at once (asking the servers for unknown limits)."""
        self.ensure_limits(None)
        return sum(e.capacity for e in self.endpoints)

    def ensure_limits(self, cancel: threading.Event | None) -> None:
        """Ask the endpoints whose limit is unknown for their slots (at once, in parallel)."""
        if all(e.limit is not None for e in self.endpoints):
            return
        with self._limits_lock:
            unknown = [e for e in self.endpoints if e.limit is None]
            if not unknown:
                return
            with ThreadPoolExecutor(max_workers=len(unknown)) as pool:
                found = list(pool.map(lambda e: _server_slots(e.provider, cancel), unknown))
            if cancel is not None and (cancel.is_set() or past_deadline(cancel)):
                return  # the answers may be cut short: ask again next time
            with self._cond:
                for endpoint, slots in zip(unknown, found, strict=True):
                    endpoint.limit = slots or DEFAULT_PER_HOST
                    logger.debug("fleet: %s takes %d at a time", endpoint.url, endpoint.limit)
                self._cond.notify_all()

    def acquire(
        self,
        cancel: threading.Event | None,
        *,
        bounded: bool = True,
        avoid: set[Endpoint] | None = None,
        deadline: float | None = None,
        last: OllmError | None = None,
    ) -> Endpoint:
        """A slot on the least busy endpoint, waiting while none is free.

        ``avoid``: endpoints that already failed this request; used again only once every
        endpoint has (a request waits for a busy good server rather than re-trying a dead one
        whose rest just ended). The wait ends at ``deadline`` (``time.monotonic()``; the
        earlier of it and the one ``cancel`` carries), and at once when every endpoint rests
        past it: a rest the server asked for (``Retry-After``) is waited out only when the
        call has the time.

        Raises:
            Cancelled: ``CANCELLED`` when ``cancel`` was set while waiting.
            OllmError: ``last`` (the request's last failure), else ``LLM_TIMEOUT``, when no
                endpoint takes the request before the deadline.
        """
        self.ensure_limits(cancel)
        deadline = _earlier(deadline, deadline_of(cancel))
        pool = [e for e in self.endpoints if not avoid or e not in avoid] or self.endpoints
        with self._cond:
            while True:
                if cancel is not None and cancel.is_set():
                    name = self.endpoints[0].provider.name
                    raise Cancelled("the request was cancelled", provider=name)
                now = self._clock()
                ready = [e for e in pool if e.takes(now, bounded=bounded)]
                if ready:
                    chosen = min(ready, key=lambda e: (e.in_flight, e.last_pick))
                    self._picks += 1
                    chosen.last_pick = self._picks
                    chosen.in_flight += 1
                    return chosen
                waits = [e.rest_until - now for e in pool if e.rest_until > now]
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0 or (len(waits) == len(pool) and min(waits) >= left):
                        raise last or self._late()
                    waits.append(left)
                timeout = min([_WAIT_SLICE_S, *waits]) if cancel is not None or waits else None
                self._cond.wait(timeout=None if timeout is None else max(timeout, 0.001))

    def _late(self) -> RequestTimeout:
        provider = self.endpoints[0].provider
        return RequestTimeout(
            "no server of the fleet was free before the call's deadline "
            f"({', '.join(e.url for e in self.endpoints)})",
            provider=provider.name,
        )

    def release(self, endpoint: Endpoint, error: OllmError | None) -> Failover | None:
        """Free the slot; rest the endpoint when ``error`` says it is down or busy."""
        with self._cond:
            reason = endpoint.finish(
                error, self._clock(), backoff=self._backoff, max_backoff=self._max_backoff
            )
            self._cond.notify_all()
        return reason

    def call(
        self,
        fn: Callable[[ProviderAdapter], _T],
        cancel: threading.Event | None = None,
        *,
        bounded: bool = True,
        timeout: float | None = None,
    ) -> _T:
        """``fn(member)`` on the least busy endpoint, moving on while it fails before answering.

        ``bounded=False`` (quick metadata calls) does not wait for a free slot: a model's
        context length should not queue behind long generations. ``timeout``: seconds the
        whole call may take (beside the deadline ``cancel`` carries).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        failed: set[Endpoint] = set()
        attempt = 0
        last: OllmError | None = None
        while True:
            attempt += 1
            endpoint = self.acquire(
                cancel, bounded=bounded, avoid=failed, deadline=deadline, last=last
            )
            try:
                value = fn(endpoint.provider)
            except OllmError as exc:
                if self.release(endpoint, exc) is None or self.spent(attempt, failed, endpoint):
                    raise
                logger.debug("fleet: moving a request off %s (%s)", endpoint.url, exc.code)
                last = exc
                continue
            except BaseException:
                self.release(endpoint, None)
                raise
            self.release(endpoint, None)
            return value

    def stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """``chat_stream`` on the least busy endpoint; moved on while it fails before an event.

        Once an event was yielded, the stream belongs to that endpoint: a later error ends it
        with the member's ``ErrorEvent`` and is never replayed elsewhere.
        """
        failed: set[Endpoint] = set()
        attempt = 0
        deadline = None if request.timeout is None else time.monotonic() + request.timeout
        last: OllmError | None = None
        while True:
            attempt += 1
            try:
                endpoint = self.acquire(request.cancel, avoid=failed, deadline=deadline, last=last)
            except Cancelled:
                yield FinishEvent("cancelled")
                return
            except OllmError as exc:  # no server free before the deadline
                yield ErrorEvent(exc.to_info(), exception=exc)
                return
            error: OllmError | None = None
            stream: Iterator[ProviderEvent] = iter(())
            try:
                stream = endpoint.provider.chat_stream(request)
                first = next(stream, None)
                if isinstance(first, ErrorEvent):
                    error = error_from_code(first.error)
                    if failover_reason(error) is not None and not self.spent(
                        attempt, failed, endpoint
                    ):
                        last = error
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
                self.release(endpoint, error)

    def spent(self, attempt: int, failed: set[Endpoint], endpoint: Endpoint) -> bool:
        """Record that ``endpoint`` failed this request; whether the request must give up.

        It gives up once every endpoint failed it and ``max_attempts`` were made.
        """
        failed.add(endpoint)
        return attempt >= self.max_attempts and len(failed) == len(self.endpoints)


def _earlier(a: float | None, b: float | None) -> float | None:
    """The earlier of two optional deadlines."""
    if a is None:
        return b
    return a if b is None else min(a, b)


def _server_slots(provider: ProviderAdapter, cancel: threading.Event | None) -> int | None:
    if not callable(getattr(provider, "parallel_slots", None)):
        return None
    try:
        value = call_with_cancel(provider, "parallel_slots", cancel=cancel)
    except OllmError as exc:
        logger.debug("fleet: %r did not say its slots (%s)", provider, exc.code)
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

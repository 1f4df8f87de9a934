"""A fleet's endpoints: each server's load and health, and when a failure ejects it.

An :class:`Endpoint` counts its requests in flight against its limit and rests after a
failure that happened before any answer. :func:`failover_reason` sorts such an error into
``"down"`` (refused, unreachable, 5xx, no connection within the connect timeout) or ``"busy"``
(429); :meth:`Endpoint.finish` turns it into a rest: the server's ``Retry-After`` where it gave
one (a 429's or a 503's; at most :data:`MAX_RETRY_AFTER_S`), else for ``"down"`` a backoff
that doubles per consecutive failure up to its maximum. The rest is that one endpoint's: the
request itself moves to another at once. :func:`health_of` sums the endpoints'
health checks up into the fleet's. Endpoints hold no lock of their own: the fleet's router
holds its lock around every change.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ..errors import ConnectionFailed, HTTPStatusError, OllmError, RateLimited, RequestTimeout
from ..providers.base import ProviderAdapter
from ..types import ErrorInfo, HealthStatus

__all__ = [
    "DEFAULT_PER_HOST",
    "MAX_RETRY_AFTER_S",
    "Endpoint",
    "EndpointStatus",
    "Failover",
    "failover_reason",
    "health_of",
    "retry_after_of",
]

# The fleet's documented logger (ejections at WARNING, returns at INFO).
logger = logging.getLogger("ollm_lite.fleet")

#: Requests in flight per endpoint when neither ``per_host`` nor the server says.
DEFAULT_PER_HOST = 4
#: Longest rest a ``Retry-After`` may impose on one endpoint.
MAX_RETRY_AFTER_S = 60.0

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


def retry_after_of(error: OllmError) -> float | None:
    """The seconds the server asked to wait before the next request (``Retry-After``), if it
    said (a 429's ``retry_after``, or any error status's ``details["retry_after"]``)."""
    value = error.retry_after if isinstance(error, RateLimited) else None
    if value is None:
        value = error.details.get("retry_after")
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


class Endpoint:
    """One member provider with its load (requests in flight, limit) and health (rest, failures)."""

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

    @property
    def capacity(self) -> int:
        """Requests it takes at once (:data:`DEFAULT_PER_HOST` until its limit is known)."""
        return self.limit or DEFAULT_PER_HOST

    def takes(self, now: float, *, bounded: bool) -> bool:
        """Whether it takes a request now: not resting and (when ``bounded``) below its limit."""
        return self.rest_until <= now and (not bounded or self.in_flight < self.capacity)

    def status(self, now: float) -> EndpointStatus:
        """Its load and health at ``now``."""
        return EndpointStatus(
            url=self.url,
            in_flight=self.in_flight,
            limit=self.limit,
            up=self.rest_until <= now,
            resting_for=max(0.0, self.rest_until - now),
            failures=self.failures,
            served=self.served,
        )

    def finish(
        self, error: OllmError | None, now: float, *, backoff: float, max_backoff: float
    ) -> Failover | None:
        """Free one slot; count a success, or rest the endpoint when ``error`` says so.

        Returns:
            Why the request should move elsewhere (``"down"``, ``"busy"``), or ``None``.
        """
        self.in_flight -= 1
        if error is None:
            self.served += 1
            if self.failures:
                logger.info("fleet: %s answers again", self.url)
                self.failures = 0
            return None
        reason = failover_reason(error)
        if reason is None:
            return None
        asked = retry_after_of(error)
        if reason == "busy":
            rest = min(MAX_RETRY_AFTER_S, asked or backoff)
            logger.warning("fleet: %s is rate limiting; resting it %.1f s", self.url, rest)
        else:
            self.failures += 1
            rest = min(max_backoff, backoff * 2 ** (self.failures - 1))
            if asked is not None:  # the server said when to come back (a 503's Retry-After)
                rest = min(MAX_RETRY_AFTER_S, asked)
            # One warning when a host goes down; its later ejections while it stays down are
            # details (--debug): a dead host would otherwise print a line per request.
            log = logger.warning if self.failures == 1 else logger.debug
            log(
                "fleet: %s ejected for %.1f s after %s (%d in a row)",
                self.url, rest, error.code, self.failures,
            )  # fmt: skip
        self.rest_until = max(self.rest_until, now + rest)
        return reason


def health_of(checks: Sequence[HealthStatus], *, provider: str, base_url: str) -> HealthStatus:
    """The fleet's health from its endpoints' ``checks``: healthy when one of them is.

    The fastest healthy endpoint gives the latency and version; with none healthy, the error
    lists every endpoint's reason.
    """
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
        provider=provider,
        base_url=base_url,
        checked_at=datetime.now(UTC),
        latency_ms=best.latency_ms,
        version=best.version,
        error=error,
    )

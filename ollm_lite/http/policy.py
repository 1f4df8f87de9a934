"""Time limits, the retry policy and the size limits of requests."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from math import inf

from ..errors import ConfigError, OllmError, RateLimited
from .errors import parse_retry_after

__all__ = ["RetryPolicy", "Timeouts"]

#: Largest error body read to extract the server's message.
MAX_ERROR_BODY = 64 * 1024
#: Largest non-streamed answer accepted.
MAX_BODY = 256 * 1024 * 1024
#: A read may time out this much before the watcher marks the deadline: still the deadline.
DEADLINE_SLACK_S = 0.05
#: At most this long ``close()`` waits for the rest of a body it could reuse the connection for.
DRAIN_WAIT_S = 0.02
#: At most this many bytes ``close()`` reads to reuse the connection.
DRAIN_MAX = 64 * 1024


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Time limits of one request, in seconds.

    Attributes:
        connect: Limit for opening the TCP connection.
        idle: Longest wait for the response to begin and, once it streams, the longest gap
            without content (keep-alive comments do not count as content).
        total: Deadline for the whole request, streaming included; ``None`` for none.
    """

    connect: float = 5.0
    idle: float = 120.0
    total: float | None = None

    @classmethod
    def of(cls, value: float | Timeouts | None, default: Timeouts | None = None) -> Timeouts:
        """Coerce a number (idle limit, connect capped at 5 s) or ``None`` to ``Timeouts``."""
        if isinstance(value, Timeouts):
            return value
        base = default or cls()
        if value is None:
            return base
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < inf:
            raise ConfigError(f"timeout must be a positive number of seconds, got {value!r}")
        value = float(value)
        return cls(connect=min(base.connect, value), idle=value, total=base.total)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how long to wait before trying a request again.

    Only failures before any content reached the caller are retried.
    """

    retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0
    statuses: frozenset[int] = field(default=frozenset({408, 429, 500, 502, 503, 504}))

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before try number ``attempt + 1`` (``attempt`` counts from 0)."""
        if retry_after is not None:
            return retry_after
        base: float = min(self.max_backoff, self.backoff * 2.0**attempt)
        return min(self.max_backoff, base * random.uniform(0.75, 1.25))

    def next_delay(
        self, retry_after: float | None, attempt: int, deadline: float | None, retry: bool = True
    ) -> float | None:
        """Seconds to wait before trying again after failed try ``attempt`` (from 0), or
        ``None`` when no try is left: retries used up or off, a ``Retry-After`` longer than
        ``max_retry_after``, or a wait that would end past the monotonic ``deadline``."""
        if not retry or attempt >= self.retries:
            return None
        if retry_after is not None and retry_after > self.max_retry_after:
            return None
        delay = self.delay(attempt, retry_after)
        if deadline is not None and time.monotonic() + delay >= deadline:
            return None
        return delay

    def classify(self, error: OllmError, status: int, headers: Mapping[str, str]) -> Exception:
        """``error`` (from an error status) wrapped as :class:`Retryable` when the status may
        be tried again; an exhausted quota (``insufficient_quota``) never is."""
        quota = "insufficient_quota" in (error.details.get("code"), error.details.get("type"))
        if status not in self.statuses or quota:
            return error
        retry_after = error.retry_after if isinstance(error, RateLimited) else None
        if retry_after is None:
            retry_after = parse_retry_after(headers)
        return Retryable(error, retry_after)


def past(deadline: float | None) -> bool:
    """Whether the total deadline has (all but) passed.

    The socket's read timeout is capped at the time left, so a read can time out a few
    milliseconds before the watcher marks the request: that is still the deadline.
    """
    return deadline is not None and time.monotonic() >= deadline - DEADLINE_SLACK_S


class Retryable(Exception):
    """Internal: a failure before the first byte that the retry policy may try again.

    ``stale``: the request went out on a pooled connection the server had already closed; it
    is sent again at once, outside the policy.
    """

    def __init__(self, error: OllmError, retry_after: float | None, *, stale: bool = False) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after
        self.stale = stale

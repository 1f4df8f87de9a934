"""Rate limits: requests and tokens per minute, per client.

In any 60 s window at most ``requests_per_minute`` requests are sent; a request is not sent
while the tokens of the answers received in the last 60 s are at or above
``tokens_per_minute`` (a request's own tokens are not estimated in advance). A request waits
for its turn — every thread, ``map`` item and batch line of the client shares one limiter —
but never past its call's deadline (``RequestTimeout``), and a ``cancel`` ends the wait at
once (``Cancelled``). A server's 429 ``Retry-After`` still holds as before: the transport's
retry policy waits it out on top of this.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import Cancelled, ConfigError, RequestTimeout

__all__ = ["RateLimit", "RateLimiter", "rate_from", "rate_issues"]

#: The window the limits count over (seconds).
WINDOW = 60.0
#: Slack added to each wait so that a request admitted just as the window's oldest entry
#: leaves it is never counted in the same 60 s by a clock elsewhere.
_SLACK = 0.01


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimit:
    """Most requests and tokens per minute a client sends (``None``: no limit on that).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a limit that is not a whole number >= 1.
    """

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    def __post_init__(self) -> None:
        problems = rate_issues({f.name: getattr(self, f.name) for f in fields(self)}, "RateLimit")
        if problems:
            path, message = problems[0]
            raise ConfigError(f"{path} {message}", details={"path": path})


_KEYS = tuple(f.name for f in fields(RateLimit))


def rate_issues(table: Any, where: str = "rate") -> list[tuple[str, str]]:
    """Problems in a ``[rate]`` table, as ``(dotted path, message)``."""
    if table is None:
        return []
    if not isinstance(table, Mapping):
        return [(where, f"must be a table, not {type(table).__name__}")]
    issues: list[tuple[str, str]] = []
    for key, value in table.items():
        path = f"{where}.{key}"
        if key not in _KEYS:
            issues.append((path, f"unknown key; expected one of {', '.join(_KEYS)}"))
        elif value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            issues.append((path, f"must be a whole number >= 1, not {value!r}"))
    return issues


def rate_from(given: Any, configured: Any) -> RateLimit | None:
    """The rate limit a client keeps: ``given`` (``connect(rate=)``), else the config file's
    ``[rate]`` table (``None``: none; a bad table is reported by ``validate_config``).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a ``given`` that is no :class:`RateLimit`.
    """
    if given is not None:
        if not isinstance(given, RateLimit):
            raise ConfigError(f"rate must be a RateLimit, not {type(given).__name__}")
        return given
    if not isinstance(configured, Mapping) or not configured or rate_issues(configured):
        return None
    return RateLimit(**configured)


class RateLimiter:
    """One client's limiter: when each request was sent, and the tokens of recent answers."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self._sent: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._token_sum = 0
        self._lock = threading.Lock()

    def _forget(self, now: float) -> None:
        while self._sent and self._sent[0] <= now - WINDOW:
            self._sent.popleft()
        while self._tokens and self._tokens[0][0] <= now - WINDOW:
            self._token_sum -= self._tokens.popleft()[1]

    def _wait_needed(self, now: float) -> float:
        """Seconds until a request may go (0: now)."""
        limit = self.limit
        waits = [0.0]
        rpm = limit.requests_per_minute
        if rpm is not None and len(self._sent) >= rpm:
            waits.append(self._sent[len(self._sent) - rpm] + WINDOW - now + _SLACK)
        tpm = limit.tokens_per_minute
        if tpm is not None and self._token_sum >= tpm:
            # the answers leave the window oldest first: wait until enough have left
            total = self._token_sum
            for stamp, tokens in self._tokens:
                total -= tokens
                if total < tpm:
                    waits.append(stamp + WINDOW - now + _SLACK)
                    break
        return max(waits)

    def acquire(self, cancel: threading.Event | None, deadline: float | None) -> tuple[float, bool]:
        """Wait for the request's turn and count it as sent; returns the slot (its time) and
        whether it had to wait.

        Raises:
            RequestTimeout: ``LLM_TIMEOUT``: its turn comes after the call's deadline.
            Cancelled: ``CANCELLED``: ``cancel`` was set while it waited.
        """
        waited = False
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled("the call was cancelled while it waited for the rate limit")
            now = time.monotonic()
            with self._lock:
                self._forget(now)
                wait = self._wait_needed(now)
                if wait <= 0:
                    self._sent.append(now)
                    return now, waited
            if deadline is not None and now + wait > deadline:
                raise RequestTimeout(
                    f"the rate limit's next free slot is in {wait:.1f} s, after the call's "
                    "deadline: the request was not sent",
                    details={"wait": round(wait, 3), "limit": _describe(self.limit)},
                )
            waited = True
            if cancel is not None:
                cancel.wait(wait)  # returns at once when the event is set
            else:
                time.sleep(wait)

    def release(self, slot: float) -> None:
        """Give back a slot :meth:`acquire` gave (its request was not sent after all)."""
        with self._lock, contextlib.suppress(ValueError):  # already out of the window
            self._sent.remove(slot)

    def answered(self, tokens: int) -> None:
        """An answer with ``tokens`` came back now."""
        if self.limit.tokens_per_minute is None or tokens <= 0:
            return
        with self._lock:
            self._tokens.append((time.monotonic(), tokens))
            self._token_sum += tokens


def _describe(limit: RateLimit) -> dict[str, int | None]:
    return {f.name: getattr(limit, f.name) for f in fields(limit)}

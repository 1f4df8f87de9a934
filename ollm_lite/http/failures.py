"""A failed send or read (refused, timed out, reset, cancelled) as an exception.

The status of an answer is mapped by :mod:`ollm_lite.http.errors`; this module maps what goes
wrong *around* it, from the ``requests``/``urllib3`` exception and what the request knows (was
it cancelled, is its deadline past). Failures the retry policy may try again come wrapped in
:class:`~ollm_lite.http.policy.Retryable`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import requests
import urllib3

from ..errors import (
    BadResponse,
    Cancelled,
    ConfigError,
    ConnectionFailed,
    OllmError,
    RequestTimeout,
)
from .cancel import CancelFlag, Scope
from .policy import Retryable, Timeouts, past

__all__ = ["Failures", "Origin", "cancelled", "is_reset"]


@dataclass(frozen=True, slots=True)
class Origin:
    """Who a request went to, for messages.

    Attributes:
        provider: Provider name.
        base_url: Server root (without credentials).
        start_hint: What to tell the user when the server cannot be reached.
    """

    provider: str
    base_url: str
    start_hint: str = ""

    @property
    def where(self) -> str:
        """``"<provider> at <base_url>"``."""
        return f"{self.provider} at {self.base_url}"

    @property
    def hint(self) -> str:
        """``start_hint`` with a leading blank, or ``""``."""
        return f" {self.start_hint}" if self.start_hint else ""


def cancelled(origin: Origin, model: str | None) -> Cancelled:
    """``CANCELLED`` for a request to ``origin``."""
    return Cancelled("the request was cancelled", provider=origin.provider, model=model)


@dataclass(frozen=True, slots=True)
class Failures:
    """The errors of one request: what its send or its body read failing means.

    Attributes:
        origin: Provider and server.
        scope: The request's sockets, and why the watcher aborted it, if it did.
        cancel: The request's cancel event(s).
        deadline: Its total deadline (``time.monotonic()``), or ``None``.
        timeouts: Its limits.
        model: The model, for messages.
    """

    origin: Origin
    scope: Scope
    cancel: CancelFlag | None
    deadline: float | None
    timeouts: Timeouts
    model: str | None

    def cancelled(self) -> bool:
        """Whether the request was cancelled (by the watcher, or its event is set)."""
        return self.scope.reason == "cancelled" or (
            self.cancel is not None and self.cancel.is_set()
        )

    def interrupted(self) -> bool:
        """Whether the request was cut short: cancelled, or aborted at its deadline."""
        return self.scope.reason is not None or (self.cancel is not None and self.cancel.is_set())

    def deadline_error(self) -> RequestTimeout:
        """``LLM_TIMEOUT`` for a request past its total deadline."""
        return RequestTimeout(
            f"{self.origin.where} did not finish within the {self.timeouts.total or 0:.3g} s "
            "deadline",
            provider=self.origin.provider,
            model=self.model,
            details={"deadline": self.timeouts.total},
        )

    def on_send(self, exc: Exception, url: str, redact: Callable[[str], str]) -> Exception:
        """The error for ``exc`` raised while sending (before any status arrived).

        Args:
            exc: What ``requests`` raised.
            url: The request's URL, redacted.
            redact: The transport's redactor.
        """
        origin, model = self.origin, self.model
        if self.cancelled():
            return cancelled(origin, model)
        if self.scope.reason == "deadline" or (
            past(self.deadline) and isinstance(exc, requests.ReadTimeout)
        ):
            return self.deadline_error()
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            limit = self.timeouts.connect
            return Retryable(
                RequestTimeout(
                    f"could not connect to {origin.where} within {limit:g} s.{origin.hint}",
                    provider=origin.provider,
                    model=model,
                ),
                None,
            )
        if isinstance(exc, requests.exceptions.Timeout):
            return RequestTimeout(
                f"{origin.where} did not answer within {self.timeouts.idle:g} s",
                provider=origin.provider,
                model=model,
                details={"idle_timeout": self.timeouts.idle},
            )
        refused = _refused_request(exc, origin, model, redact)
        if refused is not None:
            return refused
        # A pooled connection the server closed while it sat idle (keep-alive timeout, or a
        # server that closes after each answer without saying so): the request was never
        # read. Sent again at once on a new connection, outside the retry policy, as Go's
        # net/http does for a server-closed idle connection.
        stale = self.scope.reused and isinstance(exc, requests.exceptions.ConnectionError)
        if isinstance(exc, requests.exceptions.ConnectionError) and "RemoteDisconnected" not in (
            str(exc)
        ):
            return Retryable(_connection_error(origin, exc, url, model), None, stale=stale)
        # Accepted, then closed without an answer: retrying is safe because nothing arrived.
        return Retryable(
            ConnectionFailed(
                f"{origin.where} closed the connection without answering",
                url=origin.base_url,
                provider=origin.provider,
                model=model,
            ),
            None,
            stale=stale,
        )

    def on_read(self, exc: BaseException) -> OllmError:
        """The error for ``exc`` raised while reading the body of an answer."""
        origin = self.origin
        if self.cancelled():
            return Cancelled("the request was cancelled", provider=origin.provider)
        if self.scope.reason == "deadline" or past(self.deadline):
            return self.deadline_error()
        if isinstance(exc, requests.exceptions.Timeout | urllib3.exceptions.ReadTimeoutError):
            return RequestTimeout(
                f"{origin.where} sent nothing for {self.timeouts.idle:g} s",
                provider=origin.provider,
                model=self.model,
                details={"idle_timeout": self.timeouts.idle},
            )
        return ConnectionFailed(
            f"the connection to {origin.where} was lost mid-stream ({type(exc).__name__})",
            url=origin.base_url,
            provider=origin.provider,
            model=self.model,
        )


def _refused_request(
    exc: Exception, origin: Origin, model: str | None, redact: Callable[[str], str]
) -> OllmError | None:
    """The error for a request that cannot succeed however often it is sent, or ``None``."""
    if isinstance(exc, requests.exceptions.InvalidHeader):
        return ConfigError(f"a header for {origin.provider} cannot be sent (a key or value)")
    if isinstance(exc, requests.exceptions.InvalidURL | requests.exceptions.MissingSchema):
        return ConfigError(f"invalid URL for {origin.provider}: {redact(str(exc))}")
    if isinstance(exc, requests.exceptions.TooManyRedirects):
        last = redact(str(getattr(exc.request, "url", "")))[:200]
        return BadResponse(
            f"{origin.where} redirected too many times (last: {last})",
            provider=origin.provider,
            model=model,
        )
    if "BadStatusLine" in str(exc):
        # Something listens there, but it is not an HTTP server (wrong port or service):
        # trying again cannot help.
        return ConnectionFailed(
            f"{origin.where} did not answer with HTTP; is this the right address and "
            f"port?{origin.hint}",
            url=origin.base_url,
            provider=origin.provider,
            model=model,
        )
    return None


def _connection_error(origin: Origin, exc: BaseException, url: str, model: str | None) -> OllmError:
    reason = "connection refused"
    text = str(exc)
    if (
        "Name or service not known" in text
        or "nodename nor servname" in text
        or ("getaddrinfo" in text)
    ):
        reason = "host name could not be resolved"
    elif "refused" not in text.lower():
        reason = type(exc).__name__
    return ConnectionFailed(
        f"cannot connect to {origin.where} ({reason}).{origin.hint}",
        url=origin.base_url,
        provider=origin.provider,
        model=model,
        details={"url": url},
    )


def is_reset(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception in its chain) is a reset, broken pipe or timeout."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionResetError | BrokenPipeError | TimeoutError):
            return True
        if isinstance(cur, requests.exceptions.Timeout | urllib3.exceptions.ReadTimeoutError):
            return True
        nxt = cur.__cause__ or cur.__context__
        if nxt is None and cur.args and isinstance(cur.args[-1], BaseException):
            nxt = cur.args[-1]
        cur = nxt
    return False

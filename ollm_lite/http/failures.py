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
from .policy import Retryable, Timeouts, past

__all__ = ["Origin", "deadline_error", "read_failure", "send_failure"]


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
    def hint(self) -> str:
        """``start_hint`` with a leading blank, or ``""``."""
        return f" {self.start_hint}" if self.start_hint else ""


def cancelled(origin: Origin, model: str | None) -> Cancelled:
    """``CANCELLED`` for a request to ``origin``."""
    return Cancelled("the request was cancelled", provider=origin.provider, model=model)


def deadline_error(origin: Origin, timeouts: Timeouts, model: str | None) -> RequestTimeout:
    """``LLM_TIMEOUT`` for a request past its total deadline."""
    return RequestTimeout(
        f"{origin.provider} at {origin.base_url} did not finish within the "
        f"{timeouts.total:g} s deadline",
        provider=origin.provider,
        model=model,
        details={"deadline": timeouts.total},
    )


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
        f"cannot connect to {origin.provider} at {origin.base_url} ({reason}).{origin.hint}",
        url=origin.base_url,
        provider=origin.provider,
        model=model,
        details={"url": url},
    )


def send_failure(
    exc: Exception,
    origin: Origin,
    *,
    aborted: str | None,
    is_cancelled: bool,
    deadline: float | None,
    timeouts: Timeouts,
    url: str,
    model: str | None,
    reused: bool,
    redact: Callable[[str], str],
) -> Exception:
    """The error for ``exc`` raised while sending (before any status arrived).

    Args:
        aborted: Why the watcher interrupted the request (``"cancelled"``, ``"deadline"``).
        is_cancelled: Whether the request's cancel event is set.
        url: The request's URL, redacted.
        reused: Whether the request went out on a pooled connection.
    """
    if aborted == "cancelled" or is_cancelled:
        return cancelled(origin, model)
    if aborted == "deadline" or (past(deadline) and isinstance(exc, requests.ReadTimeout)):
        return deadline_error(origin, timeouts, model)
    where = f"{origin.provider} at {origin.base_url}"
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return Retryable(
            RequestTimeout(
                f"could not connect to {where} within {timeouts.connect:g} s.{origin.hint}",
                provider=origin.provider,
                model=model,
            ),
            None,
        )
    if isinstance(exc, requests.exceptions.Timeout):
        return RequestTimeout(
            f"{where} did not answer within {timeouts.idle:g} s",
            provider=origin.provider,
            model=model,
            details={"idle_timeout": timeouts.idle},
        )
    if isinstance(exc, requests.exceptions.InvalidHeader):
        return ConfigError(f"a header for {origin.provider} cannot be sent (a key or value)")
    if isinstance(exc, requests.exceptions.InvalidURL | requests.exceptions.MissingSchema):
        return ConfigError(f"invalid URL for {origin.provider}: {redact(str(exc))}")
    if isinstance(exc, requests.exceptions.TooManyRedirects):
        return BadResponse(
            f"{where} redirected too many times "
            f"(last: {redact(str(getattr(exc.request, 'url', '')))[:200]})",
            provider=origin.provider,
            model=model,
        )
    if "BadStatusLine" in str(exc):
        # Something listens there, but it is not an HTTP server (wrong port or service):
        # trying again cannot help.
        return ConnectionFailed(
            f"{where} did not answer with HTTP; is this the right address and port?{origin.hint}",
            url=origin.base_url,
            provider=origin.provider,
            model=model,
        )
    # A pooled connection the server closed while it sat idle (keep-alive timeout, or a
    # server that closes after each answer without saying so): the request was never
    # read. Sent again at once on a new connection, outside the retry policy, as Go's
    # net/http does for a server-closed idle connection.
    stale = reused and isinstance(exc, requests.exceptions.ConnectionError)
    if isinstance(exc, requests.exceptions.ConnectionError) and "RemoteDisconnected" not in (
        str(exc)
    ):
        return Retryable(_connection_error(origin, exc, url, model), None, stale=stale)
    # Accepted, then closed without an answer: retrying is safe because nothing arrived.
    return Retryable(
        ConnectionFailed(
            f"{where} closed the connection without answering",
            url=origin.base_url,
            provider=origin.provider,
            model=model,
        ),
        None,
        stale=stale,
    )


def read_failure(
    exc: BaseException,
    origin: Origin,
    *,
    aborted: str | None,
    is_cancelled: bool,
    deadline: float | None,
    timeouts: Timeouts,
    model: str | None,
) -> OllmError:
    """The error for ``exc`` raised while reading the body of an answer."""
    if aborted == "cancelled" or is_cancelled:
        return Cancelled("the request was cancelled", provider=origin.provider)
    if aborted == "deadline" or past(deadline):
        return deadline_error(origin, timeouts, model)
    if isinstance(exc, requests.exceptions.Timeout | urllib3.exceptions.ReadTimeoutError):
        return RequestTimeout(
            f"{origin.provider} at {origin.base_url} sent nothing for {timeouts.idle:g} s",
            provider=origin.provider,
            model=model,
            details={"idle_timeout": timeouts.idle},
        )
    return ConnectionFailed(
        f"the connection to {origin.provider} at {origin.base_url} was lost mid-stream "
        f"({type(exc).__name__})",
        url=origin.base_url,
        provider=origin.provider,
        model=model,
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

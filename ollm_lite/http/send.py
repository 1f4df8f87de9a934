"""One try of a request: send it, watch it, and map what comes back.

:class:`Sender` sends a :class:`Request` once and returns the open
:class:`~ollm_lite.http.response.StreamResponse` for a success status; anything else raises,
as :class:`~ollm_lite.http.policy.Retryable` when the retry policy may try it again. The retry
loop itself is :meth:`ollm_lite.http.transport.Transport.open_stream`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Literal, NamedTuple

import requests

from ..errors import Cancelled, OllmError, RequestTimeout
from .cancel import CancelFlag, Scope, Watchdog, current
from .errors import error_for_status
from .failures import Failures, Origin
from .policy import MAX_ERROR_BODY, RetryPolicy, Timeouts
from .response import StreamResponse
from .secrets import Redactor

__all__ = ["Request", "Sender"]

#: The name the transport has always logged under, kept for users' logging configuration.
logger = logging.getLogger("ollm_lite.transport")


class Request(NamedTuple):
    """One request, the same on every try."""

    method: str
    url: str
    body: bytes | None
    params: Mapping[str, str] | None
    headers: Mapping[str, str]
    cancel: CancelFlag | None
    deadline: float | None
    timeouts: Timeouts
    model: str | None
    not_found: Literal["model", "route"]
    redact: Redactor
    """The transport's redactor plus this request's own header values."""


class Sender:
    """Sends requests of one transport, each watched by the transport's one watcher thread.

    Args:
        origin: Provider and server, for messages.
        watchdog: The transport's watcher.
        model_hint: Added to ``MODEL_NOT_FOUND`` messages; ``{model}`` is replaced.
        auth_hint: What to check after a 401/403 (``""``: the provider's API key).
    """

    __slots__ = ("_auth_hint", "_model_hint", "_origin", "_watchdog")

    def __init__(self, origin: Origin, watchdog: Watchdog, model_hint: str, auth_hint: str) -> None:
        self._origin = origin
        self._watchdog = watchdog
        self._model_hint = model_hint
        self._auth_hint = auth_hint

    def send(
        self, session: requests.Session, request: Request, policy: RetryPolicy
    ) -> StreamResponse:
        """Send ``request`` once; the open answer for a success status.

        Raises:
            Retryable: a failure ``policy`` may try again.
            OllmError: any other failure.
        """
        scope = Scope()
        failures = Failures(
            self._origin, scope, request.cancel, request.deadline, request.timeouts, request.model
        )
        if request.cancel is not None or request.deadline is not None:
            self._watchdog.watch(scope, request.cancel, request.deadline)
        started = time.perf_counter()
        timeouts = request.timeouts
        read_timeout = timeouts.idle
        if request.deadline is not None:
            read_timeout = max(0.001, min(read_timeout, request.deadline - time.monotonic()))
        current.scope = scope
        unchained: Exception | None = None
        try:
            response = session.request(
                request.method,
                request.url,
                data=request.body,
                params=request.params,
                headers=request.headers,
                stream=True,
                timeout=(timeouts.connect, read_timeout),
            )
        except BaseException as exc:
            scope.finish()
            self._watchdog.unwatch(scope)
            if not isinstance(exc, Exception):
                raise
            error = failures.on_send(exc, request.redact(request.url), request.redact)
            if not isinstance(exc, requests.exceptions.InvalidHeader):
                raise error from exc
            unchained = error  # the refused header (a key) stays out of the chain
        finally:
            current.scope = None
        if unchained is not None:
            raise unchained
        elapsed = (time.perf_counter() - started) * 1000
        logger.debug(
            "%s %s -> %d in %.1f ms", request.method, request.url, response.status_code, elapsed
        )
        stream = StreamResponse(response, failures, self._watchdog.unwatch)
        if response.status_code < 400:
            return stream
        raise self._status_failure(stream, request, policy)

    def _status_failure(
        self, stream: StreamResponse, request: Request, policy: RetryPolicy
    ) -> Exception:
        """The error for an answer with an error status (its body read and closed)."""
        with stream:
            try:
                err_body = stream.read_limited(MAX_ERROR_BODY)
            except OllmError as exc:
                if isinstance(exc, Cancelled | RequestTimeout):
                    raise
                err_body = b""
        err = error_for_status(
            stream.status,
            err_body,
            stream.headers,
            provider=self._origin.provider,
            url=request.redact(request.url),
            model=request.model,
            not_found=request.not_found,
            redact=request.redact,
            model_hint=self._model_hint,
            auth_hint=self._auth_hint,
        )
        return policy.classify(err, stream.status, stream.headers)

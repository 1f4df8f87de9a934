"""HTTP transport: the session of a provider and the retry loop around each request.

One :class:`Transport` per provider instance owns one ``requests.Session`` (connection reuse;
safe to share between threads for separate requests) and gives providers two calls:
:meth:`Transport.request_json` for whole answers and :meth:`Transport.open_stream` for
streamed ones. Around every request it adds:

* timeouts suited to local servers: connect 5 s, idle 120 s (the longest gap without content),
  and an optional total deadline (:class:`~ollm_lite.http.policy.Timeouts`);
* retries *before the first byte reaches the caller* only: connection errors, 408, 429, 500,
  502, 503, 504, with exponential backoff and jitter, honouring ``Retry-After`` and
  ``retry-after-ms`` up to 60 s (:class:`~ollm_lite.http.policy.RetryPolicy`). Content already
  delivered is never replayed;
* one mapping from HTTP status to the exception tree
  (:func:`~ollm_lite.http.errors.error_for_status`), carrying the server's own message, never
  its whole body;
* cancellation through a ``threading.Event``: the transport's one watcher thread
  (:mod:`ollm_lite.http.cancel`) shuts the socket down when the event is set (or the deadline
  passes), which interrupts a read that is blocked on a silent server. A cancel already set
  sends nothing;
* secrets (:mod:`ollm_lite.http.secrets`): API keys, URL user-info and the value of every header
  the caller supplies (to the transport, or per request) are masked in every error and log
  record; a redirect to another host carries none of those headers and no authentication
  (:class:`~ollm_lite.http.urllib3_hooks.RedirectSafeSession`). Credentials in the base URL
  become basic auth (``requests``' own).

No ``requests``, ``urllib3`` or ``json`` exception escapes: everything becomes an
:class:`~ollm_lite.errors.OllmError`. ``KeyboardInterrupt`` passes through untouched.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict, Unpack
from urllib.parse import urlencode

import requests
from requests.auth import HTTPBasicAuth

from .. import __version__
from .._cancel_link import deadline_for
from ..errors import BadResponse, RequestTimeout
from .cancel import Watchdog
from .failures import Origin, cancelled
from .policy import Retryable, RetryPolicy, Timeouts
from .response import StreamResponse
from .secrets import Redactor, basic_token, check_sendable
from .send import Request, Sender, logger
from .urllib3_hooks import Adapter, RedirectSafeSession
from .urls import split_userinfo

__all__ = ["RequestOptions", "Transport"]

#: The only codings asked for (and decoded here, bounded): not brotli or zstd, whatever
#: optional packages urllib3 finds installed.
_ACCEPT_ENCODING = "gzip, deflate"


class Transport:
    """HTTP access for one provider instance.

    Args:
        base_url: Server root, already normalised (see
            :func:`~ollm_lite.http.urls.normalize_base_url`). Credentials in it
            (``http://user:pw@host``) are sent as basic auth (unless ``headers`` has an
            ``Authorization``) and kept out of ``base_url`` and messages.
        provider: Provider name used in messages and error details.
        headers: Headers sent with every request (auth included); their values are secrets.
        secrets: Values that must never appear in messages (API keys). Each must be sendable
            in a header (no surrounding blank or line break, no control character, Latin-1).
        timeouts: Default limits; per request, ``timeout=`` sets the total deadline.
        retry: Retry policy for failures before the first byte.
        start_hint: What to tell the user when the server cannot be reached.
        model_hint: Added to ``MODEL_NOT_FOUND`` messages; ``{model}`` is replaced.
        auth_hint: What to check after a 401/403 (default: the provider's API key).
    """

    def __init__(
        self,
        base_url: str,
        *,
        provider: str,
        headers: Mapping[str, str] | None = None,
        secrets: Sequence[str] = (),
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        start_hint: str = "",
        model_hint: str = "",
        auth_hint: str = "",
    ) -> None:
        check_sendable(provider, secrets, headers or {})
        secrets = [*secrets, *(headers or {}).values()]
        self.base_url, credentials = split_userinfo(base_url)
        self.provider = provider
        self.timeouts = timeouts or Timeouts()
        self.retry = retry or RetryPolicy()
        self.start_hint = start_hint
        self.model_hint = model_hint
        self._origin = Origin(provider, self.base_url, start_hint)
        self._headers = {"User-Agent": f"ollm-lite/{__version__}", **(headers or {})}
        self._auth: HTTPBasicAuth | None = None
        if credentials is not None:
            secrets = [*secrets, *credentials, basic_token(*credentials)]
            if not any(k.lower() == "authorization" for k in self._headers):
                # As bytes: requests encodes text as Latin-1, which a password outside it
                # (and curl, which sends the URL's UTF-8) would not survive.
                user, password = (part.encode() for part in credentials)
                self._auth = HTTPBasicAuth(user, password)
        self.redact = Redactor(secrets)
        self._watchdog = Watchdog()
        self._sender = Sender(self._origin, self._watchdog, model_hint, auth_hint)
        self._session: RedirectSafeSession | None = None
        self._session_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Transport(provider={self.provider!r}, base_url={self.base_url!r})"

    @property
    def session(self) -> requests.Session:
        """The ``requests.Session`` (created on first use)."""
        if self._session is None:
            with self._session_lock:
                if self._session is None:
                    session = RedirectSafeSession()
                    adapter = Adapter()
                    session.mount("http://", adapter)
                    session.mount("https://", adapter)
                    session.headers["Accept-Encoding"] = _ACCEPT_ENCODING
                    session.headers.update(self._headers)
                    session.auth = self._auth
                    self._session = session
        return self._session

    def close(self) -> None:
        """Close pooled connections (and the watcher thread, when no request is open)."""
        if self._session is not None:
            self._session.close()
            self._session = None
        self._watchdog.close()

    def url(self, path: str) -> str:
        """Absolute URL of ``path`` (an absolute URL is returned unchanged)."""
        if "://" in path:
            return path
        return self.base_url + ("" if path.startswith("/") else "/") + path

    # ------------------------------------------------------------------ public calls

    def open_stream(
        self, method: str, path: str, *, retry: bool = True, **options: Unpack[RequestOptions]
    ) -> StreamResponse:
        """Send a request and return the open response once a success status arrived.

        Args:
            method: HTTP method.
            path: Path below ``base_url`` (or an absolute URL).
            retry: Whether to apply the retry policy.
            **options: What else the request carries (:class:`RequestOptions`).

        Raises:
            ConfigError: ``CONFIG_INVALID`` for a header value that cannot be sent.
            Cancelled: ``CANCELLED``.
            ConnectionFailed: ``CONNECTION_FAILED``.
            RequestTimeout: ``LLM_TIMEOUT``.
            AuthenticationError, ModelNotFound, RateLimited, HTTPStatusError: from the status.
        """
        request = self._request(method, path, options)
        cancel = request.cancel
        attempt = 0
        stale_resent = False
        while True:
            if cancel is not None and cancel.is_set():
                raise cancelled(self._origin, request.model)
            if request.deadline is not None and time.monotonic() >= request.deadline:
                raise self._late(request)  # nothing is sent past the deadline
            try:
                return self._sender.send(self.session, request, self.retry)
            except Retryable as exc:
                if exc.stale and not stale_resent:
                    stale_resent = True
                    logger.debug(
                        "%s %s: pooled connection was closed; sending again", method, request.url
                    )
                    continue
                err = exc.error
                err.details["attempts"] = attempt + 1
                delay = self.retry.next_delay(exc.retry_after, attempt, request.deadline, retry)
                if delay is None:
                    raise err from exc.__cause__
                logger.debug(
                    "%s %s failed (%s); retry %d in %.2f s",
                    method,
                    request.url,
                    err.code,
                    attempt + 1,
                    delay,
                )
                if cancel is None:
                    time.sleep(delay)
                elif cancel.wait(delay):
                    raise cancelled(self._origin, request.model) from None
                attempt += 1

    def _late(self, request: Request) -> RequestTimeout:
        """``LLM_TIMEOUT`` for a request whose deadline passed before it could be sent."""
        return RequestTimeout(
            f"the deadline passed before {request.method} {self.redact(request.url)} "
            f"could be sent to {self._origin.where}",
            provider=self.provider,
            model=request.model,
            details={"deadline": request.timeouts.total},
        )

    def _request(self, method: str, path: str, options: RequestOptions) -> Request:
        """The request ``open_stream`` sends, the same on every try (deadline fixed now).

        Raises:
            TypeError: for an option :class:`RequestOptions` does not name (a typo).
        """
        unknown = options.keys() - RequestOptions.__optional_keys__
        if unknown:
            raise TypeError(f"unexpected request option(s): {', '.join(sorted(unknown))}")
        now = time.monotonic()
        total = options.get("timeout")
        if total is None:
            total = self.timeouts.total
        # The deadline of the call this request is made for travels with its cancel event (an
        # absolute time, never seconds), so every request of a call (look-ups before the chat
        # included) keeps to it; a request's own seconds become a deadline here, once.
        deadline = deadline_for(total, options.get("cancel"))
        timeouts = (
            self.timeouts
            if deadline is None
            else Timeouts(self.timeouts.connect, self.timeouts.idle, max(deadline - now, 0.0))
        )
        given = options.get("headers") or {}
        redact = self.redact.plus(given.values())
        body, headers = _encode(options.get("json_body"), given, self.provider)
        form = options.get("form_body")
        if form is not None:  # RFC 6749 §3.2: OAuth token endpoints take a form
            body = urlencode(list(form.items())).encode("ascii")
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        protocol = options.get("protocol_headers")
        if protocol:
            headers = {**protocol, **headers}
        return Request(
            method,
            self.url(path),
            body,
            options.get("params"),
            headers,
            options.get("cancel"),
            deadline,
            timeouts,
            options.get("model"),
            options.get("not_found", "route"),
            redact,
        )

    def request_json(
        self,
        method: str,
        path: str,
        *,
        allow_empty: bool = False,
        **options: Unpack[RequestOptions],
    ) -> Any:
        """Send a request and return its decoded JSON answer.

        Args:
            method, path, **options: As :meth:`open_stream` (with retries).
            allow_empty: Return ``None`` for an empty answer instead of raising.

        Raises:
            BadResponse: ``LLM_BAD_RESPONSE`` when the answer is not JSON.
            OllmError: everything :meth:`open_stream` raises.
        """
        with self.open_stream(method, path, **options) as response:
            raw = response.read_body()
        where = f"{self.provider} at {self.base_url}"
        model = options.get("model")
        if not raw.strip():
            if allow_empty:
                return None
            raise BadResponse(
                f"{where} sent an empty answer to {method} {path}",
                provider=self.provider,
                model=model,
            )
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise BadResponse(
                f"{where} sent an answer to {method} {path} that is not JSON",
                provider=self.provider,
                model=model,
            ) from exc


class RequestOptions(TypedDict, total=False):
    """What a request carries besides its method and path (all optional)."""

    json_body: Any
    """JSON body (sent as UTF-8, ``Content-Type: application/json``)."""
    form_body: Mapping[str, str] | None
    """Form body (``application/x-www-form-urlencoded``), instead of a JSON body."""
    params: Mapping[str, str] | None
    """Query parameters."""
    headers: Mapping[str, str] | None
    """Extra headers for this request from the caller: their values are secrets (masked in
    messages, dropped on a redirect to another host)."""
    protocol_headers: Mapping[str, str] | None
    """Headers the library itself sets for the protocol (``Accept``, MCP's session id ...):
    not secrets; kept on a redirect to another host only if they are in
    :data:`~ollm_lite.http.urllib3_hooks.REDIRECT_KEEPS`."""
    cancel: threading.Event | None
    """Setting it interrupts the request at any point."""
    timeout: float | None
    """Total deadline in seconds (``None``: the transport default)."""
    model: str | None
    """Model name for messages and ``MODEL_NOT_FOUND``."""
    not_found: Literal["model", "route"]
    """Whether a 404 means the model (``"model"``) or the route (default) is missing."""


def _encode(
    json_body: Any, headers: Mapping[str, str] | None, provider: str
) -> tuple[bytes | None, dict[str, str]]:
    """The body (UTF-8 JSON) and headers of a request, the headers checked for sendability.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a header value that cannot be sent.
    """
    req_headers = dict(headers or {})
    check_sendable(provider, (), req_headers)
    if json_body is None:
        return None, req_headers
    req_headers.setdefault("Content-Type", "application/json")
    return json.dumps(json_body, ensure_ascii=False).encode("utf-8"), req_headers

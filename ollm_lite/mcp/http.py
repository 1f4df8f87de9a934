"""The streamable HTTP transport (MCP specification, Basic > Transports > Streamable HTTP).

Every client message is a POST of one JSON-RPC object to the server's MCP endpoint with
``Accept: application/json, text/event-stream``. A notification or response is answered
``202 Accepted``; a request is answered either with one JSON object (``application/json``) or
with an SSE stream (``text/event-stream``) whose events carry the server's messages — progress
and log notifications, server requests, and finally the response. The server may hand out an
``Mcp-Session-Id`` in the answer to ``initialize``; the client then sends it on every later
request, and ``DELETE``s the session when it closes. From 2025-06-18 on, every request after
the handshake carries ``MCP-Protocol-Version: <negotiated version>``. An SSE stream that ends
before the response arrived is resumed with a ``GET`` carrying ``Last-Event-ID`` when the
server numbered its events (2025-11-25: the server may close the stream at any time and the
client "polls" it), after waiting the ``retry`` milliseconds the server last set (bounded by
the call's timeout and cancel: the session abandons the request then); otherwise the request
fails with ``CONNECTION_FAILED``. After the
handshake a ``GET`` stream carries what the server sends outside any request (a ``405``: it
offers none; it is reopened after the server's ``retry``, else 1 s), and a ``404`` to a
request carrying the session id ends that session
(:class:`SessionExpired`; the session layer starts a new one).

The caller's ``headers`` (and credentials in the URL) are secrets: masked in every error and
log record, and not sent on when a redirect leads to another host
(:mod:`ollm_lite.http.secrets`); the headers the protocol itself needs are sent as
``protocol_headers``.

With ``auth`` (:class:`~ollm_lite.mcp.auth.McpAuth`) every HTTP request of the transport
(POSTs, the listening and resuming GETs, the closing DELETE) carries the token of
:mod:`ollm_lite.mcp.auth` as ``Authorization: Bearer``; a ``401`` signs in (or refreshes) and a
``403 insufficient_scope`` steps up, each once per request, then the request is sent again,
all within the request's stop event (the call's deadline and cancel; the time a person takes
to sign in is bounded on its own and not counted, :meth:`HttpTransport.person_seconds`).
Without ``auth``, a 401
carrying a Bearer challenge is an ``AuthenticationError`` saying that the server requires
sign-in.

Each request runs its POST on a daemon thread of its own, so calls from many threads proceed
in parallel; abandoning a request (timeout, cancel) shuts its connection down through the
library's transport (:mod:`ollm_lite.http.transport`, the only place that speaks HTTP). The legacy
HTTP+SSE transport of 2024-11-05 is not spoken.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .._cancel_link import LinkedEvent
from ..errors import (
    AuthenticationError,
    BadResponse,
    Cancelled,
    ConfigError,
    ConnectionFailed,
    HTTPStatusError,
    OllmError,
)
from ..http.policy import RetryPolicy, Timeouts
from ..http.response import StreamResponse
from ..http.transport import Transport
from ..http.urls import without_userinfo
from ..streams import SSEDecoder, SSEEvent
from .jsonrpc import (
    MAX_MESSAGE_BYTES,
    ErrorResponse,
    Failed,
    Message,
    Notification,
    OnClose,
    OnMessage,
    Request,
    RequestId,
    Response,
    message_object,
    parse_message,
)

if TYPE_CHECKING:
    from .auth.credentials import McpAuth
    from .auth.flow import Authorizer

__all__ = ["HttpTransport", "SessionExpired"]

logger = logging.getLogger(__name__)

_ACCEPT = "application/json, text/event-stream"
_RESUME_ATTEMPTS = 5
_CLOSE_TIMEOUT_S = 5.0
#: How long a notification or response POST may take, sign-in included.
_SEND_TIMEOUT_S = 60.0
#: Wait before reopening the GET stream when the server set no ``retry``.
_LISTEN_RETRY_S = 1.0
#: The longest ``retry`` honoured (ms): what :meth:`threading.Event.wait` accepts.
_RETRY_MAX_MS = int(threading.TIMEOUT_MAX) * 1000


class SessionExpired(ConnectionFailed):
    """The server answered 404 to a request carrying its ``Mcp-Session-Id``: the session ended.

    "When a client receives HTTP 404 in response to a request containing an Mcp-Session-Id, it
    MUST start a new session by sending a new InitializeRequest without a session ID attached"
    (Basic > Transports > Streamable HTTP > Session Management); the session does that once.
    """


class HttpTransport:
    """One MCP endpoint over streamable HTTP."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        name: str | None = None,
        auth: McpAuth | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
            shown = without_userinfo(url) if isinstance(url, str) else url
            raise ConfigError(f"an MCP server URL must start with http:// or https://: {shown!r}")
        given = dict(headers or {})
        server = f"MCP server {name!r}" if name else "the MCP server"
        sent = f"the headers given to {server} ({', '.join(given)})" if given else server
        self._http = Transport(
            url,
            provider="mcp",
            headers=given,
            timeouts=Timeouts(connect=10.0, idle=24 * 3600.0),
            retry=RetryPolicy(retries=0),
            start_hint="check the MCP server's URL and that it is running",
            auth_hint=f"Check {sent}: the server did not accept them.",
        )
        self.url = self._http.base_url  # credentials in the URL became basic auth
        self.describe = f"MCP server at {self.url}"
        self.redact = self._http.redact
        self.max_message_bytes = max_message_bytes
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._aborts: dict[RequestId, threading.Event] = {}
        self._listen_stop = threading.Event()
        self._listener: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._on_message: OnMessage | None = None
        self._named = f"MCP server {name!r} at {self.url}" if name else self.describe
        self._auth: Authorizer | None = None
        if auth is not None:
            from .auth.flow import Authorizer

            self._auth = Authorizer(auth, self.url, label=self._named, redact=self.redact)

    def person_seconds(self) -> float:
        """Seconds spent so far waiting on a person signing in (see
        :meth:`~ollm_lite.mcp.auth.flow.Authorizer.person_seconds`)."""
        return self._auth.person_seconds() if self._auth is not None else 0.0

    def start(self, on_message: OnMessage, on_close: OnClose) -> None:
        """Remember the callbacks; the first POST (``initialize``) opens the connection."""
        self._on_message = on_message

    def send(self, message: Message) -> None:
        """POST one message: a request on a thread of its own, anything else right here.

        Raises:
            ConnectionFailed, HTTPStatusError ...: a notification or response was refused.
        """
        if self._closed:
            raise ConnectionFailed(f"{self.describe} is closed")
        if isinstance(message, Request):
            abort = threading.Event()
            with self._lock:
                self._aborts[message.id] = abort
            threading.Thread(
                target=self._exchange, args=(message, abort), name="ollm-mcp-http", daemon=True
            ).start()
            return
        stop = LinkedEvent(self._listen_stop, deadline=time.monotonic() + _SEND_TIMEOUT_S)
        with self._open(
            "POST", self._headers(), stop, json_body=message_object(message)
        ) as response:
            response.read_body(self.max_message_bytes)
        if isinstance(message, Notification) and message.method == "notifications/initialized":
            self._listen()

    def abandon(self, request_id: RequestId) -> None:
        """Shut the connection of an abandoned request down."""
        with self._lock:
            abort = self._aborts.pop(request_id, None)
        if abort is not None:
            abort.set()

    def close(self) -> None:
        """Abandon every request, end the session (``DELETE``) and close the connections."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            aborts = list(self._aborts.values())
            self._aborts.clear()
        for abort in aborts:
            abort.set()
        self._listen_stop.set()
        if self._listener is not None and self._listener is not threading.current_thread():
            self._listener.join(_CLOSE_TIMEOUT_S)
        if self.session_id is not None:
            # "Clients that no longer need a particular session SHOULD send an HTTP DELETE";
            # a 405 says the server does not allow it, which is fine.
            with (
                contextlib.suppress(OllmError),
                self._open(
                    "DELETE",
                    self._headers(),
                    LinkedEvent(deadline=time.monotonic() + _CLOSE_TIMEOUT_S),
                    timeout=_CLOSE_TIMEOUT_S,
                ) as response,
            ):
                response.read_body(1 << 20)
        if self._auth is not None:
            self._auth.close()
        self._http.close()

    # ------------------------------------------------------------------ internals

    def _open(
        self,
        method: str,
        headers: Mapping[str, str],
        stop: threading.Event,
        *,
        json_body: Any = None,
        timeout: float | None = None,
    ) -> StreamResponse:
        """Send one HTTP request of the transport, authorized (see the module text).

        Raises:
            AuthenticationError: ``LLM_AUTH_FAILED``: the server requires a sign-in this
                transport cannot give, or refused the token it got.
            OllmError: as :meth:`Transport.open_stream`.
        """
        retried: set[int] = set()
        while True:
            sent = self._auth.header(stop) if self._auth is not None else {}
            try:
                return self._http.open_stream(
                    method,
                    self.url,
                    json_body=json_body,
                    headers=sent,
                    protocol_headers=headers,
                    cancel=stop,
                    timeout=timeout,
                    retry=False,
                )
            except AuthenticationError as exc:
                failure = exc
            # Raised outside the except block: the refused request is no context of the answer.
            status = failure.status
            if status not in (401, 403):
                raise failure
            if status in retried:
                if status == 403 and self._auth is not None:
                    self._auth.step_up_refused(failure.details.get("www_authenticate"))
                raise self._refused(failure)
            if self._auth is None:
                raise self._sign_in_required(failure)
            retried.add(status)
            challenge = failure.details.get("www_authenticate")
            if status == 401:
                self._auth.unauthorized(challenge, sent, stop)
            elif not self._auth.forbidden(challenge, sent, stop):
                raise failure

    def _sign_in_required(self, exc: AuthenticationError) -> AuthenticationError:
        """Without ``auth``: a Bearer challenge says the server wants an OAuth sign-in."""
        from .auth.challenge import parse_challenge

        challenge = exc.details.get("www_authenticate")
        if exc.status != 401 or not parse_challenge(challenge).bearer:
            return exc
        return AuthenticationError(
            f"{self._named} requires sign-in (OAuth): give McpServer.http(..., auth="
            'McpAuth.login() or McpAuth.client_credentials(...)), or auth = "login" / '
            '"client_credentials" in its [mcp.servers.NAME] table (docs/mcp.md, Signing in)',
            status=401,
            details={**exc.details, "server_url": self.url},
        )

    def _refused(self, exc: AuthenticationError) -> AuthenticationError:
        """The server refused the token the sign-in just gave (a second 401, or 403)."""
        return AuthenticationError(
            f"{self._named} refused the token it was just given (HTTP {exc.status}): "
            f"{exc.details.get('server_message') or exc.message}",
            status=exc.status,
            details={**exc.details, "server_url": self.url},
        )

    def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = {"Accept": _ACCEPT}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        headers.update(extra or {})
        return headers

    def _exchange(self, request: Request, abort: threading.Event) -> None:
        try:
            answered = self._post(request, abort)
            if not answered and not abort.is_set():
                self._fail(
                    request.id,
                    ConnectionFailed(f"{self.describe} ended its answer to {request.method} early"),
                )
        except Cancelled:
            pass  # abandoned by the session: it already knows
        except HTTPStatusError as exc:
            if not abort.is_set():
                self._fail(request.id, self._expired(exc) or exc)
        except OllmError as exc:
            if not abort.is_set():
                self._fail(request.id, exc)
        finally:
            with self._lock:
                self._aborts.pop(request.id, None)

    def _expired(self, exc: HTTPStatusError) -> SessionExpired | None:
        session = exc.details.get("session_id")
        if exc.status != 404 or session is None:
            return None
        with self._lock:
            if self.session_id == session:  # forget it: the next initialize starts afresh
                self.session_id = None
                self.protocol_version = None
        return SessionExpired(
            f"{self.describe} ended the session {session!r} (HTTP 404)",
            details={"session_id": session},
        )

    def _post(self, request: Request, abort: threading.Event) -> bool:
        headers = self._headers()
        try:
            return self._post_with(request, abort, headers)
        except HTTPStatusError as exc:
            if "Mcp-Session-Id" in headers:
                exc.details["session_id"] = headers["Mcp-Session-Id"]
            raise

    def _post_with(self, request: Request, abort: threading.Event, headers: dict[str, str]) -> bool:
        with self._open("POST", headers, abort, json_body=message_object(request)) as response:
            if request.method == "initialize":
                self.session_id = response.headers.get("mcp-session-id") or None
            ctype = response.headers.get("content-type", "").lower()
            if "text/event-stream" in ctype:
                answered, last_id, wait = self._read_events(request, response.iter_chunks())
            else:
                try:
                    body = response.read_body(self.max_message_bytes)
                except BadResponse as exc:
                    self._fail(request.id, self._too_large(exc))
                    return True
                answered, last_id, wait = self._deliver(request, body), None, None
        attempts = 0
        while not answered and last_id is not None and attempts < _RESUME_ATTEMPTS:
            attempts += 1
            # "the client MUST respect the retry field, waiting the given number of
            # milliseconds before attempting to reconnect" (2025-11-25, Streamable HTTP >
            # Resumability): on the request's abort event, which the session sets at the
            # call's timeout or cancel, so even a huge ``retry`` never outlasts the call.
            if wait is not None and abort.wait(wait):
                return True  # abandoned: the session has already given its answer
            with self._open("GET", self._headers({"Last-Event-ID": last_id}), abort) as response:
                answered, newer, later = self._read_events(request, response.iter_chunks())
                last_id = newer or last_id
                wait = later if later is not None else wait
        return answered

    def _too_large(self, exc: BadResponse) -> BadResponse:
        return BadResponse(
            f"{self.describe} sent a message over the {self.max_message_bytes} byte limit; "
            "it was not read",
            details={"limit": self.max_message_bytes, "reason": exc.message},
        )

    def _read_events(self, request: Request, chunks: Any) -> tuple[bool, str | None, float | None]:
        """Read a request's SSE answer: whether it brought the response, the last event id,
        and the reconnection delay in seconds the server set (its last ``retry``)."""
        answered = False
        decoder = SSEDecoder(max_line=self.max_message_bytes)
        try:
            for event in _events(decoder, chunks):
                if event.event == "message" and event.data.strip():
                    answered = self._deliver(request, event.data.encode("utf-8")) or answered
                if answered:
                    break
        except BadResponse as exc:  # an event over the size limit
            self._fail(request.id, self._too_large(exc))
            return True, None, None
        return answered, decoder.last_event_id, _retry_seconds(decoder.reconnection_ms, None)

    def _listen(self) -> None:
        """Open the GET stream for messages the server sends on its own (once per session).

        "The client MAY issue an HTTP GET to the MCP endpoint" to receive server requests and
        notifications (``tools/list_changed``, log messages) outside of any request; a 405
        says the server offers no such stream.
        """
        with self._lock:
            if self._listener is not None and self._listener.is_alive():
                return
            self._listener = threading.Thread(
                target=self._listen_loop, name="ollm-mcp-listen", daemon=True
            )
            self._listener.start()

    def _listen_loop(self) -> None:
        last_id: str | None = None
        wait = _LISTEN_RETRY_S
        failures = 0
        while not self._listen_stop.is_set() and failures < _RESUME_ATTEMPTS:
            extra = {"Accept": "text/event-stream"}
            if last_id is not None:
                extra["Last-Event-ID"] = last_id
            try:
                with self._open("GET", self._headers(extra), self._listen_stop) as response:
                    if "text/event-stream" not in response.headers.get("content-type", ""):
                        return
                    failures = 0
                    decoder = SSEDecoder(max_line=self.max_message_bytes)
                    try:
                        for event in _events(decoder, response.iter_chunks()):
                            if event.data.strip():
                                self._deliver_any(event.data.encode("utf-8"))
                    finally:
                        last_id = decoder.last_event_id or last_id
                        if decoder.reconnection_ms is not None:
                            wait = _delay_s(decoder.reconnection_ms)
            except HTTPStatusError as exc:
                logger.debug("%s: no GET stream (%s)", self.describe, exc.status)
                return
            except OllmError as exc:
                failures += 1
                logger.debug("%s: GET stream ended: %s", self.describe, exc.message)
            if self._listen_stop.wait(wait):  # the server's ``retry``, as for a request
                return

    def _deliver_any(self, raw: bytes) -> None:
        callback = self._on_message
        assert callback is not None
        try:
            message = parse_message(raw)
        except BadResponse as exc:
            callback(exc)
            return
        callback(message)

    def _deliver(self, request: Request, raw: bytes) -> bool:
        """Hand one message to the session; whether it was the answer to ``request``."""
        callback = self._on_message
        assert callback is not None
        if not raw.strip():
            return False
        try:
            message = parse_message(raw)
        except BadResponse as exc:
            callback(exc)
            return False
        if request.method == "initialize" and isinstance(message, Response):
            result = message.result if isinstance(message.result, dict) else {}
            version = result.get("protocolVersion")
            self.protocol_version = version if isinstance(version, str) else None
        callback(message)
        return isinstance(message, Response | ErrorResponse) and message.id == request.id

    def _fail(self, request_id: RequestId, error: OllmError) -> None:
        callback = self._on_message
        if callback is not None:
            callback(Failed(request_id, error))


def _events(decoder: SSEDecoder, chunks: Iterable[bytes]) -> Iterator[SSEEvent]:
    """The events ``decoder`` makes of ``chunks``; the decoder keeps what the stream set
    (``last_event_id``, ``reconnection_ms``) for the caller to read afterwards."""
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.flush()


def _retry_seconds(retry_ms: int | None, current: float | None) -> float | None:
    """The reconnection delay after an SSE event's ``retry`` field (milliseconds; the WHATWG
    rule keeps the last one seen), in seconds; ``current`` when the event set none."""
    return current if retry_ms is None else _delay_s(retry_ms)


def _delay_s(retry_ms: int) -> float:
    """``retry`` milliseconds in seconds. The field is any run of digits: a delay longer than
    a thread can wait (:data:`threading.TIMEOUT_MAX`) is that longest wait, which the call's
    timeout, its cancel or ``close`` ends in any case."""
    return min(retry_ms, _RETRY_MAX_MS) / 1000.0

"""One MCP client session over a transport: handshake, requests matched to answers, notifications.

Lifecycle (MCP specification, Basic > Lifecycle): the client sends ``initialize`` with the
newest protocol version it implements, its ``clientInfo`` and capabilities; the server answers
with the version it chose; "if the client does not support the version in the server's
response, it SHOULD disconnect" — here a :class:`~ollm_lite.errors.ConfigError`. Then
``notifications/initialized``. This client declares no client capabilities (no roots,
sampling or elicitation), so a server request for those, like any request it does not know,
is answered with JSON-RPC error ``-32601`` (method not found); ``ping`` is answered with an
empty result (Basic > Utilities > Ping).

Requests carry integer ids from one counter; :meth:`McpSession.request` may be called from
many threads at once — each waits for the answer with its own id. A request that times out
or is cancelled is abandoned with ``notifications/cancelled`` (Basic > Utilities >
Cancellation), and a late answer is dropped. Progress notifications (Basic > Utilities >
Progress) reach the callback given with the request through its ``progressToken``; server log
messages (Server > Utilities > Logging) go to the ``ollm_lite.mcp.server`` logger at the
matching level; ``notifications/tools/list_changed`` (Server > Tools) calls
:attr:`McpSession.on_tools_changed`. When the transport closes (the server died), every waiting
request fails at once with the transport's error.

What the caller configured the transport with (a stdio server's ``env`` values, an HTTP
server's headers) is masked by the transport's redactor (:mod:`ollm_lite.http.secrets`) in
every error the session raises and every record it logs, server log messages included.
"""

from __future__ import annotations

import copy
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import __version__
from ..errors import (
    BadResponse,
    Cancelled,
    ConfigError,
    ConnectionFailed,
    OllmError,
    RequestTimeout,
)
from ..http.secrets import Redactor
from .http import SessionExpired
from .jsonrpc import (
    MAX_MESSAGE_BYTES,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorResponse,
    Failed,
    Incoming,
    McpError,
    Message,
    Notification,
    OnClose,
    OnMessage,
    Oversized,
    Request,
    RequestId,
    Response,
)

__all__ = ["LATEST_PROTOCOL_VERSION", "PROTOCOL_VERSIONS", "McpSession", "ProgressCallback"]

logger = logging.getLogger(__name__)
server_logger = logging.getLogger("ollm_lite.mcp.server")

#: The protocol revisions this client implements, newest first (offered: the first).
PROTOCOL_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_PROTOCOL_VERSION = PROTOCOL_VERSIONS[0]

CLIENT_INFO = {"name": "ollm-lite", "version": __version__}

#: ``progress(progress, total, message)`` for a request's progress notifications.
ProgressCallback = Callable[[float, "float | None", "str | None"], None]

_POLL_S = 0.05
# RFC 5424 severities as MCP names them (Server > Utilities > Logging) → logging levels.
_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class McpTransport(Protocol):
    """What the session needs from stdio or streamable HTTP."""

    describe: str

    def start(self, on_message: OnMessage, on_close: OnClose) -> None: ...

    def send(self, message: Message) -> None: ...

    def abandon(self, request_id: RequestId) -> None: ...

    def close(self) -> None: ...


@dataclass(slots=True)
class _Pending:
    method: str
    on_progress: ProgressCallback | None = None
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: OllmError | None = None

    def settle(self, result: Any = None, error: OllmError | None = None) -> None:
        if not self.done.is_set():
            self.result, self.error = result, error
            self.done.set()


class McpSession:
    """Requests and notifications over one transport (thread-safe)."""

    def __init__(self, transport: McpTransport, *, label: str) -> None:
        self.transport = transport
        self.label = label
        redact = getattr(transport, "redact", None)
        self.redact: Redactor = redact if isinstance(redact, Redactor) else Redactor(())
        self.protocol_version: str | None = None
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self.on_tools_changed: Callable[[], None] | None = None
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, _Pending] = {}
        self._progress: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self._closed: OllmError | None = None
        self._garbage: BadResponse | None = None
        self._start_timeout = 30.0
        self._epoch = 0  # handshakes done; a request retried after an expired session
        self._handshake_lock = threading.Lock()

    # ------------------------------------------------------------------ handshake

    def open(self, start_timeout: float) -> None:
        """Start the transport and run the ``initialize`` handshake within ``start_timeout``.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when the server chose a protocol version this
                client does not implement.
            ConnectionFailed, RequestTimeout, BadResponse, McpError: the server did not
                complete the handshake.
        """
        self.transport.start(self._on_message, self._on_close)
        self._start_timeout = start_timeout
        self._masked(self._handshake, start_timeout)

    def _masked(self, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)``, an error it raises masked by the transport's redactor.

        The masked copy is raised outside the ``except`` block: raised inside, it would carry
        the unmasked original as its ``__context__``.
        """
        try:
            return call(*args)
        except OllmError as exc:
            error = self.redact.error(exc)
            if error is exc:
                raise
        raise error

    def _handshake(self, start_timeout: float) -> None:
        params = {
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": dict(CLIENT_INFO),
        }
        try:
            result = self._request("initialize", params, start_timeout, None, None, False)
        except McpError as exc:
            if exc.rpc_code == UNSUPPORTED_PROTOCOL_VERSION:
                raise _stateless_only(self.label, exc) from exc
            raise
        self._accept(result)
        self.notify("notifications/initialized")

    def _accept(self, result: Any) -> None:
        if not isinstance(result, dict):
            raise BadResponse(f"{self.label} answered initialize with {result!r}")
        version = result.get("protocolVersion")
        if version not in PROTOCOL_VERSIONS:
            raise ConfigError(
                f"{self.label} speaks MCP protocol version {version!r}; ollm_lite implements "
                f"{', '.join(PROTOCOL_VERSIONS)}",
                details={"protocol_version": version, "supported": list(PROTOCOL_VERSIONS)},
            )
        self.protocol_version = version
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else {}
        caps = result.get("capabilities")
        self.capabilities = caps if isinstance(caps, dict) else {}
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None

    # ------------------------------------------------------------------ requests

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float,
        cancel: threading.Event | None = None,
        on_progress: ProgressCallback | None = None,
        cancellable: bool = True,
    ) -> Any:
        """Send a request and wait for its answer.

        Args:
            method: The JSON-RPC method.
            params: Its parameters.
            timeout: Seconds to wait for the answer.
            cancel: Setting it abandons the request.
            on_progress: Receives the request's progress notifications.
            cancellable: Whether to send ``notifications/cancelled`` when abandoning it
                (``initialize`` "MUST NOT be cancelled").

        Returns:
            The ``result`` member of the answer.

        Raises:
            RequestTimeout: ``LLM_TIMEOUT`` after ``timeout`` seconds.
            Cancelled: ``CANCELLED`` when ``cancel`` was set.
            McpError: ``MCP_ERROR``: the server answered with a JSON-RPC error.
            ConnectionFailed: ``CONNECTION_FAILED``: the server is gone.
            BadResponse: ``LLM_BAD_RESPONSE``: the answer was over the size limit.
        """
        return self._masked(
            self._request_again, method, params, timeout, cancel, on_progress, cancellable
        )

    def _request_again(
        self,
        method: str,
        params: dict[str, Any] | None,
        timeout: float,
        cancel: threading.Event | None,
        on_progress: ProgressCallback | None,
        cancellable: bool,
    ) -> Any:
        """:meth:`_request`, once more after a new handshake when the session expired."""
        epoch = self._epoch
        try:
            return self._request(method, params, timeout, cancel, on_progress, cancellable)
        except SessionExpired:
            with self._handshake_lock:
                if self._epoch == epoch:  # the first caller to notice starts a new session
                    logger.debug("%s: session expired; initializing again", self.label)
                    self._handshake(self._start_timeout)
                    self._epoch += 1
            return self._request(method, params, timeout, cancel, on_progress, cancellable)

    def _request(
        self,
        method: str,
        params: dict[str, Any] | None,
        timeout: float,
        cancel: threading.Event | None,
        on_progress: ProgressCallback | None,
        cancellable: bool,
    ) -> Any:
        rid = next(self._ids)
        pending = _Pending(method, on_progress)
        params = dict(params or {})
        token = None
        if on_progress is not None:
            token = f"ollm-{rid}"
            params["_meta"] = {**params.get("_meta", {}), "progressToken": token}
        with self._lock:
            if self._closed is not None:
                raise _copy(self._closed)
            self._pending[rid] = pending
            if token is not None:
                self._progress[token] = pending
        try:
            self.transport.send(Request(rid, method, params or None))
            self._wait(rid, pending, timeout, cancel, cancellable)
        finally:
            with self._lock:
                self._pending.pop(rid, None)
                if token is not None:
                    self._progress.pop(token, None)
        if pending.error is not None:
            raise _copy(pending.error)
        return pending.result

    def _wait(
        self,
        rid: int,
        pending: _Pending,
        timeout: float,
        cancel: threading.Event | None,
        cancellable: bool,
    ) -> None:
        deadline = time.monotonic() + timeout
        waited = self._person_seconds()
        while not pending.done.wait(min(_POLL_S, max(0.0, deadline - time.monotonic()))):
            if cancel is not None and cancel.is_set():
                self._abandon(rid, "cancelled by the client", cancellable)
                raise Cancelled(f"{pending.method} to {self.label} was cancelled")
            if time.monotonic() >= deadline:
                # A person signing in meanwhile is bounded by the sign-in's own limit:
                # ``timeout`` counts the machine's time only.
                person = self._person_seconds() - waited
                if person > 0:
                    deadline, waited = deadline + person, waited + person
                    continue
                self._abandon(rid, f"no answer within {timeout:g} s", cancellable)
                raise self._timeout_error(pending.method, timeout)

    def _person_seconds(self) -> float:
        """Seconds the transport has spent waiting on a person signing in (0 for a transport
        that never signs in)."""
        clock = getattr(self.transport, "person_seconds", None)
        return float(clock()) if callable(clock) else 0.0

    def _timeout_error(self, method: str, timeout: float) -> OllmError:
        if self._garbage is not None and method == "initialize":
            return BadResponse(
                f"{self.label} did not answer initialize within {timeout:g} s and wrote "
                f"output that is not MCP to stdout: {self._garbage.message}",
                details={"timeout": timeout},
            )
        return RequestTimeout(
            f"{self.label} did not answer {method} within {timeout:g} s",
            details={"timeout": timeout, "method": method},
        )

    def _abandon(self, rid: int, reason: str, cancellable: bool) -> None:
        with self._lock:
            self._pending.pop(rid, None)
        try:
            if cancellable and self._closed is None:
                self.notify("notifications/cancelled", {"requestId": rid, "reason": reason})
        except OllmError:
            pass  # the server is gone: nothing to cancel
        finally:
            self.transport.abandon(rid)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification.

        Raises:
            ConnectionFailed: ``CONNECTION_FAILED`` when the server is gone.
        """
        self.transport.send(Notification(method, params))

    # ------------------------------------------------------------------ incoming

    def _on_message(self, message: Incoming) -> None:
        try:
            self._dispatch(message)
        except Exception:  # a callback's bug must not stop the reader thread
            logger.warning(
                "%s: failed to handle %s", self.label, self.redact(repr(message)), exc_info=True
            )

    def _dispatch(self, message: Incoming) -> None:
        if isinstance(message, Failed):
            with self._lock:
                pending = self._pending.get(message.id)
            if pending is not None:
                pending.settle(error=message.error)
        elif isinstance(message, Response | ErrorResponse):
            self._answer(message)
        elif isinstance(message, Notification):
            self._notification(message)
        elif isinstance(message, Request):
            self._server_request(message)
        elif isinstance(message, Oversized):
            self._oversized(message)
        else:
            if self._garbage is None:
                logger.warning("%s: %s (skipped)", self.label, self.redact(message.message))
            self._garbage = message

    def _answer(self, message: Response | ErrorResponse) -> None:
        with self._lock:
            pending = None if message.id is None else self._pending.get(message.id)
        if pending is None:
            logger.debug("%s: answer to unknown or abandoned request %r", self.label, message.id)
            return
        if isinstance(message, Response):
            pending.settle(result=message.result)
        else:
            pending.settle(
                error=McpError(
                    f"{self.label} answered {pending.method} with error {message.code}: "
                    f"{message.message}",
                    rpc_code=message.code,
                    data=message.data,
                    details={"rpc_code": message.code, "method": pending.method},
                )
            )

    def _oversized(self, message: Oversized) -> None:
        limit = getattr(self.transport, "max_message_bytes", MAX_MESSAGE_BYTES)
        error = BadResponse(
            f"{self.label} sent a message of {message.size} bytes, over the {limit} byte "
            "limit; it was not read",
            details={"size": message.size, "limit": limit},
        )
        with self._lock:
            if message.id is not None and message.id in self._pending:
                targets = [self._pending[message.id]]
            else:  # whose answer it was cannot be told: every waiting request lost it
                targets = list(self._pending.values())
        for pending in targets:
            pending.settle(error=error)

    def _notification(self, message: Notification) -> None:
        params = message.params or {}
        method = message.method
        if method == "notifications/progress":
            self._progress_update(params)
        elif method == "notifications/message":
            level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
            source = params.get("logger")
            server_logger.log(
                level,
                "%s%s: %s",
                self.label,
                self.redact(f" ({source})") if isinstance(source, str) else "",
                self.redact(str(params.get("data"))),
            )
        elif method == "notifications/tools/list_changed":
            callback = self.on_tools_changed
            if callback is not None:
                callback()
        else:
            logger.debug("%s: notification %s", self.label, method)

    def _progress_update(self, params: dict[str, Any]) -> None:
        token = params.get("progressToken")
        with self._lock:
            pending = self._progress.get(token) if isinstance(token, str) else None
        progress = params.get("progress")
        if pending is None or pending.on_progress is None:
            return
        if not isinstance(progress, int | float) or isinstance(progress, bool):
            return
        total = params.get("total")
        text = params.get("message")
        pending.on_progress(
            float(progress),
            float(total)
            if isinstance(total, int | float) and not isinstance(total, bool)
            else None,
            text if isinstance(text, str) else None,
        )

    def _server_request(self, message: Request) -> None:
        reply: Response | ErrorResponse
        if message.method == "ping":
            reply = Response(message.id, {})
        else:
            reply = ErrorResponse(
                message.id,
                METHOD_NOT_FOUND,
                f"Method not found: this client (ollm-lite) does not offer {message.method!r}",
            )
        try:
            self.transport.send(reply)
        except OllmError:
            logger.debug("%s: could not answer %s", self.label, message.method)

    def _on_close(self, error: OllmError) -> None:
        if self._garbage is not None and isinstance(error, ConnectionFailed):
            error = ConnectionFailed(
                f"{error.message}; it also wrote output that is not MCP to stdout: "
                f"{self._garbage.message}",
                details=error.details,
            )
        with self._lock:
            if self._closed is None:
                self._closed = error
            pending = list(self._pending.values())
        for item in pending:
            item.settle(error=error)

    # ------------------------------------------------------------------ closing

    @property
    def closed(self) -> OllmError | None:
        """Why the session ended, or ``None`` while it is open."""
        return self._closed

    def close(self) -> None:
        """Close the transport; waiting requests fail with ``CONNECTION_FAILED``."""
        with self._lock:
            if self._closed is None:
                self._closed = ConnectionFailed(f"{self.label} was closed")
            pending = list(self._pending.values())
        for item in pending:
            item.settle(error=self._closed)
        self.transport.close()


def _stateless_only(label: str, exc: McpError) -> ConfigError:
    data = exc.data if isinstance(exc.data, dict) else {}
    supported = data.get("supported") or data.get("supportedVersions")
    return ConfigError(
        f"{label} speaks only the stateless MCP revision (server/discover, no initialize) "
        f"with versions {supported!r}; ollm_lite implements {', '.join(PROTOCOL_VERSIONS)}",
        details={"supported": supported, "implemented": list(PROTOCOL_VERSIONS)},
    )


def _copy(error: OllmError) -> OllmError:
    """A fresh exception for this caller (one instance raised in many threads mixes tracebacks)."""
    return copy.copy(error)

"""HTTP transport: the only module that imports ``requests``.

One :class:`Transport` per provider instance owns one ``requests.Session`` (connection reuse;
safe to share between threads for separate requests) and gives providers two calls:
:meth:`Transport.request_json` for whole answers and :meth:`Transport.open_stream` for
streamed ones. Around every request it adds:

* timeouts suited to local servers: connect 5 s, idle 120 s (the longest gap without content),
  and an optional total deadline (:class:`Timeouts`);
* retries *before the first byte reaches the caller* only: connection errors, 408, 429, 500,
  502, 503, 504, with exponential backoff and jitter, honouring ``Retry-After`` and
  ``retry-after-ms`` up to 60 s (:class:`RetryPolicy`). Content already delivered is never
  replayed;
* one mapping from HTTP status to the exception tree (:func:`error_for_status`), carrying the
  server's own message, never its whole body;
* cancellation through a ``threading.Event``: a small watcher thread per request shuts the
  socket down when the event is set (or the deadline passes), which interrupts a read that is
  blocked on a silent server. A cancel already set sends nothing. Calls whose signature has no
  ``cancel`` argument (``context_length(model)`` …) are reached through :func:`cancel_scope`,
  an ambient event every request inside the block obeys;
* redaction: API keys never appear in errors or logs, and custom auth headers are dropped when a
  redirect leaves the host.

No ``requests``, ``urllib3`` or ``json`` exception escapes: everything becomes an
:class:`~ollm_lite.errors.OllmError`. ``KeyboardInterrupt`` passes through untouched.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import random
import re
import socket
import sys
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util.connection import allowed_gai_family
from urllib3.util.timeout import _DEFAULT_TIMEOUT

from . import __version__
from ._cancel_scope import ambient_cancel_events, cancel_scope
from ._http_errors import _Redactor, _unsendable, error_for_status, parse_retry_after
from .errors import (
    BadResponse,
    Cancelled,
    ConfigError,
    ConnectionFailed,
    OllmError,
    RateLimited,
    RequestTimeout,
)

__all__ = [
    "RetryPolicy",
    "StreamResponse",
    "Timeouts",
    "Transport",
    "cancel_scope",
    "error_for_status",
    "normalize_base_url",
    "parse_retry_after",
]

logger = logging.getLogger(__name__)

_E = TypeVar("_E", bound=OllmError)

#: How often the watcher looks at the cancel event; bounds cancellation latency.
_CANCEL_POLL_S = 0.01
#: Largest error body read to extract the server's message.
_MAX_ERROR_BODY = 64 * 1024
#: Largest non-streamed answer accepted.
_MAX_BODY = 256 * 1024 * 1024
_SENSITIVE_HEADERS = ("x-api-key", "api-key", "x-goog-api-key")
#: Most bytes one step of decompression may produce: a small compressed chunk can inflate to
#: hundreds of MB (a "zip bomb"), so the body is inflated piece by piece, each piece going
#: to the line decoder (and its line limit) before the next is made.
_INFLATE_STEP = 64 * 1024
#: The only codings asked for (and decoded here, bounded): not brotli or zstd, whatever
#: optional packages urllib3 finds installed.
_ACCEPT_ENCODING = "gzip, deflate"


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
        value = float(value)
        if value <= 0:
            raise ConfigError(f"timeout must be positive, got {value}")
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


#: ``http:/host``, ``http//host``, ``htp:/host``: a scheme with its ``://`` mistyped. Without this
#: check the scheme-less rule would read ``http//host`` as a host named ``http``.
_MISTYPED_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*(?::/|//)")


def normalize_base_url(url: str, *, strip_suffix: str | tuple[str, ...] | None = None) -> str:
    """Validate an ``http(s)://host[:port][/path]`` URL; drop trailing ``/`` and ``strip_suffix``.

    ``strip_suffix`` may be several suffixes; the first that matches is dropped.

    A bare ``host``, ``host:port`` or ``:port`` gets ``http://`` (as Ollama's own
    ``OLLAMA_HOST`` parsing does).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a URL that is not http(s) or has no host.
    """
    text = url.strip()
    shown = _without_credentials(url)
    if "://" not in text and _MISTYPED_SCHEME.match(text):
        raise ConfigError(f"invalid base URL {shown!r}: the scheme is mistyped (expected http://)")
    if text.startswith(":"):
        text = "127.0.0.1" + text
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"invalid base URL {shown!r}: expected http(s)://host[:port]")
    try:
        parts.port  # noqa: B018 - validates the port number
    except ValueError as exc:
        raise ConfigError(f"invalid base URL {shown!r}: bad port") from exc
    text = text.rstrip("/")
    suffixes = (strip_suffix,) if isinstance(strip_suffix, str) else strip_suffix or ()
    for suffix in suffixes:
        if text.endswith(suffix):
            text = text[: -len(suffix)].rstrip("/")
            break
    return text


def _without_credentials(url: str) -> str:
    """``url`` for a message: any ``user:password@`` replaced by ``***@``."""
    return re.sub(r"[^/@]+@", "***@", url)


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``http://user:pw@host/x`` → ``("http://host/x", ("user", "pw"))``; others unchanged.

    Credentials in a URL become HTTP basic auth and leave the URL, so the address shown in
    ``repr`` and in error messages never carries them.
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    bare = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    return bare, (unquote(user), unquote(password))


# --------------------------------------------------------------------------- cancellation


class _AnyEvent:
    """Set as soon as one of several events is set (a request's own and the ambient ones).

    Polled, like the watcher, so watching several events adds no thread.
    """

    __slots__ = ("_events",)

    def __init__(self, events: tuple[threading.Event, ...]) -> None:
        self._events = events

    def is_set(self) -> bool:
        return any(event.is_set() for event in self._events)

    def wait(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        first = self._events[0]
        while not self.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return False
            first.wait(min(left, _CANCEL_POLL_S))
        return True


_CancelFlag = threading.Event | _AnyEvent


def _effective_cancel(cancel: threading.Event | None) -> _CancelFlag | None:
    """``cancel`` combined with the events of the enclosing :func:`cancel_scope` blocks."""
    ambient = ambient_cancel_events()
    if not ambient:
        return cancel
    events = ambient if cancel is None or cancel in ambient else (cancel, *ambient)
    return events[0] if len(events) == 1 else _AnyEvent(events)


class _Scope:
    """The sockets of one request, so another thread can interrupt a blocked read."""

    __slots__ = ("_lock", "conns", "done", "reason", "reused")

    def __init__(self) -> None:
        self.conns: list[HTTPConnection | socket.socket] = []
        self.reason: Literal["cancelled", "deadline"] | None = None
        self.done = threading.Event()
        # The request went out on a pooled connection (which the server may have closed).
        self.reused = False
        self._lock = threading.Lock()

    def attach(self, conn: HTTPConnection | socket.socket) -> None:
        with self._lock:
            self.conns.append(conn)
            if self.reason is not None:
                _shutdown(conn)

    def abort(self, reason: Literal["cancelled", "deadline"]) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
            for conn in self.conns:
                _shutdown(conn)


def _shutdown(conn: HTTPConnection | socket.socket) -> None:
    sock = conn if isinstance(conn, socket.socket) else getattr(conn, "sock", None)
    if sock is not None and not isinstance(sock, socket.socket):
        # urllib3's SSLTransport (TLS inside a TLS proxy tunnel) has no shutdown(); the
        # socket it reads from does.
        sock = getattr(sock, "socket", None)
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_current = threading.local()
_DEADLINE_SLACK_S = 0.05
_DRAIN_WAIT_S = 0.02  # at most this long close() waits for the rest of a body it could reuse
_DRAIN_MAX = 64 * 1024


def _attach_current(conn: HTTPConnection, *, reused: bool = False) -> None:
    scope: _Scope | None = getattr(_current, "scope", None)
    if scope is not None:
        scope.reused = reused
        scope.attach(conn)
        # The socket itself too, not only the connection that holds it: for an answer read
        # until the connection closes (neither Content-Length nor chunked), http.client's
        # getresponse() hands the socket to the response and calls conn.close(), which sets
        # conn.sock to None; the connection then no longer leads to the socket the body read
        # blocks on. (_scoped_new_conn attaches a new plain socket before connect(); an HTTPS
        # connection reads from the TLS socket wrapped around it, which only exists now.)
        sock = conn.sock
        if sock is not None:
            scope.attach(sock)


def _scoped_new_conn(conn: HTTPConnection) -> socket.socket:
    """urllib3's ``create_connection``, with each socket in the scope *before* ``connect()``.

    A TCP handshake that is never answered blocks in ``connect()`` for the whole connect
    timeout; a socket the watcher can already see is shut down on cancel, which makes that
    ``connect()`` fail at once (Linux). Errors are mapped exactly as urllib3 maps them.
    """
    scope: _Scope | None = getattr(_current, "scope", None)
    host = conn._dns_host.strip("[]")
    err: OSError | None = None
    try:
        for af, socktype, proto, _name, addr in socket.getaddrinfo(
            host, conn.port, allowed_gai_family(), socket.SOCK_STREAM
        ):
            sock = socket.socket(af, socktype, proto)
            try:
                for option in conn.socket_options or ():
                    sock.setsockopt(*option)
                timeout: Any = conn.timeout
                if timeout is not _DEFAULT_TIMEOUT:
                    sock.settimeout(timeout)
                if conn.source_address:
                    sock.bind(conn.source_address)
                if scope is not None:
                    scope.attach(sock)
                sock.connect(addr)
            except OSError as exc:
                err = exc
                sock.close()
                continue
            sys.audit("http.client.connect", conn, conn.host, conn.port)
            return sock
        raise err if err is not None else OSError("getaddrinfo returns an empty list")
    except socket.gaierror as exc:
        raise NameResolutionError(conn.host, conn, exc) from exc
    except TimeoutError as exc:
        raise ConnectTimeoutError(
            conn, f"Connection to {conn.host} timed out. (connect timeout={conn.timeout})"
        ) from exc
    except OSError as exc:
        raise NewConnectionError(conn, f"Failed to establish a new connection: {exc}") from exc


class _ScopedHTTPConnection(HTTPConnection):
    """Registers itself with the sending thread's scope before each request."""

    def _new_conn(self) -> socket.socket:
        return _scoped_new_conn(self)

    def connect(self) -> None:
        super().connect()
        _attach_current(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:
            _attach_current(self, reused=True)
        super().request(*args, **kwargs)


class _ScopedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _scoped_new_conn(self)

    def connect(self) -> None:
        super().connect()
        _attach_current(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:
            _attach_current(self, reused=True)
        super().request(*args, **kwargs)


class _ScopedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _ScopedHTTPConnection


class _ScopedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _ScopedHTTPSConnection


class _Adapter(HTTPAdapter):
    """An adapter whose connections can be interrupted from another thread; no retries."""

    def __init__(self) -> None:
        super().__init__(max_retries=0, pool_maxsize=16)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _ScopedHTTPPool,
            "https": _ScopedHTTPSPool,
        }
        # urllib3 2.x closes a pool's idle sockets only when the pool is garbage collected;
        # an exception traceback that still references a response keeps it alive, so
        # Transport.close() would leave sockets open. Close pools when they are dropped.
        self.poolmanager.pools.dispose_func = _close_pool


def _close_pool(pool: Any) -> None:
    with contextlib.suppress(Exception):
        pool.close()


class _Session(requests.Session):
    """A session that drops custom auth headers when a redirect leaves the host."""

    def rebuild_auth(self, prepared_request: Any, response: Any) -> None:
        super().rebuild_auth(prepared_request, response)  # type: ignore[no-untyped-call]
        if self.should_strip_auth(  # type: ignore[no-untyped-call]
            response.request.url, prepared_request.url
        ):
            for name in _SENSITIVE_HEADERS:
                prepared_request.headers.pop(name, None)


class _Watcher:
    """Interrupts a request when its cancel event is set or its deadline passes."""

    __slots__ = ("_thread",)

    def __init__(self, scope: _Scope, cancel: _CancelFlag | None, deadline: float | None) -> None:
        self._thread = threading.Thread(
            target=self._run, args=(scope, cancel, deadline), name="ollm-cancel-watch", daemon=True
        )
        self._thread.start()

    @staticmethod
    def _run(scope: _Scope, cancel: _CancelFlag | None, deadline: float | None) -> None:
        poll = _CANCEL_POLL_S
        while not scope.done.wait(poll):
            if cancel is not None and cancel.is_set():
                scope.abort("cancelled")
                return
            if deadline is not None and time.monotonic() >= deadline:
                scope.abort("deadline")
                return

    def join(self) -> None:
        self._thread.join()


# --------------------------------------------------------------------------- streaming response


class StreamResponse:
    """An open HTTP response being streamed. Use as a context manager; it owns the connection.

    Iterate with :meth:`iter_chunks` (raw byte chunks) or :meth:`iter_decoded` (events from a
    sans-IO decoder, with the idle-content limit applied).
    """

    def __init__(
        self,
        transport: Transport,
        response: requests.Response,
        scope: _Scope,
        watcher: _Watcher | None,
        cancel: _CancelFlag | None,
        deadline: float | None,
        timeouts: Timeouts,
        model: str | None,
    ) -> None:
        self._transport = transport
        self._response = response
        self._scope = scope
        self._watcher = watcher
        self._cancel = cancel
        self._deadline = deadline
        self._timeouts = timeouts
        self._model = model
        self._closed = False
        # urllib3's chunk reader, kept here so a caller leaving iter_chunks() early does not
        # close it: close() may still finish the body and keep the connection.
        self._source: Iterator[bytes] | None = None
        self.status = response.status_code
        self.headers: Mapping[str, str] = response.headers

    def __enter__(self) -> StreamResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection: back to the pool when fully read, closed otherwise."""
        if self._closed:
            return
        self._closed = True
        if self._source is not None and self._scope.reason is None and not self._cancelled():
            self._finish_body(self._source)
        self._source = None
        with contextlib.suppress(Exception):  # closing must never raise
            self._response.close()
        self._scope.done.set()
        if self._watcher is not None:
            self._watcher.join()

    def _finish_body(self, source: Iterator[bytes]) -> None:
        """Read what is left of a chunked body if it is already here, to reuse the connection.

        Providers stop reading at their terminal event (``[DONE]``, ``done: true``); usually
        only the chunked terminator is left. Waiting at most ``_DRAIN_WAIT_S`` for at most
        ``_DRAIN_MAX`` bytes lets the connection go back to the pool; a server still sending
        (the caller left mid-answer) gets its connection closed as before.
        """
        sock = getattr(getattr(self._response.raw, "_connection", None), "sock", None)
        if sock is None:
            return
        try:
            previous = sock.gettimeout()
            sock.settimeout(_DRAIN_WAIT_S)
        except OSError:
            return
        read = 0
        deadline = time.monotonic() + _DRAIN_WAIT_S
        try:
            for chunk in source:
                read += len(chunk)
                # A server still trickling the answer is not waited for, byte by byte.
                if read > _DRAIN_MAX or time.monotonic() > deadline:
                    return
        except Exception:  # a timeout or reset: the connection is closed, as before
            return
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(previous)

    def _cancelled(self) -> bool:
        return self._scope.reason == "cancelled" or (
            self._cancel is not None and self._cancel.is_set()
        )

    def _read_error(self, exc: BaseException) -> OllmError:
        """Translate a failure while reading the body."""
        if self._cancelled():
            return Cancelled("the request was cancelled", provider=self._transport.provider)
        if self._scope.reason == "deadline" or _past(self._deadline):
            return self._transport._deadline_error(self._timeouts, self._model)
        if isinstance(exc, requests.exceptions.Timeout | urllib3.exceptions.ReadTimeoutError):
            return RequestTimeout(
                f"{self._transport.provider} at {self._transport.base_url} sent nothing for "
                f"{self._timeouts.idle:g} s",
                provider=self._transport.provider,
                model=self._model,
                details={"idle_timeout": self._timeouts.idle},
            )
        return ConnectionFailed(
            f"the connection to {self._transport.provider} at {self._transport.base_url} was "
            f"lost mid-stream ({type(exc).__name__})",
            url=self._transport.base_url,
            provider=self._transport.provider,
            model=self._model,
        )

    def _is_reset(self, exc: BaseException) -> bool:
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

    def iter_chunks(self) -> Iterator[bytes]:
        """Raw body chunks as they arrive (one HTTP chunk each for chunked bodies).

        A clean end of the connection, even one that breaks chunked framing, just ends the
        iteration: the provider decides whether the stream was complete.

        Raises:
            Cancelled: ``CANCELLED`` when the cancel event was set.
            RequestTimeout: ``LLM_TIMEOUT`` on the idle limit or the total deadline.
            ConnectionFailed: ``CONNECTION_FAILED`` when the connection was reset.
        """
        raw = self._response.raw
        cancel = self._cancel
        try:
            if raw.chunked and raw.supports_chunked_reads():
                source: Iterator[bytes] = raw.read_chunked(None, decode_content=False)
                self._source = source
            else:
                source = _read1_iter(raw)
            for chunk in self._decoded(source):
                if chunk:
                    if cancel is not None and cancel.is_set():
                        raise self._read_error(EOFError())
                    yield chunk
        except OllmError:
            raise
        except (urllib3.exceptions.DecodeError, zlib.error) as exc:
            if self._scope.reason is not None or self._cancelled():
                raise self._read_error(exc) from exc
            encoding = self.headers.get("content-encoding", "")
            raise BadResponse(
                f"{self._transport.provider} at {self._transport.base_url} sent a body that "
                f"could not be decoded (Content-Encoding: {encoding or 'none'})",
                provider=self._transport.provider,
                model=self._model,
                details={"content_encoding": encoding},
            ) from exc
        except (
            requests.RequestException,
            urllib3.exceptions.HTTPError,
            OSError,
            ValueError,
            AttributeError,
        ) as exc:
            if self._scope.reason is None and not self._cancelled() and not self._is_reset(exc):
                self._response._content_consumed = True  # type: ignore[attr-defined]
                return  # clean close that broke the framing: the caller sees a short stream
            raise self._read_error(exc) from exc
        if self._scope.reason is not None or self._cancelled():
            raise self._read_error(EOFError())
        self._response._content_consumed = True  # type: ignore[attr-defined]

    def _decoded(self, source: Iterator[bytes]) -> Iterator[bytes]:
        """``source`` with its ``Content-Encoding`` undone, in bounded pieces."""
        coding = self.headers.get("content-encoding", "").strip().lower()
        if coding in ("", "identity"):
            # Not ``yield from``: leaving early must not close urllib3's chunk reader, which
            # close() may still drain to keep the connection.
            for chunk in source:
                yield chunk
            return
        if coding not in ("gzip", "x-gzip", "deflate"):
            raise BadResponse(
                f"{self._transport.provider} at {self._transport.base_url} sent a body in a "
                f"coding that was not asked for (Content-Encoding: {coding})",
                provider=self._transport.provider,
                model=self._model,
                details={"content_encoding": coding},
            )
        inflater = _Inflater("deflate" if coding == "deflate" else "gzip")
        for chunk in source:
            yield from inflater.feed(chunk)
        yield inflater.flush()

    def iter_decoded(self, decoder: Any) -> Iterator[Any]:
        """Items produced by a sans-IO ``decoder`` (``feed``/``flush``) from the body.

        The idle limit counts *content*: chunks that produce no item (keep-alive comments,
        pings, half lines) do not reset it.

        Raises:
            RequestTimeout: ``LLM_TIMEOUT`` when no item arrived for ``Timeouts.idle`` seconds.
            BadResponse: ``LLM_BAD_RESPONSE`` from the decoder (over-long line).
            Cancelled, ConnectionFailed: as :meth:`iter_chunks`.
        """
        idle = self._timeouts.idle
        monotonic = time.monotonic
        feed = decoder.feed
        last = monotonic()
        for chunk in self.iter_chunks():
            items = feed(chunk)
            now = monotonic()
            if items:
                last = now
                yield from items
            elif now - last > idle:
                raise RequestTimeout(
                    f"{self._transport.provider} sent no content for {idle:g} s",
                    provider=self._transport.provider,
                    model=self._model,
                    details={"idle_timeout": idle},
                )
        yield from decoder.flush()

    def read_body(self, limit: int = _MAX_BODY) -> bytes:
        """The whole remaining body (bounded by ``limit``)."""
        parts: list[bytes] = []
        size = 0
        for chunk in self.iter_chunks():
            size += len(chunk)
            if size > limit:
                raise BadResponse(
                    f"{self._transport.provider} answered more than {limit} bytes",
                    provider=self._transport.provider,
                )
            parts.append(chunk)
        return b"".join(parts)


class _Inflater:
    """Decodes one ``Content-Encoding`` incrementally, at most ``_INFLATE_STEP`` bytes a piece.

    urllib3 inflates a whole received chunk at once; reading the raw body and inflating it
    here with a bounded ``max_length`` keeps memory bounded by the consumer's own limits.
    """

    __slots__ = ("_coding", "_members", "_obj", "_started")

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._started = False
        self._members = 0
        self._obj = self._new()

    def _new(self) -> Any:
        if self._coding == "deflate":  # zlib-wrapped per RFC 9110; raw deflate is tried too
            return zlib.decompressobj()
        return zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``data``.

        Raises:
            zlib.error: the body is not in the announced coding.
        """
        while data:
            try:
                out = self._obj.decompress(data, _INFLATE_STEP)
            except zlib.error:
                if self._members:  # garbage after a whole gzip member is ignored, as urllib3 does
                    return
                if self._coding != "deflate" or self._started:
                    raise
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate (old servers)
                out = self._obj.decompress(data, _INFLATE_STEP)
            self._started = True
            if out:
                yield out
            data = self._obj.unconsumed_tail
            if not data and self._obj.eof and self._obj.unused_data:
                data = self._obj.unused_data  # the next gzip member
                self._members += 1
                self._obj = self._new()

    def flush(self) -> bytes:
        return bytes(self._obj.flush())


def _past(deadline: float | None) -> bool:
    """Whether the total deadline has (all but) passed.

    The socket's read timeout is capped at the time left, so a read can time out a few
    milliseconds before the watcher thread marks the scope: that is still the deadline.
    """
    return deadline is not None and time.monotonic() >= deadline - _DEADLINE_SLACK_S


def _read1_iter(raw: Any) -> Iterator[bytes]:
    """The raw (still encoded) body as it arrives."""
    read1 = getattr(raw, "read1", None)
    if read1 is None:  # urllib3 < 2: read the http.client response directly
        read1 = raw._fp.read1
        while True:
            data = read1(65536)
            if not data:
                return
            yield data
    while True:
        data = read1(65536, decode_content=False)
        if not data:
            return
        yield data


# --------------------------------------------------------------------------- transport


def _check_sendable(provider: str, keys: Sequence[str], headers: Mapping[str, str]) -> None:
    """Refuse, before any request, API keys and header values that cannot be sent.

    Raised outside any ``except`` block and without the value, so the key is in no
    exception of the chain, no message and no log record.

    Raises:
        ConfigError: ``CONFIG_INVALID``.
    """
    for key in keys:
        why = _unsendable(key) if isinstance(key, str) else "a value that is not text"
        if why:
            raise ConfigError(
                f"the API key for {provider} holds {why}, which cannot be sent in an HTTP "
                "header: check the variable or file it came from (a trailing newline?)"
            )
    for name, value in headers.items():
        why = _unsendable(value) if isinstance(value, str) else "a value that is not text"
        if why:
            raise ConfigError(f"the {name} header for {provider} holds {why}, which cannot be sent")


def _basic_token(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


class Transport:
    """HTTP access for one provider instance.

    Args:
        base_url: Server root, already normalised (see :func:`normalize_base_url`).
            Credentials in it (``http://user:pw@host``) are sent as basic auth (unless
            ``headers`` has an ``Authorization``) and kept out of ``base_url`` and messages.
        provider: Provider name used in messages and error details.
        headers: Headers sent with every request (auth included).
        secrets: Values that must never appear in messages (API keys). Each must be sendable
            in a header (no surrounding blank or line break, no control character, Latin-1).
        timeouts: Default limits; per request, ``timeout=`` sets the total deadline.
        retry: Retry policy for failures before the first byte.
        start_hint: What to tell the user when the server cannot be reached.
        model_hint: Added to ``MODEL_NOT_FOUND`` messages; ``{model}`` is replaced.
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
    ) -> None:
        _check_sendable(provider, secrets, headers or {})
        self.base_url, credentials = split_userinfo(base_url)
        self.provider = provider
        self.timeouts = timeouts or Timeouts()
        self.retry = retry or RetryPolicy()
        self.start_hint = start_hint
        self.model_hint = model_hint
        self._headers = {"User-Agent": f"ollm-lite/{__version__}", **(headers or {})}
        if credentials is not None:
            secrets = [*secrets, *credentials, _basic_token(*credentials)]
            if not any(k.lower() == "authorization" for k in self._headers):
                self._headers["Authorization"] = f"Basic {_basic_token(*credentials)}"
        self.redact = _Redactor(secrets)
        self._session: _Session | None = None
        self._session_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Transport(provider={self.provider!r}, base_url={self.base_url!r})"

    @property
    def session(self) -> requests.Session:
        """The ``requests.Session`` (created on first use)."""
        if self._session is None:
            with self._session_lock:
                if self._session is None:
                    session = _Session()
                    adapter = _Adapter()
                    session.mount("http://", adapter)
                    session.mount("https://", adapter)
                    session.headers["Accept-Encoding"] = _ACCEPT_ENCODING
                    session.headers.update(self._headers)
                    self._session = session
        return self._session

    def close(self) -> None:
        """Close pooled connections."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def url(self, path: str) -> str:
        """Absolute URL of ``path`` (an absolute URL is returned unchanged)."""
        if "://" in path:
            return path
        return self.base_url + ("" if path.startswith("/") else "/") + path

    # ------------------------------------------------------------------ public calls

    def open_stream(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
        model: str | None = None,
        not_found: Literal["model", "route"] = "route",
        retry: bool = True,
    ) -> StreamResponse:
        """Send a request and return the open response once a success status arrived.

        Args:
            method: HTTP method.
            path: Path below ``base_url`` (or an absolute URL).
            json_body: JSON body.
            params: Query parameters.
            headers: Extra headers for this request.
            cancel: Setting it interrupts the request at any point. The events of the
                enclosing :func:`cancel_scope` blocks are watched as well.
            timeout: Total deadline in seconds (``None``: the transport default).
            model: Model name for messages and ``MODEL_NOT_FOUND``.
            not_found: Whether a 404 means the model (``"model"``) or the route is missing.
            retry: Whether to apply the retry policy.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for a header value that cannot be sent.
            Cancelled: ``CANCELLED``.
            ConnectionFailed: ``CONNECTION_FAILED``.
            RequestTimeout: ``LLM_TIMEOUT``.
            AuthenticationError, ModelNotFound, RateLimited, HTTPStatusError: from the status.
        """
        timeouts = (
            self.timeouts
            if timeout is None
            else Timeouts(self.timeouts.connect, self.timeouts.idle, timeout)
        )
        deadline = None if timeouts.total is None else time.monotonic() + timeouts.total
        flag = _effective_cancel(cancel)
        url = self.url(path)
        body = None
        req_headers = dict(headers or {})
        _check_sendable(self.provider, (), req_headers)
        if json_body is not None:
            body = json.dumps(json_body, ensure_ascii=False).encode("utf-8")
            req_headers.setdefault("Content-Type", "application/json")
        policy = self.retry
        attempt = 0
        stale_resent = False
        while True:
            if flag is not None and flag.is_set():
                raise Cancelled("the request was cancelled", provider=self.provider, model=model)
            try:
                return self._send_once(
                    method,
                    url,
                    body,
                    params,
                    req_headers,
                    flag,
                    deadline,
                    timeouts,
                    model,
                    not_found,
                )
            except _Retryable as exc:
                if exc.stale and not stale_resent:
                    stale_resent = True
                    logger.debug("%s %s: pooled connection was closed; sending again", method, url)
                    continue
                err = exc.error
                err.details["attempts"] = attempt + 1
                wait = exc.retry_after
                can_retry = retry and attempt < policy.retries
                if wait is not None and wait > policy.max_retry_after:
                    can_retry = False
                delay = policy.delay(attempt, wait)
                if deadline is not None and time.monotonic() + delay >= deadline:
                    can_retry = False
                if not can_retry:
                    raise err from exc.__cause__
                logger.debug(
                    "%s %s failed (%s); retry %d in %.2f s",
                    method,
                    url,
                    err.code,
                    attempt + 1,
                    delay,
                )
                if flag is not None:
                    if flag.wait(delay):
                        raise Cancelled(
                            "the request was cancelled", provider=self.provider, model=model
                        ) from None
                else:
                    time.sleep(delay)
                attempt += 1

    def request_json(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
        model: str | None = None,
        not_found: Literal["model", "route"] = "route",
        allow_empty: bool = False,
    ) -> Any:
        """Send a request and return its decoded JSON answer.

        Raises:
            BadResponse: ``LLM_BAD_RESPONSE`` when the answer is not JSON.
            OllmError: everything :meth:`open_stream` raises.
        """
        with self.open_stream(
            method,
            path,
            json_body=json_body,
            params=params,
            headers=headers,
            cancel=cancel,
            timeout=timeout,
            model=model,
            not_found=not_found,
        ) as response:
            raw = response.read_body()
        if not raw.strip():
            if allow_empty:
                return None
            raise BadResponse(
                f"{self.provider} at {self.base_url} sent an empty answer to {method} {path}",
                provider=self.provider,
                model=model,
            )
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise BadResponse(
                f"{self.provider} at {self.base_url} sent an answer to {method} {path} that is "
                "not JSON",
                provider=self.provider,
                model=model,
            ) from exc

    # ------------------------------------------------------------------ internals

    def _deadline_error(self, timeouts: Timeouts, model: str | None) -> RequestTimeout:
        return RequestTimeout(
            f"{self.provider} at {self.base_url} did not finish within the "
            f"{timeouts.total:g} s deadline",
            provider=self.provider,
            model=model,
            details={"deadline": timeouts.total},
        )

    def _connection_error(self, exc: BaseException, url: str, model: str | None) -> OllmError:
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
        hint = f" {self.start_hint}" if self.start_hint else ""
        return ConnectionFailed(
            f"cannot connect to {self.provider} at {self.base_url} ({reason}).{hint}",
            url=self.base_url,
            provider=self.provider,
            model=model,
            details={"url": self.redact(url)},
        )

    def _send_once(
        self,
        method: str,
        url: str,
        body: bytes | None,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str],
        cancel: _CancelFlag | None,
        deadline: float | None,
        timeouts: Timeouts,
        model: str | None,
        not_found: Literal["model", "route"],
    ) -> StreamResponse:
        scope = _Scope()
        watcher = (
            _Watcher(scope, cancel, deadline)
            if cancel is not None or deadline is not None
            else None
        )
        started = time.perf_counter()
        read_timeout = timeouts.idle
        if deadline is not None:
            read_timeout = max(0.001, min(read_timeout, deadline - time.monotonic()))
        _current.scope = scope
        unchained: Exception | None = None
        try:
            response = self.session.request(
                method,
                url,
                data=body,
                params=params,
                headers=headers,
                stream=True,
                timeout=(timeouts.connect, read_timeout),
            )
        except BaseException as exc:
            scope.done.set()
            if watcher is not None:
                watcher.join()
            if not isinstance(exc, Exception):
                raise
            error = self._send_error(exc, scope, cancel, deadline, timeouts, url, model)
            if not isinstance(exc, requests.exceptions.InvalidHeader):
                raise error from exc
            unchained = error  # the refused header (a key) stays out of the chain
        finally:
            _current.scope = None
        if unchained is not None:
            raise unchained
        elapsed = (time.perf_counter() - started) * 1000
        logger.debug("%s %s -> %d in %.1f ms", method, url, response.status_code, elapsed)
        stream = StreamResponse(self, response, scope, watcher, cancel, deadline, timeouts, model)
        if response.status_code < 400:
            return stream
        with stream:
            try:
                err_body = _read_limited(stream, _MAX_ERROR_BODY)
            except OllmError as exc:
                if isinstance(exc, Cancelled | RequestTimeout):
                    raise
                err_body = b""
        err = error_for_status(
            response.status_code,
            err_body,
            response.headers,
            provider=self.provider,
            url=self.redact(url),
            model=model,
            not_found=not_found,
            redact=self.redact,
            model_hint=self.model_hint,
        )
        quota = err.details.get("code") == "insufficient_quota" or err.details.get("type") == (
            "insufficient_quota"
        )
        if response.status_code in self.retry.statuses and not quota:
            retry_after = err.retry_after if isinstance(err, RateLimited) else None
            if retry_after is None:
                retry_after = parse_retry_after(response.headers)
            raise _Retryable(err, retry_after)
        raise err

    def _send_error(
        self,
        exc: Exception,
        scope: _Scope,
        cancel: _CancelFlag | None,
        deadline: float | None,
        timeouts: Timeouts,
        url: str,
        model: str | None,
    ) -> Exception:
        if scope.reason == "cancelled" or (cancel is not None and cancel.is_set()):
            return Cancelled("the request was cancelled", provider=self.provider, model=model)
        if scope.reason == "deadline" or (
            _past(deadline) and isinstance(exc, requests.exceptions.ReadTimeout)
        ):
            return self._deadline_error(timeouts, model)
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            return _Retryable(
                RequestTimeout(
                    f"could not connect to {self.provider} at {self.base_url} within "
                    f"{timeouts.connect:g} s.{' ' + self.start_hint if self.start_hint else ''}",
                    provider=self.provider,
                    model=model,
                ),
                None,
            )
        if isinstance(exc, requests.exceptions.Timeout):
            return RequestTimeout(
                f"{self.provider} at {self.base_url} did not answer within {timeouts.idle:g} s",
                provider=self.provider,
                model=model,
                details={"idle_timeout": timeouts.idle},
            )
        if isinstance(exc, requests.exceptions.InvalidHeader):
            return ConfigError(f"a header for {self.provider} cannot be sent (a key or value)")
        if isinstance(exc, requests.exceptions.InvalidURL | requests.exceptions.MissingSchema):
            return ConfigError(f"invalid URL for {self.provider}: {self.redact(str(exc))}")
        if isinstance(exc, requests.exceptions.TooManyRedirects):
            return BadResponse(
                f"{self.provider} at {self.base_url} redirected too many times "
                f"(last: {self.redact(str(getattr(exc.request, 'url', '')))[:200]})",
                provider=self.provider,
                model=model,
            )
        if "BadStatusLine" in str(exc):
            # Something listens there, but it is not an HTTP server (wrong port or service):
            # trying again cannot help.
            return ConnectionFailed(
                f"{self.provider} at {self.base_url} did not answer with HTTP; is this the "
                f"right address and port?{' ' + self.start_hint if self.start_hint else ''}",
                url=self.base_url,
                provider=self.provider,
                model=model,
            )
        # A pooled connection the server closed while it sat idle (keep-alive timeout, or a
        # server that closes after each answer without saying so): the request was never
        # read. Sent again at once on a new connection, outside the retry policy, as Go's
        # net/http does for a server-closed idle connection.
        stale = scope.reused and isinstance(exc, requests.exceptions.ConnectionError)
        if isinstance(exc, requests.exceptions.ConnectionError) and "RemoteDisconnected" not in (
            str(exc)
        ):
            return _Retryable(self._connection_error(exc, url, model), None, stale=stale)
        # Accepted, then closed without an answer: retrying is safe because nothing arrived.
        return _Retryable(
            ConnectionFailed(
                f"{self.provider} at {self.base_url} closed the connection without answering",
                url=self.base_url,
                provider=self.provider,
                model=model,
            ),
            None,
            stale=stale,
        )


def _read_limited(stream: StreamResponse, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    for chunk in stream.iter_chunks():
        parts.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


class _Retryable(Exception):
    """Internal: a failure before the first byte that the retry policy may try again."""

    def __init__(self, error: OllmError, retry_after: float | None, *, stale: bool = False) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after
        self.stale = stale

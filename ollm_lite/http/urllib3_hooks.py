"""The only code that relies on urllib3's (and requests') internals.

The transport must be able to shut down the socket of a request from another thread (cancel,
deadline), including while ``connect()`` still waits for a TCP handshake. urllib3 offers no
public hook for that, so this module:

* subclasses urllib3's connection classes to put each socket of a request in its
  :class:`~ollm_lite.http.cancel.Scope` (a copy of urllib3's ``create_connection`` registers
  the socket *before* ``connect()``);
* mounts pools of those connections on a ``requests`` adapter without retries, and closes
  pools when dropped;
* reads a response body chunk by chunk the way urllib3 2.x allows (``read_chunked``,
  ``read1``), and finds the socket of a response to drain its end.

Every internal name used is listed in :data:`REQUIRED`; :func:`missing_internals` says which
ones the installed versions lack (a test runs it, so an upgrade that removes one fails loudly
instead of silently losing cancellation).
"""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Iterator
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection as _util_connection, timeout as _util_timeout

from .cancel import Scope, current
from .urls import leaves_origin

__all__ = [
    "REQUIRED",
    "Adapter",
    "RedirectSafeSession",
    "body_chunks",
    "missing_internals",
    "response_socket",
]

#: The only headers a request keeps when a redirect leaves its host (:func:`leaves_origin`):
#: those the library and ``requests`` write for the protocol itself. Every other one (every
#: header the caller supplied, ``Authorization`` from any source, cookies) is dropped.
REDIRECT_KEEPS = frozenset(
    {
        "user-agent",
        "accept",
        "accept-encoding",
        "content-type",
        "content-length",
        "transfer-encoding",
        "connection",
        "mcp-protocol-version",
        "last-event-id",
        "proxy-authorization",  # for the proxy of the new URL, set by requests from the env
    }
)

#: (where, attribute) for every internal name this module relies on. ``where`` is a class or
#: module path; attributes of an *instance* are checked on a connection and a response built
#: without any I/O.
REQUIRED: tuple[tuple[str, str], ...] = (
    ("urllib3.util.connection", "allowed_gai_family"),
    ("urllib3.util.timeout", "_DEFAULT_TIMEOUT"),
    ("urllib3.connection.HTTPConnection", "_new_conn"),
    ("urllib3.connection.HTTPConnection", "connect"),
    ("urllib3.connection.HTTPConnection", "request"),
    ("urllib3.connectionpool.HTTPConnectionPool", "ConnectionCls"),
    ("urllib3.connectionpool.HTTPConnectionPool", "_put_conn"),
    ("urllib3.response.HTTPResponse", "read_chunked"),
    ("urllib3.response.HTTPResponse", "supports_chunked_reads"),
    ("urllib3.response.HTTPResponse", "read1"),
    ("requests.adapters.HTTPAdapter", "init_poolmanager"),
    ("requests.sessions.Session", "rebuild_auth"),
    ("HTTPConnection()", "_dns_host"),
    ("HTTPConnection()", "socket_options"),
    ("HTTPConnection()", "source_address"),
    ("HTTPConnection()", "timeout"),
    ("HTTPConnection()", "sock"),
    ("HTTPResponse()", "_connection"),
    ("HTTPResponse()", "chunked"),
    ("PoolManager()", "pools"),
    ("PoolManager()", "pool_classes_by_scheme"),
    ("PoolManager().pools", "dispose_func"),
)


def missing_internals() -> list[str]:
    """The entries of :data:`REQUIRED` that the installed urllib3/requests lack, as
    ``"where.attribute"`` (empty when all are there). Builds objects but does no I/O."""
    samples: dict[str, Any] = {
        "HTTPConnection()": HTTPConnection("localhost", 80),
        "HTTPResponse()": urllib3.response.HTTPResponse(body=b"", preload_content=False),
    }
    samples["PoolManager()"] = urllib3.PoolManager()
    samples["PoolManager().pools"] = samples["PoolManager()"].pools
    missing = []
    for where, name in REQUIRED:
        owner = samples.get(where)
        if owner is None:
            module, _, attr = where.rpartition(".")
            imported = sys.modules.get(where) or sys.modules.get(module)
            owner = imported if where in sys.modules else getattr(imported, attr, None)
        if owner is None or not hasattr(owner, name):
            missing.append(f"{where}.{name}")
    return missing


def _attach_current(conn: HTTPConnection, *, reused: bool = False) -> None:
    scope: Scope | None = current.scope
    if scope is not None:
        scope.reused = reused
        scope.attach(conn)
        if isinstance(conn, _ScopedHTTPConnection):
            conn.scope = scope
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
    scope: Scope | None = current.scope
    host = conn._dns_host.strip("[]")
    err: OSError | None = None
    try:
        for af, socktype, proto, _name, addr in socket.getaddrinfo(
            host, conn.port, _util_connection.allowed_gai_family(), socket.SOCK_STREAM
        ):
            sock = socket.socket(af, socktype, proto)
            try:
                for option in conn.socket_options or ():
                    sock.setsockopt(*option)
                timeout: Any = conn.timeout
                if timeout is not _util_timeout._DEFAULT_TIMEOUT:
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

    #: The scope of the request the connection carries, until it goes back to the pool.
    scope: Scope | None = None

    def _new_conn(self) -> socket.socket:
        return _scoped_new_conn(self)

    def connect(self) -> None:
        super().connect()
        _attach_current(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:
            _attach_current(self, reused=True)
        super().request(*args, **kwargs)


class _ScopedHTTPSConnection(_ScopedHTTPConnection, HTTPSConnection):
    """The same for HTTPS: ``HTTPSConnection.connect`` opens its socket with ``_new_conn``."""


def _leave_scope(conn: Any) -> None:
    """Detach a connection going back to the pool from its request's scope.

    urllib3 returns a connection to the pool as soon as a body is read to its end, before the
    caller closes the response: from then on another request may use it, and the first
    request's cancel must not shut it down.
    """
    scope = getattr(conn, "scope", None)
    if scope is not None:
        scope.detach(conn)
        conn.scope = None


class _ScopedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _ScopedHTTPConnection

    def _put_conn(self, conn: Any) -> None:
        _leave_scope(conn)
        super()._put_conn(conn)


class _ScopedHTTPSPool(_ScopedHTTPPool, HTTPSConnectionPool):
    ConnectionCls = _ScopedHTTPSConnection


class Adapter(HTTPAdapter):
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


class RedirectSafeSession(requests.Session):
    """A session whose redirects to another host carry no header the caller supplied.

    ``requests`` drops only ``Authorization`` there; this session keeps nothing but
    :data:`REDIRECT_KEEPS` and adds no authentication (no ``.netrc`` look-up for the new
    host either). A redirect within the host keeps every header, as ``requests`` does.
    """

    def rebuild_auth(self, prepared_request: Any, response: Any) -> None:
        if leaves_origin(response.request.url, prepared_request.url):
            headers = prepared_request.headers
            for name in [n for n in headers if n.lower() not in REDIRECT_KEEPS]:
                del headers[name]
            return
        super().rebuild_auth(prepared_request, response)  # type: ignore[no-untyped-call]


def body_chunks(raw: Any) -> tuple[Iterator[bytes], bool]:
    """The raw (still encoded) body of urllib3 response ``raw`` as it arrives, and whether
    the iterator is urllib3's chunk reader (one item per HTTP chunk), which a caller may
    keep reading after leaving its own loop."""
    if raw.chunked and raw.supports_chunked_reads():
        return raw.read_chunked(None, decode_content=False), True
    return _read1_iter(raw), False


def _read1_iter(raw: Any) -> Iterator[bytes]:
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


def response_socket(raw: Any) -> Any:
    """The socket urllib3 response ``raw`` reads from while its connection holds it, or
    ``None``."""
    return getattr(getattr(raw, "_connection", None), "sock", None)

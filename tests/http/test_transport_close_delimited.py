"""Cancel and deadline on a silent answer read until the connection closes, over HTTP and HTTPS.

An answer with neither ``Content-Length`` nor ``Transfer-Encoding`` is read until the server
closes. ``http.client`` then hands the socket over to the response and drops it from the
connection object (``conn.sock = None``), so the transport must keep the socket itself to be able
to interrupt the read: on a reused keep-alive connection, and on a new HTTPS one (whose TLS
socket only exists after the handshake).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.transport_support import open_fds, read_request, wait_for_threads

from ollm_lite.errors import Cancelled, RequestTimeout
from ollm_lite.http.policy import RetryPolicy, Timeouts
from ollm_lite.http.transport import Transport

LIMIT = 0.5
"""Seconds from ``cancel.set()`` (or the deadline) to the end of the call."""

KEEP_ALIVE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
CLOSE_DELIMITED = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n\r\n"


class SilentAfter:
    """Answers the first ``warm`` requests of each connection with a keep-alive ``{}``, then a
    close-delimited 200 head followed by silence until :meth:`close`."""

    def __init__(self, warm: int, context: ssl.SSLContext | None = None) -> None:
        self.warm = warm
        self.context = context
        self.connections = 0
        self.stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        scheme = "https" if context else "http"
        self.url = f"{scheme}://127.0.0.1:{self._listener.getsockname()[1]}"
        self._workers: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            self.connections += 1
            worker = threading.Thread(target=self._handle, args=(client,), daemon=True)
            self._workers.append(worker)
            worker.start()

    def _handle(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError), contextlib.closing(client):
            client.settimeout(5)
            conn = client
            if self.context is not None:
                conn = self.context.wrap_socket(client, server_side=True)
            with contextlib.closing(conn):
                for _ in range(self.warm):
                    if not _read_request(conn):
                        return
                    conn.sendall(KEEP_ALIVE)
                if _read_request(conn):
                    conn.sendall(CLOSE_DELIMITED)
                    self.stop.wait(30)

    def close(self) -> None:
        self.stop.set()
        self._thread.join(5)
        for worker in self._workers:
            worker.join(5)
        self._listener.close()


def _read_request(conn: socket.socket) -> bool:
    """Read one whole request; ``False`` when the client closed the connection."""
    return read_request(conn) is not None


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (made with the ``openssl`` command)."""
    openssl = shutil.which("openssl")
    if openssl is None:  # pragma: no cover
        pytest.skip("the openssl command is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture(params=["http", "https"])
def scheme(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@contextlib.contextmanager
def silent_after(
    warm: int, scheme: str, certificate: tuple[Path, Path]
) -> Iterator[tuple[SilentAfter, Transport]]:
    """The server and a transport that trusts it; afterwards, no thread or descriptor left."""
    threads, fds = threading.active_count(), open_fds()
    context = None
    if scheme == "https":
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*certificate)
    server = SilentAfter(warm, context)
    transport = Transport(
        server.url,
        provider="test",
        timeouts=Timeouts(connect=1.0, idle=30.0),
        retry=RetryPolicy(retries=0),
    )
    # REQUESTS_CA_BUNDLE (when set) would win over the session's own verify setting.
    transport.session.trust_env = False
    transport.session.verify = str(certificate[0])
    try:
        yield server, transport
    finally:
        transport.close()
        server.close()
    assert wait_for_threads(threads) <= threads, [t.name for t in threading.enumerate()]
    deadline = time.monotonic() + 3
    while open_fds() > fds and time.monotonic() < deadline:
        time.sleep(0.02)
    assert open_fds() <= fds


def _read_all(transport: Transport, **kw: object) -> bytes:
    with transport.open_stream("POST", "/x", json_body={}, **kw) as resp:  # type: ignore[arg-type]
        return resp.read_body()


@pytest.mark.parametrize("warm", [1, 0], ids=["reused", "new"])
def test_cancel_a_silent_close_delimited_answer(
    warm: int, scheme: str, certificate: tuple[Path, Path]
) -> None:
    """A close-delimited 200 head then silence, on a reused or a new connection: setting the
    event ends the blocked body read within the limit, not at the idle limit."""
    with silent_after(warm, scheme, certificate) as (server, transport):
        for _ in range(warm):
            assert _read_all(transport) == b"{}"
        cancel = threading.Event()
        set_at: list[float] = []
        timer = threading.Timer(0.2, lambda: (set_at.append(time.monotonic()), cancel.set()))
        timer.start()
        with pytest.raises(Cancelled):
            _read_all(transport, cancel=cancel)
        ended = time.monotonic()
        timer.join()
        assert server.connections == 1, "the warm connection was not reused"
    assert set_at, "the call ended before the cancel was set"
    assert ended - set_at[0] < LIMIT


@pytest.mark.parametrize("warm", [1, 0], ids=["reused", "new"])
def test_deadline_ends_a_silent_close_delimited_answer(
    warm: int, scheme: str, certificate: tuple[Path, Path]
) -> None:
    """The same silence under a 0.3 s total deadline ends in ``LLM_TIMEOUT`` naming it."""
    with silent_after(warm, scheme, certificate) as (server, transport):
        for _ in range(warm):
            assert _read_all(transport) == b"{}"
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as info:
            _read_all(transport, timeout=0.3)
        elapsed = time.monotonic() - started
        assert server.connections == 1
    assert "deadline" in info.value.message
    assert elapsed < 0.3 + LIMIT

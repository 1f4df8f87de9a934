"""A scriptable loopback HTTP server for transport tests.

Each request path maps to a *script*: a function that receives the raw client socket (after the
request head and body were read) and writes whatever bytes it wants, with any delays or faults.
Raw sockets are used so faults that HTTP libraries would hide can be produced exactly.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

Script = Callable[[socket.socket, "Request"], None]


@dataclass
class Request:
    """What the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    stop: threading.Event = field(default_factory=threading.Event)
    """Set when the server shuts down: scripts wait on it instead of sleeping."""


@dataclass
class LoopbackServer:
    """Serves scripts on 127.0.0.1 at an ephemeral port; records every request."""

    scripts: dict[str, Script] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._clients: list[socket.socket] = []
        self._workers: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            self._clients.append(client)
            worker = threading.Thread(target=self._handle, args=(client,), daemon=True)
            self._workers.append(worker)
            worker.start()

    def _handle(self, client: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                req = _read_request(client)
                if req is None:
                    return
                req.stop = self._stop
                self.requests.append(req)
                script = self.scripts.get(req.path.split("?")[0], _not_found)
                script(client, req)
                if not getattr(script, "keep_alive", False):
                    return
        except OSError:
            return
        finally:
            # Scripts without keep_alive answer one request per connection: closing tells the
            # client so, instead of leaving it to send its next request into the void.
            with contextlib.suppress(OSError):
                client.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()
        for client in self._clients:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
        for worker in self._workers:
            worker.join(5)
        for client in self._clients:
            with contextlib.suppress(OSError):
                client.close()


def _read_request(client: socket.socket) -> Request | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = client.recv(65536)
        if not chunk:
            break
        rest += chunk
    return Request(method, path, headers, rest[:length])


def _not_found(client: socket.socket, req: Request) -> None:
    respond(client, 404, b'{"error": "not found"}')


def respond(
    client: socket.socket,
    status: int,
    body: bytes,
    *,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> None:
    """Write a complete response with Content-Length."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    client.sendall(
        f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n".encode()
        + body
    )


def chunked_head(client: socket.socket, content_type: str = "text/event-stream") -> None:
    """Start a chunked 200 response."""
    client.sendall(
        f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n".encode()
    )


def send_chunk(client: socket.socket, data: bytes) -> None:
    """Write one HTTP chunk."""
    client.sendall(b"%x\r\n%s\r\n" % (len(data), data))


def end_chunks(client: socket.socket) -> None:
    """Write the terminating zero-length chunk."""
    client.sendall(b"0\r\n\r\n")


def stream_script(
    chunks: list[bytes], *, delay: float = 0.0, then: str = "end", keep_alive: bool = False
) -> Script:
    """A script that streams ``chunks`` (one HTTP chunk each) then ends, hangs or resets."""

    def script(client: socket.socket, req: Request) -> None:
        chunked_head(client)
        for data in chunks:
            if delay:
                time.sleep(delay)
            send_chunk(client, data)
        if then == "end":
            end_chunks(client)
        elif then == "hang":
            req.stop.wait(30)
        elif then == "reset":
            linger_zero = b"\x01\x00\x00\x00\x00\x00\x00\x00"
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_zero)
            client.close()
        elif then == "close":
            client.shutdown(socket.SHUT_RDWR)

    script.keep_alive = keep_alive  # type: ignore[attr-defined]
    return script


def silent(client: socket.socket, req: Request) -> None:
    """Accept the request and never answer."""
    req.stop.wait(30)


@contextlib.contextmanager
def serve(scripts: dict[str, Script]) -> Iterator[LoopbackServer]:
    """Run a server for the duration of a ``with`` block."""
    server = LoopbackServer(scripts)
    try:
        yield server
    finally:
        server.close()


def open_fds() -> int:
    """Number of open file descriptors of this process (Linux)."""
    import os

    return len(os.listdir("/proc/self/fd"))


def wait_for_threads(baseline: int, timeout: float = 2.0) -> int:
    """Wait until the thread count drops to ``baseline``; return the final count."""
    deadline = time.monotonic() + timeout
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.01)
    return threading.active_count()

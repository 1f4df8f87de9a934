"""The one loopback HTTP server of the tests and benchmarks, and its raw-socket request reader.

Each request is routed to a *script*: a function that receives the raw client socket (after the
request head and body were read) and writes whatever bytes it wants, with any delays or faults.
Raw sockets are used so faults that HTTP libraries would hide can be produced exactly. Routes
are keyed by path (``"/api/chat"``) or by method and path (``("POST", "/api/chat")``; tried
first). The Ollama stand-in of ``ollama_support``, the fault scripts of ``faults/fault_server``
and the benchmark server (``benchmarks/_server.py``, in a child process) all run on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Script = Callable[[socket.socket, "Request"], None]
Route = str | tuple[str, str]
_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Request:
    """What the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    stop: threading.Event = field(default_factory=threading.Event)
    """Set when the server shuts down: scripts wait on it instead of sleeping."""

    @property
    def json(self) -> Any:
        """The body parsed as JSON (None when it is empty)."""
        return json.loads(self.body) if self.body else None


def read_request(client: socket.socket) -> Request | None:
    """Read one request (head, then a Content-Length or chunked body) from a raw socket.

    Returns None when the client closed the connection before a whole head arrived.
    """
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
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return Request(method, path, headers, _read_chunked(client, rest))
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = client.recv(65536)
        if not chunk:
            break
        rest += chunk
    return Request(method, path, headers, rest[:length])


def _read_chunked(client: socket.socket, data: bytes) -> bytes:
    """A chunked request body, ``data`` being what already arrived after the head."""
    buf = bytearray(data)
    body: list[bytes] = []

    def more() -> bool:
        chunk = client.recv(65536)
        buf.extend(chunk)
        return bool(chunk)

    while True:
        while b"\r\n" not in buf:
            if not more():
                return b"".join(body)
        end = buf.index(b"\r\n")
        size = int(bytes(buf[:end]).split(b";")[0], 16)
        del buf[: end + 2]
        if size == 0:  # then trailers (ignored) and a blank line
            while not buf.startswith(b"\r\n") and b"\r\n\r\n" not in buf:
                if not more():
                    break
            return b"".join(body)
        while len(buf) < size + 2:
            if not more():
                return b"".join([*body, bytes(buf[:size])])
        body.append(bytes(buf[:size]))
        del buf[: size + 2]


@dataclass
class LoopbackServer:
    """Serves scripts on 127.0.0.1 at an ephemeral port; records every request.

    Args:
        scripts: Route → script; a request matching no route gets ``fallback``.
        keep_alive: Whether a connection serves another request after a script returned,
            unless the script has its own ``keep_alive`` attribute.
        fallback: The script for unknown routes (a JSON 404 by default).
    """

    scripts: Mapping[Route, Script] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    keep_alive: bool = False
    fallback: Script | None = None

    def __post_init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.disconnected = threading.Event()
        """Set when a script noticed that the client went away (a write or read failed)."""
        self._stop = threading.Event()
        self._clients: list[socket.socket] = []
        self._workers: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def seen(self) -> list[Request]:
        """Every request received so far, in order (the same list as ``requests``)."""
        return self.requests

    def _serve(self) -> None:
        self._sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            # Every write goes out at once, as its own TCP segment where it can.
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._clients.append(client)
            worker = threading.Thread(target=self._handle, args=(client,), daemon=True)
            self._workers.append(worker)
            worker.start()

    def _script(self, req: Request) -> Script:
        path = req.path.split("?")[0]
        script = self.scripts.get((req.method, path)) or self.scripts.get(path)
        return script or self.fallback or _not_found

    def _handle(self, client: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                req = read_request(client)
                if req is None:
                    return
                req.stop = self._stop
                self.requests.append(req)
                script = self._script(req)
                script(client, req)
                if not getattr(script, "keep_alive", self.keep_alive):
                    return
        except OSError:
            self.disconnected.set()
        finally:
            # Scripts without keep_alive answer one request per connection: closing tells the
            # client so, instead of leaving it to send its next request into the void.
            with contextlib.suppress(OSError):
                client.close()

    def close(self) -> None:
        """Stop accepting, end every connection and wait for the script threads."""
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
def serve(
    scripts: Mapping[Route, Script], *, keep_alive: bool = False, fallback: Script | None = None
) -> Iterator[LoopbackServer]:
    """Run a server for the duration of a ``with`` block."""
    server = LoopbackServer(scripts, keep_alive=keep_alive, fallback=fallback)
    try:
        yield server
    finally:
        server.close()


def open_fds() -> int:
    """Number of open file descriptors of this process (Linux)."""
    return len(os.listdir("/proc/self/fd"))


def wait_for_threads(baseline: int, timeout: float = 2.0) -> int:
    """Wait until the thread count drops to ``baseline``; return the final count."""
    deadline = time.monotonic() + timeout
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.01)
    return threading.active_count()


def serve_until_stdin_closes(server: LoopbackServer) -> None:
    """The child side of :class:`ChildServer`: print the port, serve until stdin closes."""
    print(server.port, flush=True)
    try:
        sys.stdin.read()  # the parent closes our stdin to stop us
    finally:
        server.close()


class ChildServer:
    """A loopback server in a child process, so that it never competes with the measured
    client for the GIL. ``argv`` runs a program that calls :func:`serve_until_stdin_closes`;
    ``url`` is its root. Use as a context manager, or call :meth:`close`."""

    def __init__(self, argv: Sequence[str], *, cwd: str | None = None) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_ROOT), str(_ROOT / "tests"), env.get("PYTHONPATH", "")) if p
        )
        self._proc = subprocess.Popen(
            [sys.executable, *argv],
            cwd=cwd or str(_ROOT),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.strip():
            self.close()
            raise RuntimeError(f"the loopback server {' '.join(argv)} did not start")
        self.port = int(line)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ChildServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the child process (closing its stdin; killed after 10 s)."""
        proc = self._proc
        if proc.poll() is None:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

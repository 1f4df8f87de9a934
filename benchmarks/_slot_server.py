"""A loopback model server with slots, for the batch benchmark (stdlib only).

Like llama.cpp's ``llama-server -np K``: at most ``slots`` requests are worked on at once, each
takes a fixed ``latency``, and the others wait their turn. ``POST /v1/chat/completions`` answers
a whole ``chat.completion`` (``stream: true`` is not needed by a batch); ``GET /props`` reports
``total_slots`` as llama.cpp does, so a fleet finds its per-endpoint limit by itself.

Run it in a child process (:class:`SlotServer`), one per endpoint, so it never competes with
the measured client for the GIL::

    with SlotServer(slots=4, latency=0.05) as server:
        server.url  # http://127.0.0.1:PORT
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

__all__ = ["SlotServer"]

_ROOT = Path(__file__).resolve().parent.parent
_ANSWER = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1718000000,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "label: printer"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
).encode()


def _handler(slots: threading.Semaphore, latency: float, total: int) -> type:
    props = json.dumps({"total_slots": total}).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # As real servers do: no Nagle, or headers and body written apart wait for the
            # client's delayed ACK (40 ms a request on Linux).
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(200, props) if self.path == "/props" else self._send(404, b"{}")

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with slots:
                if latency:
                    time.sleep(latency)
            self._send(200, _ANSWER)

    return Handler


def _main() -> None:
    slots, latency = int(sys.argv[1]), float(sys.argv[2])
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), _handler(threading.Semaphore(slots), latency, slots)
    )
    server.daemon_threads = True
    server.request_queue_size = 512
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.shutdown()


class SlotServer:
    """The server in a child process; ``url`` once entered."""

    def __init__(self, *, slots: int, latency: float) -> None:
        self.slots = slots
        self.latency = latency
        self.url = ""
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> SlotServer:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._slot_server", str(self.slots), str(self.latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=_ROOT,
        )
        assert self._proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self._proc.stdout.readline())}"
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


if __name__ == "__main__":
    _main()

"""Fixtures for the chat runtime tests: a small stdlib loopback Ollama that replays NDJSON.

``ollama_replay(answers, capabilities=..., context_length=...)`` starts a
``ThreadingHTTPServer`` on 127.0.0.1 (ephemeral port) and returns it. Every ``POST /api/chat``
takes the next answer — a list of JSON objects, or a dict ``{"lines": [...], "delay": s,
"hang": bool}`` — and sends each object as one NDJSON line in its own HTTP chunk, as Ollama
streams. ``POST /api/show`` reports the model's capabilities and trained context length;
``GET /api/ps`` lists nothing. The server records every chat body in ``chat_bodies`` and sets
``client_gone`` when a client closed its connection while an answer was hanging.
"""

from __future__ import annotations

import contextlib
import json
import select
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Answer:
    """One scripted ``/api/chat`` response.

    Attributes:
        lines: JSON objects, one NDJSON line (and one HTTP chunk) each.
        delay: Seconds before each line.
        hang: After the lines, keep the connection open and silent until the client leaves.
    """

    lines: Sequence[dict[str, Any]]
    delay: float = 0.0
    hang: bool = False


class OllamaReplay(ThreadingHTTPServer):
    """The loopback server (see the module docstring)."""

    daemon_threads = True

    def __init__(
        self, answers: Sequence[Answer], capabilities: Sequence[str], context_length: int
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers: deque[Answer] = deque(answers)
        self.capabilities = list(capabilities)
        self.context_length = context_length
        self.chat_bodies: list[dict[str, Any]] = []
        self.client_gone = threading.Event()
        self.stopping = threading.Event()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops a kept-alive connection is normal here, not worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
        self._thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OllamaReplay

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/api/ps":
            self._json({"models": []})
        else:
            self._json({"error": "404 page not found"}, 404)

    def do_POST(self) -> None:
        body = self._body()
        if self.path == "/api/show":
            self._json(
                {
                    "details": {"family": "llama"},
                    "model_info": {
                        "general.architecture": "llama",
                        "llama.context_length": self.server.context_length,
                    },
                    "capabilities": self.server.capabilities,
                }
            )
        elif self.path == "/api/chat":
            self.server.chat_bodies.append(body)
            answer = self.server.answers.popleft() if self.server.answers else None
            if answer is None:
                self._json({"error": "no scripted answer left"}, 500)
                return
            self._stream(answer)
        else:
            self._json({"error": "404 page not found"}, 404)

    def _stream(self, answer: Answer) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for line in answer.lines:
                if answer.delay and self.server.stopping.wait(answer.delay):
                    return
                data = json.dumps(line).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            if answer.hang:
                self._hang()
                return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.server.client_gone.set()
            self.close_connection = True

    def _hang(self) -> None:
        """Stay silent until the client closes its end (or the server stops)."""
        self.close_connection = True
        while not self.server.stopping.is_set():
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable:
                with contextlib.suppress(OSError):
                    if self.connection.recv(1) != b"":
                        continue
                self.server.client_gone.set()
                return


@pytest.fixture
def ollama_replay() -> Iterator[Callable[..., OllamaReplay]]:
    """Start loopback Ollama stand-ins; all are stopped after the test."""
    servers: list[OllamaReplay] = []

    def start(
        answers: Sequence[Sequence[dict[str, Any]] | dict[str, Any]],
        *,
        capabilities: Sequence[str] = ("completion", "tools"),
        context_length: int = 131072,
    ) -> OllamaReplay:
        scripted = [Answer(**a) if isinstance(a, dict) else Answer(list(a)) for a in answers]
        server = OllamaReplay(scripted, capabilities, context_length)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()

"""MCP servers whose one tool, ``whoami``, answers with the secret they were configured with:
a stdio server's ``TOKEN`` variable (``env=``) or an HTTP server's ``X-Token`` header
(``headers=``), both built in code as a script would."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import ollm_lite

#: A stdio MCP server whose one tool, ``whoami``, answers with its ``TOKEN`` variable.
ECHO_ENV = r"""
import json, os, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "echo", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
            {"name": "whoami", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        text = "token " + os.environ["TOKEN"]
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
"""


@contextmanager
def _echo_headers_server() -> Iterator[str]:
    """A loopback MCP endpoint (streamable HTTP, JSON answers) whose one tool, ``whoami``,
    answers with the ``X-Token`` header it was sent."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._answer(405, None)

        def do_DELETE(self) -> None:
            self._answer(405, None)

        def do_POST(self) -> None:
            msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if "id" not in msg:
                return self._answer(202, None)
            result: dict[str, Any] = {}
            if msg["method"] == "initialize":
                result = {
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "web", "version": "1"},
                }
            elif msg["method"] == "tools/list":
                result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
            elif msg["method"] == "tools/call":
                said = f"token {self.headers.get('X-Token')}"
                result = {"content": [{"type": "text", "text": said}]}
            self._answer(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})

        def _answer(self, code: int, obj: Any) -> None:
            raw = b"" if obj is None else json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@contextmanager
def echo_mcp_server(kind: str, secret: str) -> Iterator[ollm_lite.McpServer]:
    """A ``"stdio"`` or ``"http"`` MCP server handed ``secret`` (``env``/``headers``), whose
    ``whoami`` tool echoes it; closed after the block."""
    if kind == "stdio":
        command = [sys.executable, "-c", ECHO_ENV]
        with ollm_lite.McpServer.stdio(command, env={"TOKEN": secret}) as server:
            yield server
    else:
        with _echo_headers_server() as url:
            with ollm_lite.McpServer.http(url, headers={"X-Token": secret}) as server:
                yield server

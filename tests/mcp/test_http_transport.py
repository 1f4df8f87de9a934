"""Streamable HTTP against a scripted loopback server (MCP specification, Basic > Transports >
Streamable HTTP): JSON and SSE answers, ``Mcp-Session-Id`` and ``MCP-Protocol-Version`` on
later requests, 202 for notifications, DELETE at close, a stream resumed with
``Last-Event-ID``, an expired session, the size limit, and a silent server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ollm_lite import McpServer, mcp_tools
from ollm_lite.errors import ConfigError

SESSION = "sess-123"


@dataclass
class Script:
    mode: str = "json"  # json | sse | resume | expired | always_expired | silent | push
    seen: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    big: int = 0
    closed: threading.Event = field(default_factory=threading.Event)


def _result(rid: Any, method: str, params: dict[str, Any], script: Script) -> Any:
    if method == "initialize":
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "web", "version": "1"},
        }
    if method == "tools/list":
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return {"tools": [{"name": "echo", "description": "Echo.", "inputSchema": schema}]}
    if method == "tools/call":
        text = params["arguments"].get("text", "")
        return {"content": [{"type": "text", "text": "x" * script.big if script.big else text}]}
    return {}


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:
            pass

        def do_DELETE(self) -> None:
            script.seen.append(("DELETE", dict(self.headers), None))
            self.send_response(200)
            self.end_headers()

        def do_GET(self) -> None:
            script.seen.append(("GET", dict(self.headers), None))
            if script.mode == "push":
                deadline = time.monotonic() + 30  # the change comes after the first listing
                while time.monotonic() < deadline and not any(
                    b and b.get("method") == "tools/list" for _, _, b in script.seen
                ):
                    time.sleep(0.02)
                changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
                self._sse([(json.dumps(changed), "p1")])
                script.closed.wait(30)  # hold the stream open until the test ends
                return
            if script.mode != "resume" or self.headers.get("Last-Event-ID") != "e1":
                self.send_response(405)
                self.end_headers()
                return
            pending = getattr(script, "pending", None)
            self._sse([(json.dumps({"jsonrpc": "2.0", "id": pending, "result": {
                "content": [{"type": "text", "text": "resumed"}]}}), "e2")])  # fmt: skip

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.seen.append(("POST", dict(self.headers), body))
            method, rid = body.get("method"), body.get("id")
            session = self.headers.get("Mcp-Session-Id")
            expired = script.mode == "always_expired" or (
                script.mode == "expired" and session == SESSION
            )
            if expired and method == "tools/call":
                self.send_response(404)
                self.end_headers()
                return
            if rid is None or method is None:
                self.send_response(202)
                self.end_headers()
                return
            if script.mode == "silent" and method == "tools/call":
                time.sleep(30)
                return
            answer = {"jsonrpc": "2.0", "id": rid,
                      "result": _result(rid, method, body.get("params") or {}, script)}  # fmt: skip
            if method == "tools/call" and script.mode == "resume":
                script.pending = rid  # type: ignore[attr-defined]
                note = {"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "data": "working"}}  # fmt: skip
                self._sse([(json.dumps(note), "e1")])  # then the stream ends: poll with GET
                return
            if method == "tools/call" and script.mode == "sse":
                token = body["params"].get("_meta", {}).get("progressToken")
                params = {"progressToken": token, "progress": 1, "total": 1}
                progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
                self._sse([(json.dumps(progress), None), (json.dumps(answer), None)])
                return
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if method == "initialize":
                again = any(b and b.get("method") == "initialize" for _, _, b in script.seen[:-1])
                self.send_header("Mcp-Session-Id", SESSION + "-2" if again else SESSION)
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, events: list[tuple[str, str | None]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for data, event_id in events:
                head = f"id: {event_id}\n" if event_id else ""
                self.wfile.write(f": keep-alive\n\n{head}data: {data}\n\n".encode())
                self.wfile.flush()

    return Handler


@pytest.fixture
def web() -> Iterator[tuple[str, Script]]:
    script = Script()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", script
    finally:
        script.closed.set()
        server.shutdown()
        server.server_close()


def test_json_answers_session_id_and_version_header(web: tuple[str, Script]) -> None:
    url, script = web
    with McpServer.http(url, headers={"Authorization": "Bearer t0ken"}) as server:
        assert server.call_tool("echo", {"text": "hi"}).data == "hi"
    posts = [(h, b) for kind, h, b in script.seen if kind == "POST"]
    init_headers, init = posts[0]
    assert init["method"] == "initialize"
    assert "Mcp-Session-Id" not in init_headers and "MCP-Protocol-Version" not in init_headers
    assert "application/json" in init_headers["Accept"]
    assert "text/event-stream" in init_headers["Accept"]
    assert init_headers["Authorization"] == "Bearer t0ken"
    for headers, _ in posts[1:]:
        assert headers["Mcp-Session-Id"] == SESSION
        assert headers["MCP-Protocol-Version"] == "2025-11-25"
    assert posts[1][1] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    deletes = [h for kind, h, _ in script.seen if kind == "DELETE"]
    assert deletes and deletes[0]["Mcp-Session-Id"] == SESSION


def test_sse_answers_with_progress(web: tuple[str, Script]) -> None:
    url, script = web
    script.mode = "sse"
    seen: list[Any] = []
    with McpServer.http(url) as server:
        result = server.call_tool(
            "echo", {"text": "streamed"}, on_progress=lambda *a: seen.append(a)
        )
    assert result.data == "streamed"
    assert seen == [(1.0, 1.0, None)]


def test_a_stream_that_ends_early_is_resumed_with_last_event_id(web: tuple[str, Script]) -> None:
    url, script = web
    script.mode = "resume"
    with McpServer.http(url) as server:
        assert server.call_tool("echo", {"text": "x"}).data == "resumed"
    gets = [h for kind, h, _ in script.seen if kind == "GET" and "Last-Event-ID" in h]
    assert gets[0]["Last-Event-ID"] == "e1"


def test_an_expired_session_starts_a_new_one(web: tuple[str, Script]) -> None:
    url, script = web
    script.mode = "expired"
    with McpServer.http(url) as server:
        assert server.call_tool("echo", {"text": "again"}).data == "again"
    posts = [(h, b) for kind, h, b in script.seen if kind == "POST"]
    inits = [h for h, b in posts if b["method"] == "initialize"]
    assert len(inits) == 2 and "Mcp-Session-Id" not in inits[1]
    last_call = [h for h, b in posts if b["method"] == "tools/call"][-1]
    assert last_call["Mcp-Session-Id"] == SESSION + "-2"


def test_a_session_that_keeps_expiring_is_a_tool_error(web: tuple[str, Script]) -> None:
    url, script = web
    script.mode = "always_expired"
    with McpServer.http(url) as server:
        result = server.call_tool("echo", {"text": "x"})
    assert not result.ok and result.error is not None
    assert result.error.code == "TOOL_EXECUTION_FAILED"
    assert result.error.details is not None
    assert result.error.details["code"] == "CONNECTION_FAILED"


def test_an_answer_over_the_limit_is_an_error(web: tuple[str, Script]) -> None:
    url, script = web
    script.big = 50_000
    with McpServer.http(url, max_message_bytes=20_000) as server:
        result = server.call_tool("echo", {"text": "x"})
    assert not result.ok and result.error is not None
    assert result.error.code == "TOOL_RESULT_TOO_LARGE"


def test_a_silent_server_times_out_and_is_told_to_cancel(web: tuple[str, Script]) -> None:
    url, script = web
    script.mode = "silent"
    with McpServer.http(url, timeout=1.0) as server:
        result = server.call_tool("echo", {"text": "x"})
        assert not result.ok and result.error is not None and result.error.code == "TOOL_TIMEOUT"
    cancels = [b for kind, _, b in script.seen if kind == "POST" and b.get("method") == (
        "notifications/cancelled")]  # fmt: skip
    assert cancels and cancels[0]["params"]["requestId"] == 2


def test_mcp_tools_from_a_url(web: tuple[str, Script]) -> None:
    url, _ = web
    tools = mcp_tools(url)
    assert [t.name for t in tools] == ["echo"]
    assert tools[0].server is not None
    tools[0].server.close()


def test_only_http_urls() -> None:
    with pytest.raises(ConfigError):
        McpServer.http("ftp://example.invalid/mcp")


def test_the_get_stream_brings_tools_list_changed(web: tuple[str, Script]) -> None:
    url, script = web
    script.mode = "push"
    with McpServer.http(url) as server:
        server.tools()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            listed = [b for kind, _, b in script.seen if kind == "POST" and b["method"] == (
                "tools/list")]  # fmt: skip
            if server._tools is None and len(listed) == 1:
                break
            time.sleep(0.05)
        server.tools()
    gets = [h for kind, h, _ in script.seen if kind == "GET"]
    assert gets and gets[0]["Accept"] == "text/event-stream"
    assert gets[0]["Mcp-Session-Id"] == SESSION
    listed = [b for kind, _, b in script.seen if kind == "POST" and b["method"] == "tools/list"]
    assert len(listed) == 2  # listed again after the change

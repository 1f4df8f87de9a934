"""Streamable HTTP honours the SSE ``retry`` field (MCP 2025-11-25, Basic > Transports >
Streamable HTTP > Resumability: the client MUST wait the ``retry`` milliseconds the server sent
before reconnecting), for a request's broken stream (resumed with ``GET`` + ``Last-Event-ID``)
and for the listening ``GET`` stream; the wait never outlasts the call's timeout or cancel.

The server is a raw loopback script; it records when each stream ended and each ``GET``
arrived. Only lower bounds on waits are asserted (a busy machine makes waits longer, never
shorter); upper bounds only detect a hang.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from support.thread_failures import thread_failures
from support.transport_support import (
    LoopbackServer,
    Request,
    chunked_head,
    end_chunks,
    respond,
    send_chunk,
    serve,
)

from ollm_lite import McpServer

PRIMING = "id: e1\nretry: {retry}\ndata: \n\n"


@dataclass
class Web:
    """What the endpoint does and saw."""

    retry: int = 1500
    priming: str = PRIMING
    """What a ``tools/call`` stream sends before it ends (``{retry}`` filled in)."""
    listen_retry: int | None = None
    """``retry`` on the listening GET stream (``None``: that stream is refused, 405)."""
    stream_ended: list[float] = field(default_factory=list)
    resumed: list[float] = field(default_factory=list)
    listens: list[float] = field(default_factory=list)
    server: LoopbackServer | None = None


def _result(message: dict[str, Any]) -> dict[str, Any]:
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "web", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    return {}


def _script(web: Web) -> Any:
    pending: list[Any] = []

    def script(client: socket.socket, req: Request) -> None:
        if req.method == "DELETE":
            respond(client, 200, b"")
        elif req.method == "GET" and "last-event-id" in req.headers:
            web.resumed.append(time.monotonic())
            chunked_head(client)
            answer = {"jsonrpc": "2.0", "id": pending[-1], "result": {
                "content": [{"type": "text", "text": "resumed"}]}}  # fmt: skip
            send_chunk(client, f"id: e2\ndata: {json.dumps(answer)}\n\n".encode())
            end_chunks(client)
        elif req.method == "GET":
            web.listens.append(time.monotonic())
            if web.listen_retry is None:
                respond(client, 405, b"")
                return
            chunked_head(client)
            send_chunk(client, f"retry: {web.listen_retry}\ndata: \n\n".encode())
            end_chunks(client)
            web.stream_ended.append(time.monotonic())
        elif "id" not in req.json:
            respond(client, 202, b"")
        elif req.json.get("method") == "tools/call":
            # The 2025-11-25 polling pattern: prime with an id and a retry, then close.
            pending.append(req.json["id"])
            chunked_head(client)
            send_chunk(client, web.priming.format(retry=web.retry).encode())
            end_chunks(client)
            web.stream_ended.append(time.monotonic())
        else:
            body = {"jsonrpc": "2.0", "id": req.json["id"], "result": _result(req.json)}
            respond(client, 200, json.dumps(body).encode())

    return script


@pytest.fixture
def web() -> Iterator[Web]:
    state = Web()
    with serve({"/mcp": _script(state)}) as server:
        state.server = server
        yield state


def _open(web: Web, **kw: Any) -> McpServer:
    assert web.server is not None
    return McpServer.http(f"{web.server.url}/mcp", **kw)


def test_a_retry_in_a_block_of_its_own_counts_too(web: Web) -> None:
    """``retry: 1500`` alone in its block dispatches no event, but WHATWG sets the reconnection
    time as the field is read: the resume still waits 1.5 s (before: it came at once)."""
    web.priming = "retry: {retry}\n\nid: e1\ndata: \n\n"
    with _open(web) as server:
        result = server.call_tool("echo", {}, timeout=60)
    assert result.ok and result.data == "resumed"
    assert len(web.resumed) == 1 and len(web.stream_ended) == 1
    assert web.resumed[0] - web.stream_ended[0] >= 1.5


def test_a_broken_stream_is_resumed_after_the_retry_the_server_set(web: Web) -> None:
    """The stream ended after ``retry: 1500``: the ``GET`` + ``Last-Event-ID`` comes no
    sooner than 1.5 s later (before: 2-7 ms), and brings the answer."""
    with _open(web) as server:
        result = server.call_tool("echo", {}, timeout=60)
    assert result.ok and result.data == "resumed"
    assert len(web.resumed) == 1 and len(web.stream_ended) == 1
    assert web.resumed[0] - web.stream_ended[0] >= 1.45


def test_a_huge_retry_ends_at_the_call_timeout(web: Web) -> None:
    """``retry: 999999999``: the call ends at its own timeout (``TOOL_TIMEOUT``), never
    reconnecting, never hanging."""
    web.retry = 999_999_999
    with _open(web) as server:
        started = time.monotonic()
        result = server.call_tool("echo", {}, timeout=1.0)
        seconds = time.monotonic() - started
    assert not result.ok and result.error is not None
    assert result.error.code == "TOOL_TIMEOUT"
    assert web.resumed == []
    assert seconds < 30  # a hang detector


def test_a_huge_retry_ends_at_cancel(web: Web) -> None:
    """``retry: 999999999`` and a cancel: the call ends ``CANCELLED``, never reconnecting."""
    web.retry = 999_999_999
    cancel = threading.Event()
    timer = threading.Timer(0.5, cancel.set)
    with _open(web) as server:
        timer.start()
        try:
            result = server.call_tool("echo", {}, timeout=60, cancel=cancel)
        finally:
            timer.cancel()
    assert not result.ok and result.error is not None
    assert result.error.code == "CANCELLED"
    assert web.resumed == []


def test_the_listening_stream_waits_the_retry_the_server_set(web: Web) -> None:
    """The listening ``GET`` stream ended after ``retry: 2500``: it is reopened no sooner
    than 2.5 s later (before: a fixed 1 s)."""
    web.listen_retry = 2500
    with _open(web):
        deadline = time.monotonic() + 30
        while len(web.listens) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(web.listens) >= 2
    assert web.listens[1] - web.stream_ended[0] >= 2.45


@pytest.mark.parametrize("retry", [99999999999999999999, 10**400], ids=["20-digits", "401-digits"])
def test_a_retry_beyond_any_clock_ends_at_the_timeout_without_a_thread_traceback(
    web: Web, retry: int
) -> None:
    """``retry: 99999999999999999999`` (more seconds than a thread can wait, or a float can
    hold): the call still ends at its timeout, and the transport's POST thread ends quietly
    (before: it died with an uncaught ``OverflowError``)."""
    web.retry = retry
    with thread_failures() as failures:
        with _open(web) as server:
            result = server.call_tool("echo", {}, timeout=1.0)
        failures.settle(("ollm-mcp",))
    assert not result.ok and result.error is not None
    assert result.error.code == "TOOL_TIMEOUT"
    assert failures == []


def test_a_listening_stream_retry_beyond_any_clock_ends_quietly(web: Web) -> None:
    """The listening ``GET`` stream sets a retry no clock can wait: closing the server ends
    its thread without a traceback (before: ``OverflowError`` in ``ollm-mcp-listen``)."""
    web.listen_retry = 99999999999999999999
    with thread_failures() as failures:
        with _open(web):
            deadline = time.monotonic() + 30
            while not web.stream_ended and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)  # the listener reads the end of its stream and starts waiting
        failures.settle(("ollm-mcp",))
    assert web.stream_ended
    assert failures == []

"""Every thread the library starts ends without a traceback, whatever the peer does.

The library's threads: the MCP stdio reader, writer and stderr drain; the MCP streamable-HTTP
request and listening threads; the cancel watcher of the HTTP transport (``ollm-cancel-watch``);
the tool workers and their cancel relay (``ollm-tool``, ``ollm-tool-cancel``). Python hands an
exception that ends a thread to ``threading.excepthook``, which prints a traceback on the
user's stderr; :func:`support.thread_failures.thread_failures` collects them instead. Each
property drives one kind of thread with a peer that misbehaves in generated ways and asserts
that none of them ended that way.
"""

from __future__ import annotations

import json
import socket
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings, strategies as st
from support.thread_failures import thread_failures
from support.transport_support import Request, chunked_head, end_chunks, respond, send_chunk, serve

import ollm_lite
from ollm_lite import McpServer, OllmError, ScriptedProvider, ToolCall, ToolCallEvent
from ollm_lite.mcp import stdio

# --------------------------------------------------------------------------- MCP stdio

#: A server that answers ``initialize`` and then, to its next request, plays the actions in
#: ``argv[1]`` (JSON): bytes to stdout or stderr, a pause, closing either, a helper that leaves
#: the process group and writes to the inherited pipes for a while, an exit.
STDIO_PEER = textwrap.dedent(
    """
    import json, os, sys, time
    actions = json.loads(sys.argv[1])
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message:
            continue
        if message.get("method") == "initialize":
            result = {"protocolVersion": message["params"]["protocolVersion"],
                      "capabilities": {"tools": {}}, "serverInfo": {"name": "peer"}}
            os.write(1, (json.dumps({"jsonrpc": "2.0", "id": message["id"],
                                     "result": result}) + "\\n").encode())
            continue
        for kind, value in actions:
            try:
                if kind == "out":
                    os.write(1, bytes.fromhex(value))
                elif kind == "err":
                    os.write(2, bytes.fromhex(value))
                elif kind == "sleep":
                    time.sleep(value / 1000)
                elif kind == "close":
                    os.close(value)
                elif kind == "exit":
                    os._exit(value)
                elif kind == "helper" and os.fork() == 0:
                    os.setsid()
                    end = time.monotonic() + value / 1000
                    while time.monotonic() < end:
                        try:
                            os.write(2, b"helper\\n" * 32)
                        except OSError:
                            break
                        time.sleep(0.001)
                    os._exit(0)
            except OSError:
                pass
    """
)

_bytes = st.binary(max_size=300).map(bytes.hex)
_stdio_action = st.one_of(
    st.tuples(st.just("out"), _bytes | st.just(b'{"jsonrpc": "2.0", "id": 2, "result"\n'.hex())),
    st.tuples(st.just("err"), _bytes),
    st.tuples(st.just("sleep"), st.integers(0, 200)),
    st.tuples(st.just("close"), st.sampled_from([1, 2])),
    st.tuples(st.just("exit"), st.integers(0, 3)),
    st.tuples(st.just("helper"), st.integers(50, 2000)),
)


@settings(max_examples=12)
@given(actions=st.lists(_stdio_action, max_size=6))
@example(actions=[("helper", 2000)])  # closed while a helper still writes to its stderr
def test_mcp_stdio_threads_end_quietly_whatever_the_server_does(
    tmp_path_factory: pytest.TempPathFactory, actions: list[tuple[str, Any]]
) -> None:
    script = tmp_path_factory.mktemp("peer") / "peer.py"
    script.write_text(STDIO_PEER)
    with pytest.MonkeyPatch.context() as patch, thread_failures() as failures:
        patch.setattr(stdio, "TERM_GRACE_S", 0.3)  # short joins: a helper may hold a pipe
        try:
            server = McpServer.stdio(
                [sys.executable, str(script), json.dumps(actions)], timeout=1.0, start_timeout=15
            )
        except OllmError:
            server = None
        if server is not None:
            try:
                server.call_tool("anything", {}, timeout=1.0)
                with pytest.raises(OllmError):
                    server.tools()  # the server answers nothing right any more
            except OllmError:
                pass
            finally:
                server.close()
        failures.settle(("ollm-mcp",), timeout=5)
    assert failures == []


# --------------------------------------------------------------------------- MCP HTTP

_sse_field = st.one_of(
    st.one_of(st.integers(0, 2000), st.integers(10**12, 10**30)).map(lambda n: f"retry: {n}\n"),
    st.text(max_size=12).map(lambda t: f"id: {t}\n"),
    st.sampled_from(["data: \n", "data: {\n", "event: message\n", "\n", ": ping\n", "data: []\n"]),
    st.just('data: {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}\n'),
)
_answer = st.tuples(
    st.sampled_from([200, 200, 202, 400, 404, 500]),
    st.booleans(),  # an event stream, else a plain body
    st.lists(_sse_field, max_size=8).map("".join),
)


def _initialize(req: Request) -> bytes:
    params = req.json.get("params") or {}
    result = {
        "protocolVersion": params.get("protocolVersion"),
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "peer", "version": "1"},
    }
    return json.dumps({"jsonrpc": "2.0", "id": req.json["id"], "result": result}).encode()


_HUGE = "retry: 99999999999999999999\n"


@settings(max_examples=15)
@given(post=_answer, listen=_answer)
@example(post=(200, True, f"id: e1\n{_HUGE}data: \n\n"), listen=(405, False, ""))
@example(post=(200, False, ""), listen=(200, True, f"{_HUGE}data: \n\n"))
def test_mcp_http_threads_end_quietly_whatever_the_server_sends(
    post: tuple[int, bool, str], listen: tuple[int, bool, str]
) -> None:
    def answer(client: socket.socket, shape: tuple[int, bool, str]) -> None:
        status, streamed, text = shape
        if streamed and status == 200:
            chunked_head(client)
            send_chunk(client, text.encode() or b"\n")
            end_chunks(client)
        else:
            respond(client, status, text.encode())

    def script(client: socket.socket, req: Request) -> None:
        if req.method == "DELETE":
            respond(client, 200, b"")
        elif req.method == "GET":
            answer(client, listen)
        elif isinstance(req.json, dict) and req.json.get("method") == "initialize":
            respond(client, 200, _initialize(req))
        elif isinstance(req.json, dict) and "id" not in req.json:
            respond(client, 202, b"")
        else:
            answer(client, post)

    with thread_failures() as failures, serve({"/mcp": script}) as server:
        try:
            with McpServer.http(f"{server.url}/mcp", timeout=1.0, start_timeout=10) as mcp:
                mcp.call_tool("anything", {}, timeout=1.0)
        except OllmError:
            pass
        failures.settle(("ollm-mcp",), timeout=10)
    assert failures == []


# --------------------------------------------------------------------------- cancel watcher


@settings(max_examples=10)
@given(
    sent=st.lists(st.binary(max_size=64), max_size=4),
    how=st.sampled_from(["timeout", "cancel"]),
)
def test_the_cancel_watcher_ends_quietly_whatever_the_server_sends(
    sent: list[bytes], how: str
) -> None:
    """A server that sends any bytes and then goes silent: the call ends at its timeout or
    cancel, and the watcher that interrupted it ends without a traceback."""

    def script(client: socket.socket, req: Request) -> None:
        chunked_head(client, "application/x-ndjson")
        for data in sent:
            if data:
                send_chunk(client, data)
        req.stop.wait(30)  # silent until the server shuts down

    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    with thread_failures() as failures, serve({("POST", "/api/chat"): script}) as server:
        llm = ollm_lite.connect("ollama", host=server.url, model="m")
        timer.start()
        try:
            if how == "timeout":
                llm.ask("hi", timeout=0.5)
            else:
                llm.ask("hi", cancel=cancel)
        except OllmError:
            pass
        finally:
            timer.cancel()
            llm.close()
        failures.settle(("ollm-cancel",), timeout=10)
    assert failures == []


# --------------------------------------------------------------------------- tool threads

_raised = st.sampled_from(
    [ValueError, KeyboardInterrupt, SystemExit, GeneratorExit, RecursionError, MemoryError, None]
)


@settings(max_examples=15)
@given(raised=st.lists(_raised, min_size=1, max_size=4), cancel_after=st.sampled_from([None, 0.05]))
def test_tool_threads_end_quietly_whatever_the_tools_raise(
    raised: list[type[BaseException] | None], cancel_after: float | None
) -> None:
    """Tools that raise anything (``KeyboardInterrupt`` and ``SystemExit`` included), with or
    without a cancel while they run: each call gets a result, no tool thread a traceback."""

    def make(index: int, error: type[BaseException] | None) -> Any:
        def tool_fn() -> str:
            """A tool that fails as generated."""
            if error is not None:
                raise error(f"tool {index}")
            return "ok"

        tool_fn.__name__ = f"tool_{index}"
        return tool_fn

    tools = [make(i, error) for i, error in enumerate(raised)]
    calls = [ToolCall(f"c{i}", f"tool_{i}", {}, "{}") for i in range(len(tools))]
    provider = ScriptedProvider([[ToolCallEvent(call) for call in calls], "done"])
    cancel = threading.Event()
    timer = threading.Timer(cancel_after or 0, cancel.set)
    with thread_failures() as failures:
        if cancel_after is not None:
            timer.start()
        try:
            ollm_lite.connect(provider, model="m").run("go", tools=tools, cancel=cancel)
        except OllmError:
            pass
        finally:
            timer.cancel()
        failures.settle(("ollm-tool",), timeout=10)
    assert failures == []


def test_the_thread_failure_capture_sees_a_dying_thread(tmp_path: Path) -> None:
    """The capture the properties rely on does catch a thread that dies."""

    def die() -> None:
        raise ValueError("boom")

    with thread_failures() as failures:
        thread = threading.Thread(target=die, name="ollm-test-dies")
        thread.start()
        thread.join()
    assert len(failures) == 1 and "ValueError: boom" in failures[0]

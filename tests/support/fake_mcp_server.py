"""A scriptable MCP stdio server for fault tests: ``python fake_mcp_server.py MODE [ARG]``.

It speaks newline-delimited JSON-RPC like a real server (MCP specification, Basic >
Transports > stdio) and misbehaves on demand. Modes:

* ``ok``: a well-behaved server (tools ``echo``, ``add``, ``slow``, ``fail``, ``image``,
  ``structured``, ``big``, ``progress``, ``ask_client``), tools/list in pages of two;
* ``exit``: writes a line to stderr and exits 3 before reading anything;
* ``garbage``: answers everything with lines that are not JSON;
* ``silent``: reads and never answers;
* ``out_of_order``: holds each ``tools/call`` answer until the next call arrives, then
  answers the newer one first;
* ``flood``: after the handshake, every ``tools/call`` is preceded by ARG log notifications
  and progress notifications for unknown tokens;
* ``version``: answers ``initialize`` with protocol version ARG;
* ``stateless``: answers ``initialize`` with UnsupportedProtocolVersionError (-32022);
* ``ignore_term``: ignores SIGTERM (closing must fall back to SIGKILL) and never exits on EOF;
* ``die_on_call``: exits in the middle of a ``tools/call``.

Tool ``big`` answers with ARG bytes of text (``{"size": N}``); ``slow`` sleeps
``seconds`` and records ``notifications/cancelled`` it receives into the file named by
``$FAKE_MCP_LOG`` (one JSON line per message received), so tests can see what arrived.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
ARG = sys.argv[2] if len(sys.argv) > 2 else ""
LOG = os.environ.get("FAKE_MCP_LOG")
_write_lock = threading.Lock()
_held: list[dict[str, Any]] = []
_cancelled: set[Any] = set()

TOOLS = [
    {"name": "echo", "description": "Echo the text.", "inputSchema": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "add", "description": "Add two numbers.", "inputSchema": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"]}},
    {"name": "slow", "description": "Sleep.", "inputSchema": {
        "type": "object", "properties": {"seconds": {"type": "number"}}}},
    {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object"}},
    {"name": "image", "description": "A tiny image.", "inputSchema": {"type": "object"}},
    {"name": "structured", "description": "Structured.", "inputSchema": {"type": "object"}},
    {"name": "big", "description": "A big text.", "inputSchema": {
        "type": "object", "properties": {"size": {"type": "integer"}}}},
    {"name": "progress", "description": "Reports progress.", "inputSchema": {"type": "object"}},
    {"name": "ask_client", "description": "Sends the client requests.", "inputSchema": {
        "type": "object"}},
    {"name": "dotted.name/x", "description": "A name models cannot use.", "inputSchema": {
        "type": "object"}},
]  # fmt: skip


def send(obj: dict[str, Any]) -> None:
    data = json.dumps(obj, separators=(",", ":")) + "\n"
    with _write_lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def log(obj: Any) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps(obj) + "\n")


def result(rid: Any, value: Any) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": value})


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], **extra}


def call_tool(rid: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "echo":
        result(rid, text(str(args.get("text"))))
    elif name == "add":
        result(rid, text(str(args["a"] + args["b"])))
    elif name == "slow":
        deadline = time.monotonic() + float(args.get("seconds", 30))
        while time.monotonic() < deadline and rid not in _cancelled:
            time.sleep(0.01)
        if rid not in _cancelled:
            result(rid, text("slept"))
    elif name == "fail":
        result(rid, text("it broke", isError=True))
    elif name == "image":
        image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        result(rid, {"content": [image]})
    elif name == "structured":
        result(rid, text('{"t": 1}', structuredContent={"t": 1}))
    elif name == "big":
        result(rid, text("x" * int(args.get("size", 20_000_000))))
    elif name == "progress":
        for step in range(1, 4):
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {
                        "progressToken": token,
                        "progress": step,
                        "total": 3,
                        "message": f"step {step}",
                    },
                }
            )
        result(rid, text("done"))
    elif name == "ask_client":
        send({"jsonrpc": "2.0", "id": "srv-1", "method": "sampling/createMessage", "params": {}})
        send({"jsonrpc": "2.0", "id": "srv-2", "method": "ping"})
        send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "warning", "logger": "fake", "data": "careful"},
            }
        )
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        result(rid, text("asked"))
    elif name == "dotted.name/x":
        result(rid, text("dotted"))
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"no {name}"}})


def handle(msg: dict[str, Any]) -> None:
    log(msg)
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method is None:
        return  # a response to one of our requests
    if method == "notifications/cancelled":
        _cancelled.add(params.get("requestId"))
        return
    if rid is None:
        return
    if MODE == "garbage":
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
        return
    if MODE == "silent":
        return
    if method == "initialize":
        if MODE == "stateless":
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32022, "message": "modern",
                  "data": {"supported": ["2026-07-28"]}}})  # fmt: skip
            return
        version = ARG if MODE == "version" else params.get("protocolVersion")
        result(rid, {"protocolVersion": version, "capabilities": {"tools": {"listChanged": True},
               "logging": {}}, "serverInfo": {"name": "fake", "version": "1.0"}})  # fmt: skip
    elif method == "tools/list":
        start = int(params.get("cursor") or 0)
        page: dict[str, Any] = {"tools": TOOLS[start : start + 2]}
        if start + 2 < len(TOOLS):
            page["nextCursor"] = str(start + 2)
        result(rid, page)
    elif method == "tools/call":
        if MODE == "die_on_call":
            os._exit(7)
        if MODE == "flood":
            for i in range(int(ARG or 10000)):
                send({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "debug", "data": f"flood {i}"}})  # fmt: skip
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": "nobody", "progress": i}})  # fmt: skip
        if MODE == "out_of_order":
            _held.append(msg)
            if len(_held) == 2:
                newer, older = _held.pop(), _held.pop()
                call_tool(newer["id"], newer["params"])
                call_tool(older["id"], older["params"])
            return
        threading.Thread(target=call_tool, args=(rid, params), daemon=True).start()
    elif method == "ping":
        result(rid, {})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "not found"}})


def main() -> None:
    if MODE == "exit":
        sys.stderr.write("fake: cannot start: missing configuration\n")
        sys.exit(3)
    if MODE == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin:
        if line.strip():
            handle(json.loads(line))
    if MODE == "ignore_term":
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()

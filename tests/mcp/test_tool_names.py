"""MCP tools whose names clean up alike stay usable (docs/mcp.md, name clashes): several instances
of one server reporting the same name, or one server offering ``files/read``, ``files.read``
and ``files_read``. Every tool gets a distinct name within ``[A-Za-z0-9_-]{1,64}``, and a call
under that name reaches its own server under the tool's own name.

The servers are real streamable HTTP endpoints on loopback that answer a call with
``<server>:<the name it was called by>``.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
from collections.abc import Iterator, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from support.transport_support import Request, respond, serve

from ollm_lite import McpServer
from ollm_lite.chat import ChatClient
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.tools import ToolRegistry
from ollm_lite.types import FinishEvent, ToolCall, ToolCallEvent, ToolCallResultEvent

NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _endpoint(label: str, reported: str, tools: Sequence[str]) -> Any:
    """A streamable HTTP MCP endpoint reporting ``reported`` and offering ``tools``."""

    def script(client: socket.socket, req: Request) -> None:
        if req.method != "POST":
            respond(client, 405, b"")
            return
        message = req.json
        if "id" not in message:
            respond(client, 202, b"")
            return
        method, params = message.get("method"), message.get("params") or {}
        result: dict[str, Any] = {}
        if method == "initialize":
            result = {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": reported, "version": "1"},
            }
        elif method == "tools/list":
            schema = {"type": "object"}
            result = {"tools": [{"name": n, "inputSchema": schema} for n in tools]}
        elif method == "tools/call":
            text = f"{label}:{params['name']}"
            result = {"content": [{"type": "text", "text": text}]}
        body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        respond(client, 200, json.dumps(body).encode())

    return script


@contextlib.contextmanager
def _servers(reported: str, tools: Sequence[str], count: int) -> Iterator[list[McpServer]]:
    """``count`` servers reporting the same name and offering the same ``tools``."""
    with contextlib.ExitStack() as stack:
        opened = []
        for i in range(count):
            web = stack.enter_context(serve({"/mcp": _endpoint(f"s{i}", reported, tools)}))
            opened.append(stack.enter_context(McpServer.http(f"{web.url}/mcp")))
        yield opened


def _reached(registry: ToolRegistry) -> list[str]:
    """What each registered tool's call reached: ``<server>:<name it was called by>``."""
    out = []
    for name in registry.names():
        result = registry.execute(ToolCall.from_arguments("c", name, {}))
        assert result.ok, (name, result)
        out.append(result.data)
    return out


def test_three_instances_of_one_server_keep_every_tool() -> None:
    """Three servers all reporting ``fake``: their ``echo`` tools get three distinct names
    and each call reaches its own server (before: ``ConfigError`` on the second one)."""
    with _servers("fake", ["echo"], 3) as servers:
        registry = ToolRegistry([t for s in servers for t in s.tools()])
        names = registry.names()
        assert len(set(names)) == 3 and all(NAME_OK.match(n) for n in names)
        assert sorted(_reached(registry)) == ["s0:echo", "s1:echo", "s2:echo"]


def test_one_server_with_names_that_clean_up_alike() -> None:
    """``files/read``, ``files.read`` and ``files_read`` on one server: three usable tools,
    each called by its own name, also through the chat runtime."""
    offered = ["files/read", "files.read", "files_read"]
    with _servers("fs", offered, 1) as (server,):
        registry = ToolRegistry(server.tools())
        names = registry.names()
        assert len(set(names)) == 3 and all(NAME_OK.match(n) for n in names)
        assert sorted(_reached(registry)) == sorted(f"s0:{n}" for n in offered)
        calls = [ToolCallEvent(ToolCall(f"c{i}", n, {}, "{}")) for i, n in enumerate(names)]
        provider = ScriptedProvider([[*calls, FinishEvent("tool")], "done"])
        client = ChatClient(provider, tools=server.tools(), model="m")
        events = list(client.chat("go"))
        results = [e.result for e in events if isinstance(e, ToolCallResultEvent)]
        assert sorted(r.data for r in results) == sorted(f"s0:{n}" for n in offered)


_TOOL_NAME = st.text(alphabet="ab/._-", min_size=1, max_size=6) | st.just("t" * 70)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reported=st.sampled_from(["fs", "my server.v2", "s" * 70]),
    tools=st.lists(_TOOL_NAME, min_size=1, max_size=5, unique=True),
    count=st.integers(1, 3),
)
def test_any_clash_of_server_tools_gives_distinct_usable_names(
    reported: str, tools: list[str], count: int
) -> None:
    """Any tool names on any number of same-named servers: one distinct valid name per
    (server, tool), and calling every name reaches every (server, tool) exactly once."""
    with _servers(reported, tools, count) as servers:
        registry = ToolRegistry([t for s in servers for t in s.tools()])
        names = registry.names()
        assert len(names) == len(set(names)) == count * len(tools)
        assert all(NAME_OK.match(n) for n in names), names
        expected = sorted(f"s{i}:{t}" for i in range(count) for t in tools)
        assert sorted(_reached(registry)) == expected

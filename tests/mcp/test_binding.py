"""MCP tools wherever tools are accepted: ToolRegistry, ChatClient, ``mcp_tools``.

Covers the renaming rule (clashing MCP tools become ``<server>_<tool>``, local tools and
unique names never change), parallel calls in one turn, the chat's cancel event and
``tool_timeout`` reaching the server as ``notifications/cancelled``, and servers opened by
``mcp_tools`` being closed at interpreter exit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.mcp_support import fake_command, wait_gone

from ollm_lite import McpServer, mcp_tools
from ollm_lite.chat import ChatClient
from ollm_lite.config import Config, McpServerConfig
from ollm_lite.errors import ConfigError
from ollm_lite.mcp import McpToolSchema
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.tools import Tool, ToolDefinitionError, ToolRegistry, tool
from ollm_lite.types import (
    ChatFinishEvent,
    FinishEvent,
    ToolCall,
    ToolCallEvent,
    ToolCallResultEvent,
    ToolSchema,
)


@pytest.fixture(scope="module")
def fake() -> Iterator[McpServer]:
    with McpServer.stdio(fake_command()) as server:
        yield server


@tool
def add(a: int, b: int) -> int:
    """Add locally."""
    return a + b


def _call(name: str, args: dict[str, Any], cid: str = "c1") -> ToolCallEvent:
    return ToolCallEvent(ToolCall.from_arguments(cid, name, args))


def test_server_tools_are_tool_schemas(fake: McpServer) -> None:
    tools = fake.tools()
    assert all(isinstance(t, ToolSchema) and isinstance(t, McpToolSchema) for t in tools)
    made = tool(tools[0])
    assert isinstance(made, Tool) and made.name == "echo" and made.runner is not None
    assert made.fn(text="direct").data == "direct"


def test_a_clash_with_a_local_tool_renames_only_the_server_tool(fake: McpServer) -> None:
    registry = ToolRegistry([add, *fake.tools()])
    names = registry.names()
    assert "add" in names and "fake_add" in names and "echo" in names
    assert registry.get("add") is add
    result = registry.execute(ToolCall.from_arguments("1", "fake_add", {"a": 1, "b": 2}))
    assert result.data == "3"
    assert registry.execute(ToolCall.from_arguments("2", "add", {"a": 1, "b": 2})).data == 3


def test_register_after_the_fact_renames_the_server_tool_either_way(fake: McpServer) -> None:
    mcp_add = next(t for t in fake.tools() if t.name == "add")
    registry = ToolRegistry([mcp_add])
    registry.register(add)
    assert registry.names() == ["fake_add", "add"]
    registry = ToolRegistry([add])
    registry.register(mcp_add)
    assert registry.names() == ["add", "fake_add"]
    registry.register(mcp_add)  # the same tool again is fine
    assert registry.names() == ["add", "fake_add"]


def test_two_servers_with_the_same_tools_get_their_prefixes() -> None:
    with (
        McpServer.stdio(fake_command(), name="alpha") as a,
        McpServer.stdio(fake_command(), name="beta one.x") as b,
    ):
        registry = ToolRegistry([*a.tools(), *b.tools()])
        names = registry.names()
        assert "alpha_echo" in names and "beta_one_x_echo" in names
        assert "echo" not in names
        assert all(len(n) <= 64 for n in names)
        got = registry.execute(ToolCall.from_arguments("1", "beta_one_x_echo", {"text": "b"}))
        assert got.data == "b"


def test_long_names_are_cut_to_64() -> None:
    with McpServer.stdio(fake_command(), name="s" * 60) as a, McpServer.stdio(fake_command()) as b:
        names = ToolRegistry([*a.tools(), *b.tools()]).names()
        assert "s" * 60 + "_ech" in names and "s" * 60 + "_add" in names
        assert all(len(n) <= 64 for n in names)
        with McpServer.stdio(fake_command(), name="t" * 70) as c:
            # every tool of c is cut to the same 64 characters: a counter tells them apart
            names = ToolRegistry([*b.tools(), *c.tools()]).names()
            assert len(set(names)) == len(names) == 2 * len(b.tools())
            assert all(len(n) <= 64 for n in names)


def test_two_local_tools_still_clash() -> None:
    @tool(name="add")
    def other(a: int) -> int:
        return a

    with pytest.raises(ToolDefinitionError):
        ToolRegistry([add, other])


def test_arguments_are_checked_against_the_input_schema(fake: McpServer) -> None:
    registry = ToolRegistry(fake.tools())
    bad = registry.execute(ToolCall.from_arguments("1", "add", {"a": "one"}))
    assert not bad.ok and bad.error is not None
    assert bad.error.code == "TOOL_INVALID_ARGUMENTS"


def test_a_turn_of_mcp_calls_runs_in_parallel_and_answers_in_order(fake: McpServer) -> None:
    provider = ScriptedProvider(
        [
            [
                _call("slow", {"seconds": 1}, "a"),
                _call("echo", {"text": "quick"}, "b"),
                _call("add", {"a": 2, "b": 2}, "c"),
                FinishEvent("tool"),
            ],
            "done",
        ]
    )
    client = ChatClient(provider, tools=[add, *fake.tools()], model="m")
    events = list(client.chat("go"))
    results = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert [e.tool_call.id for e in results] == ["a", "b", "c"]
    assert [e.result.data for e in results] == ["slept", "quick", 4]  # "add" is the local one
    sent = provider.requests[1].messages
    tool_messages = [m for m in sent if m.role == "tool"]
    assert [json.loads(m.text)["data"] for m in tool_messages] == ["slept", "quick", 4]
    schemas = {s.name for s in provider.requests[0].tools or []}
    assert {"add", "fake_add", "echo", "slow"} <= schemas


def test_the_chat_cancel_event_cancels_the_server_call(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with McpServer.stdio(fake_command(), env={"FAKE_MCP_LOG": str(log)}) as server:
        provider = ScriptedProvider([[_call("slow", {"seconds": 120}), FinishEvent("tool")]])
        client = ChatClient(provider, tools=server.tools(), model="m")
        cancel = threading.Event()
        threading.Timer(1.0, cancel.set).start()
        events = list(client.chat("go", cancel=cancel))
        assert isinstance(events[-1], ChatFinishEvent) and events[-1].reason == "cancelled"
        assert _wait_for(log, "notifications/cancelled")


def test_the_chat_tool_timeout_cancels_the_server_call(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with McpServer.stdio(fake_command(), env={"FAKE_MCP_LOG": str(log)}, timeout=600) as server:
        provider = ScriptedProvider([[_call("slow", {"seconds": 120}), FinishEvent("tool")], "ok"])
        client = ChatClient(provider, tools=server.tools(), model="m", tool_timeout=1.0)
        events = list(client.chat("go"))
        (result,) = [e.result for e in events if isinstance(e, ToolCallResultEvent)]
        assert not result.ok and result.error is not None
        assert result.error.code == "TOOL_TIMEOUT"
        assert _wait_for(log, "notifications/cancelled")


def _wait_for(log: Path, method: str, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and any(
            json.loads(line).get("method") == method for line in log.read_text().splitlines()
        ):
            return True
        time.sleep(0.05)
    return False


def test_mcp_tools_from_a_command_list_closes_the_server_at_exit(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        from ollm_lite import mcp_tools
        tools = mcp_tools({fake_command()!r})
        print(tools[0].server.pid, len(tools), flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    pid, count = map(int, done.stdout.split())
    assert count == 10
    assert wait_gone(pid)


def test_mcp_tools_by_configured_name() -> None:
    config = Config(mcp_servers={"f": McpServerConfig(command=fake_command(), timeout=5)})
    tools = mcp_tools("f", config=config)
    server = tools[0].server
    assert server is not None
    try:
        assert server.name == "f" and server.timeout == 5.0
    finally:
        server.close()
    with pytest.raises(ConfigError, match="no MCP server named 'g'"):
        mcp_tools("g", config=config)
    broken = Config(mcp_servers={"b": McpServerConfig(command="not-a-list")})
    with pytest.raises(ConfigError, match=r"mcp\.servers\.b\.command"):
        mcp_tools("b", config=broken)


def test_mcp_tools_of_an_open_server_is_its_tools(fake: McpServer) -> None:
    assert mcp_tools(fake) == fake.tools()
    with pytest.raises(ConfigError):
        mcp_tools(42)  # type: ignore[arg-type]

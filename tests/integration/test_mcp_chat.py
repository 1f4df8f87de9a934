"""End to end: a chat on the real llama.cpp server calls a tool of a real MCP server.

llama-cpp-python's server (``chatml-function-calling``) constrains a forced first-turn call
with a grammar, so the tiny model reliably calls the tool; ``ChatClient`` then runs it on the
reference ``@modelcontextprotocol/server-everything`` (installed pinned by
``scripts/mcp_servers.py``) and sends the result back for the second turn.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import llamacpp  # scripts/, put on sys.path by conftest.py
import mcp_servers  # scripts/ as well
import pytest

from ollm_lite import McpServer
from ollm_lite.chat import ChatClient
from ollm_lite.types import ChatFinishEvent, ProviderRequest, ToolCallResultEvent

pytestmark = pytest.mark.integration


class FirstTurnForced:
    """The real provider, with ``tool_choice`` forced on the first request only."""

    def __init__(self, inner: Any, tool: str) -> None:
        self.inner = inner
        self.tool = tool
        self.requests: list[ProviderRequest] = []

    def chat_stream(self, request: ProviderRequest) -> Iterator[Any]:
        if not self.requests:
            request = dataclasses.replace(request, tool_choice={"name": self.tool})
        self.requests.append(request)
        return self.inner.chat_stream(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_chat_calls_a_real_mcp_tool(llamacpp_py_server: Any, make_provider: Any) -> None:
    mcp_servers.install(["everything"])
    with McpServer.stdio(mcp_servers.command("everything")) as server:
        tools = [t for t in server.tools() if t.name == "echo"]
        provider = FirstTurnForced(make_provider(llamacpp_py_server), "echo")
        client = ChatClient(provider, tools=tools, model=llamacpp.MODEL_ALIAS, max_turns=2)
        events = list(client.chat("Echo the word 'hello' with the echo tool."))
    results = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert results, events
    assert results[0].tool_call.name == "echo"
    assert results[0].result.ok, results[0].result
    assert str(results[0].result.data).startswith("Echo: ")
    second = provider.requests[1]
    tool_message = next(m for m in second.messages if m.role == "tool")
    assert json.loads(tool_message.text)["data"].startswith("Echo: ")
    finish = events[-1]
    assert isinstance(finish, ChatFinishEvent) and finish.reason in ("complete", "max_turns")

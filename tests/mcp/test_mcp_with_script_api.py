"""MCP tools through the script API: ``llm.run(prompt, tools=server.tools())``.

The script API (``ollm_lite.client``) runs handled tools through ``ToolRegistry``, which
knows schemas bound to an MCP server; this checks the whole path over ``ScriptedProvider``.
"""

from __future__ import annotations

import importlib.util

import pytest
from support.mcp_support import fake_command

import ollm_lite
from ollm_lite import McpServer
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.types import FinishEvent, ToolCall, ToolCallEvent

if importlib.util.find_spec("ollm_lite.client") is None:  # pragma: no cover - older trees
    pytest.skip(
        "!!! the script API (ollm_lite.client) is not in this tree: nothing to check !!!",
        allow_module_level=True,
    )


def test_run_calls_mcp_tools() -> None:
    with McpServer.stdio(fake_command()) as server:
        provider = ScriptedProvider(
            [
                [
                    ToolCallEvent(ToolCall.from_arguments("c1", "echo", {"text": "via run"})),
                    FinishEvent("tool"),
                ],
                "done",
            ]
        )
        llm = ollm_lite.connect(provider=provider, model="m")
        try:
            reply = llm.run("go", tools=server.tools())
        finally:
            llm.close()
    assert reply.finish == "complete"
    assert [r.data for r in reply.tool_results] == ["via run"]

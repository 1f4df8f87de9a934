"""Tools from Model Context Protocol (MCP) servers, over a small synchronous client.

MCP (https://modelcontextprotocol.io/specification) servers offer tools over JSON-RPC 2.0,
as a subprocess speaking newline-delimited JSON on stdin/stdout or as a streamable HTTP
endpoint. This package connects to one, lists its tools and runs them for the chat loop::

    from ollm_lite import McpServer, mcp_tools
    with McpServer.stdio(["mcp-server-time"]) as server:
        reply = llm.run("What time is it in Tokyo?", tools=server.tools())

Layers, each a module: :mod:`~ollm_lite.mcp.jsonrpc` (framing and message types, sans-IO),
:mod:`~ollm_lite.mcp.stdio` and :mod:`~ollm_lite.mcp.http` (transports),
:mod:`~ollm_lite.mcp.session` (handshake, request/answer matching, notifications),
:mod:`~ollm_lite.mcp.content` (a tool result as the model sees it),
:mod:`~ollm_lite.mcp.server` (:class:`McpServer`, the bound tool schemas, :func:`mcp_tools`)
and :mod:`~ollm_lite.mcp.auth` (:class:`McpAuth`: signing in to servers that require OAuth).
Implemented protocol revisions: 2025-11-25, 2025-06-18 and 2025-03-26 (the ``initialize``
handshake); see ``docs/mcp.md`` for what is and is not covered.
"""

from __future__ import annotations

from .auth import McpAuth
from .jsonrpc import MAX_MESSAGE_BYTES, McpError
from .server import McpServer, McpToolSchema, mcp_tools
from .session import LATEST_PROTOCOL_VERSION, PROTOCOL_VERSIONS

__all__ = [
    "LATEST_PROTOCOL_VERSION",
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSIONS",
    "McpAuth",
    "McpError",
    "McpServer",
    "McpToolSchema",
    "mcp_tools",
]

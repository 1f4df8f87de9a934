"""The MCP parts of the command line: ``ollm-lite mcp list NAME`` and ``chat --tools NAME,...``.

Both name servers configured as ``[mcp.servers.NAME]`` tables. An unknown name is a usage
error (exit 2, raised here as :class:`UnknownMcpServer`); a server that cannot start is a
runtime error (exit 1). Every server opened for a command is closed before the command
returns. Importing this module loads no HTTP library (``--help`` stays fast): the client
itself is imported when a command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ConfigError
from ._terminal_text import printable

if TYPE_CHECKING:
    from ..config import Config
    from ..mcp import McpServer, McpToolSchema

__all__ = ["UnknownMcpServer", "add_mcp_parser", "list_tools", "open_tools", "parse_names"]


class UnknownMcpServer(ConfigError):
    """A name on the command line has no ``[mcp.servers.NAME]`` table (a usage error)."""


def add_mcp_parser(
    commands: Any,
    flags: argparse.ArgumentParser,
    missing: Callable[..., Any],
    list_handler: Callable[..., int],
) -> argparse.ArgumentParser:
    """Add ``mcp list NAME`` to the CLI's sub-commands; returns the ``mcp`` parser."""
    mcp: argparse.ArgumentParser = commands.add_parser(
        "mcp", parents=[flags], help="MCP servers configured as [mcp.servers.NAME]"
    )
    actions = mcp.add_subparsers(dest="mcp_command", metavar="ACTION")
    mcp.set_defaults(handler=missing(mcp))
    listing = actions.add_parser(
        "list", parents=[flags], help="the tools of a configured MCP server, one per line"
    )
    listing.add_argument("name", metavar="NAME", help="the server's [mcp.servers.NAME] name")
    listing.set_defaults(handler=list_handler)
    return mcp


def parse_names(text: str) -> list[str]:
    """``NAME[,NAME...]`` as a list (blanks and repeats dropped)."""
    names: list[str] = []
    for part in text.split(","):
        name = part.strip()
        if name and name not in names:
            names.append(name)
    return names


def _check_known(names: list[str], config: Config) -> None:
    unknown = [n for n in names if n not in config.mcp_servers]
    if unknown:
        known = ", ".join(sorted(config.mcp_servers)) or "none configured"
        raise UnknownMcpServer(
            f"no MCP server named {', '.join(map(repr, unknown))} in the configuration "
            f"(add [mcp.servers.{unknown[0]}] to it); known: {known}",
            details={"unknown": unknown, "known": sorted(config.mcp_servers)},
        )


@contextlib.contextmanager
def open_tools(names: list[str], config: Config) -> Iterator[list[McpToolSchema]]:
    """Open the named servers and yield all their tools; every server closes on exit.

    Raises:
        UnknownMcpServer: a name is not configured (checked before anything starts).
        OllmError: a server could not be started or listed.
    """
    _check_known(names, config)
    from ..mcp.server import from_config

    servers: list[McpServer] = []
    try:
        tools: list[McpToolSchema] = []
        for name in names:
            server = from_config(name, config)
            servers.append(server)
            tools.extend(server.tools())
        yield tools
    finally:
        for server in servers:
            server.close()


def list_tools(name: str, config: Config, out: TextIO) -> int:
    """Print ``name  description`` for each tool of the server ``name``; returns 0.

    Descriptions come from the server: printed on one line, without control characters.

    Raises:
        UnknownMcpServer: ``name`` is not configured.
        OllmError: the server could not be started or listed.
    """
    with open_tools([name], config) as tools:
        width = max((len(t.name) for t in tools), default=0)
        for item in tools:
            description = re.sub(r"\s+", " ", printable(item.description or "")).strip()
            out.write(f"{item.name.ljust(width)}  {description}".rstrip() + "\n")
    return 0

"""The MCP parts of the command line: ``ollm-lite mcp list NAME``, ``mcp login NAME``,
``mcp logout NAME`` and ``chat --tools NAME,...``.

``mcp login NAME`` signs in to a server configured with ``auth`` (a person in the browser for
``auth = "login"``, the client credentials for ``auth = "client_credentials"``) and stores the
tokens, so that later uses by name (``mcp_tools("NAME")``, ``chat --tools NAME``, a cron job)
need no person; ``mcp logout NAME`` forgets them. Each names a server configured as
a ``[mcp.servers.NAME]`` table. An unknown name is a usage error (exit 2, raised here as
:class:`UnknownMcpServer`); a server that cannot start is a runtime error (exit 1). Every
server opened for a command is closed before the command returns. Importing this module
loads no HTTP library (``--help`` stays fast): the client itself is imported when a command
runs.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ConfigError, OllmError
from ._terminal_text import printable

if TYPE_CHECKING:
    from ..config import Config
    from ..mcp import McpServer, McpToolSchema

__all__ = [
    "UnknownMcpServer",
    "add_mcp_parser",
    "list_tools",
    "login",
    "logout",
    "open_tools",
    "parse_names",
]

#: How long the machine's part of ``mcp login`` (discovery, registration, the token
#: requests) may take, in seconds, beyond the person's own bound
#: (:data:`ollm_lite.mcp.auth.flow.SIGN_IN_TIMEOUT_S`, 10 minutes).
LOGIN_TIMEOUT_S = 120.0


class UnknownMcpServer(ConfigError):
    """A name on the command line has no ``[mcp.servers.NAME]`` table (a usage error)."""


def add_mcp_parser(
    commands: Any,
    flags: argparse.ArgumentParser,
    missing: Callable[..., Any],
    list_handler: Callable[..., int],
    login_handler: Callable[..., int] | None = None,
    logout_handler: Callable[..., int] | None = None,
) -> argparse.ArgumentParser:
    """Add ``mcp list|login|logout NAME`` to the CLI's sub-commands; returns the ``mcp``
    parser."""
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
    for action, handler, text in (
        ("login", login_handler, "sign in to a configured MCP server and store its tokens"),
        ("logout", logout_handler, "forget the stored tokens of a configured MCP server"),
    ):
        if handler is None:
            continue
        parser = actions.add_parser(action, parents=[flags], help=text)
        parser.add_argument("name", metavar="NAME", help="the server's [mcp.servers.NAME] name")
        parser.set_defaults(handler=handler)
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


def login(name: str, config: Config, err: TextIO) -> int:
    """Sign in to the configured server ``name`` and store the tokens; returns 0.

    Raises:
        UnknownMcpServer: ``name`` is not configured.
        ConfigError: the server has no ``auth``, or its table has problems.
        OllmError: the sign-in failed (``AuthenticationError`` and the like).
    """
    from .._cancel_link import LinkedEvent
    from ..http.secrets import Redactor
    from ..http.urls import split_userinfo
    from ..mcp.auth.flow import SIGN_IN_TIMEOUT_S, Authorizer
    from ..mcp.server import configured_auth

    entry = _auth_entry(name, config)
    url, _ = split_userinfo(entry.url)
    auth = configured_auth(name, entry, interactive=True)
    assert auth is not None
    label = f"MCP server {name!r} at {url}"
    redact = Redactor(entry.headers.values() if isinstance(entry.headers, dict) else ())
    authorizer = Authorizer(auth, url, label=label, redact=redact)
    bound = LOGIN_TIMEOUT_S + SIGN_IN_TIMEOUT_S
    stop = LinkedEvent(threading.Event(), deadline=time.monotonic() + bound)
    failure: OllmError | None = None
    try:
        authorizer.sign_in(stop)
    except OllmError as exc:
        failure = redact.error(exc)
    finally:
        authorizer.close()
    if failure is not None:
        raise failure
    err.write(f"signed in to {label}; tokens stored in {authorizer.store.path}\n")
    return 0


def logout(name: str, config: Config, err: TextIO) -> int:
    """Forget the stored tokens of the configured server ``name``; returns 0.

    Raises:
        UnknownMcpServer: ``name`` is not configured.
        ConfigError: the server has no ``auth``, or its table has problems.
    """
    from ..http.urls import split_userinfo
    from ..mcp.auth.store import TokenStore

    entry = _auth_entry(name, config)
    url, _ = split_userinfo(entry.url)
    store = TokenStore()
    gone = store.forget(url)
    err.write(f"forgot {gone} stored token{'s' * (gone != 1)} of MCP server {name!r}\n")
    return 0


def _auth_entry(name: str, config: Config) -> Any:
    _check_known([name], config)
    from ..config import validate_config

    prefix = f"mcp.servers.{name}"
    problems = [i for i in validate_config(config) if i.path.startswith(prefix)]
    if problems:
        raise ConfigError("; ".join(str(i) for i in problems))
    entry = config.mcp_servers[name]
    if entry.auth is None:
        raise ConfigError(
            f'[mcp.servers.{name}] has no auth: set auth = "login" (a person signs in) or '
            '"client_credentials" (client_id and client_secret) to sign in to it'
        )
    return entry

"""The ``[mcp.servers.NAME]`` tables of the configuration file: MCP servers by name.

A stdio server has ``command`` (a list of strings) and optionally ``env`` (a table of strings
added to the inherited environment), ``cwd`` and ``timeout`` (seconds per tool call); an HTTP
server has ``url`` (``http(s)://``), optionally ``headers`` (a table of strings) and
``timeout``, and, when it requires authorization (OAuth), ``auth`` (``"client_credentials"`` or
``"login"``), ``client_id``, ``client_secret`` and ``scope`` (see ``docs/mcp.md``)::

    [mcp.servers.git]
    command = ["uvx", "mcp-server-git"]
    timeout = 30
    [mcp.servers.search]
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "Bearer ${SEARCH_TOKEN}" }
    [mcp.servers.tickets]
    url = "https://mcp.tickets.example/mcp"
    auth = "client_credentials"
    client_id = "nightly-report"
    client_secret = "${TICKETS_SECRET}"

Like the rest of the file, values load as written and :func:`mcp_issues` reports what is
wrong, each issue with its dotted path (``mcp.servers.git.command``). Standard library only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["McpServerConfig", "mcp_issues", "parse_mcp_table"]

_SERVER_KEYS = (
    "command",
    "env",
    "cwd",
    "timeout",
    "url",
    "headers",
    "auth",
    "client_id",
    "client_secret",
    "scope",
)
#: The sign-ins ``auth`` may name.
AUTH_KINDS = ("client_credentials", "login")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(slots=True, kw_only=True)
class McpServerConfig:
    """One configured MCP server (values as loaded; see :func:`mcp_issues`).

    Attributes:
        command: The stdio server's command line.
        env: Variables added to the inherited environment of the stdio server.
        cwd: The stdio server's working directory.
        timeout: Seconds each tool call may take.
        url: The streamable HTTP endpoint.
        headers: Headers sent with every HTTP request (values are masked for display).
        auth: ``"client_credentials"`` or ``"login"``: how to sign in (OAuth).
        client_id: The client's id at the authorization server (``login``: optional).
        client_secret: Its secret (masked for display).
        scope: The scopes to ask for (a string or a list of strings).
    """

    command: Any = None
    env: Any = field(default_factory=dict)
    cwd: Any = None
    timeout: Any = None
    url: Any = None
    headers: Any = field(default_factory=dict, repr=False)
    auth: Any = None
    client_id: Any = None
    client_secret: Any = field(default=None, repr=False)
    scope: Any = None


def parse_mcp_table(value: Any) -> tuple[dict[str, McpServerConfig], list[tuple[str, str]]]:
    """The servers of an ``[mcp]`` table and the structural problems met (path, message)."""
    problems: list[tuple[str, str]] = []
    servers: dict[str, McpServerConfig] = {}
    if not isinstance(value, dict):
        return servers, [("mcp", f"must be a table, got {type(value).__name__}")]
    for key, table in value.items():
        if key != "servers":
            problems.append((f"mcp.{key}", "unknown key (expected: servers)"))
            continue
        if not isinstance(table, dict):
            problems.append(("mcp.servers", f"must be a table, got {type(table).__name__}"))
            continue
        for name, section in table.items():
            where = f"mcp.servers.{name}"
            if not isinstance(section, dict):
                problems.append((where, f"must be a table, got {type(section).__name__}"))
                continue
            known = {k: v for k, v in section.items() if k in _SERVER_KEYS}
            for unknown in sorted(set(section) - set(_SERVER_KEYS)):
                problems.append(
                    (f"{where}.{unknown}", f"unknown key (expected: {', '.join(_SERVER_KEYS)})")
                )
            servers[str(name)] = McpServerConfig(**known)
    return servers, problems


def mcp_issues(servers: dict[str, McpServerConfig]) -> list[tuple[str, str]]:
    """Every problem in the configured servers as ``(dotted path, message)``."""
    issues: list[tuple[str, str]] = []
    for name, server in servers.items():
        issues.extend(_server_issues(name, server))
    return issues


def _auth_issues(where: str, server: McpServerConfig) -> list[tuple[str, str]]:
    issues: list[tuple[str, str]] = []
    if server.auth is None:
        for key in ("client_id", "client_secret", "scope"):
            if getattr(server, key) is not None:
                issues.append(
                    (f"{where}.{key}", 'applies with auth = "client_credentials" or "login"')
                )
        return issues
    if server.auth not in AUTH_KINDS:
        issues.append((f"{where}.auth", 'must be "client_credentials" or "login"'))
    if server.command is not None:
        issues.append((f"{where}.auth", "applies to an HTTP server (url) only"))
    for key in ("client_id", "client_secret"):
        value = getattr(server, key)
        if value is not None and (not isinstance(value, str) or not value):
            issues.append((f"{where}.{key}", "must be a non-empty string"))
    if server.auth == "client_credentials":
        for key in ("client_id", "client_secret"):
            if getattr(server, key) is None:
                issues.append((f"{where}.{key}", 'is required with auth = "client_credentials"'))
    if server.client_secret is not None and server.client_id is None:
        issues.append((f"{where}.client_secret", "needs the client_id it belongs to"))
    scope = server.scope
    if scope is not None and not (
        (isinstance(scope, str) and scope.strip())
        or (isinstance(scope, list) and scope and all(isinstance(s, str) and s for s in scope))
    ):
        issues.append((f"{where}.scope", "must be a string of scopes or a list of strings"))
    return issues


def _server_issues(name: str, server: McpServerConfig) -> list[tuple[str, str]]:
    where = f"mcp.servers.{name}"
    issues: list[tuple[str, str]] = []
    if not _NAME.match(name):
        issues.append((where, "the name must be 1-64 letters, digits, '_' or '-'"))
    if (server.command is None) == (server.url is None):
        issues.append((where, "set either command (a list of strings) or url, not both"))
    if server.command is not None and (
        not isinstance(server.command, list)
        or not server.command
        or not all(isinstance(p, str) and p for p in server.command)
    ):
        issues.append((f"{where}.command", "must be a non-empty list of non-empty strings"))
    if server.url is not None:
        url = server.url
        if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url, re.IGNORECASE):
            issues.append((f"{where}.url", "must be an http:// or https:// URL"))
        for key in ("env", "cwd"):
            if getattr(server, key):
                issues.append((f"{where}.{key}", "applies to a stdio server (command) only"))
    if server.command is not None and server.headers:
        issues.append((f"{where}.headers", "applies to an HTTP server (url) only"))
    for key in ("env", "headers"):
        value = getattr(server, key)
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            issues.append((f"{where}.{key}", "must be a table of strings"))
    if server.cwd is not None and not isinstance(server.cwd, str):
        issues.append((f"{where}.cwd", "must be a string (a folder)"))
    issues.extend(_auth_issues(where, server))
    timeout = server.timeout
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        issues.append((f"{where}.timeout", "must be a positive number of seconds"))
    return issues

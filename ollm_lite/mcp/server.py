"""``McpServer``: one connected MCP server whose tools a chat can call; ``mcp_tools``.

:meth:`McpServer.stdio` starts a server subprocess, :meth:`McpServer.http` connects to a
streamable HTTP endpoint; both finish the ``initialize`` handshake before returning, within
``start_timeout``. :meth:`McpServer.tools` lists the tools (``tools/list``, every page
followed through ``nextCursor``, MCP specification: Server > Utilities > Pagination) as
:class:`McpToolSchema` values: tool schemas (:class:`~ollm_lite.types.ToolSchema`) bound to
the server, which :class:`~ollm_lite.tools.ToolRegistry`, ``ChatClient(tools=...)`` and the
script API accept like ``@tool`` functions. The list is fetched again after the server sends
``notifications/tools/list_changed``.

A call (``tools/call``) never raises into the chat: it becomes a
:class:`~ollm_lite.types.ToolResult` (see :mod:`ollm_lite.mcp.content`); a call over the
server's ``timeout`` is cancelled on the server and gives ``TOOL_TIMEOUT``, the chat's cancel
event gives ``CANCELLED``, a server that dies gives ``TOOL_EXECUTION_FAILED`` at once (with
``details["code"] == "CONNECTION_FAILED"``), an answer over the size limit
``TOOL_RESULT_TOO_LARGE``.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadResponse, Cancelled, ConfigError, OllmError, RequestTimeout
from ..tools import Tool
from ..types import ErrorInfo, ToolResult, ToolSchema
from .auth.credentials import McpAuth
from .content import tool_result
from .http import HttpTransport
from .jsonrpc import MAX_MESSAGE_BYTES
from .session import McpSession, McpTransport, ProgressCallback
from .stdio import StdioTransport

__all__ = ["McpServer", "McpToolSchema", "mcp_tools"]

logger = logging.getLogger(__name__)

_MAX_PAGES = 1000
_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class McpServer:
    """A connected MCP server. Use :meth:`stdio` or :meth:`http`; close it (or use ``with``).

    Attributes:
        name: The name its tools are prefixed with on a clash: ``name=``, else the
            configured name, else the name the server reports.
        timeout: Seconds each tool call may take.
        protocol_version: The negotiated MCP protocol version.
        server_info: The server's ``serverInfo`` (``name``, ``version`` ...).
        instructions: The server's instructions for the model, if it gave any.
    """

    def __init__(
        self,
        transport: McpTransport,
        *,
        name: str | None,
        timeout: float,
        start_timeout: float,
    ) -> None:
        """Connect over ``transport``; prefer :meth:`stdio` and :meth:`http`.

        Raises:
            ConfigError, ConnectionFailed, RequestTimeout, BadResponse, McpError: see
                :meth:`stdio`.
        """
        self.timeout = _positive("timeout", timeout)
        start_timeout = _positive("start_timeout", start_timeout)
        self._session = McpSession(transport, label=transport.describe)
        self._session.on_tools_changed = self._tools_changed
        self._tools: list[McpToolSchema] | None = None
        self._tools_generation = 0
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._session.open(start_timeout)
        except BaseException:
            self._session.close()
            raise
        reported = self._session.server_info.get("name")
        self.name = name or (reported if isinstance(reported, str) and reported else "mcp")
        self._session.label = f"MCP server {self.name!r}"

    # ------------------------------------------------------------------ constructors

    @classmethod
    def stdio(
        cls,
        command: Sequence[str],
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float = 60.0,
        start_timeout: float = 30.0,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> McpServer:
        """Start a server subprocess and connect to it over stdio.

        Args:
            command: The command line, e.g. ``["mcp-server-time"]``.
            name: Prefix for its tools on a name clash (default: the name it reports).
            env: Variables added to the inherited environment.
            cwd: The server's working directory.
            timeout: Seconds each tool call may take.
            start_timeout: Seconds for start-up and the ``initialize`` handshake.
            max_message_bytes: Largest message accepted (64 MiB).

        Raises:
            ConfigError: ``CONFIG_INVALID``: the command cannot be started, or the server
                speaks a protocol version this client does not implement.
            ConnectionFailed: ``CONNECTION_FAILED``: the server exited during start-up (its
                last stderr lines are in the message).
            RequestTimeout: ``LLM_TIMEOUT``: no answer to ``initialize`` in time.
            BadResponse: ``LLM_BAD_RESPONSE``: it wrote something that is not MCP instead.
        """
        transport = StdioTransport(command, env=env, cwd=cwd, max_message_bytes=max_message_bytes)
        server = cls(transport, name=name, timeout=timeout, start_timeout=start_timeout)
        return server

    @classmethod
    def http(
        cls,
        url: str,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        auth: McpAuth | None = None,
        timeout: float = 60.0,
        start_timeout: float = 30.0,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> McpServer:
        """Connect to a streamable HTTP MCP endpoint.

        Args:
            url: The endpoint, e.g. ``http://127.0.0.1:3001/mcp``.
            name: Prefix for its tools on a name clash (default: the name it reports).
            headers: Headers sent with every request (e.g. ``Authorization``).
            auth: How to sign in when the server requires authorization
                (:meth:`McpAuth.login`, :meth:`McpAuth.client_credentials`); the tokens are
                stored and refreshed (see ``docs/mcp.md``, "Signing in").
            timeout: Seconds each tool call may take.
            start_timeout: Seconds for the ``initialize`` handshake, the machine's part of a
                sign-in it needs included; a person signing in in the browser has up to
                10 minutes of their own (``docs/mcp.md``, "Signing in").
            max_message_bytes: Largest message accepted (64 MiB).

        Raises:
            ConfigError, ConnectionFailed, RequestTimeout, BadResponse: as :meth:`stdio`;
            AuthenticationError: ``LLM_AUTH_FAILED``: the server requires a sign-in that
                ``auth`` could not give (or no ``auth`` was given);
            HTTPStatusError: ``LLM_HTTP_ERROR`` for an HTTP error answer.
        """
        if auth is not None and not isinstance(auth, McpAuth):
            raise ConfigError(
                f"auth must be an McpAuth (McpAuth.login() or McpAuth.client_credentials()), "
                f"not {type(auth).__name__}"
            )
        transport = HttpTransport(
            url, headers=headers, max_message_bytes=max_message_bytes, name=name, auth=auth
        )
        return cls(transport, name=name, timeout=timeout, start_timeout=start_timeout)

    # ------------------------------------------------------------------ properties

    @property
    def protocol_version(self) -> str | None:
        return self._session.protocol_version

    @property
    def server_info(self) -> dict[str, Any]:
        return dict(self._session.server_info)

    @property
    def instructions(self) -> str | None:
        return self._session.instructions

    @property
    def pid(self) -> int | None:
        """The stdio server's process id (``None`` for HTTP)."""
        return getattr(self._session.transport, "pid", None)

    @property
    def _secret_values(self) -> tuple[str, ...]:
        # Its env values, header values and URL credentials: the call log masks them too.
        # Private on purpose: a public attribute would hand secrets to any caller.
        return self._session.redact.secrets

    def __repr__(self) -> str:
        state = "closed" if self._closed else self._session.protocol_version
        return f"McpServer(name={self.name!r}, {self._session.transport.describe}, {state})"

    # ------------------------------------------------------------------ tools

    def tools(self) -> list[McpToolSchema]:
        """The server's tools as schemas bound to it (listed once, again after a change).

        Raises:
            ConnectionFailed, RequestTimeout, McpError, BadResponse: listing failed.
        """
        with self._lock:
            if self._tools is not None:
                return list(self._tools)
            generation = self._tools_generation
        if "tools" not in self._session.capabilities:
            listed: list[McpToolSchema] = []
        else:
            listed = [self._schema(t) for t in self._list_tools()]
        with self._lock:
            # A change announced while the list was in flight makes this answer stale: keep it
            # for this caller only, so that the next call lists again.
            if generation == self._tools_generation:
                self._tools = listed
        return list(listed)

    def _list_tools(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            params = {} if cursor is None else {"cursor": cursor}
            page = self._session.request("tools/list", params, timeout=self.timeout)
            items = page.get("tools") if isinstance(page, dict) else None
            if not isinstance(items, list):
                raise BadResponse(f"{self._label} answered tools/list without a tools list")
            found.extend(t for t in items if isinstance(t, dict) and isinstance(t.get("name"), str))
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor or cursor in seen:
                return found
            seen.add(cursor)
        raise BadResponse(f"{self._label} kept paginating tools/list past {_MAX_PAGES} pages")

    def _schema(self, spec: dict[str, Any]) -> McpToolSchema:
        remote = spec["name"]
        name = remote if _NAME_OK.match(remote) else re.sub(r"[^A-Za-z0-9_-]", "_", remote)[:64]
        description = spec.get("description")
        if not isinstance(description, str):
            title = spec.get("title")
            description = title if isinstance(title, str) else None
        schema = spec.get("inputSchema")
        return McpToolSchema(
            name=name or "tool",
            description=description,
            parameters=schema if isinstance(schema, dict) else {"type": "object"},
            server=self,
            remote_name=remote,
        )

    def _tools_changed(self) -> None:
        logger.debug("%s: tool list changed", self._label)
        with self._lock:
            self._tools = None
            self._tools_generation += 1

    @property
    def _label(self) -> str:
        return self._session.label

    # ------------------------------------------------------------------ calls

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> ToolResult:
        """Call a tool by its name on the server; never raises for a failed call.

        Args:
            name: The tool's name as the server knows it.
            arguments: Its arguments.
            timeout: Seconds for this call (default and upper bound: the server's ``timeout``).
            cancel: Setting it cancels the call on the server.
            on_progress: Receives ``(progress, total, message)`` progress notifications.

        Returns:
            The mapped result; failures are ``ok=False`` with code ``TOOL_TIMEOUT``,
            ``CANCELLED``, ``TOOL_RESULT_TOO_LARGE``, ``TOOL_RESULT_INVALID`` or
            ``TOOL_EXECUTION_FAILED`` (``details["code"]`` the underlying error's code).
        """
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        params = {"name": name, "arguments": dict(arguments or {})}
        try:
            result = self._session.request(
                "tools/call", params, timeout=limit, cancel=cancel, on_progress=on_progress
            )
        except RequestTimeout as exc:
            return _failed("TOOL_TIMEOUT", exc, {"timeout": limit})
        except Cancelled as exc:
            return _failed("CANCELLED", exc)
        except BadResponse as exc:
            code = "TOOL_RESULT_TOO_LARGE" if "limit" in exc.details else "TOOL_RESULT_INVALID"
            return _failed(code, exc)
        except OllmError as exc:
            return _failed("TOOL_EXECUTION_FAILED", exc)
        return tool_result(result)

    def ping(self, timeout: float | None = None) -> None:
        """Check the server answers (``ping``).

        Raises:
            ConnectionFailed, RequestTimeout, McpError: it does not.
        """
        self._session.request("ping", None, timeout=timeout or self.timeout)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Disconnect; a stdio server is ended (stdin closed, SIGTERM, then SIGKILL)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._session.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran or the server went away."""
        return self._closed or self._session.closed is not None

    def __enter__(self) -> McpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _failed(code: str, exc: OllmError, details: dict[str, Any] | None = None) -> ToolResult:
    info = {"code": exc.code, **exc.details, **(details or {})}
    return ToolResult(ok=False, error=ErrorInfo(exc.message, code, info))


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{name} must be a positive number of seconds, not {value!r}")
    return float(value)


# --------------------------------------------------------------------------- bound schemas


@dataclass(frozen=True, slots=True)
class McpToolSchema(ToolSchema):
    """A tool of an MCP server: the schema the model sees, bound to the server that runs it.

    ``parameters`` is the server's ``inputSchema`` unchanged. ``name`` is the server's tool
    name (characters outside ``[A-Za-z0-9_-]`` replaced by ``_``); calls go to
    ``remote_name``.
    """

    server: McpServer | None = field(default=None, repr=False)
    """The server that runs the tool."""
    remote_name: str = ""
    """The tool's name on the server."""

    def as_tool(self) -> Tool:
        """The :class:`~ollm_lite.tools.Tool` that calls the server (what registries hold)."""
        server = self.server
        if server is None:
            raise ConfigError(f"tool {self.name!r} is not bound to an MCP server")
        remote = self.remote_name or self.name
        return Tool(
            name=self.name,
            description=self.description,
            parameters=self.parameters if self.parameters is not None else {"type": "object"},
            fn=_ServerCall(server, remote),
            runner=_ServerRun(server, remote),
            server=server.name,
        )


@dataclass(frozen=True, slots=True)
class _ServerCall:
    """Calls one tool on one server; equal for the same server and tool (registries compare)."""

    server: McpServer
    remote: str

    def __call__(self, **arguments: Any) -> ToolResult:
        return self.server.call_tool(self.remote, arguments)


@dataclass(frozen=True, slots=True)
class _ServerRun:
    """The registry's runner for one tool on one server (equal for the same pair)."""

    server: McpServer
    remote: str

    def __call__(self, arguments: dict[str, Any], cancel: threading.Event | None) -> ToolResult:
        return self.server.call_tool(self.remote, arguments, cancel=cancel)


# --------------------------------------------------------------------------- mcp_tools

# Strong references: a server opened here lives until exit even when its tools are dropped.
_opened: list[McpServer] = []
_opened_lock = threading.Lock()
_atexit_registered = False


def mcp_tools(
    server: McpServer | Sequence[str] | str, *, config: Any = None
) -> list[McpToolSchema]:
    """The tools of an MCP server, opening it when needed.

    Args:
        server: An open :class:`McpServer`; a command list (started over stdio); an
            ``http(s)://`` URL (streamable HTTP); or the name of a ``[mcp.servers.NAME]``
            table of the configuration. Servers opened here are closed at interpreter exit.
        config: A :class:`~ollm_lite.config.Config` or a path to a TOML file for names
            (default: the configuration ``load_config()`` finds).

    Returns:
        The tools, bound to the server.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an unknown name or a bad configuration table, and
            as :meth:`McpServer.stdio` / :meth:`McpServer.http`.
    """
    if isinstance(server, McpServer):
        return server.tools()
    opened = open_server(server, config=config)
    try:
        return opened.tools()
    except BaseException:
        opened.close()
        raise


def open_server(spec: Sequence[str] | str, *, config: Any = None) -> McpServer:
    """Open a server from a command list, a URL or a configured name; closed at exit."""
    if isinstance(spec, str) and spec.lower().startswith(("http://", "https://")):
        opened = McpServer.http(spec)
    elif isinstance(spec, str):
        opened = from_config(spec, config)
    elif isinstance(spec, list | tuple):
        opened = McpServer.stdio(list(spec))
    else:
        raise ConfigError(
            "an MCP server is an McpServer, a command list, an http(s) URL or a configured "
            f"name, not {type(spec).__name__}"
        )
    _close_at_exit(opened)
    return opened


def from_config(name: str, config: Any = None) -> McpServer:
    """Open the server of ``[mcp.servers.NAME]``.

    Raises:
        ConfigError: ``CONFIG_INVALID``: no such table, or the table has problems.
    """
    from ..config import Config, load_config, validate_config

    loaded = config if isinstance(config, Config) else load_config(config)
    entry = loaded.mcp_servers.get(name)
    if entry is None:
        known = ", ".join(sorted(loaded.mcp_servers)) or "none configured"
        hint = f"; to start a command give a list, e.g. [{name!r}]" if " " not in name else ""
        raise ConfigError(
            f"no MCP server named {name!r} in the configuration ([mcp.servers.{name}]); "
            f"known: {known}{hint}",
            details={"name": name, "known": sorted(loaded.mcp_servers)},
        )
    prefix = f"mcp.servers.{name}"
    problems = [i for i in validate_config(loaded) if i.path.startswith(prefix)]
    if problems:
        raise ConfigError(
            "; ".join(str(i) for i in problems), details={"issues": [str(i) for i in problems]}
        )
    timeout = float(entry.timeout) if entry.timeout is not None else 60.0
    if entry.url is not None:
        return McpServer.http(
            entry.url,
            name=name,
            headers=entry.headers,
            auth=configured_auth(name, entry, interactive=False),
            timeout=timeout,
        )
    return McpServer.stdio(entry.command, name=name, env=entry.env, cwd=entry.cwd, timeout=timeout)


def configured_auth(name: str, entry: Any, *, interactive: bool) -> McpAuth | None:
    """The :class:`McpAuth` of a ``[mcp.servers.NAME]`` table (``None`` without ``auth``).

    A ``login`` server used by name never asks a person (``interactive=False``): when one is
    needed, the error names ``ollm-lite mcp login NAME``.
    """
    kind = getattr(entry, "auth", None)
    if kind is None:
        return None
    if kind == "client_credentials":
        return McpAuth.client_credentials(entry.client_id, entry.client_secret, scope=entry.scope)
    made = McpAuth.login(entry.client_id, entry.client_secret, scope=entry.scope)
    return made if interactive else made.headless(f"ollm-lite mcp login {name}")


def _close_at_exit(server: McpServer) -> None:
    global _atexit_registered
    with _opened_lock:
        _opened.append(server)
        if not _atexit_registered:
            atexit.register(_close_opened)
            _atexit_registered = True


def _close_opened() -> None:
    with _opened_lock:
        servers = list(_opened)
        _opened.clear()
    for server in servers:
        try:
            server.close()
        except Exception:  # closing at exit must not mask the program's own outcome
            logger.debug("closing %r at exit failed", server, exc_info=True)

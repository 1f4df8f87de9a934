"""Secrets in a configuration: finding them, masking them, and the redacted view for display."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ._mcp_config import McpServerConfig
from .http.secrets import Redactor

if TYPE_CHECKING:
    from ._config_model import Config

#: The keys of a ``[providers.NAME]`` section, in display order.
SECTION_KEYS = ("base_url", "api_key", "backend", "timeout")
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def secret_strings(value: Any) -> list[str]:
    """Every string inside an ``api_key`` value (a mistyped table may hide the key)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in secret_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in secret_strings(v)]
    return []


def config_secrets(config: Config) -> list[str]:
    """Every configured secret: API keys, MCP servers' header and ``env`` values (to mask
    wherever one was pasted by mistake)."""
    providers: Any = config.providers
    servers: Any = config.mcp_servers
    found = [
        s
        for p in (providers.values() if isinstance(providers, dict) else ())
        for s in secret_strings(getattr(p, "api_key", None))
    ]
    for server in servers.values() if isinstance(servers, dict) else ():
        found.extend(secret_strings(getattr(server, "headers", None)))
        found.extend(secret_strings(getattr(server, "env", None)))
    return found


def mask_secrets(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` and any URL user-info (``user:pass@``) as ``***``.

    Masked by the library's one redactor (the transport's), with its minimum secret length.
    """
    return Redactor(secrets)(_USERINFO.sub("***@", text))


def secret_path(where: str) -> bool:
    """Whether the value at ``where`` may be a credential (its text is never quoted)."""
    leaf = where.rsplit(".", 1)[-1].lower()
    return any(word in leaf for word in ("key", "token", "secret", "password"))


def redacted(config: Config) -> dict[str, Any]:
    """``config`` as plain data with every API key replaced by ``"***"`` (for display).

    A key pasted into another field, and URL user-info, are masked as well.
    """
    secrets = config_secrets(config)

    def mask(value: Any) -> Any:
        if isinstance(value, str):
            return mask_secrets(value, secrets)
        if isinstance(value, dict):
            return {mask(k): mask(v) for k, v in value.items()}
        return value

    out: dict[str, Any] = {"provider": config.provider}
    if config.model is not None:
        out["model"] = config.model
    providers: dict[str, Any] = {}
    for name, section in config.providers.items():
        values: dict[str, Any] = {}
        for key in SECTION_KEYS:
            value = getattr(section, key, None)
            if value is None:
                continue
            values[key] = "***" if key == "api_key" and value != "" else value
        providers[name] = values
    if providers:
        out["providers"] = providers
    if config.context_limits:
        out["context_limits"] = dict(config.context_limits)
    if config.mcp_servers:
        out["mcp"] = {"servers": {name: _mcp_display(s) for name, s in config.mcp_servers.items()}}
    return {key: mask(value) for key, value in out.items()}


def _mcp_display(server: McpServerConfig) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key in ("command", "env", "cwd", "timeout", "url"):
        value = getattr(server, key)
        if value is not None and value != {}:
            values[key] = value
    if isinstance(server.env, dict) and server.env:
        values["env"] = {k: "***" for k in server.env}  # every value: a secret
    if isinstance(server.headers, dict) and server.headers:
        values["headers"] = {k: "***" for k in server.headers}
    return values

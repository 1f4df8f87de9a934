"""The redacted view of a configuration, for display: every secret masked."""

from __future__ import annotations

from typing import Any

from ._mcp_servers import McpServerConfig
from ._model import Config
from ._secrets import config_secrets, mask_secrets

#: The keys of a ``[providers.NAME]`` section, in display order.
SECTION_KEYS = ("base_url", "api_key", "backend", "timeout")


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
    if config.options:
        out["options"] = dict(config.options)
    if config.mcp_servers:
        out["mcp"] = {"servers": {name: _mcp_display(s) for name, s in config.mcp_servers.items()}}
    return {key: mask(value) for key, value in out.items()}


def _mcp_display(server: McpServerConfig) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key in ("command", "env", "cwd", "timeout", "url", "auth", "client_id", "scope"):
        value = getattr(server, key)
        if value is not None and value != {}:
            values[key] = value
    if isinstance(server.env, dict) and server.env:
        values["env"] = {k: "***" for k in server.env}  # every value: a secret
    if isinstance(server.headers, dict) and server.headers:
        values["headers"] = {k: "***" for k in server.headers}
    if server.client_secret is not None:
        values["client_secret"] = "***"
    return values

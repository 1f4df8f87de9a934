"""Secrets in a configuration: finding the configured keys, and masking them in any text."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from ..http.secrets import Redactor

_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


class Configured(Protocol):
    """What :func:`config_secrets` reads of a configuration: its providers and MCP servers."""

    @property
    def providers(self) -> Mapping[str, object]: ...

    @property
    def mcp_servers(self) -> Mapping[str, object]: ...


def secret_strings(value: Any) -> list[str]:
    """Every string inside an ``api_key`` value (a mistyped table may hide the key)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in secret_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in secret_strings(v)]
    return []


def config_secrets(config: Configured) -> list[str]:
    """Every configured secret: API keys, MCP servers' header and ``env`` values and client
    secrets (to mask wherever one was pasted by mistake)."""
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
        found.extend(secret_strings(getattr(server, "client_secret", None)))
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

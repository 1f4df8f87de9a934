"""Where the rest of the library reaches the call log: a few small functions.

``connect`` (and the CLI) ask :func:`client_logger` for the client's logger (``None``: not
logging); the gate (:mod:`ollm_lite.gate`) records each call through it. With the log off
nothing else is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._recorder import CallLogger

__all__ = ["client_logger"]


def client_logger(log: Any, cache: Any, config: Any, provider: Any) -> CallLogger | None:
    """The logger of a client made by ``connect(log=, cache=)`` (``None``: off).

    A provider whose ``log_from_settings`` is false (``ScriptedProvider``) logs only when
    ``log`` or ``cache`` ask for it, never by the config file or ``OLLM_LOG`` alone.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for ``cache=True`` with ``log=False`` or a bad value.
    """
    from ._settings import resolve

    if (
        log is None
        and (cache is None or cache is False)
        and not getattr(provider, "log_from_settings", True)
    ):
        return None  # a script (a test): not on by the config file or OLLM_LOG alone
    path, caching = resolve(log, cache, config)
    if path is None:
        return None
    from ._recorder import CallLogger

    return CallLogger(path, cache=caching, provider=provider, secrets=config_secrets(config))


def config_secrets(config: Any) -> list[str]:
    """Values never to store: configured keys, every MCP ``env`` and ``headers`` value."""
    from ..config import config_secrets as keys

    found = list(keys(config)) if config is not None else []
    servers = getattr(config, "mcp_servers", None)
    for server in servers.values() if isinstance(servers, dict) else ():
        for table in (getattr(server, "env", None), getattr(server, "headers", None)):
            if isinstance(table, dict):
                found.extend(v for v in table.values() if isinstance(v, str))
    return found

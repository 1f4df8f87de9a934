"""Whether calls are logged, and where: ``connect(log=...)``, ``OLLM_LOG``, ``[log]``.

A keyword beats the environment, which beats the config file. The path is the first given of
the keyword's path, ``OLLM_LOG``'s path, ``[log] path``, then ``$XDG_DATA_HOME/ollm/logs.db``
(``~/.local/share/ollm/logs.db``); ``open_log(None)`` and the CLI use the same rule.

Every path is checked where it is given (:func:`usable_path`): a path that is no path (a NUL
byte, a name the file system cannot encode, ``~user`` of no such user, another type) is a
``ConfigError`` naming where it came from, never a failure of the first call that logs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._files import path_text
from ..errors import ConfigError

__all__ = [
    "ENV_VAR",
    "LOG_KEYS",
    "default_path",
    "env_setting",
    "log_issues",
    "log_path",
    "resolve",
    "usable_path",
]

ENV_VAR = "OLLM_LOG"
#: The keys of the config file's ``[log]`` table.
LOG_KEYS = ("enabled", "path")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def env_setting(env: Mapping[str, str]) -> bool | str | None:
    """What ``OLLM_LOG`` says: on, off, a path (on), or ``None`` when unset or empty."""
    raw = env.get(ENV_VAR, "").strip()
    if not raw:
        return None
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    return raw


def usable_path(value: Any, source: str) -> Path:
    """``value`` (a ``str``, ``bytes`` or ``os.PathLike`` path) as a ``Path``, ``~`` expanded.

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming ``source`` (``OLLM_LOG``, ``log``, ...) when
            ``value`` is no path: another type, empty, a NUL byte, a name the file system
            cannot encode, or ``~user`` of a user with no known home folder.
    """
    try:
        text = os.fsdecode(os.fspath(value))
    except TypeError:
        raise ConfigError(
            f"{source} must be a path, not {type(value).__name__}", details={"source": source}
        ) from None
    shown = path_text(text)

    def refused(reason: str) -> ConfigError:
        return ConfigError(
            f"{source} names no usable path, {shown}: {reason}",
            details={"source": source, "path": shown},
        )

    if not text:
        raise refused("it is empty")
    if "\0" in text:
        raise refused("a path cannot hold a NUL byte")
    try:
        os.fsencode(text)
    except UnicodeError:
        raise refused("the file system cannot encode its name") from None
    try:
        return Path(text).expanduser()
    except RuntimeError:  # ~user of no such user, or no home folder at all
        user = text.partition(os.sep)[0]
        raise refused(f"no home folder is known for {user}") from None


def default_path(env: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME/ollm/logs.db``, else ``~/.local/share/ollm/logs.db``.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when that folder cannot be named.
    """
    xdg = env.get("XDG_DATA_HOME")
    if xdg:
        return usable_path(xdg, "XDG_DATA_HOME") / "ollm" / "logs.db"
    home = env.get("HOME")
    base = usable_path(home or "~", "HOME")
    return base / ".local" / "share" / "ollm" / "logs.db"


def _table(config: Any) -> dict[str, Any]:
    table = getattr(config, "log", None)
    return table if isinstance(table, dict) else {}


def log_path(keyword: Any = None, config: Any = None, env: Mapping[str, str] | None = None) -> Path:
    """The log file by the path rule (the keyword's path, ``OLLM_LOG``'s, ``[log] path``,
    the default).

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming the source of a path that is no usable path.
    """
    env = os.environ if env is None else env
    if isinstance(keyword, str | bytes | os.PathLike):
        return usable_path(keyword, "connect(log=...)")
    setting = env_setting(env)
    if isinstance(setting, str):
        return usable_path(setting, ENV_VAR)
    path = _table(config).get("path")
    if isinstance(path, str) and path:
        return usable_path(path, "[log] path")
    return default_path(env)


def resolve(
    log: Any, cache: Any, config: Any, env: Mapping[str, str] | None = None
) -> tuple[Path | None, bool]:
    """The log file (``None``: off) and whether to cache, for ``connect(log=, cache=)``.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for ``cache=True`` with ``log=False``, a
            ``log``/``cache`` value of the wrong type, or a path that is no usable path.
    """
    env = os.environ if env is None else env
    if log is not None and not isinstance(log, bool | str | os.PathLike):
        raise ConfigError(f"log must be True, False or a path, not {log!r}")
    if log == "":
        raise ConfigError("log must be True, False or a path, not ''")
    if cache is not None and not isinstance(cache, bool):
        raise ConfigError(f"cache must be True or False, not {cache!r}")
    if cache and log is False:
        raise ConfigError("cache=True needs the call log: it cannot go with log=False")
    if log is None:
        setting = env_setting(env)
        on = _table(config).get("enabled") is True if setting is None else setting is not False
        on = on or bool(cache)
    else:
        on = log is not False
    if not on:
        return None, False
    return log_path(log if log is not True else None, config, env), bool(cache)


def log_issues(table: Any) -> list[tuple[str, str]]:
    """Problems in the ``[log]`` table, as ``(dotted path, message)``."""
    if table is None or table == {}:
        return []
    if not isinstance(table, dict):
        return [("log", f"must be a table, not {type(table).__name__}")]
    issues = []
    for key, value in table.items():
        if key not in LOG_KEYS:
            issues.append((f"log.{key}", f"unknown key; expected one of {', '.join(LOG_KEYS)}"))
        elif key == "enabled" and not isinstance(value, bool):
            issues.append(("log.enabled", f"must be true or false, not {value!r}"))
        elif key == "path" and (not isinstance(value, str) or not value):
            issues.append(("log.path", f"must be a non-empty string, not {value!r}"))
        elif key == "path":
            try:
                usable_path(value, "it")
            except ConfigError as exc:
                issues.append(("log.path", exc.message))
    return issues


def shown(
    config: Any, env: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The call log's effective settings for ``config show``: values and where each came from."""
    env = os.environ if env is None else env
    table = _table(config)
    origins = getattr(config, "origins", {}) or {}
    setting = env_setting(env)
    if setting is not None:
        enabled, enabled_from = setting is not False, f"env {ENV_VAR}"
    elif "enabled" in table:
        enabled, enabled_from = table["enabled"] is True, origins.get("log.enabled", "file")
    else:
        enabled, enabled_from = False, "default"
    path = log_path(None, config, env)
    if isinstance(setting, str):
        path_from = f"env {ENV_VAR}"
    elif isinstance(table.get("path"), str) and table.get("path"):
        path_from = origins.get("log.path", "file")
    else:
        path_from = "default"
    return {"enabled": enabled, "path": str(path)}, {"enabled": enabled_from, "path": path_from}

"""Configuration: ``load_config`` merges defaults, a TOML file, the environment and overrides.

Precedence, highest first: explicit overrides (CLI flags) > environment > file > defaults. With
nothing configured the provider is ``local`` (Ollama) and every provider falls back to its own
defaults, so an existing Ollama setup works unchanged.

File: the ``path`` argument, else ``$OLLM_CONFIG``, else ``$XDG_CONFIG_HOME/ollm/config.toml``,
else ``~/.config/ollm/config.toml``. String values may use ``${VAR}`` and ``${VAR:-default}``
(the default applies when ``VAR`` is unset or empty; ``$${`` is a literal ``${``)::

    provider = "local"
    model = "llama3.2"
    [providers.vllm]
    base_url = "http://gpu-box:8000"
    api_key = "${VLLM_API_KEY:-}"
    timeout = 300
    [providers.openai-compatible]
    base_url = "http://localhost:1234"
    backend = "lmstudio"
    [context_limits]
    "llama3.2" = 8192
    [mcp.servers.git]                       # MCP servers whose tools chats may use
    command = ["mcp-server-git"]
    [options]                               # defaults of every call that sets none
    max_tokens = 512

Environment: ``OLLM_PROVIDER``, ``OLLM_MODEL``, ``OLLAMA_HOST``, ``OLLAMA_API_KEY``,
``VLLM_HOST``, ``VLLM_API_KEY``, ``OPENAI_COMPATIBLE_HOST``, ``OPENAI_COMPATIBLE_API_KEY``,
``GEMINI_API_KEY`` (else ``GOOGLE_API_KEY``); empty values count as unset. :data:`ENV_VARS` is
the one list, and providers read their defaults through :func:`env_default`.

Invariants:

* Provider names are canonical after loading (``local``, ``vllm``, ``openai-compatible``,
  ``gemini``). An alias selects its canonical provider; a backend alias (``lmstudio``,
  ``localai``, ``kobold``, ``llamacpp``) also sets ``providers.openai-compatible.backend``.
* :func:`load_config` raises only for an unreadable file (or one that is not a regular file,
  or holds more than :data:`CONFIG_LIMIT` bytes) or malformed TOML, a named file that
  does not exist, and an unset ``${VAR}`` without a default. Bad values load as they are and
  :func:`validate_config` reports every problem at once, each with its dotted field path; a
  value holding a malformed reference (an unterminated ``${``, ``${}``, ``${1A}``) is one of
  them: it loads exactly as written, unexpanded.
* No API key appears in ``repr`` (``ProviderConfig.api_key`` is left out of it) or in
  :func:`redacted`.

Importing this module imports no HTTP library (the CLI's ``--help`` stays fast).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._files import MiB, path_text, read_file
from .._safe_text import type_name
from ..call_log._settings import log_issues
from ..errors import ConfigError
from ..gate._settings import GATE_TABLES, gate_issues
from ._check import (
    check_context_limits,
    check_model,
    check_provider,
    check_sections,
    type_issue,
    unknown_key,
    url_problem as _url_problem,  # noqa: F401  (the CLI's --host check)
)
from ._display import SECTION_KEYS as _SECTION_KEYS, redacted
from ._mcp_servers import McpServerConfig, mcp_issues, parse_mcp_table
from ._model import (
    BACKENDS,
    PROVIDER_ALIASES,
    PROVIDERS,
    Config,
    ConfigIssue,
    ProviderConfig,
    canonical_provider,
)
from ._options import options_issues
from ._secrets import config_secrets, mask_secrets
from ._vars import expand_tree, expand_vars

__all__ = [
    "BACKENDS",
    "ENV_VARS",
    "PROVIDERS",
    "PROVIDER_ALIASES",
    "Config",
    "ConfigIssue",
    "McpServerConfig",
    "ProviderConfig",
    "canonical_provider",
    "config_path",
    "env_default",
    "env_names",
    "expand_vars",
    "config_secrets",
    "load_config",
    "mask_secrets",
    "redacted",
    "validate_config",
]

logger = logging.getLogger(__name__)

#: The most bytes a config file may hold: far above any real one, and never read unbounded.
CONFIG_LIMIT = 1 * MiB
#: Environment variable → dotted config path it sets: the one list of the variables the
#: library reads (providers ask :func:`env_default`). Where two set the same path, the first
#: one set wins (``GEMINI_API_KEY`` over Google's own ``GOOGLE_API_KEY``).
ENV_VARS: dict[str, str] = {
    "OLLM_PROVIDER": "provider",
    "OLLM_MODEL": "model",
    "OLLAMA_HOST": "providers.local.base_url",
    "OLLAMA_API_KEY": "providers.local.api_key",
    "VLLM_HOST": "providers.vllm.base_url",
    "VLLM_API_KEY": "providers.vllm.api_key",
    "OPENAI_COMPATIBLE_HOST": "providers.openai-compatible.base_url",
    "OPENAI_COMPATIBLE_API_KEY": "providers.openai-compatible.api_key",
    "GEMINI_API_KEY": "providers.gemini.api_key",
    "GOOGLE_API_KEY": "providers.gemini.api_key",
    "ANTHROPIC_BASE_URL": "providers.anthropic.base_url",
    "ANTHROPIC_API_KEY": "providers.anthropic.api_key",
}


def env_default(provider: str, key: str, env: Mapping[str, str] | None = None) -> str | None:
    """What the environment sets ``providers.<provider>.<key>`` to, or ``None``.

    The first variable of :data:`ENV_VARS` for that path that is set and not empty wins; an
    API key has its surrounding whitespace stripped (a key read from a file keeps its
    trailing newline). How a provider built without ``base_url=`` / ``api_key=`` finds its
    defaults (explicit arguments beat the environment).

    Args:
        provider: Canonical provider name (``local``, ``vllm``, ``openai-compatible``,
            ``gemini``).
        key: ``base_url`` or ``api_key``.
        env: Environment variables (default ``os.environ``).
    """
    env = os.environ if env is None else env
    path = f"providers.{provider}.{key}"
    for var in env_names(path):
        value = env.get(var)
        if value and key == "api_key":
            value = _stripped_key(value)
        if value:
            return value
    return None


def env_names(path: str) -> list[str]:
    """The environment variables that set the dotted config ``path``, first one winning."""
    return [var for var, target in ENV_VARS.items() if target == path]


_TOP_KEYS = (
    "provider",
    "model",
    "providers",
    "context_limits",
    "mcp",
    "log",
    "options",
    *GATE_TABLES,
)
#: Override keys that apply to the selected provider's section (``--host``, ``--api-key``).
_SHORTHAND_KEYS = _SECTION_KEYS


def config_path(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] = os.environ
) -> tuple[Path, bool]:
    """Which file :func:`load_config` reads, and whether it was named explicitly.

    Explicit: the ``path`` argument or ``$OLLM_CONFIG``; else the XDG location.
    """
    if path is not None:
        if not isinstance(path, str | os.PathLike):
            raise ConfigError(
                f"a config file is a path (str or os.PathLike), not {type_name(path)}"
            )
        return Path(path).expanduser(), True
    if env.get("OLLM_CONFIG"):
        return Path(env["OLLM_CONFIG"]).expanduser(), True
    xdg = env.get("XDG_CONFIG_HOME")
    if xdg:
        base = Path(xdg).expanduser()
    else:
        home = env.get("HOME")
        base = (Path(home) if home else Path.home()) / ".config"
    return base / "ollm" / "config.toml", False


# --------------------------------------------------------------------------- layers


class _Layer:
    """One source's settings, flattened to what the merge needs."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.provider: Any = None
        self.model: Any = None
        self.sections: dict[str, dict[str, Any]] = {}
        self.context_limits: dict[str, Any] = {}
        self.mcp_servers: dict[str, McpServerConfig] = {}
        self.log: dict[str, Any] = {}
        self.gate: dict[str, dict[str, Any]] = {}  # [prices], [budget], [rate]
        self.options: dict[str, Any] = {}
        self.shorthand: dict[str, Any] = {}
        self.origins: dict[str, str] = {}
        self.issues: list[ConfigIssue] = []
        self.tables: dict[str, str] = {}  # canonical provider -> the table name that set it

    def set_provider(self, value: Any, origin: str) -> None:
        self.provider = value
        self.origins["provider"] = origin
        if isinstance(value, str):
            canonical, preset = canonical_provider(value)
            self.provider = canonical
            if preset is not None:
                self.section("openai-compatible")["backend"] = preset
                self.origins["providers.openai-compatible.backend"] = origin

    def section(self, name: str) -> dict[str, Any]:
        return self.sections.setdefault(name, {})


def _file_layer(data: Mapping[str, Any], origin: str) -> _Layer:
    layer = _Layer(origin)
    for key, value in data.items():
        if key == "provider":
            layer.set_provider(value, origin)
        elif key == "model":
            layer.model = value
            layer.origins["model"] = origin
        elif key == "providers":
            if not isinstance(value, dict):
                layer.issues.append(type_issue("providers", "a table", value))
                continue
            for name, section in value.items():
                _add_section(layer, str(name), section, origin)
        elif key == "context_limits":
            if not isinstance(value, dict):
                layer.issues.append(type_issue("context_limits", "a table", value))
                continue
            for model, limit in value.items():
                layer.context_limits[str(model)] = limit
                layer.origins[f"context_limits.{model}"] = origin
        elif key == "mcp":
            servers, problems = parse_mcp_table(value)
            layer.mcp_servers.update(servers)
            layer.issues.extend(ConfigIssue(path, message) for path, message in problems)
            for name in servers:
                layer.origins[f"mcp.servers.{name}"] = origin
        elif key == "log":  # the call log's table (its values checked by validate_config)
            if not isinstance(value, dict):
                layer.issues.append(type_issue("log", "a table", value))
                continue
            layer.log = dict(value)
            layer.origins.update({f"log.{k}": origin for k in value})
        elif key in GATE_TABLES:  # the gate's tables (their values checked by validate_config)
            if not isinstance(value, dict):
                layer.issues.append(type_issue(key, "a table", value))
                continue
            layer.gate[key] = dict(value)
            layer.origins.update({f"{key}.{k}": origin for k in value})
        elif key == "options":  # default generation options (checked by validate_config)
            if not isinstance(value, dict):
                layer.issues.append(type_issue("options", "a table", value))
                continue
            layer.options = dict(value)
            layer.origins.update({f"options.{k}": origin for k in value})
        else:
            layer.issues.append(unknown_key(key, key, _TOP_KEYS))
    return layer


def _add_section(layer: _Layer, name: str, section: Any, origin: str) -> None:
    canonical, preset = canonical_provider(name)
    where = f"providers.{name}"
    if not isinstance(section, dict):
        layer.issues.append(type_issue(where, "a table", section))
        return
    if canonical in layer.tables:
        layer.issues.append(
            ConfigIssue(
                where,
                f"configures {canonical} a second time (as providers.{layer.tables[canonical]} "
                "does): keep one table",
            )
        )
    layer.tables[canonical] = name
    target = layer.section(canonical)
    explicit = canonical == name  # the canonical table wins over an alias table's values
    if preset is not None:
        target.setdefault("backend", preset)
        layer.origins.setdefault(f"providers.{canonical}.backend", origin)
    for key, value in section.items():
        if key not in _SECTION_KEYS:
            layer.issues.append(unknown_key(f"{where}.{key}", key, _SECTION_KEYS))
            continue
        if explicit or key not in target:
            target[key] = _stripped_key(value) if key == "api_key" else value
            layer.origins[f"providers.{canonical}.{key}"] = origin


def _stripped_key(value: Any) -> Any:
    """An API key without surrounding whitespace: a key file read into a variable or pasted
    into the TOML file keeps its trailing newline, which no HTTP header can carry."""
    return value.strip() if isinstance(value, str) else value


def _env_layer(env: Mapping[str, str]) -> _Layer:
    layer = _Layer("env")
    for var, path in ENV_VARS.items():
        value = env.get(var)
        if value and path.endswith(".api_key"):
            value = _stripped_key(value)
        if not value or path in layer.origins:
            continue
        origin = f"env {var}"
        if path == "provider":
            layer.set_provider(value, origin)
        elif path == "model":
            layer.model = value
            layer.origins["model"] = origin
        else:
            _, name, key = path.split(".")
            layer.section(name)[key] = value
            layer.origins[path] = origin
    return layer


def _override_layer(overrides: Mapping[str, Any]) -> _Layer:
    data = {k: v for k, v in overrides.items() if v is not None}
    shorthand = {k: data.pop(k) for k in _SHORTHAND_KEYS if k in data}
    layer = _file_layer(data, "override")
    layer.shorthand = shorthand
    return layer


def _merge(layers: list[_Layer]) -> Config:
    """Later layers win, key by key."""
    config = Config()
    sections: dict[str, dict[str, Any]] = {}
    for layer in layers:
        if layer.provider is not None:
            config.provider = layer.provider
        if layer.model is not None:
            config.model = layer.model
        for name, values in layer.sections.items():
            sections.setdefault(name, {}).update(values)
        config.context_limits.update(layer.context_limits)
        config.mcp_servers.update(layer.mcp_servers)
        config.log.update(layer.log)
        for name, table in layer.gate.items():
            getattr(config, name).update(table)
        config.options.update(layer.options)
        config.origins.update(layer.origins)
        config.issues.extend(layer.issues)
    _drop_other_backends_server(layers, sections, config.origins)
    # --host / --api-key apply to whichever provider is selected once every layer is merged.
    selected = canonical_provider(config.provider)[0] if isinstance(config.provider, str) else ""
    for layer in layers:
        for key, value in layer.shorthand.items() if selected else ():
            sections.setdefault(selected, {})[key] = value
            config.origins[f"providers.{selected}.{key}"] = layer.origin
    config.providers = {name: ProviderConfig(**values) for name, values in sections.items()}
    return config


#: The settings that name one server: they belong to the backend they were configured for.
_SERVER_KEYS = ("base_url", "api_key")


def _drop_other_backends_server(
    layers: list[_Layer], sections: dict[str, dict[str, Any]], origins: dict[str, str]
) -> None:
    """Forget an ``openai-compatible`` URL and key set for another backend than the one chosen.

    The backend aliases share one section, so ``OLLM_PROVIDER=lmstudio`` over a file written
    for ``llamacpp`` would otherwise send LM Studio requests to the llama.cpp server's URL. A
    URL or key set in a layer that also named a backend is that backend's; when a later layer
    picks another backend, the chosen backend's own default (or a URL set without a backend,
    e.g. ``OPENAI_COMPATIBLE_HOST``) applies, and ``config show`` says which value was dropped.
    """
    merged = sections.get("openai-compatible")
    chosen = merged.get("backend") if merged else None
    if not isinstance(chosen, str):
        return
    owners: dict[str, tuple[Any, str]] = {}
    for layer in layers:
        section = layer.sections.get("openai-compatible", {})
        for key in _SERVER_KEYS:
            if key in section:
                owners[key] = (section.get("backend"), layer.origin)
    for key, (backend, origin) in owners.items():
        if isinstance(backend, str) and backend != chosen and merged is not None:
            del merged[key]
            origins[f"providers.openai-compatible.{key}"] = (
                f"not used: the {origin} sets it for backend {backend!r}, and backend "
                f"{chosen!r} ({origins.get('providers.openai-compatible.backend', 'default')}) "
                "is selected"
            )


# --------------------------------------------------------------------------- loading


def load_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Read the configuration: overrides > environment > file > defaults.

    Args:
        path: The TOML file to read (default: ``$OLLM_CONFIG``, else
            ``$XDG_CONFIG_HOME/ollm/config.toml``, else ``~/.config/ollm/config.toml``; a
            default location that does not exist is simply skipped).
        env: Environment variables (default ``os.environ``): the provider variables and the
            values ``${VAR}`` expands to.
        overrides: The highest layer (CLI flags), shaped like the file (``provider``,
            ``model``, ``providers``, ``context_limits``); ``None`` values are ignored. The
            shorthand keys ``base_url``, ``api_key``, ``backend`` and ``timeout`` apply to the
            provider selected after merging (what ``--host`` and ``--api-key`` do).

    Returns:
        The merged :class:`Config` (check it with :func:`validate_config`).

    Raises:
        ConfigError: ``CONFIG_INVALID`` when a named file does not exist, the file cannot be
            read or is not valid TOML, or a ``${VAR}`` is unset and has no default.
    """
    env = os.environ if env is None else env
    file, explicit = config_path(path, env)
    layers: list[_Layer] = []
    source: str | None = None
    data = _read_toml(file, explicit)
    if data is not None:
        source = str(file)
        problems: list[ConfigIssue] = []
        layer = _file_layer(expand_tree(data, env, "", problems), "file")
        layer.issues[:0] = problems
        layers.append(layer)
    layers.append(_env_layer(env))
    if overrides:
        layers.append(_override_layer(overrides))
    config = _merge(layers)
    config.source = source
    logger.debug("configuration loaded (file=%s)", source)
    return config


def _read_toml(file: Path, explicit: bool) -> dict[str, Any] | None:
    raw = read_file(file, CONFIG_LIMIT, "config file", missing_ok=True)
    if raw is None:
        if explicit:
            raise ConfigError(
                f"config file {path_text(file)} does not exist (check --config / $OLLM_CONFIG)",
                details={"file": path_text(file)},
            )
        return None
    import tomllib  # here, not at the top: a provider built without a file never needs it

    try:
        return tomllib.loads(raw.decode("utf-8"))
    except RecursionError as exc:
        raise ConfigError(
            f"config file {file} nests arrays or tables too deeply", details={"file": str(file)}
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {file} is not UTF-8 text", details={"file": str(file)}
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"config file {file} is not valid TOML: {exc}", details={"file": str(file)}
        ) from exc


# --------------------------------------------------------------------------- validation


def validate_config(config: Config) -> list[ConfigIssue]:
    """Every problem in ``config``, each with its dotted field path; ``[]`` when it is fine.

    Checks: the provider is known (aliases accepted), the model is a non-empty string,
    provider sections are known providers, ``base_url`` is an ``http(s)://host[:port]`` URL
    (or what ``OLLAMA_HOST`` accepts: ``host``, ``host:port``, ``:port``), ``api_key`` is a
    string, ``backend`` is a known backend and only set for ``openai-compatible``,
    ``timeout`` is a positive number, context limits are positive integers, no unknown keys,
    no malformed ``${...}`` references; ``[options]`` holds only generation options with
    values the script API accepts; and Gemini, when selected, has an API key (not
    ``anthropic``: the local servers that speak the Messages API need none).

    A field already reported while loading (a malformed reference keeps the value as
    written) gets no second issue for that unexpanded value.
    """
    # Each check takes Any: a loaded file may hold any TOML type in any field.
    issues = [
        *check_provider(config.provider),
        *check_model(config.model),
        *check_sections(config.providers),
        *check_context_limits(config.context_limits),
        *_check_gemini_key(config),
    ]
    issues.extend(ConfigIssue(path, message) for path, message in log_issues(config.log))
    issues.extend(ConfigIssue(path, message) for path, message in gate_issues(config))
    issues.extend(options_issues(config.options))
    servers: Any = config.mcp_servers
    if isinstance(servers, dict):
        issues.extend(ConfigIssue(path, message) for path, message in mcp_issues(servers))
    loaded = {issue.path for issue in config.issues}
    issues = [*config.issues, *(i for i in issues if i.path not in loaded)]
    secrets = config_secrets(config)
    return [
        ConfigIssue(mask_secrets(i.path, secrets), mask_secrets(i.message, secrets)) for i in issues
    ]


def _check_gemini_key(config: Config) -> list[ConfigIssue]:
    """Gemini, when it is the selected provider, needs an API key."""
    provider: Any = config.provider
    if not isinstance(provider, str) or canonical_provider(provider)[0] != "gemini":
        return []
    if config.provider_config("gemini").api_key:
        return []
    return [
        ConfigIssue(
            "providers.gemini.api_key",
            "Gemini needs an API key: set GEMINI_API_KEY, pass --api-key, or set "
            "api_key in [providers.gemini]",
        )
    ]

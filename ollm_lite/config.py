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

Environment: ``OLLM_PROVIDER``, ``OLLM_MODEL``, ``OLLAMA_HOST``, ``OLLAMA_API_KEY``,
``VLLM_HOST``, ``VLLM_API_KEY``, ``OPENAI_COMPATIBLE_HOST``, ``OPENAI_COMPATIBLE_API_KEY``,
``GEMINI_API_KEY`` (else ``GOOGLE_API_KEY``); empty values count as unset. :data:`ENV_VARS` is
the one list, and providers read their defaults through :func:`env_default`.

Invariants:

* Provider names are canonical after loading (``local``, ``vllm``, ``openai-compatible``,
  ``gemini``). An alias selects its canonical provider; a backend alias (``lmstudio``,
  ``localai``, ``kobold``, ``llamacpp``) also sets ``providers.openai-compatible.backend``.
* :func:`load_config` raises only for an unreadable file or malformed TOML, a named file that
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
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._mcp_config import McpServerConfig, mcp_issues, parse_mcp_table
from .errors import ConfigError
from .http.secrets import Redactor, unsendable
from .http.urls import URLProblem, parse_base_url, without_userinfo
from .providers.backends import BACKENDS as BACKEND_TABLE, OPENAI_COMPATIBLE_BACKENDS

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

#: The provider enum, in display order.
PROVIDERS: tuple[str, ...] = ("local", "vllm", "openai-compatible", "gemini")

#: ``openai-compatible`` backends (``backend =``), from the one backend table.
BACKENDS: tuple[str, ...] = OPENAI_COMPATIBLE_BACKENDS

#: Accepted alias → (canonical provider, backend preset or ``None``); every backend preset
#: (but ``generic``) is an alias under its own name and its other names.
PROVIDER_ALIASES: dict[str, tuple[str, str | None]] = {
    "ollama": ("local", None),
    "openai_compatible": ("openai-compatible", None),
    "openai-compat": ("openai-compatible", None),
    **{
        alias: ("openai-compatible", name)
        for name in OPENAI_COMPATIBLE_BACKENDS
        if name != "generic"
        for alias in (name, *BACKEND_TABLE[name].aliases)
    },
    "google": ("gemini", None),
}

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


_TOP_KEYS = ("provider", "model", "providers", "context_limits", "mcp")
_SECTION_KEYS = ("base_url", "api_key", "backend", "timeout")
#: Override keys that apply to the selected provider's section (``--host``, ``--api-key``).
_SHORTHAND_KEYS = _SECTION_KEYS
_VAR = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem found in a configuration.

    Attributes:
        path: Dotted field path, e.g. ``providers.openai-compatible.backend``.
        message: What is wrong and what is expected.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(slots=True, kw_only=True)
class ProviderConfig:
    """Settings of one provider; ``None`` means "the provider's own default".

    Attributes:
        base_url: Server address (``http(s)://host[:port][/path]``).
        api_key: Credential; never shown in ``repr``.
        backend: ``openai-compatible`` only: ``lmstudio``, ``localai``, ``kobold``,
            ``llamacpp`` or ``generic``.
        timeout: Idle/read timeout in seconds.
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    backend: str | None = None
    timeout: float | None = None

    def __repr__(self) -> str:
        text = (
            f"ProviderConfig(base_url={self.base_url!r}, backend={self.backend!r}, "
            f"timeout={self.timeout!r})"
        )
        return mask_secrets(text, _secret_strings(self.api_key))


@dataclass(slots=True, kw_only=True)
class Config:
    """The merged configuration.

    Attributes:
        provider: The selected provider (canonical name; default ``local``).
        model: The default model, if any.
        providers: Settings per provider, keyed by canonical name.
        context_limits: Context window per model name (wins over what servers report).
        mcp_servers: MCP servers by name (``[mcp.servers.NAME]``), for ``mcp_tools(NAME)``
            and ``ollm-lite chat --tools NAME``.
        source: The file that was read, or ``None`` when none was.
        origins: Dotted path → where its value came from (``file``, ``env NAME``,
            ``override``), for ``ollm-lite config show``.
        issues: Problems found while loading (unknown keys, tables of the wrong type,
            malformed ``${...}`` references); :func:`validate_config` reports them with the
            rest.
    """

    provider: str = "local"
    model: str | None = None
    providers: dict[str, ProviderConfig] = field(default_factory=dict)
    context_limits: dict[str, int] = field(default_factory=dict)
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)
    source: str | None = field(default=None, compare=False)
    origins: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    issues: list[ConfigIssue] = field(default_factory=list, repr=False, compare=False)

    def __repr__(self) -> str:
        text = (
            f"Config(provider={self.provider!r}, model={self.model!r}, "
            f"providers={self.providers!r}, context_limits={self.context_limits!r}, "
            f"source={self.source!r})"
        )
        return mask_secrets(text, config_secrets(self))

    def provider_config(self, name: str | None = None) -> ProviderConfig:
        """The settings of ``name`` (default: the selected provider); empty when unset."""
        wanted = name if name is not None else self.provider
        canonical = canonical_provider(wanted)[0] if isinstance(wanted, str) else ""
        return self.providers.get(canonical) or ProviderConfig()


# --------------------------------------------------------------------------- names


def canonical_provider(name: str) -> tuple[str, str | None]:
    """``(canonical name, backend preset)`` for a provider name or alias.

    Unknown names come back unchanged (``validate_config`` reports them). Matching ignores
    case and surrounding blanks.
    """
    key = name.strip().lower()
    if key in PROVIDERS:
        return key, None
    return PROVIDER_ALIASES.get(key, (name, None))


def config_path(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] = os.environ
) -> tuple[Path, bool]:
    """Which file :func:`load_config` reads, and whether it was named explicitly.

    Explicit: the ``path`` argument or ``$OLLM_CONFIG``; else the XDG location.
    """
    if path is not None:
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


# --------------------------------------------------------------------------- ${VAR}


def expand_vars(text: str, env: Mapping[str, str], *, where: str = "value") -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}`` in ``text`` from ``env``.

    ``${VAR:-default}`` uses ``default`` when ``VAR`` is unset or empty; ``$${`` stands for a
    literal ``${``. Nothing else is special (a lone ``$`` stays as it is).

    Args:
        text: The string to expand.
        env: Variable values.
        where: Dotted path of the value, for error messages.

    Returns:
        The expanded string.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an unset variable without a default (naming it
            and ``where``), an empty or malformed name, or an unterminated ``${``.
    """
    expanded, problems = _expand(text, env, where, quote=True)
    if problems:
        raise ConfigError(f"{where}: {problems[0]}", details={"path": where})
    return expanded


def _expand(text: str, env: Mapping[str, str], where: str, *, quote: bool) -> tuple[str, list[str]]:
    """``text`` expanded, and what is wrong with each malformed reference in it.

    Malformed references are left as they are; ``quote=False`` keeps their text out of the
    messages (the value may be a secret). An unset variable without a default still raises.
    """
    problems: list[str] = []

    def sub(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole == "$${":
            return "${"
        body = match.group(1)
        if body is None:
            problems.append("unterminated '${' (write $${ for a literal ${)")
            return whole
        name, sep, default = body.partition(":-")
        if not _NAME.fullmatch(name):
            shown = f" '${{{_clip(body)}}}'" if quote else ""
            problems.append(
                f"bad variable reference{shown}: expected ${{NAME}} or ${{NAME:-default}}"
            )
            return whole
        value = env.get(name)
        if value:
            return value
        if sep:
            return default
        if value is not None:  # set but empty, no default: empty is what was asked for
            return value
        raise ConfigError(
            f"{where}: environment variable {name} is not set (export it, or write "
            f"${{{name}:-default}} to give a default)",
            details={"path": where, "variable": name},
        )

    return _VAR.sub(sub, text), problems


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _expand_tree(value: Any, env: Mapping[str, str], where: str, issues: list[ConfigIssue]) -> Any:
    """``value`` with every string expanded; a string with a malformed reference stays as
    written and each of its problems goes to ``issues``."""
    if isinstance(value, str):
        expanded, problems = _expand(value, env, where, quote=not _secret_path(where))
        issues.extend(ConfigIssue(where, problem) for problem in problems)
        return value if problems else expanded
    if isinstance(value, dict):
        return {
            k: _expand_tree(v, env, f"{where}.{k}" if where else k, issues)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_expand_tree(v, env, f"{where}[{i}]", issues) for i, v in enumerate(value)]
    return value


def _secret_path(where: str) -> bool:
    """Whether the value at ``where`` may be a credential (its text is never quoted)."""
    leaf = where.rsplit(".", 1)[-1].lower()
    return any(word in leaf for word in ("key", "token", "secret", "password"))


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
                layer.issues.append(_type_issue("providers", "a table", value))
                continue
            for name, section in value.items():
                _add_section(layer, str(name), section, origin)
        elif key == "context_limits":
            if not isinstance(value, dict):
                layer.issues.append(_type_issue("context_limits", "a table", value))
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
        else:
            layer.issues.append(_unknown_key(key, key, _TOP_KEYS))
    return layer


def _add_section(layer: _Layer, name: str, section: Any, origin: str) -> None:
    canonical, preset = canonical_provider(name)
    where = f"providers.{name}"
    if not isinstance(section, dict):
        layer.issues.append(_type_issue(where, "a table", section))
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
            layer.issues.append(_unknown_key(f"{where}.{key}", key, _SECTION_KEYS))
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
        config.origins.update(layer.origins)
        config.issues.extend(layer.issues)
    # --host / --api-key apply to whichever provider is selected once every layer is merged.
    selected = canonical_provider(config.provider)[0] if isinstance(config.provider, str) else ""
    for layer in layers:
        for key, value in layer.shorthand.items() if selected else ():
            sections.setdefault(selected, {})[key] = value
            config.origins[f"providers.{selected}.{key}"] = layer.origin
    config.providers = {name: ProviderConfig(**values) for name, values in sections.items()}
    return config


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
        layer = _file_layer(_expand_tree(data, env, "", problems), "file")
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
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        if explicit:
            raise ConfigError(
                f"config file {file} does not exist (check --config / $OLLM_CONFIG)",
                details={"file": str(file)},
            ) from None
        return None
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {file}: {exc.strerror or exc}", details={"file": str(file)}
        ) from exc
    import tomllib  # here, not at the top: a provider built without a file never needs it

    try:
        return tomllib.loads(raw.decode("utf-8"))
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
    no malformed ``${...}`` references; and Gemini, when selected, has an API key.

    A field already reported while loading (a malformed reference keeps the value as
    written) gets no second issue for that unexpanded value.
    """
    issues: list[ConfigIssue] = []
    # Values are checked as Any: a loaded file may hold any TOML type in any field.
    provider: Any = config.provider
    model: Any = config.model
    providers: Any = config.providers
    limits: Any = config.context_limits
    if not isinstance(provider, str):
        issues.append(_type_issue("provider", "a string", provider))
    elif canonical_provider(provider)[0] not in PROVIDERS:
        issues.append(ConfigIssue("provider", _unknown_provider(provider)))
    if model is not None and (not isinstance(model, str) or not model.strip()):
        issues.append(
            _type_issue("model", "a non-empty string", model)
            if not isinstance(model, str)
            else ConfigIssue("model", "must not be empty")
        )
    if not isinstance(providers, dict):
        issues.append(_type_issue("providers", "a table", providers))
    else:
        for name, section in providers.items():
            issues.extend(_check_section(str(name), section))
    if not isinstance(limits, dict):
        issues.append(_type_issue("context_limits", "a table", limits))
    else:
        for name, limit in limits.items():
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                issues.append(
                    ConfigIssue(
                        f"context_limits.{name}",
                        f"must be a positive integer (tokens), got {_show(limit)}",
                    )
                )
    if isinstance(provider, str) and canonical_provider(provider)[0] == "gemini":
        key = config.provider_config("gemini").api_key
        if not key:
            issues.append(
                ConfigIssue(
                    "providers.gemini.api_key",
                    "Gemini needs an API key: set GEMINI_API_KEY, pass --api-key, or set "
                    "api_key in [providers.gemini]",
                )
            )
    servers: Any = config.mcp_servers
    if isinstance(servers, dict):
        issues.extend(ConfigIssue(path, message) for path, message in mcp_issues(servers))
    loaded = {issue.path for issue in config.issues}
    issues = [*config.issues, *(i for i in issues if i.path not in loaded)]
    secrets = config_secrets(config)
    return [
        ConfigIssue(mask_secrets(i.path, secrets), mask_secrets(i.message, secrets)) for i in issues
    ]


def _check_section(name: str, section: Any) -> list[ConfigIssue]:
    where = f"providers.{name}"
    canonical = canonical_provider(name)[0]
    if canonical not in PROVIDERS:
        return [ConfigIssue(where, _unknown_provider(name))]
    if not isinstance(section, ProviderConfig):
        return [_type_issue(where, "a table", section)]
    issues: list[ConfigIssue] = []
    if section.base_url is not None:
        problem = _url_problem(section.base_url, ollama_host=canonical == "local")
        if problem:
            issues.append(ConfigIssue(f"{where}.base_url", problem))
    api_key: Any = section.api_key
    if api_key is not None and not isinstance(api_key, str):
        # The value itself may be a secret: name its type only.
        issues.append(
            ConfigIssue(f"{where}.api_key", f"must be a string, got {_type_name(api_key)}")
        )
    elif api_key:
        why = unsendable(api_key)
        if why:
            issues.append(
                ConfigIssue(f"{where}.api_key", f"holds {why}: it cannot be sent in a header")
            )
    backend: Any = section.backend
    if backend is not None:
        if not isinstance(backend, str):
            issues.append(_type_issue(f"{where}.backend", "a string", backend))
        elif canonical != "openai-compatible":
            issues.append(
                ConfigIssue(
                    f"{where}.backend",
                    f"backend only applies to openai-compatible, not {canonical}",
                )
            )
        elif backend not in BACKENDS:
            issues.append(
                ConfigIssue(
                    f"{where}.backend",
                    f"unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}"
                    + _suggest(backend, BACKENDS),
                )
            )
    timeout: Any = section.timeout
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        issues.append(
            ConfigIssue(
                f"{where}.timeout", f"must be a positive number of seconds, got {_show(timeout)}"
            )
        )
    return issues


def _url_problem(url: Any, *, ollama_host: bool = False) -> str | None:
    """What is wrong with ``url`` as a base URL, or ``None`` (the providers' own parser).

    ``ollama_host``: also accept a bare IPv6 address (``::1``, ``::``), as ``OLLAMA_HOST`` does.
    Messages never show URL user-info (``user:pass@``), with or without a scheme.
    """
    if not isinstance(url, str):
        return f"must be a string, got {_show(url)}"
    if not url.strip():
        return "must not be empty"
    try:
        parse_base_url(url, bare_ipv6=ollama_host)
    except URLProblem as exc:
        return f"malformed URL {without_userinfo(url)!r}: {exc.reason}"
    return None


def _unknown_provider(name: str) -> str:
    names = (*PROVIDERS, *PROVIDER_ALIASES)
    return (
        f"unknown provider {name!r}: expected one of {', '.join(PROVIDERS)} "
        f"(aliases: {', '.join(PROVIDER_ALIASES)})" + _suggest(name, names)
    )


def _unknown_key(path: str, key: str, known: tuple[str, ...]) -> ConfigIssue:
    return ConfigIssue(
        path, f"unknown key {key!r}: expected one of {', '.join(known)}" + _suggest(key, known)
    )


def _suggest(word: str, choices: tuple[str, ...]) -> str:
    import difflib  # here, not at the top: only a mistake needs it

    close = difflib.get_close_matches(word.lower(), choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _type_name(value: Any) -> str:
    return {
        "str": "a string",
        "int": "an integer",
        "float": "a number",
        "bool": "a boolean",
        "dict": "a table",
        "list": "an array",
    }.get(type(value).__name__, type(value).__name__)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(_clip(value))
    if isinstance(value, dict | list):
        return _type_name(value)
    return f"{_type_name(value)} {value!r}"


def _type_issue(path: str, expected: str, value: Any) -> ConfigIssue:
    return ConfigIssue(path, f"must be {expected}, got {_show(value)}")


# --------------------------------------------------------------------------- secrets

_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def _secret_strings(value: Any) -> list[str]:
    """Every string inside an ``api_key`` value (a mistyped table may hide the key)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _secret_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _secret_strings(v)]
    return []


def config_secrets(config: Config) -> list[str]:
    """Every configured API key value (to mask wherever a key was pasted by mistake)."""
    providers: Any = config.providers
    servers: Any = config.mcp_servers
    found = [
        s
        for p in (providers.values() if isinstance(providers, dict) else ())
        for s in _secret_strings(getattr(p, "api_key", None))
    ]
    for server in servers.values() if isinstance(servers, dict) else ():
        found.extend(_secret_strings(getattr(server, "headers", None)))
        env: Any = getattr(server, "env", None)
        if isinstance(env, dict):
            found.extend(
                s for k, v in env.items() if _secret_path(str(k)) for s in _secret_strings(v)
            )
    return found


def mask_secrets(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` and any URL user-info (``user:pass@``) as ``***``.

    Masked by the library's one redactor (the transport's), with its minimum secret length.
    """
    return Redactor(secrets)(_USERINFO.sub("***@", text))


# --------------------------------------------------------------------------- display


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
        for key in _SECTION_KEYS:
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
        values["env"] = {k: "***" if _secret_path(str(k)) else v for k, v in server.env.items()}
    if isinstance(server.headers, dict) and server.headers:
        values["headers"] = {k: "***" for k in server.headers}
    return values

"""The configuration's data: provider names and aliases, :class:`Config` and its parts.

Public through :mod:`ollm_lite.config`, which re-exports every name here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..providers.backends import (
    BACKENDS as BACKEND_TABLE,
    OPENAI_COMPATIBLE_BACKENDS,
    OPENAI_COMPATIBLE_PRESETS,
)
from ._mcp_servers import McpServerConfig
from ._secrets import config_secrets, mask_secrets, secret_strings

#: The provider enum, in display order.
PROVIDERS: tuple[str, ...] = ("local", "vllm", "openai-compatible", "gemini", "anthropic")

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
        for name in OPENAI_COMPATIBLE_PRESETS
        for alias in (name, *BACKEND_TABLE[name].aliases)
    },
    "google": ("gemini", None),
    "claude": ("anthropic", None),
}


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
        return mask_secrets(text, secret_strings(self.api_key))


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
        log: The ``[log]`` table (``enabled``, ``path``) of the call log.
        prices: The ``[prices."MODEL"]`` tables (``input``, ``output``, ``cached_input``:
            per million tokens), by model name.
        budget: The ``[budget]`` table (``tokens``, ``cost``, ``requests``, ``per``).
        rate: The ``[rate]`` table (``requests_per_minute``, ``tokens_per_minute``).
        options: The ``[options]`` table: default generation options (the
            ``GenerationOptions`` fields and ``think``) for every call that sets none.
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
    log: dict[str, Any] = field(default_factory=dict)
    prices: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)
    rate: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
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


def canonical_provider(name: str) -> tuple[str, str | None]:
    """``(canonical name, backend preset)`` for a provider name or alias.

    Unknown names come back unchanged (``validate_config`` reports them). Matching ignores
    case and surrounding blanks.
    """
    key = name.strip().lower()
    if key in PROVIDERS:
        return key, None
    return PROVIDER_ALIASES.get(key, (name, None))

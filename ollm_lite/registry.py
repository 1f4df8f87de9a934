"""Providers by name: ``ProviderRegistry`` and ``default_registry``.

A registry maps canonical names (``adapter.name``) to adapters, plus aliases that resolve to a
canonical name. Entries may be *lazy*: a factory that builds the adapter on first
:meth:`ProviderRegistry.get`, so a registry of every built-in provider costs nothing until one
is used (no HTTP stack is imported before that).

The built-in aliases ``lmstudio``, ``localai``, ``kobold`` and ``llamacpp`` are *preset
aliases*: they resolve to ``openai-compatible`` (and are not listed as providers of their own),
but :meth:`ProviderRegistry.get` returns for each its own ``OpenAICompatibleProvider`` with that
``backend``, configured from ``providers.openai-compatible`` (base URL, API key, timeout)
unless the configuration has an entry under the preset's own name (``providers.kobold``), which
then wins. ``ollama`` is a plain alias of ``local``; the other spellings the configuration
accepts (``koboldcpp``, ``llama.cpp``, ``google`` …) resolve the same way and share the
instance of the name they spell.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .errors import ConfigError, ProviderNotFound
from .providers.backends import DEFAULT_BACKEND, OPENAI_COMPATIBLE_PRESETS
from .providers.base import ProviderAdapter

if TYPE_CHECKING:
    from .config import Config, ProviderConfig

__all__ = ["OPENAI_COMPATIBLE_PRESETS", "ProviderRegistry", "default_registry"]

Factory = Callable[[], ProviderAdapter]


class ProviderRegistry:
    """Adapters by name, with aliases and a default. Thread-safe.

    Example:
        registry = ProviderRegistry()
        registry.register(LocalProvider(), aliases=["ollama"])
        registry.get("ollama")  # the LocalProvider
    """

    def __init__(self) -> None:
        self._adapters: dict[str, ProviderAdapter] = {}
        self._factories: dict[str, Factory] = {}
        self._aliases: dict[str, str] = {}
        self._presets: dict[str, Factory | ProviderAdapter] = {}
        self._default: str | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"ProviderRegistry(providers={self.list()!r}, default={self._default!r})"

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.resolve(name) is not None

    def register(self, adapter: ProviderAdapter, aliases: Iterable[str] = ()) -> None:
        """Store ``adapter`` under ``adapter.name`` (replacing an entry of that name).

        Args:
            adapter: Any object implementing :class:`ProviderAdapter`.
            aliases: Other names that resolve to it.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when ``adapter`` has no usable ``name``.
        """
        name = getattr(adapter, "name", None)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"cannot register {adapter!r}: it has no name")
        with self._lock:
            self._forget(name)
            self._adapters[name] = adapter
            for alias in aliases:
                self.alias(alias, name)

    def register_factory(self, name: str, factory: Factory, aliases: Iterable[str] = ()) -> None:
        """Register a provider built on first :meth:`get` by ``factory()``.

        The factory's adapter is stored under ``name`` whatever its own ``name`` says (presets
        share one class name but are separate entries).
        """
        with self._lock:
            self._forget(name)
            self._factories[name] = factory
            for alias in aliases:
                self.alias(alias, name)

    def register_preset(self, alias: str, name: str, factory: Factory) -> None:
        """Make ``alias`` resolve to ``name`` but fetch its own adapter, built by ``factory``.

        Used for backend presets: ``get("lmstudio")`` is an OpenAI-compatible provider with the
        LM Studio backend, while ``resolve("lmstudio") == "openai-compatible"``.

        Raises:
            ProviderNotFound: ``PROVIDER_NOT_FOUND`` when ``name`` is not registered.
        """
        with self._lock:
            self.alias(alias, name)
            self._presets[alias] = factory

    def alias(self, alias: str, name: str) -> None:
        """Make ``alias`` resolve to the registered provider ``name``.

        Raises:
            ProviderNotFound: ``PROVIDER_NOT_FOUND`` when ``name`` is not registered.
        """
        with self._lock:
            canonical = self.resolve(name)
            if canonical is None:
                raise self._not_found(name)
            self._presets.pop(alias, None)
            if alias != canonical:
                self._aliases[alias] = canonical

    def resolve(self, name: str) -> str | None:
        """The canonical name for ``name`` (aliases first), or ``None`` if unknown."""
        with self._lock:
            target = self._aliases.get(name, name)
            if target in self._adapters or target in self._factories:
                return target
            return None

    def get(self, name: str | None = None) -> ProviderAdapter | None:
        """The provider for ``name`` (``None``: the default), or ``None`` if unknown.

        Raises:
            OllmError: whatever building a lazily registered provider raised (e.g.
                ``CONFIG_INVALID`` for a bad base URL).
        """
        with self._lock:
            if name is None:
                name = self._default
                if name is None:
                    return None
            canonical = self.resolve(name)
            if canonical is None:
                return None
            preset = self._presets.get(name)
            if preset is not None:
                if not isinstance(preset, ProviderAdapter):
                    preset = preset()
                    self._presets[name] = preset
                return preset
            adapter = self._adapters.get(canonical)
            if adapter is None:
                adapter = self._factories[canonical]()
                self._adapters[canonical] = adapter
                del self._factories[canonical]
            return adapter

    def require(self, name: str | None = None) -> ProviderAdapter:
        """Like :meth:`get`, but an unknown name raises.

        Raises:
            ProviderNotFound: ``PROVIDER_NOT_FOUND`` naming the registered providers.
        """
        adapter = self.get(name)
        if adapter is None:
            raise self._not_found(name if name is not None else "(default)")
        return adapter

    def set_default(self, name: str) -> None:
        """Make ``name`` (or what it aliases) the default provider.

        Raises:
            ProviderNotFound: ``PROVIDER_NOT_FOUND`` when it is not registered.
        """
        with self._lock:
            canonical = self.resolve(name)
            if canonical is None:
                raise self._not_found(name)
            # A preset alias stays the default as itself: get() must return the preset.
            self._default = name if name in self._presets else canonical

    def get_default(self) -> ProviderAdapter:
        """The default provider.

        Raises:
            ProviderNotFound: ``PROVIDER_NOT_FOUND`` when no default is set.
        """
        with self._lock:
            if self._default is None:
                raise ProviderNotFound(
                    "no default provider is set: call set_default(name)",
                    details={"registered": self.list()},
                )
            return self.require(self._default)

    @property
    def default_name(self) -> str | None:
        """The canonical name of the default provider, if one is set."""
        return None if self._default is None else self.resolve(self._default)

    def list(self) -> list[str]:
        """Registered canonical names (no aliases), in registration order."""
        with self._lock:
            names = [*self._adapters, *self._factories]
            return list(dict.fromkeys(names))

    def aliases(self) -> dict[str, str]:
        """Alias → canonical name."""
        with self._lock:
            return dict(self._aliases)

    def _forget(self, name: str) -> None:
        """Drop every entry stored under ``name``, before a new one takes its place."""
        for entries in (self._adapters, self._factories, self._aliases, self._presets):
            entries.pop(name, None)

    def _not_found(self, name: str) -> ProviderNotFound:
        known = self.list()
        return ProviderNotFound(
            f"no provider named {name!r}; registered: {', '.join(known) or 'none'}",
            provider=name,
            details={"registered": known, "aliases": sorted(self._aliases)},
        )


# --------------------------------------------------------------------------- built-ins


def default_registry(config: Config | None = None) -> ProviderRegistry:
    """A registry of the built-in providers, built lazily from ``config``.

    Registers ``local`` (Ollama, the default), ``vllm``, ``openai-compatible`` and ``gemini``;
    ``ollama`` aliases ``local``; ``lmstudio``, ``localai``, ``kobold`` and ``llamacpp`` alias
    ``openai-compatible`` and fetch an ``OpenAICompatibleProvider`` preset with that backend
    (settings from ``providers.<preset>`` when present, else ``providers.openai-compatible``);
    the configuration's other alias spellings (``koboldcpp``, ``llama.cpp``, ``google`` …)
    work too. No provider is constructed (and no HTTP library imported) until it is first
    fetched.

    Args:
        config: Base URLs, API keys, backends and timeouts per provider, and the default
            provider (``config.provider``). ``None``: what :func:`ollm_lite.load_config`
            reads, exactly as the ``ollm-lite`` command line does (the configuration file,
            then ``$OLLM_PROVIDER``, ``$OPENAI_COMPATIBLE_HOST`` and the other variables).

    Raises:
        ProviderNotFound: ``PROVIDER_NOT_FOUND`` when ``config.provider`` names no provider.
        ConfigError: ``CONFIG_INVALID`` when ``config`` is ``None`` and the configuration
            file cannot be read (see :func:`ollm_lite.load_config`).
    """
    if config is None:
        from .config import load_config

        config = load_config()
    built_in = _BuiltIns(config)
    registry = ProviderRegistry()
    registry.register_factory("local", built_in.local, aliases=["ollama"])
    registry.register_factory("vllm", built_in.vllm)
    registry.register_factory("openai-compatible", built_in.openai_compatible())
    registry.register_factory("gemini", built_in.gemini)
    registry.register_factory("anthropic", built_in.anthropic, aliases=["claude"])
    presets = {p: _once(built_in.openai_compatible(p)) for p in OPENAI_COMPATIBLE_PRESETS}
    for preset, factory in presets.items():
        registry.register_preset(preset, "openai-compatible", factory)
    _register_spellings(registry, presets)
    registry.set_default(config.provider or "local")
    return registry


class _BuiltIns:
    """Factories of the built-in providers, each reading its section of one configuration."""

    def __init__(self, config: Config) -> None:
        self.sections: dict[str, ProviderConfig] = dict(config.providers)

    def settings(self, name: str, fallback: str | None = None) -> dict[str, Any]:
        """The constructor arguments a section sets (``fallback``'s when it has none)."""
        section = self.sections.get(name)
        if section is None and fallback is not None:
            section = self.sections.get(fallback)
        if section is None:
            return {}
        out: dict[str, Any] = {}
        for key in ("base_url", "api_key", "timeout", "retries"):
            value = getattr(section, key, None)
            if value is not None:
                out[key] = value
        return out

    def local(self) -> ProviderAdapter:
        from .providers.ollama import LocalProvider

        return LocalProvider(**self.settings("local", "ollama"))

    def vllm(self) -> ProviderAdapter:
        from .providers.vllm import VllmProvider

        return VllmProvider(**self.settings("vllm"))

    def gemini(self) -> ProviderAdapter:
        # Imported by name: the Gemini module is optional in a trimmed install.
        try:
            module = importlib.import_module(f"{__package__}.providers.gemini")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.providers.gemini":
                raise
            raise ProviderNotFound(
                "the gemini provider is not available in this installation", provider="gemini"
            ) from exc
        adapter: ProviderAdapter = module.GeminiProvider(**self.settings("gemini"))
        return adapter

    def anthropic(self) -> ProviderAdapter:
        from .providers.anthropic import AnthropicProvider

        return AnthropicProvider(**self.settings("anthropic"))

    def openai_compatible(self, preset: str | None = None) -> Factory:
        """The factory of ``openai-compatible`` itself (``None``) or of one backend preset."""

        def build() -> ProviderAdapter:
            from .providers.openai_compat import OpenAICompatibleProvider

            kwargs = (
                self.settings(preset, "openai-compatible")
                if preset
                else self.settings("openai-compatible")
            )
            backend = preset
            if backend is None:
                section = self.sections.get("openai-compatible")
                backend = getattr(section, "backend", None) or DEFAULT_BACKEND
            return OpenAICompatibleProvider(backend=backend, **kwargs)

        return build


def _register_spellings(registry: ProviderRegistry, presets: dict[str, Factory]) -> None:
    """Register the configuration's other spellings (``koboldcpp``, ``llama.cpp``, ``google`` …)."""
    from .config import PROVIDER_ALIASES

    for alias, (canonical, backend) in PROVIDER_ALIASES.items():
        if alias in registry or registry.resolve(canonical) is None:
            continue
        if backend in presets:
            registry.register_preset(alias, canonical, presets[backend])
        else:
            registry.alias(alias, canonical)


def _once(factory: Factory) -> Factory:
    """``factory`` building at most one adapter, shared by every alias that uses it."""
    built: list[ProviderAdapter] = []
    lock = threading.Lock()

    def build() -> ProviderAdapter:
        with lock:
            if not built:
                built.append(factory())
            return built[0]

    return build

"""From configuration to a provider: the rules the CLI and the script API share.

``connect()`` and ``ollm-lite`` read the configuration the same way: :func:`client_config`
loads it with :func:`~ollm_lite.config.load_config` (file, environment, then the explicit
arguments as the top layer, exactly what the CLI's ``--provider``/``--host``/``--api-key``/
``--model`` flags do), :func:`require_valid` stops at the first problem, and
:func:`build_provider` builds the one provider a client talks to from the
:func:`~ollm_lite.registry.default_registry` of that configuration. A provider object given by
the caller (``ScriptedProvider`` in a test, a custom adapter) is used as it is.
:func:`resolve_model` picks the model: the configured one, else the server's only chat model.

:func:`build_provider` is the one place that turns "which server(s)" into an adapter, so
serving several hosts plugs in here.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError, OllmError, ProviderNotFound
from ..providers.base import ProviderAdapter, call_with_cancel
from . import (
    PROVIDER_ALIASES,
    PROVIDERS,
    Config,
    ProviderConfig,
    canonical_provider,
    load_config,
    validate_config,
)
from ._options import options_issues

__all__ = [
    "build_provider",
    "call_defaults",
    "client_config",
    "given_provider",
    "require_valid",
    "resolve_model",
]

logger = logging.getLogger(__name__)

_MODEL_HINT = 'pass model="NAME" (CLI: --model), set OLLM_MODEL, or model = "..." in the config'


def given_provider(
    provider: str | ProviderAdapter | None, *, configured_by_name: bool
) -> ProviderAdapter | None:
    """The provider object ``connect(provider=...)`` was given, or ``None`` for a name.

    Args:
        provider: A provider name or alias, a provider object, or ``None``.
        configured_by_name: Whether ``host``, ``hosts`` or ``api_key`` was given: they
            configure a provider by name only.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an object that is no provider, or one given with
            arguments that configure a provider by name.
        ProviderNotFound: ``PROVIDER_NOT_FOUND`` for an unknown provider name.
    """
    if isinstance(provider, str):
        if canonical_provider(provider)[0] not in PROVIDERS:
            raise ProviderNotFound(
                f"no provider named {provider!r}; choose from {', '.join(PROVIDERS)} or an "
                f"alias ({', '.join(sorted(PROVIDER_ALIASES))})",
                provider=provider,
            )
        return None
    if provider is None:
        return None
    if not callable(getattr(provider, "chat_stream", None)):
        raise ConfigError(f"provider must be a name or a provider object, not {provider!r}")
    if configured_by_name:
        raise ConfigError(
            "host=, hosts= and api_key= configure a provider by name; the provider object "
            "given is configured already"
        )
    return provider


def client_config(
    config: str | os.PathLike[str] | Config | None,
    *,
    provider: str | None = None,
    host: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
) -> Config:
    """The configuration with the explicit arguments on top, as the CLI builds it.

    Args:
        config: A TOML file, a loaded ``Config``, or ``None`` (``$OLLM_CONFIG``, else the
            default location, skipped when absent).
        provider: A provider name or alias (``None``: the configured one).
        host: Base URL of the selected provider.
        api_key: API key of the selected provider.
        model: The model (``None``: the configured one).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an unreadable file or an unset ``${VAR}``.
    """
    overrides = {"provider": provider, "model": model, "base_url": host, "api_key": api_key}
    if not isinstance(config, Config):
        return load_config(config, overrides=overrides)
    return _override(config, provider=provider, model=model, host=host, api_key=api_key)


def _override(
    config: Config,
    *,
    provider: str | None,
    model: str | None,
    host: str | None,
    api_key: str | None,
) -> Config:
    """A loaded ``Config`` with the explicit arguments applied (the given one is not changed)."""
    sections = dict(config.providers)
    selected = config.provider
    if provider is not None:
        selected, backend = canonical_provider(provider)
        if backend is not None:
            section = sections.get(selected, ProviderConfig())
            sections[selected] = dataclasses.replace(section, backend=backend)
    if host is not None or api_key is not None:
        section = sections.get(selected, ProviderConfig())
        sections[selected] = dataclasses.replace(
            section,
            base_url=host if host is not None else section.base_url,
            api_key=api_key if api_key is not None else section.api_key,
        )
    return dataclasses.replace(
        config,
        provider=selected,
        model=model if model is not None else config.model,
        providers=sections,
        context_limits=dict(config.context_limits),
        options=dict(config.options),
    )


def require_valid(config: Config) -> None:
    """Stop at the first problem ``validate_config`` finds, as the CLI does.

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming the problem (and how many more there are).
    """
    issues = validate_config(config)
    if issues:
        more = f" ({len(issues) - 1} more)" if len(issues) > 1 else ""
        raise ConfigError(
            f"invalid configuration: {issues[0]}{more}; run `ollm-lite config validate`",
            details={"issues": [str(i) for i in issues]},
        )


def call_defaults(config: Config, options: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults of every call of a client: ``options`` (``connect(**options)``) over the
    configuration's ``[options]`` table; ``extra_body`` merges key by key.

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming the first bad ``[options]`` entry (also when a
            provider object was given, which skips the rest of the configuration's checks).
    """
    if not config.options:
        return dict(options)
    issues = options_issues(config.options)
    if issues:
        raise ConfigError(
            f"invalid configuration: {issues[0]}; run `ollm-lite config validate`",
            details={"issues": [str(i) for i in issues]},
        )
    from ..client._options import merge

    return merge(config.options, options)


def build_provider(
    config: Config,
    provider: ProviderAdapter | None = None,
    *,
    hosts: Sequence[str] | None = None,
    per_host: int | None = None,
) -> ProviderAdapter:
    """The adapter a client talks to.

    Args:
        config: The configuration (its selected provider and settings).
        provider: An adapter given by the caller; used as it is.
        hosts: Base URLs of the selected provider's servers; one host is the same as
            ``host=``, several make a :class:`~ollm_lite.fleet.Fleet` (a request goes to the
            least busy server and moves on when one fails).
        per_host: Requests in flight per server (default: the server's own figure where it
            gives one, else 4); given with one server or none, that server is wrapped in a
            :class:`~ollm_lite.fleet.Fleet` that keeps to it.

    Raises:
        ProviderNotFound: ``PROVIDER_NOT_FOUND`` for an unknown provider name.
        ConfigError: ``CONFIG_INVALID`` for a bad base URL, or ``hosts`` that is no list
            of URLs.
    """
    if provider is not None:
        return provider
    from ..registry import default_registry

    def build(host: str | None, member: bool = False) -> ProviderAdapter:
        settings = config
        if host is not None:
            settings = _override(config, provider=None, model=None, host=host, api_key=None)
        built = default_registry(settings).require(settings.provider)
        return fleet_member(built) if member else built

    if hosts is not None:
        if isinstance(hosts, str) or not all(isinstance(h, str) and h for h in hosts):
            raise ConfigError("hosts must be a list of base URLs")
        if len(hosts) > 1 or (hosts and per_host is not None):
            from ..fleet import fleet_from_hosts

            return fleet_from_hosts(lambda url: build(url, True), hosts, per_host=per_host)
        if hosts:
            return build(hosts[0])
    if per_host is not None:
        from ..fleet import Fleet

        return Fleet([build(None, True)], per_host=per_host)
    return build(None)


def fleet_member(provider: ProviderAdapter) -> ProviderAdapter:
    """``provider``, just built by the library for a fleet, made to fail fast (no retries of
    its own): inside a fleet a member's retryable failure is the fleet's to route (another
    server at once, the sick one rested for its ``Retry-After``), not the member's to wait
    out. Only for providers the library built itself (a caller's object is never changed)."""
    fail_fast = getattr(provider, "_fail_fast", None)
    if callable(fail_fast):
        fail_fast()
    return provider


def resolve_model(
    model: str | None, adapter: ProviderAdapter, *, cancel: threading.Event | None = None
) -> str:
    """The model to use: ``model`` when given, else the server's only chat model.

    ``cancel`` is passed to the adapter's ``list_models`` where it accepts it.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when none is given and the server lists none, or
            several, or cannot list them.
        OllmError: a failure listing the models (``CONNECTION_FAILED`` …).
    """
    if model:
        return model
    try:
        models = call_with_cancel(adapter, "list_models", cancel=cancel)
    except OllmError as exc:
        if exc.code == "UNSUPPORTED_OPERATION":
            raise ConfigError(f"no model given: {_MODEL_HINT}") from exc
        raise
    except (AttributeError, NotImplementedError) as exc:  # an adapter without the method
        raise ConfigError(f"no model given: {_MODEL_HINT}") from exc
    names: list[str] = [m.name for m in models if m.kind != "embedding"]
    if len(names) == 1:
        logger.debug("using the server's only model %s", names[0])
        return names[0]
    if not names:
        raise ConfigError(f"no model given and the server lists none: {_MODEL_HINT}")
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    raise ConfigError(f"no model given and the server has several ({shown}): {_MODEL_HINT}")

"""The checks behind :func:`ollm_lite.config.validate_config`, and the messages they give."""

from __future__ import annotations

import math
from typing import Any

from ..http.secrets import unsendable
from ..http.urls import URLProblem, parse_base_url, without_userinfo
from ._model import (
    BACKENDS,
    PROVIDER_ALIASES,
    PROVIDERS,
    ConfigIssue,
    ProviderConfig,
    canonical_provider,
)
from ._vars import clip


def check_provider(provider: Any) -> list[ConfigIssue]:
    """The selected provider: a string naming a known provider or alias."""
    if not isinstance(provider, str):
        return [type_issue("provider", "a string", provider)]
    if canonical_provider(provider)[0] not in PROVIDERS:
        return [ConfigIssue("provider", unknown_provider(provider))]
    return []


def check_model(model: Any) -> list[ConfigIssue]:
    """The default model: unset, or a non-empty string."""
    if model is None or (isinstance(model, str) and model.strip()):
        return []
    if not isinstance(model, str):
        return [type_issue("model", "a non-empty string", model)]
    return [ConfigIssue("model", "must not be empty")]


def check_sections(providers: Any) -> list[ConfigIssue]:
    """Every ``[providers.NAME]`` table."""
    if not isinstance(providers, dict):
        return [type_issue("providers", "a table", providers)]
    return [
        issue for name, section in providers.items() for issue in check_section(str(name), section)
    ]


def check_context_limits(limits: Any) -> list[ConfigIssue]:
    """``[context_limits]``: a positive number of tokens per model."""
    if not isinstance(limits, dict):
        return [type_issue("context_limits", "a table", limits)]
    return [
        ConfigIssue(
            f"context_limits.{name}", f"must be a positive integer (tokens), got {show(limit)}"
        )
        for name, limit in limits.items()
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
    ]


def check_section(name: str, section: Any) -> list[ConfigIssue]:
    where = f"providers.{name}"
    canonical = canonical_provider(name)[0]
    if canonical not in PROVIDERS:
        return [ConfigIssue(where, unknown_provider(name))]
    if not isinstance(section, ProviderConfig):
        return [type_issue(where, "a table", section)]
    issues: list[ConfigIssue] = []
    if section.base_url is not None:
        problem = url_problem(section.base_url, ollama_host=canonical == "local")
        if problem:
            issues.append(ConfigIssue(f"{where}.base_url", problem))
    api_key: Any = section.api_key
    if api_key is not None and not isinstance(api_key, str):
        # The value itself may be a secret: name its type only.
        issues.append(
            ConfigIssue(f"{where}.api_key", f"must be a string, got {toml_type(api_key)}")
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
            issues.append(type_issue(f"{where}.backend", "a string", backend))
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
                    + suggest(backend, BACKENDS),
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
                f"{where}.timeout", f"must be a positive number of seconds, got {show(timeout)}"
            )
        )
    return issues


def url_problem(url: Any, *, ollama_host: bool = False) -> str | None:
    """What is wrong with ``url`` as a base URL, or ``None`` (the providers' own parser).

    ``ollama_host``: also accept a bare IPv6 address (``::1``, ``::``), as ``OLLAMA_HOST`` does.
    Messages never show URL user-info (``user:pass@``), with or without a scheme.
    """
    if not isinstance(url, str):
        return f"must be a string, got {show(url)}"
    if not url.strip():
        return "must not be empty"
    try:
        parse_base_url(url, bare_ipv6=ollama_host)
    except URLProblem as exc:
        return f"malformed URL {without_userinfo(url)!r}: {exc.reason}"
    return None


def unknown_provider(name: str) -> str:
    names = (*PROVIDERS, *PROVIDER_ALIASES)
    return (
        f"unknown provider {name!r}: expected one of {', '.join(PROVIDERS)} "
        f"(aliases: {', '.join(PROVIDER_ALIASES)})" + suggest(name, names)
    )


def unknown_key(path: str, key: str, known: tuple[str, ...]) -> ConfigIssue:
    return ConfigIssue(
        path, f"unknown key {key!r}: expected one of {', '.join(known)}" + suggest(key, known)
    )


def suggest(word: str, choices: tuple[str, ...]) -> str:
    import difflib  # here, not at the top: only a mistake needs it

    close = difflib.get_close_matches(word.lower(), choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def toml_type(value: Any) -> str:
    return {
        "str": "a string",
        "int": "an integer",
        "float": "a number",
        "bool": "a boolean",
        "dict": "a table",
        "list": "an array",
    }.get(type(value).__name__, type(value).__name__)


def show(value: Any) -> str:
    if isinstance(value, str):
        return repr(clip(value))
    if isinstance(value, dict | list):
        return toml_type(value)
    return f"{toml_type(value)} {value!r}"


def type_issue(path: str, expected: str, value: Any) -> ConfigIssue:
    return ConfigIssue(path, f"must be {expected}, got {show(value)}")

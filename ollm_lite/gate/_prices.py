"""Prices and costs: what a model turn cost, from the prices the user wrote down.

Prices are per million tokens, in one currency of the user's choosing (nothing is converted),
from ``connect(prices=...)`` (which wins) or the config file's ``[prices."MODEL"]`` tables,
matched on the exact model name a request used. There is no built-in price table: a stale one
would lie. The cached part of a prompt — ``prompt_tokens_details.cached_tokens`` (Chat
Completions) or ``cache_read_input_tokens`` (the Messages API), both kept in ``Usage.extra``
— is priced at ``cached_input``, or at ``input`` when that is not set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import ConfigError
from ..types import Usage

__all__ = ["Price", "cached_tokens", "price_issues", "prices_from", "turn_cost"]


@dataclass(frozen=True, slots=True)
class Price:
    """One model's prices per million tokens."""

    input: float
    output: float
    cached_input: float | None = None


_KEYS = tuple(f.name for f in fields(Price))
_REQUIRED = ("input", "output")


def price_issues(table: Any, where: str = "prices") -> list[tuple[str, str]]:
    """Problems in a prices mapping (``{model: {"input", "output", "cached_input"?}}``), as
    ``(dotted path, message)``."""
    if table is None:
        return []
    if not isinstance(table, Mapping):
        return [(where, f"must be a table of models, not {type(table).__name__}")]
    issues: list[tuple[str, str]] = []
    for model, entry in table.items():
        path = f"{where}.{model}"
        if not isinstance(model, str) or not model:
            issues.append((path, "a model name must be a non-empty string"))
            continue
        if not isinstance(entry, Mapping):
            issues.append((path, f"must be a table, not {type(entry).__name__}"))
            continue
        for key, value in entry.items():
            if key not in _KEYS:
                issues.append((f"{path}.{key}", f"unknown key; expected one of {', '.join(_KEYS)}"))
            elif not _is_price(value):
                issues.append((f"{path}.{key}", f"must be a number >= 0, not {value!r}"))
        issues.extend((f"{path}.{key}", "is required") for key in _REQUIRED if key not in entry)
    return issues


def _is_price(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def prices_from(given: Any, configured: Any) -> dict[str, Price]:
    """The prices a client uses: the config's tables, ``given`` (``connect(prices=)``) over
    them model by model.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a malformed ``given`` mapping (a malformed config
            table is reported by ``validate_config``, and its bad entries left out).
    """
    problems = price_issues(given)
    if problems:
        path, message = problems[0]
        raise ConfigError(f"prices: {path} {message}", details={"path": path})
    found: dict[str, Price] = {}
    for table, strict in ((configured, False), (given, True)):
        if not isinstance(table, Mapping):
            continue
        bad = {p.split(".")[1] for p, _ in price_issues(table)} if not strict else set()
        for model, entry in table.items():
            if model in bad or not isinstance(entry, Mapping):
                continue
            found[model] = Price(
                float(entry["input"]),
                float(entry["output"]),
                None if entry.get("cached_input") is None else float(entry["cached_input"]),
            )
    return found


def cached_tokens(usage: Usage) -> int:
    """The prompt tokens the server read from its cache (0 when it said nothing)."""
    extra = usage.extra or {}
    details = extra.get("prompt_tokens_details")
    if isinstance(details, Mapping):
        value = details.get("cached_tokens")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    value = extra.get("cache_read_input_tokens")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0


def turn_cost(price: Price | None, usage: Usage | None) -> float | None:
    """What one model turn cost (``None``: its model has no price, or the server reported no
    usage)."""
    if price is None or usage is None:
        return None
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    if prompt is None and completion is None:
        return None
    prompt, completion = prompt or 0, completion or 0
    cached = min(cached_tokens(usage), prompt)
    cached_price = price.input if price.cached_input is None else price.cached_input
    total = (prompt - cached) * price.input + cached * cached_price + completion * price.output
    return total / 1_000_000

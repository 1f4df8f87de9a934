"""The gate's configuration: the ``[prices."MODEL"]``, ``[budget]`` and ``[rate]`` tables.

``connect(prices=, budget=, rate=)`` win over the file's tables. The tables' values are
checked by ``validate_config`` (a bad entry is reported there and left out).
"""

from __future__ import annotations

from typing import Any

from ._budget import budget_issues
from ._prices import price_issues
from ._rate import rate_issues

__all__ = ["GATE_TABLES", "gate_issues"]

#: The config file's tables the gate reads.
GATE_TABLES = ("prices", "budget", "rate")


def gate_issues(config: Any) -> list[tuple[str, str]]:
    """Problems in the gate's tables of ``config``, as ``(dotted path, message)``."""
    return [
        *price_issues(getattr(config, "prices", None) or None),
        *budget_issues(getattr(config, "budget", None) or None),
        *rate_issues(getattr(config, "rate", None) or None),
    ]

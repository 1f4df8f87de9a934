"""Budgets: limits on what a client spends, checked before every model request.

Spent means: requests sent to a server (this process's requests still in flight included),
and the tokens (prompt + completion) and cost of the answers received. ``per="run"`` counts
the client's lifetime in this process; ``"day"`` and ``"month"`` are UTC calendar periods
counted from the call log — the calls every process and cron run committed to it — plus what
this client sent and received that its log does not hold yet. So processes sharing a log stay
within a limit but for the requests they had in flight when they passed it.

A request at or past a limit is not sent: :class:`~ollm_lite.errors.BudgetExceeded`.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, get_args

from ..errors import BudgetExceeded, ConfigError

if TYPE_CHECKING:
    from ..call_log._writer import LogFile

__all__ = ["Budget", "Per", "Spending", "Spent", "budget_from", "budget_issues", "period_start"]

logger = logging.getLogger("ollm_lite.gate")

Per = Literal["run", "day", "month"]
_PERS: tuple[str, ...] = get_args(Per)
What = Literal["tokens", "cost", "requests"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Limits on what a client spends in a period (``None``: no limit on that).

    Args:
        tokens: Prompt + completion tokens of the answers received.
        cost: Their cost, by the client's prices (docs/costs.md).
        requests: Requests sent to a server.
        per: ``"run"`` (the client's lifetime in this process), ``"day"`` or ``"month"``
            (UTC calendar periods, counted from the call log: they turn the log on).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a negative or non-number limit or an unknown
            ``per``.
    """

    tokens: int | None = None
    cost: float | None = None
    requests: int | None = None
    per: Per = "run"

    def __post_init__(self) -> None:
        problems = budget_issues({f.name: getattr(self, f.name) for f in fields(self)}, "Budget")
        if problems:
            path, message = problems[0]
            raise ConfigError(f"{path} {message}", details={"path": path})

    def limits(self) -> list[tuple[What, float]]:
        """The limits set, as ``(what, limit)``."""
        found: list[tuple[What, float]] = []
        for what in ("requests", "tokens", "cost"):
            limit = getattr(self, what)
            if limit is not None:
                found.append((what, limit))
        return found

    @property
    def from_log(self) -> bool:
        """Whether it is counted from the call log (``per`` a day or a month)."""
        return self.per != "run"


_KEYS = tuple(f.name for f in fields(Budget))


def budget_issues(table: Any, where: str = "budget") -> list[tuple[str, str]]:
    """Problems in a budget table (``tokens``, ``cost``, ``requests``, ``per``), as
    ``(dotted path, message)``."""
    if table is None:
        return []
    if not isinstance(table, Mapping):
        return [(where, f"must be a table, not {type(table).__name__}")]
    issues: list[tuple[str, str]] = []
    for key, value in table.items():
        path = f"{where}.{key}"
        if key not in _KEYS:
            issues.append((path, f"unknown key; expected one of {', '.join(_KEYS)}"))
        elif key == "per":
            if value not in _PERS:
                issues.append((path, f"must be one of {', '.join(_PERS)}, not {value!r}"))
        elif value is None:
            continue
        elif key in ("tokens", "requests"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                issues.append((path, f"must be a whole number >= 0, not {value!r}"))
        elif (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            issues.append((path, f"must be a number >= 0, not {value!r}"))
    return issues


def budget_from(given: Any, configured: Any) -> Budget | None:
    """The budget a client keeps: ``given`` (``connect(budget=)``), else the config file's
    ``[budget]`` table (``None``: no budget; a bad table is reported by ``validate_config``
    and ignored).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a ``given`` that is no :class:`Budget`.
    """
    if given is not None:
        if not isinstance(given, Budget):
            raise ConfigError(f"budget must be a Budget, not {type(given).__name__}")
        return given
    if not isinstance(configured, Mapping) or not configured or budget_issues(configured):
        return None
    return Budget(**configured)


def period_start(per: Per, now: datetime | None = None) -> datetime:
    """When the current UTC day or month began."""
    now = now or datetime.now(UTC)
    if per == "month":
        return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass(slots=True)
class Spent:
    """What was spent: requests sent, tokens and cost of the answers received."""

    requests: int = 0
    tokens: int = 0
    cost: float = 0.0

    def add(self, other: Spent, sign: int = 1) -> None:
        """Add (or, with ``sign=-1``, take away) ``other``."""
        self.requests += sign * other.requests
        self.tokens += sign * other.tokens
        self.cost += sign * other.cost

    def plus(self, other: Spent) -> Spent:
        """The sum of the two."""
        return Spent(
            self.requests + other.requests, self.tokens + other.tokens, self.cost + other.cost
        )


def spent_since(db: sqlite3.Connection, since: datetime) -> Spent:
    """What the calls committed to a log since ``since`` spent: requests sent (model turns
    not answered from the cache), tokens and cost (ids sort by time, so the primary keys
    find them; a log older than costs has none).

    Raises:
        sqlite3.Error: the log cannot be read.
    """
    first_id = f"{int(since.timestamp() * 1_000_000):014x}"
    has_cost = db.execute(
        "SELECT count(*) FROM pragma_table_info('calls') WHERE name = 'cost'"
    ).fetchone()[0]
    tokens, cost = db.execute(
        "SELECT coalesce(sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)), 0), "
        f"coalesce(sum({'cost' if has_cost else 'NULL'}), 0) FROM calls WHERE id >= ?",
        (first_id,),
    ).fetchone()
    (requests,) = db.execute(
        "SELECT count(*) FROM turns WHERE call_id >= ? AND cached = 0", (first_id,)
    ).fetchone()
    return Spent(int(requests), int(tokens), float(cost))


def log_spent(file: LogFile, since: datetime, budget: float) -> Spent:
    """:func:`spent_since` on the client's log. A log that cannot be read counts as nothing
    spent (the call log warns on its own)."""
    try:
        with file.connection(max(0.0, budget)) as db:
            return spent_since(db, since)
    except Exception as exc:  # sqlite3.Error, OSError, a newer schema: never the call's
        logger.debug("budget: the call log %s cannot be read: %s", file.path, exc)
        return Spent()


class Spending:
    """A client's spend counters and its budget's check.

    ``run``: everything this client spent; ``unlogged``: what it spent that its log does not
    hold yet (requests in flight, answers of calls not yet committed).
    """

    def __init__(self, budget: Budget | None, file: LogFile | None) -> None:
        self.budget = budget
        self.file = file
        self.run = Spent()
        self.unlogged = Spent()
        self._lock = threading.Lock()
        # one check at a time per client, so two threads never both pass the last slot
        self._checking = threading.Lock()

    def spent(self, budget_seconds: float = 5.0) -> Spent:
        """What the budget's period has spent so far."""
        budget = self.budget
        if budget is None or not budget.from_log or self.file is None:
            with self._lock:
                return Spent(self.run.requests, self.run.tokens, self.run.cost)
        logged = log_spent(self.file, period_start(budget.per), budget_seconds)
        with self._lock:
            return logged.plus(self.unlogged)

    def check(self, *, reserve: bool, budget_seconds: float = 5.0) -> None:
        """Refuse a request at or past a limit; with ``reserve``, count it as sent.

        Raises:
            BudgetExceeded: ``LLM_BUDGET_EXCEEDED``; nothing is counted.
        """
        budget = self.budget
        if budget is None:
            if reserve:
                self.sent(1)
            return
        with self._checking:
            spent = self.spent(budget_seconds)
            for what, limit in budget.limits():
                value = getattr(spent, what)
                if value >= limit:
                    raise BudgetExceeded(
                        f"the {budget.per} budget of {_figure(limit)} {what} is spent "
                        f"({_figure(value)}): the request was not sent",
                        details={"limit": limit, "spent": value, "what": what, "per": budget.per},
                    )
            if reserve:
                self.sent(1)

    def sent(self, requests: int) -> None:
        """``requests`` were sent (counted from now, in flight included)."""
        with self._lock:
            self.run.requests += requests
            self.unlogged.requests += requests

    def answered(self, tokens: int, cost: float | None) -> None:
        """An answer came back with ``tokens`` and ``cost`` (``None``: unpriced)."""
        with self._lock:
            self.run.tokens += tokens
            self.unlogged.tokens += tokens
            if cost is not None:
                self.run.cost += cost
                self.unlogged.cost += cost

    def logged(self, spent: Spent) -> None:
        """A call's row, holding ``spent``, is committed: the log counts it from now."""
        with self._lock:
            self.unlogged.add(spent, -1)


def _figure(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)

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

import contextlib
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, get_args

from ..call_log._schema import open_connection
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


_SPENT = (
    "SELECT (SELECT coalesce(max(rowid), 0) FROM calls), "
    "(SELECT coalesce(max(rowid), 0) FROM turns), "
    "(SELECT coalesce(sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)), 0)"
    " FROM calls WHERE rowid > ?1 AND id >= ?3), "
    "(SELECT coalesce(sum({cost}), 0) FROM calls WHERE rowid > ?1 AND id >= ?3), "
    "(SELECT count(*) FROM turns WHERE rowid > ?2 AND call_id >= ?3 AND cached = 0)"
)


def spent_since(
    db: sqlite3.Connection,
    since: datetime,
    after: tuple[int, int] = (0, 0),
    *,
    has_cost: bool | None = None,
) -> tuple[Spent, tuple[int, int]]:
    """What the calls committed to a log since ``since`` spent — requests sent (model turns
    not answered from the cache), tokens and cost — counting only the rows after ``after``
    (the last ``calls`` and ``turns`` rowids already counted; rowids only grow), and the
    rowids counted up to now. Ids sort by time, so ``since`` is a range of them. One
    statement: one snapshot of the file.

    Raises:
        sqlite3.Error: the log cannot be read.
    """
    first_id = f"{int(since.timestamp() * 1_000_000):014x}"
    if has_cost is None:  # a log older than costs, read as it is, has none
        has_cost = bool(
            db.execute(
                "SELECT count(*) FROM pragma_table_info('calls') WHERE name = 'cost'"
            ).fetchone()[0]
        )
    calls, turns, tokens, cost, requests = db.execute(
        _SPENT.format(cost="cost" if has_cost else "NULL"), (after[0], after[1], first_id)
    ).fetchone()
    return Spent(int(requests), int(tokens), float(cost)), (int(calls), int(turns))


class LogTotals:
    """What a client's log holds for the current period, read incrementally: each look reads
    only the rows committed since the last one (rowids only grow), so a check costs the same
    on the day's first call and on its ten-thousandth.

    A row pruned from the current period stays counted (a prune of today's calls is rare, and
    counting it errs on the side of not sending).
    """

    #: How often the read connection checks that the file is still the one at the path.
    _RECHECK = 1.0

    def __init__(self, file: LogFile) -> None:
        self.file = file
        self._since: datetime | None = None
        self._rows = (0, 0)
        self._totals = Spent()
        self._lock = threading.Lock()
        # its own read connection: a look is one statement, no pool checkout
        self._db: sqlite3.Connection | None = None
        self._opened: tuple[int, Any] = (0, None)  # the process and the file it was opened in
        self._checked = 0.0

    def _connection(self, budget: float) -> sqlite3.Connection:
        from ..call_log._writer import _identity

        db, now = self._db, time.monotonic()
        if db is not None and self._opened[0] != os.getpid():
            self.close()  # a child process: never a parent's connection
            db = None
        if db is not None and now - self._checked > self._RECHECK:
            self._checked = now
            if self._opened[1] != _identity(self.file.path):
                self.close()  # the file was removed or replaced: read the one there now
                db = None
        if db is None:
            with self.file.connection(budget):  # creates and migrates the file as writes do
                pass
            db = open_connection(self.file.path, budget, shared=True, writing=False)
            self._db, self._opened, self._checked = (
                db,
                (os.getpid(), _identity(self.file.path)),
                now,
            )
        return db

    def spent(self, since: datetime, budget: float) -> Spent:
        """What the log's calls since ``since`` spent. A log that cannot be read adds
        nothing new (the call log warns on its own)."""
        with self._lock:
            if since != self._since:  # a new day or month: count it from its start
                self._since, self._rows, self._totals = since, (0, 0), Spent()
            try:
                db = self._connection(max(0.0, budget))
                new, rows = spent_since(db, since, self._rows, has_cost=True)
                if rows[0] < self._rows[0] or rows[1] < self._rows[1]:
                    new, rows = spent_since(db, since, has_cost=True)  # a new file: afresh
                    self._totals = Spent()
                self._totals.add(new)
                self._rows = rows
            except Exception as exc:  # sqlite3.Error, OSError, a newer schema: never the call's
                self.close()
                logger.debug("budget: the call log %s cannot be read: %s", self.file.path, exc)
            return Spent(self._totals.requests, self._totals.tokens, self._totals.cost)

    def close(self) -> None:
        """Close the read connection (a later look opens a new one)."""
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()


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
        self.log = LogTotals(file) if file is not None else None
        self._lock = threading.Lock()
        # one check at a time per client, so two threads never both pass the last slot
        self._checking = threading.Lock()

    def spent(self, budget_seconds: float = 5.0) -> Spent:
        """What the budget's period has spent so far."""
        budget = self.budget
        if budget is None or not budget.from_log or self.log is None:
            with self._lock:
                return Spent(self.run.requests, self.run.tokens, self.run.cost)
        logged = self.log.spent(period_start(budget.per), budget_seconds)
        with self._lock:
            return logged.plus(self.unlogged)

    def check(self, *, reserve: bool, budget_seconds: float = 5.0, own: int = 0) -> None:
        """Refuse a request at or past a limit; with ``reserve``, count it as sent (``own``:
        requests of the caller's already counted, left out of the comparison).

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
            spent.requests -= own
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

    def close(self) -> None:
        """Close what it holds open (the log's read connection)."""
        if self.log is not None:
            self.log.close()

    def logged(self, spent: Spent) -> None:
        """A call's row, holding ``spent``, is committed: the log counts it from now."""
        with self._lock:
            self.unlogged.add(spent, -1)


def _figure(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)

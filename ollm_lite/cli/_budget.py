"""``ollm-lite budget``: what today and this month spent, against the ``[budget]`` limits.

For a cron line: ``ollm-lite budget && my-script`` runs the script only while no limit is
reached. The spend is read from the call log (every process writing it counts); the exit code
is 1 when the configured day or month limit is reached, 0 otherwise (also with no log or no
limits).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..call_log._settings import log_path
from ..errors import ConfigError
from ._common import EXIT_ERROR, EXIT_OK, Context, emit_json, table

__all__ = ["add_budget_parser"]


def add_budget_parser(commands: Any, flags: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``budget`` to the CLI's sub-commands; returns its parser."""
    budget: argparse.ArgumentParser = commands.add_parser(
        "budget",
        parents=[flags],
        help="today's and this month's spend against the [budget] limits",
        description=(
            "Print what the current UTC day and month spent (from the call log) against the "
            "[budget] limits of the config file; exit 1 when a limit is reached."
        ),
    )
    budget.add_argument("--json", action="store_true", help="one JSON object")
    budget.set_defaults(handler=_cmd_budget, usage_parser=budget)
    return budget


def _cmd_budget(args: argparse.Namespace, ctx: Context) -> int:
    from ..gate._budget import Spent, budget_from, period_start

    ctx.check_config()
    limits = budget_from(None, ctx.config.budget)
    now = datetime.now(UTC)
    path = log_path(None, ctx.config)
    day, month = Spent(), Spent()
    if path.exists():
        day, month = _read(path, period_start("day", now)), _read(path, period_start("month", now))
    spent = {"day": day, "month": month}.get(limits.per) if limits is not None else None
    reached = bool(
        limits is not None
        and spent is not None
        and any(getattr(spent, what) >= limit for what, limit in limits.limits())
    )
    if args.json:
        emit_json(
            ctx.out,
            {
                "day": _figures(day),
                "month": _figures(month),
                "limit": None
                if limits is None
                else {
                    "tokens": limits.tokens,
                    "cost": limits.cost,
                    "requests": limits.requests,
                    "per": limits.per,
                },
                "reached": reached,
            },
        )
        return EXIT_ERROR if reached else EXIT_OK
    rows = [
        [now.strftime("%Y-%m-%d"), str(day.requests), str(day.tokens), f"{day.cost:.4f}"],
        [now.strftime("%Y-%m"), str(month.requests), str(month.tokens), f"{month.cost:.4f}"],
    ]
    if limits is not None:
        rows.append(
            [
                f"limit per {limits.per}",
                _limit(limits.requests),
                _limit(limits.tokens),
                _limit(limits.cost),
            ]
        )
    ctx.out.write(table(["PERIOD", "REQUESTS", "TOKENS", "COST"], rows))
    if limits is None:
        ctx.out.write("no [budget] limits are configured\n")
    elif limits.per == "run":
        ctx.out.write("the budget is per run: each client counts its own\n")
    else:
        ctx.out.write(f"{'a limit is reached' if reached else 'within the limits'}\n")
    if not path.exists():
        ctx.out.write(f"nothing is logged yet ({path} does not exist)\n")
    return EXIT_ERROR if reached else EXIT_OK


def _read(path: Path, since: datetime) -> Any:
    import sqlite3

    from ..call_log._schema import NewerSchema, check_version, open_connection
    from ..gate._budget import Spent, spent_since

    try:
        db = open_connection(path, 5.0, readonly=True)
        try:
            if check_version(db) == 0:
                return Spent()
            return spent_since(db, since)[0]
        finally:
            db.close()
    except NewerSchema as exc:
        raise ConfigError(f"the call log {path} was written by a newer version ({exc})") from exc
    except sqlite3.Error as exc:
        raise ConfigError(f"the call log {path} cannot be read: {exc}") from exc


def _figures(spent: Any) -> dict[str, Any]:
    return {"tokens": spent.tokens, "cost": spent.cost, "requests": spent.requests}


def _limit(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"

"""Reading the log: :class:`CallLog` (``open_log``) — list, get, stats, prune.

A missing file reads as an empty log and none is created. A file that is not a database, is
damaged or was written by a newer version raises ``ConfigError``; a read-only or busy log is
still readable (WAL readers never wait for a writer).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import time
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from .._files import path_text
from ..errors import ConfigError
from ._records import (
    CallStats,
    LoggedCall,
    result_from_dict,
    stored_text,
    tool_call_from_dict,
    usage_from_dict,
)
from ._schema import (
    MIGRATIONS,
    NewerSchema,
    NotACallLog,
    check_regular,
    check_version,
    has_fts,
    is_foreign,
    open_connection,
)
from ._settings import usable_path

__all__ = ["CallLog", "StatsKey", "log_exists"]

StatsKey = Literal["model", "day", "host", "source"]
_STATS_COLUMNS: dict[str, str] = {
    "model": "model",
    "day": "day",
    "host": "host",
    "source": "source",
}
_BUSY = 5.0


def _seconds_ago(value: Any, name: str) -> float:
    """``value`` (a datetime, or seconds ago as a number/timedelta) as an epoch timestamp.

    A naive datetime is local time, as Python's own ``datetime.timestamp()`` takes it
    (``datetime.now() - timedelta(hours=1)`` is an hour ago)."""
    if isinstance(value, datetime):
        return float(value.timestamp())
    if isinstance(value, timedelta):
        return time.time() - value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return time.time() - float(value)
    raise ConfigError(f"{name} must be a datetime or seconds ago, not {value!r}")


def _age(value: Any) -> float:
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        seconds = float(value)
    else:
        raise ConfigError(f"older_than must be seconds or a timedelta, not {value!r}")
    if seconds < 0:
        raise ConfigError(f"older_than must not be negative, not {value!r}")
    return seconds


def log_exists(path: Path) -> bool:
    """Whether a log file is at ``path`` (``False``: nothing there), looked at without opening
    it: opening a FIFO would wait for a writer for ever.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when something other than a regular file is there, or
            the path cannot be looked at (a name too long, a folder that cannot be entered).
    """
    try:
        return check_regular(path)
    except (sqlite3.Error, OSError) as exc:
        raise _unreadable(path, exc) from exc


def _unreadable(path: Path, exc: BaseException) -> ConfigError:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return ConfigError(
        f"the call log {path_text(path)} cannot be read: {reason}", details={"path": str(path)}
    )


class CallLog:
    """The call log, for reading (and pruning); use it as a context manager.

    Args:
        path: The log file.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a file that is not a database, is damaged or was
            written by a newer version.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = usable_path(path, "open_log(path)")
        self._db: sqlite3.Connection | None = None
        self._fts = False
        if self._exists():
            self._db = self._open()

    def _exists(self) -> bool:
        return log_exists(self.path)

    def _unreadable(self, exc: BaseException) -> ConfigError:
        return _unreadable(self.path, exc)

    def _open(self) -> sqlite3.Connection:
        try:
            if os.stat(self.path).st_size == 0:
                return _empty()  # read as it is: not even a WAL header written into it
            try:
                db = open_connection(self.path, _BUSY, writing=False)
            except sqlite3.OperationalError:  # read-only file or folder: read it as it is
                db = open_connection(self.path, _BUSY, readonly=True)
            try:
                version = check_version(db)
                if is_foreign(db):
                    raise NotACallLog("not a call log: a database of something else")
                self._fts = version > 0 and has_fts(db)
                if version == 0:
                    db.close()
                    return _empty()
                if version < len(MIGRATIONS):
                    _upgrade(db)
            except BaseException:
                db.close()
                raise
        except NewerSchema as exc:
            raise ConfigError(
                f"the call log {self.path} was written by a newer version of ollm-lite ({exc})"
            ) from exc
        except (sqlite3.Error, OSError) as exc:
            raise self._unreadable(exc) from exc
        return db

    def __repr__(self) -> str:
        return f"CallLog(path={str(self.path)!r})"

    def __enter__(self) -> CallLog:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (the log stays readable: a later call reopens it)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def _query(self, sql: str, params: Any = ()) -> list[sqlite3.Row]:
        if self._db is None:
            if not self._exists():
                return []
            self._db = self._open()
        self._db.row_factory = sqlite3.Row
        try:
            return list(self._db.execute(sql, params).fetchall())
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise ConfigError(f"the call log {self.path} cannot be read: {exc}") from exc
        except sqlite3.Error as exc:
            raise ConfigError(f"the call log {self.path} cannot be read: {exc}") from exc

    # ------------------------------------------------------------------ queries

    def calls(
        self,
        *,
        since: datetime | timedelta | float | None = None,
        until: datetime | timedelta | float | None = None,
        model: str | None = None,
        search: str | None = None,
        errors: bool = False,
        limit: int | None = 50,
    ) -> list[LoggedCall]:
        """Logged calls, newest first.

        Args:
            since: Only calls started at or after this (a datetime, naive meaning local
                time, or seconds ago).
            until: Only calls started before this (the same).
            model: Only calls to this model.
            search: Only calls whose prompt or answer contains this text (full-text search
                where the SQLite build has FTS5, else ``LIKE``).
            errors: Only calls that ended with an error.
            limit: At most this many (``None``: all).

        Raises:
            ConfigError: ``CONFIG_INVALID`` for a bad argument or a log that cannot be read.
        """
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            where.append("started_ts >= ?")
            params.append(_seconds_ago(since, "since"))
        if until is not None:
            where.append("started_ts < ?")
            params.append(_seconds_ago(until, "until"))
        if model is not None:
            where.append("model = ?")
            params.append(model)
        if errors:
            where.append("error_code IS NOT NULL")
        if search:
            if self._fts and len(search) >= 3:
                where.append("rowid IN (SELECT rowid FROM calls_fts WHERE calls_fts MATCH ?)")
                params.append('"' + search.replace('"', '""') + '"')
            else:
                pattern = (
                    "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
                )
                where.append(
                    "rowid IN (SELECT rowid FROM calls_fts "
                    "WHERE prompt LIKE ? ESCAPE '\\' OR answer LIKE ? ESCAPE '\\')"
                )
                params.extend([pattern, pattern])
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise ConfigError(f"limit must be an integer >= 0 or None, not {limit!r}")
        sql = "SELECT * FROM calls"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += f" LIMIT {limit}"
        rows = self._query(sql, params)
        return [self._call(row) for row in rows]

    def get(self, call_id: str) -> LoggedCall:
        """The call with this id.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for an unknown id.
        """
        rows = self._query("SELECT * FROM calls WHERE id = ?", (str(call_id),))
        if not rows:
            raise ConfigError(f"no call {call_id!r} in the call log {self.path}")
        return self._call(rows[0])

    def _call(self, row: sqlite3.Row) -> LoggedCall:
        turns = self._query(
            "SELECT request, answer, cached FROM turns WHERE call_id = ? ORDER BY number",
            (row["id"],),
        )
        return LoggedCall(
            id=row["id"],
            started=datetime.fromisoformat(row["started"]),
            seconds=row["seconds"],
            first_token_seconds=row["first_token_seconds"],
            source=row["source"],
            script=stored_text(row["script"]),
            provider=row["provider"],
            host=row["host"],
            model=stored_text(row["model"]),
            messages=json.loads(row["messages"]),
            options=json.loads(row["options"]),
            text=stored_text(row["text"]),
            thinking=stored_text(row["thinking"]),
            tool_calls=[tool_call_from_dict(c) for c in json.loads(row["tool_calls"])],
            tool_results=[result_from_dict(r) for r in json.loads(row["tool_results"])],
            finish=row["finish"],
            error_code=row["error_code"],
            error_message=stored_text(row["error_message"]),
            usage=usage_from_dict(json.loads(row["usage"])) if row["usage"] else None,
            cached=bool(row["cached"]),
            session_id=stored_text(row["session_id"]),
            custom_id=stored_text(row["custom_id"]),
            turns=[
                {
                    "request": json.loads(t["request"]),
                    "answer": json.loads(t["answer"]),
                    "cached": bool(t["cached"]),
                }
                for t in turns
            ],
        )

    def stats(
        self, *, by: StatsKey = "model", since: datetime | timedelta | float | None = None
    ) -> list[CallStats]:
        """Figures per model, day (``YYYY-MM-DD`` in UTC), host or source.

        Cached calls spend no tokens and add none.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for an unknown ``by``.
        """
        column = _STATS_COLUMNS.get(by) if isinstance(by, str) else None
        if column is None:
            raise ConfigError(f"by must be one of model, day, host, source, not {by!r}")
        sql = (
            f"SELECT coalesce({column}, '') AS key, seconds, error_code, cached, prompt_tokens, "
            "completion_tokens FROM calls"
        )
        params: list[Any] = []
        if since is not None:
            sql += " WHERE started_ts >= ?"
            params.append(_seconds_ago(since, "since"))
        groups: dict[str, list[sqlite3.Row]] = {}
        for row in self._query(sql, params):
            groups.setdefault(row["key"], []).append(row)
        return [_stats(key, rows) for key, rows in sorted(groups.items())]

    def prune(self, *, older_than: timedelta | float) -> int:
        """Remove for good the calls started more than ``older_than`` ago (seconds or a
        timedelta), their turns and their full-text entries; the number of calls removed.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for a bad ``older_than`` or a log that cannot be
                written.
        """
        cutoff = time.time() - _age(older_than)
        if self._db is None:
            if not self._exists():
                return 0
            self._db = self._open()
        db = self._db
        try:
            db.execute("PRAGMA secure_delete = ON")  # the removed text is overwritten
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "DELETE FROM calls_fts WHERE rowid IN "
                    "(SELECT rowid FROM calls WHERE started_ts < ?)",
                    (cutoff,),
                )
                db.execute(
                    "DELETE FROM turns WHERE call_id IN "
                    "(SELECT id FROM calls WHERE started_ts < ?)",
                    (cutoff,),
                )
                removed = db.execute("DELETE FROM calls WHERE started_ts < ?", (cutoff,)).rowcount
                if self._fts and removed:
                    # merge the index segments so the deleted entries leave the file
                    db.execute("INSERT INTO calls_fts (calls_fts) VALUES ('optimize')")
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            if removed:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot prune the call log {self.path}: {exc}") from exc
        return int(removed)


def _empty() -> sqlite3.Connection:
    """An in-memory log with the schema: a file without one (empty) reads as no calls."""
    from ._schema import migrate

    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate(db)
    return db


def _upgrade(db: sqlite3.Connection) -> None:
    from ._schema import migrate

    with contextlib.suppress(sqlite3.OperationalError):  # read-only: read what it has
        migrate(db)


def _percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile of ``values`` (sorted)."""
    if not values:
        return 0.0
    rank = max(1, math.ceil(share * len(values)))
    return values[rank - 1]


def _stats(key: str, rows: list[sqlite3.Row]) -> CallStats:
    seconds = sorted(float(r["seconds"]) for r in rows)
    live = [r for r in rows if not r["cached"]]
    return CallStats(
        key=key,
        calls=len(rows),
        errors=sum(1 for r in rows if r["error_code"] is not None),
        cached=sum(1 for r in rows if r["cached"]),
        prompt_tokens=sum(int(r["prompt_tokens"] or 0) for r in live),
        completion_tokens=sum(int(r["completion_tokens"] or 0) for r in live),
        seconds_p50=_percentile(seconds, 0.5),
        seconds_p95=_percentile(seconds, 0.95),
    )

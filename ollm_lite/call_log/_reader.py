"""Reading the log: :class:`CallLog` (``open_log``) — list, get, stats, prune.

A missing file reads as an empty log and none is created. A file that is not a database, is
damaged or was written by a newer version raises ``ConfigError``; a read-only or busy log is
still readable (WAL readers never wait for a writer).
"""

from __future__ import annotations

import contextlib
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
from ._records import CallStats, LoggedCall
from ._rows import (
    Fields,
    answer_of,
    as_text,
    json_list,
    json_object,
    tool_call_of,
    tool_result_of,
    usage_of,
    warn_damaged,
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

StatsKey = Literal["model", "day", "host", "source", "script"]
_STATS_COLUMNS: dict[str, str] = {
    "model": "model",
    "day": "day",
    "host": "host",
    "source": "source",
    "script": "script",
}
_BUSY = 5.0
_MAX_LIMIT = 2**63 - 1  # SQLite's largest integer: any greater limit means all


def _bad_argument(name: str, message: str) -> ConfigError:
    return ConfigError(f"{name} {message}", details={"argument": name})


def _seconds(value: Any) -> float | None:
    """A finite number of seconds from a number or a timedelta; ``None`` for anything else
    (an int too large for a float included)."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            return None
        return seconds if math.isfinite(seconds) else None
    return None


def _seconds_ago(value: Any, name: str) -> float:
    """``value`` (a datetime, or seconds ago as a number/timedelta) as an epoch timestamp.

    A naive datetime is local time, as Python's own ``datetime.timestamp()`` takes it
    (``datetime.now() - timedelta(hours=1)`` is an hour ago)."""
    if isinstance(value, datetime):
        try:
            return float(value.timestamp())
        except (ValueError, OverflowError, OSError) as exc:  # year 1 in local time, ...
            raise _bad_argument(name, f"is out of range: {value!r} ({exc})") from None
    seconds = _seconds(value)
    if seconds is None:
        raise _bad_argument(name, f"must be a datetime or a finite number of seconds ago, "
                            f"not {_shown(value)}")  # fmt: skip
    return time.time() - seconds


def _age(value: Any) -> float:
    seconds = _seconds(value)
    if seconds is None:
        raise _bad_argument(
            "older_than", f"must be a finite number of seconds or a timedelta, not {_shown(value)}"
        )
    if seconds < 0:
        raise _bad_argument("older_than", f"must not be negative, not {value!r}")
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
    shown = path_text(path)
    if len(shown) > 120:  # a name too long to open is too long to print whole
        shown = f"{shown[:60]}...{shown[-40:]} ({len(shown)} characters)"
    return ConfigError(
        f"the call log's path {shown} cannot be read: {reason}", details={"path": str(path)}
    )


def _shown(value: Any) -> str:
    """``repr(value)``, shortened (a 400-digit number is named, not printed)."""
    try:
        text = repr(value)
    except ValueError:  # an int past the digits limit of int -> str
        return f"an {type(value).__name__} too large to show"
    return text if len(text) <= 60 else f"{text[:57]}..."


def _text_argument(name: str, value: Any) -> str:
    """``value`` as a text argument that SQLite can be given (UTF-8: no lone surrogate)."""
    if not isinstance(value, str):
        raise _bad_argument(name, f"must be a string, not {_shown(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad_argument(
            name, f"must be text UTF-8 can carry (it holds a lone surrogate): {value!r}"
        ) from None
    return value


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
        # text as bytes: a column that is not UTF-8 is then one damaged field (see _rows),
        # not a query that fails
        self._db.text_factory = bytes
        try:
            return list(self._db.execute(sql, params).fetchall())
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise ConfigError(f"the call log {self.path} cannot be read: {exc}") from exc
        except sqlite3.Error as exc:
            raise ConfigError(f"the call log {self.path} cannot be read: {exc}") from exc

    def _has_cost(self) -> bool:
        """Whether the file keeps costs (a read-only log older than them does not)."""
        rows = self._query("SELECT name FROM pragma_table_info('calls') WHERE name = 'cost'")
        return bool(rows)

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
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise _bad_argument("limit", f"must be an integer >= 0 or None, not {_shown(limit)}")
        if since is not None:
            where.append("started_ts >= ?")
            params.append(_seconds_ago(since, "since"))
        if until is not None:
            where.append("started_ts < ?")
            params.append(_seconds_ago(until, "until"))
        if model is not None:
            where.append("model = ?")
            params.append(_text_argument("model", model))
        if errors:
            where.append("error_code IS NOT NULL")
        if search is not None:
            search = _text_argument("search", search)
            if "\x00" in search:  # SQLite's LIKE and MATCH end a pattern at a NUL
                raise _bad_argument("search", f"must not hold a NUL character: {search!r}")
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
        sql = "SELECT rowid, * FROM calls"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(min(limit, _MAX_LIMIT))
        rows = self._query(sql, params)
        return [self._call(row) for row in rows]

    def get(self, call_id: str) -> LoggedCall:
        """The call with this id.

        A row whose other fields are damaged is returned as ``calls()`` returns it.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for an unknown id, or a row whose ``started``
                cannot be read.
        """
        key = _text_argument("call_id", call_id)
        # an id written as a BLOB (text with a lone surrogate, or by another tool) as well
        rows = self._query(
            "SELECT rowid, * FROM calls WHERE id IN (?, ?)", (key, key.encode("utf-8"))
        )
        if not rows:
            raise ConfigError(f"no call {call_id!r} in the call log {self.path}")
        call = self._call(rows[0])
        if call.id is None or call.started is None:
            raise ConfigError(
                f"the call {call_id!r} in the call log {self.path} is damaged: its "
                f"{'id' if call.id is None else 'started'} cannot be read",
                details={"path": str(self.path), "call_id": call_id},
            )
        return call

    def _ids(self, prefix: str) -> list[str]:
        """The ids that start with ``prefix`` (an exact id alone), at most two: what the CLI's
        ``logs show`` needs to tell a unique prefix from an ambiguous one."""
        key = _text_argument("prefix", prefix)
        rows = self._query("SELECT id FROM calls WHERE id = ?", (key,))
        if not rows:
            # ids sort as UTF-8 bytes: those starting with the prefix lie in this range
            rows = self._query(
                "SELECT id FROM calls WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",
                (key, key + "\U0010ffff"),
            )
        return [text for text in (as_text(r["id"]) for r in rows) if text is not None]

    def _call(self, row: sqlite3.Row) -> LoggedCall:
        """The call of a ``calls`` row (its damaged fields warned of)."""
        fields = Fields(row)
        call_id = fields.text("id")
        turns = self._turns(call_id if call_id is not None else row["id"], fields)
        call = LoggedCall(
            id=call_id,
            started=fields.started(),
            seconds=fields.number("seconds"),
            first_token_seconds=fields.number("first_token_seconds", nullable=True),
            source=fields.text("source"),
            script=fields.text("script"),
            provider=fields.text("provider"),
            host=fields.text("host", nullable=True),
            model=fields.text("model", nullable=True),
            messages=fields.json("messages", json_list(json_object)) or [],
            options=fields.json("options", json_object),
            text=fields.text("text"),
            thinking=fields.text("thinking", nullable=True),
            tool_calls=fields.json("tool_calls", json_list(tool_call_of)) or [],
            tool_results=fields.json("tool_results", json_list(tool_result_of)) or [],
            finish=fields.text("finish"),
            error_code=fields.text("error_code", nullable=True),
            error_message=fields.text("error_message", nullable=True),
            usage=fields.json("usage", usage_of, nullable=True),
            cached=fields.flag("cached"),
            session_id=fields.text("session_id", nullable=True),
            custom_id=fields.text("custom_id", nullable=True),
            turns=turns,
            cost=fields.number("cost", nullable=True) if "cost" in row.keys() else None,  # noqa: SIM118
        )
        if fields.damaged:
            warn_damaged(self.path, _row_name(call_id, row), fields.damaged)
        return call

    def _turns(self, call_id: Any, fields: Fields) -> list[dict[str, Any]]:
        """The call's model turns; ``[]`` (and ``turns`` noted as damaged) when any of them
        cannot be read."""
        turns = []
        for row in self._query(
            "SELECT request, answer, cached FROM turns WHERE call_id = ? ORDER BY number",
            (call_id,),
        ):
            turn = Fields(row)
            request = turn.json("request", json_object)
            answer = turn.json("answer", answer_of)
            cached = turn.flag("cached")
            if turn.damaged:
                fields.damaged.append("turns")
                return []
            turns.append({"request": request, "answer": answer, "cached": cached})
        return turns

    def stats(
        self, *, by: StatsKey = "model", since: datetime | timedelta | float | None = None
    ) -> list[CallStats]:
        """Figures per model, day (``YYYY-MM-DD`` in UTC), host, source or script.

        Cached calls spend no tokens and add none. A damaged figure of a call (changed by
        hand or by another tool) adds nothing, and is warned of once.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for an unknown ``by`` or a bad ``since``.
        """
        return self._grouped(by, since)[0]

    def _grouped(
        self, by: Any, since: datetime | timedelta | float | None
    ) -> tuple[list[CallStats], CallStats]:
        """:meth:`stats` and the figures of all its calls together (read at one time)."""
        column = _STATS_COLUMNS.get(by) if isinstance(by, str) else None
        if column is None:
            raise _bad_argument("by", f"must be one of {', '.join(_STATS_COLUMNS)}, not {by!r}")
        cost = "cost" if self._has_cost() else "NULL AS cost"  # an older read-only log
        sql = (
            f"SELECT rowid, id, coalesce({column}, '') AS key, seconds, error_code, cached, "
            f"prompt_tokens, completion_tokens, {cost} FROM calls"
        )
        params: list[Any] = []
        if since is not None:
            sql += " WHERE started_ts >= ?"
            params.append(_seconds_ago(since, "since"))
        groups: dict[str | None, list[_Figures]] = {}
        every: list[_Figures] = []
        for row in self._query(sql, params):
            figures = _Figures(row)
            if figures.damaged:
                warn_damaged(self.path, _row_name(as_text(row["id"]), row), figures.damaged)
            groups.setdefault(figures.key, []).append(figures)
            every.append(figures)
        ordered = sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or ""))
        return [_stats(key, rows) for key, rows in ordered], _stats("", every)

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


class _Figures:
    """What :meth:`CallLog.stats` reads of one call (a damaged figure as ``None``)."""

    def __init__(self, row: sqlite3.Row) -> None:
        fields = Fields(row)
        self.key = fields.text("key")
        self.seconds = fields.number("seconds")
        self.error = row["error_code"] is not None
        self.cached = fields.flag("cached")
        self.prompt_tokens = fields.count("prompt_tokens")
        self.completion_tokens = fields.count("completion_tokens")
        self.cost = fields.number("cost", nullable=True)
        self.damaged = fields.damaged


def _stats(key: str | None, rows: list[_Figures]) -> CallStats:
    seconds = sorted(r.seconds for r in rows if r.seconds is not None)
    live = [r for r in rows if not r.cached]
    costs = [r.cost for r in rows if r.cost is not None]
    return CallStats(
        key=key,
        calls=len(rows),
        errors=sum(1 for r in rows if r.error),
        cached=sum(1 for r in rows if r.cached),
        prompt_tokens=sum(r.prompt_tokens or 0 for r in live),
        completion_tokens=sum(r.completion_tokens or 0 for r in live),
        seconds_p50=_percentile(seconds, 0.5),
        seconds_p95=_percentile(seconds, 0.95),
        cost=sum(costs) if costs else None,
    )


def _row_name(call_id: str | None, row: sqlite3.Row) -> str:
    """How a warning names a row: its id, else (an id that cannot be read) its rowid."""
    return f"call {call_id!r}" if call_id is not None else f"the call at rowid {row['rowid']}"

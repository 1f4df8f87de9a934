"""Writing calls: one short transaction per call, never in the way of the call.

:class:`LogFile` is one log path in this process: a connection per thread (SQLite connections
are not shared across threads), the schema brought up to date once, and the warning given at
most once. :meth:`LogFile.write` commits one call (its row, its turns, its full-text entry) in
one transaction, waiting for a busy file at most ``budget`` seconds (what is left of the
call's deadline, never more than 5 s). Any failure — read-only, locked, disk full, not a
database, damaged, newer schema — is one ``WARNING`` per process and path; the call goes on
and the next call tries again on a fresh connection.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

from ._schema import NewerSchema, create_file, migrate, open_connection

__all__ = ["MAX_BUSY", "LogFile", "log_file"]

logger = logging.getLogger("ollm_lite.call_log")

#: The longest a write waits for a busy log (seconds).
MAX_BUSY = 5.0

_CALL_COLUMNS = (
    "id",
    "started",
    "started_ts",
    "day",
    "seconds",
    "first_token_seconds",
    "source",
    "script",
    "provider",
    "host",
    "model",
    "messages",
    "options",
    "text",
    "thinking",
    "tool_calls",
    "tool_results",
    "finish",
    "error_code",
    "error_message",
    "usage",
    "prompt_tokens",
    "completion_tokens",
    "cached",
    "session_id",
    "custom_id",
)
_INSERT_CALL = (
    f"INSERT INTO calls ({', '.join(_CALL_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _CALL_COLUMNS)})"
)
_INSERT_TURN = (
    "INSERT INTO turns (call_id, number, request, answer, cache_key, ok, cached) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)


class LogFile:
    """One log path in this process: per-thread connections, a warning at most once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._lock = threading.Lock()
        self._warned = False

    def connection(self, budget: float) -> sqlite3.Connection:
        """This thread's connection, opened (and the schema brought up to date) if needed."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            create_file(self.path)
            db = open_connection(self.path, budget)
            try:
                migrate(db)
            except BaseException:
                db.close()
                raise
            self._local.db = db
        elif getattr(self._local, "budget", None) != budget:
            db.execute(f"PRAGMA busy_timeout = {max(0, int(budget * 1000))}")
        self._local.budget = budget
        return db

    def write(
        self,
        row: dict[str, Any],
        turns: list[tuple[Any, ...]],
        search: tuple[str, str],
        budget: float,
    ) -> bool:
        """Commit one call; ``False`` (after a warning, once) when the log cannot take it."""
        budget = max(0.0, min(MAX_BUSY, budget))
        try:
            db = self.connection(budget)
            db.execute("BEGIN IMMEDIATE")
            try:
                cursor = db.execute(_INSERT_CALL, [row[c] for c in _CALL_COLUMNS])
                db.executemany(_INSERT_TURN, turns)
                db.execute(
                    "INSERT INTO calls_fts (rowid, prompt, answer) VALUES (?, ?, ?)",
                    (cursor.lastrowid, *search),
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except Exception as exc:  # sqlite3.Error, OSError, NewerSchema … never the caller's
            self._drop()
            self._warn(exc)
            return False
        return True

    def _drop(self) -> None:
        """Forget this thread's connection: the next call opens a fresh one."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        self._local.db = None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()

    def _warn(self, exc: BaseException) -> None:
        with self._lock:
            if self._warned:
                logger.debug("call log %s not written: %s", self.path, exc)
                return
            self._warned = True
        reason = "written by a newer version" if isinstance(exc, NewerSchema) else str(exc)
        logger.warning(
            "the call log %s cannot be written (%s); calls go on unlogged", self.path, reason
        )


_files: dict[Path, LogFile] = {}
_files_lock = threading.Lock()


def log_file(path: Path) -> LogFile:
    """The process's :class:`LogFile` for ``path`` (one per path, so one warning per path)."""
    key = Path(path).expanduser().absolute()
    with _files_lock:
        found = _files.get(key)
        if found is None:
            found = _files[key] = LogFile(key)
        return found

"""Writing calls: one short transaction per call, never in the way of the call.

:class:`LogFile` is one client's way into one log path: a small pool of connections (one per
call in flight, never two threads on one at a time), each bringing the schema up to date when
it opens, closed by the client's ``close()``. :meth:`LogFile.write` commits one call (its row,
its turns, its full-text entry) in one transaction, waiting for a busy file at most ``budget``
seconds (what is left of the call's deadline, never more than 5 s). Any failure — read-only,
locked, disk full, not a database, damaged, newer schema — is one ``WARNING`` per process and
path; the call goes on and the next call tries again on a fresh connection (to the file now at
the path, when the one it had was removed or replaced).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._records import searchable, storable
from ._schema import (
    MIGRATIONS,
    NewerSchema,
    check_version,
    create_file,
    migrate,
    open_connection,
)

__all__ = ["IDLE", "MAX_BUSY", "LogFile", "warn_once"]

logger = logging.getLogger("ollm_lite.call_log")

#: The longest a write waits for a busy log (seconds).
MAX_BUSY = 5.0
#: The most idle connections a client keeps open to its log.
IDLE = 4

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
    "cost",
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
    """One client's way into one log file: a few pooled connections, a warning at most once
    per process and path.

    A call takes a connection from the pool (or opens one, bringing the schema up to date) and
    gives it back when its write is done, so calls on many threads each have their own while
    the pool keeps no more than :data:`IDLE` idle ones. :meth:`close` closes the idle ones and
    has those in use closed when they come back; a later call opens new ones.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path).expanduser().absolute()
        self._idle: list[tuple[sqlite3.Connection, _Identity | None]] = []
        self._lock = threading.Lock()
        self._generation = 0

    def __repr__(self) -> str:
        return f"LogFile({str(self.path)!r})"

    @contextlib.contextmanager
    def connection(self, budget: float) -> Iterator[sqlite3.Connection]:
        """A connection for one call, waiting for a busy file at most ``budget`` seconds.

        It goes back to the pool when the block ends; after an error it is closed instead
        (the next call starts afresh).

        Raises:
            sqlite3.Error, OSError, NewerSchema: the log cannot be opened.
        """
        with self._lock:
            generation = self._generation
            db, identity = self._idle.pop() if self._idle else (None, None)
        if db is not None and (identity is None or identity != _identity(self.path)):
            # the file was removed or replaced (open the one there now), or this is a child
            # process that inherited the connection (SQLite connections never cross a fork)
            _close(db)
            db = None
        if db is None:
            db, identity = self._open(budget)
        else:
            db.execute(f"PRAGMA busy_timeout = {max(0, int(budget * 1000))}")
        try:
            yield db
        except BaseException:
            _close(db)
            raise
        with self._lock:
            keep = generation == self._generation and len(self._idle) < IDLE
            if keep:
                self._idle.append((db, identity))
        if not keep:
            _close(db)

    def _open(self, budget: float) -> tuple[sqlite3.Connection, _Identity | None]:
        create_file(self.path)
        if not os.access(self.path, os.W_OK):
            # SQLite would open it read-only, and keep reusing that descriptor for this file
            # while another connection of the process has it open: never writable again
            raise PermissionError(errno.EACCES, "the file is read-only", str(self.path))
        db = open_connection(self.path, budget, shared=True)
        try:
            migrate(db)
            return db, _identity(self.path)
        except BaseException:
            _close(db)
            raise

    def close(self) -> None:
        """Close the idle connections; those in use are closed when their call is done."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        for db, _ in idle:
            _close(db)

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
            with self.connection(budget) as db:
                db.execute("BEGIN IMMEDIATE")
                try:
                    # another process may have upgraded the file since this connection opened
                    if check_version(db) != len(MIGRATIONS):
                        raise sqlite3.DatabaseError("its schema changed while it was open")
                    cursor = db.execute(_INSERT_CALL, [storable(row[c]) for c in _CALL_COLUMNS])
                    db.executemany(_INSERT_TURN, turns)
                    db.execute(
                        "INSERT INTO calls_fts (rowid, prompt, answer) VALUES (?, ?, ?)",
                        (cursor.lastrowid, *map(searchable, search)),
                    )
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
        except Exception as exc:  # sqlite3.Error, OSError, NewerSchema … never the caller's
            warn_once(self.path, exc)
            return False
        return True


_Identity = tuple[int, int, int]


def _identity(path: Path) -> _Identity | None:
    """This process and the file now at ``path`` (``None``: no file there)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return os.getpid(), found.st_dev, found.st_ino


def _close(db: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        db.close()


_warned: set[Path] = set()
_warned_lock = threading.Lock()


def warn_once(path: Path, exc: BaseException) -> None:
    """One ``WARNING`` per process and log path that cannot be written (later ones: debug)."""
    with _warned_lock:
        first = path not in _warned
        _warned.add(path)
    if not first:
        logger.debug("call log %s not written: %s", path, exc)
        return
    reason = "written by a newer version" if isinstance(exc, NewerSchema) else str(exc)
    logger.warning("the call log %s cannot be written (%s); calls go on unlogged", path, reason)

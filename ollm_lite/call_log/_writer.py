"""Writing calls: one short transaction per call, never in the way of the call.

:class:`LogFile` is one client's way into one log path: a small pool of connections (one per
call in flight, never two threads on one at a time), each bringing the schema up to date when
it opens, closed by the client's ``close()``. :meth:`LogFile.write` commits one call (its row,
its turns, its full-text entry) in one transaction. Any failure — read-only, locked, disk full,
not a database, damaged, newer schema — is one ``WARNING`` per process and path; the call goes
on and the next call tries again on a fresh connection (to the file now at the path, when the
one it had was removed or replaced).

A call waits for its log at most :data:`MAX_BUSY` seconds in all — its cache look-ups and its
write together (:class:`LogWait`) — and never past its deadline. SQLite's busy timeout alone
cannot promise that: a reader that finds the ``-shm`` index locked by another process retries
for about 10 s whatever the timeout (``walTryBeginRead`` in SQLite's ``wal.c``, ending in
``SQLITE_PROTOCOL``). So each look-up and write runs on a worker thread (:class:`_Workers`)
that the call waits for no longer than its time allows; a write still waiting then commits
nothing, and the worker is free again once SQLite gives up. A call whose time is spent (its
deadline came, or its look-ups used the 5 s) still gives its write one attempt that waits for
no lock (:data:`NO_WAIT`), so a call answered at its deadline is still logged when its log is
free.
A look-up with no time left is a miss.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ._records import searchable, storable
from ._schema import (
    MIGRATIONS,
    NewerSchema,
    check_version,
    create_file,
    migrate,
    open_connection,
)

__all__ = ["IDLE", "MAX_BUSY", "NO_WAIT", "LogBusy", "LogFile", "LogWait", "warn_once"]

logger = logging.getLogger("ollm_lite.call_log")

#: The longest a call waits for its log, look-ups and write together (seconds).
MAX_BUSY = 5.0
#: What a write gets once its call's time is spent: one attempt that waits for no lock,
#: given at most this long (seconds): a write takes a millisecond or two, the first one into a
#: new file some tens of milliseconds (the schema and its fsyncs).
NO_WAIT = 0.5
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


_T = TypeVar("_T")


class LogBusy(sqlite3.OperationalError):
    """The log stayed busy for all the time the call could give it."""


class LogWait:
    """The time one call may still spend waiting for its log: :data:`MAX_BUSY` seconds in
    all (its cache look-ups and its write together), never past its ``deadline`` (a
    ``time.monotonic()`` value, or ``None``)."""

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.spent = 0.0

    def __repr__(self) -> str:
        return f"LogWait(deadline={self.deadline!r}, spent={self.spent:.3f})"

    def left(self) -> float:
        """The seconds left (never below 0)."""
        left = MAX_BUSY - self.spent
        if self.deadline is not None:
            left = min(left, self.deadline - time.monotonic())
        return max(0.0, left)

    @contextlib.contextmanager
    def spending(self) -> Iterator[float]:
        """The seconds left for one look-up or write; the time it takes is spent."""
        started = time.monotonic()
        try:
            yield self.left()
        finally:
            self.spent += time.monotonic() - started


class _Attempt:
    """One look-up or write on its thread, and whether the call waiting for it gave up.

    The two sides decide under a lock who has the last word: the thread commits only if the
    call has not given up, and the call gives up only if the thread is not committing (a
    commit under way is waited for: the row is in the log, as the call will say)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._given_up = False
        self._committing = False

    def may_commit(self) -> bool:
        """For the thread, just before ``COMMIT``: ``False`` once the call gave up."""
        with self._lock:
            self._committing = not self._given_up
            return self._committing

    def give_up(self) -> bool:
        """For the call: ``False`` when the thread is already committing."""
        with self._lock:
            self._given_up = not self._committing
            return self._given_up


class _Workers:
    """Daemon threads that do the log's look-ups and writes, each staying for the next one.

    A thread started per operation cost about 1 ms on a busy 2-core machine (thread start and
    join), most of a logged call's price; handing the work to a waiting worker costs tens of
    microseconds. They are daemon threads (unlike :mod:`concurrent.futures`' workers, joined
    at exit), so a write SQLite is still retrying never holds up the process's exit; a new one
    starts whenever none is idle, so a worker stuck in SQLite never holds up another call; an
    idle one ends after :attr:`IDLE_S`.
    """

    IDLE_S = 30.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._pid = os.getpid()

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on a worker.

        Raises:
            RuntimeError: no thread could be started (the interpreter is shutting down).
        """
        with self._lock:
            if self._pid != os.getpid():  # a forked child has none of its parent's threads
                self._jobs, self._idle, self._pid = queue.SimpleQueue(), 0, os.getpid()
            if self._idle:
                self._idle -= 1
                self._jobs.put(job)
                return
            jobs = self._jobs
        worker = threading.Thread(
            target=self._serve, args=(job, jobs), name="ollm-lite call log", daemon=True
        )
        worker.start()

    def _serve(self, job: Callable[[], None], jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            job()  # never raises: the job hands its outcome to its caller
            with self._lock:
                if jobs is not self._jobs:  # forked: this queue is no longer served
                    return
                self._idle += 1
            try:
                job = jobs.get(timeout=self.IDLE_S)
            except queue.Empty:
                with self._lock:
                    try:  # a job put between the timeout and the lock is this worker's
                        job = jobs.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return


_WORKERS = _Workers()


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

    def run(
        self,
        work: Callable[[sqlite3.Connection, _Attempt], _T],
        wait: LogWait,
        *,
        last_try: bool = False,
    ) -> _T:
        """``work`` done on a pooled connection, on a worker thread, waited for no longer
        than ``wait`` allows (what the call has spent on its log so far counts). With less
        time left, ``last_try`` still makes one attempt that waits for no lock
        (:data:`NO_WAIT`).

        Raises:
            LogBusy: the time ran out first (``work`` gives up: it commits nothing).
            sqlite3.Error, OSError, NewerSchema: the log cannot be opened or ``work`` failed.
        """
        with wait.spending() as budget:
            patience = max(budget, NO_WAIT) if last_try else budget
            if patience <= 0:
                raise LogBusy("the call's time for its log is spent")
            attempt = _Attempt()
            outcome: list[tuple[bool, Any]] = []
            finished = threading.Event()

            def attempt_work() -> None:
                try:
                    with self.connection(budget) as db:
                        outcome.append((True, work(db, attempt)))
                except BaseException as exc:  # handed to the caller, never a thread traceback
                    outcome.append((False, exc))
                finally:
                    finished.set()

            try:
                _WORKERS.submit(attempt_work)
            except RuntimeError:  # no new thread (the interpreter is shutting down): in line
                attempt_work()
            else:
                try:
                    done = finished.wait(patience)
                except BaseException:
                    attempt.give_up()
                    raise
                if not done:
                    if attempt.give_up():
                        raise LogBusy(f"the log was busy for all of the {budget:.1f} s left")
                    finished.wait()  # a commit under way: short, and its row is in the log
        done, value = outcome[0]
        if not done:
            raise value
        result: _T = value
        return result

    def write(
        self,
        row: dict[str, Any],
        turns: list[tuple[Any, ...]],
        search: tuple[str, str],
        wait: LogWait,
    ) -> bool:
        """Commit one call; ``False`` (after a warning, once) when the log cannot take it in
        the time ``wait`` leaves."""

        def insert(db: sqlite3.Connection, attempt: _Attempt) -> None:
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
                if not attempt.may_commit():
                    raise LogBusy("the call stopped waiting for the log")
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        try:
            self.run(insert, wait, last_try=True)
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

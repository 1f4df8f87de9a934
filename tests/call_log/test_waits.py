"""A call waits for its log at most 5 s in all — its cache look-ups and its write together —
and never past its deadline, whatever holds the log: a lock held by another process, on the
database (exclusive locking mode) or on its ``-shm`` index (an ``fcntl`` lock, for which
SQLite's own busy timeout does not count).

The locks are real, held by a child process; the tests assert what the call did (its answer,
whether its row was written, the warning), not how long it took.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.log_support import count_rows, logging_client

from ollm_lite.call_log import _writer
from ollm_lite.call_log._writer import LogFile, _warned

LOGGER = "ollm_lite.call_log"

#: Holds an ``fcntl`` write lock on the whole ``-shm`` index (as a hostile or broken program
#: might) until told to let go.
SHM_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1] + "-shm", os.O_RDWR | os.O_CREAT, 0o600)
fcntl.lockf(fd, fcntl.LOCK_EX)
"""

#: Holds the log in exclusive locking mode (a connection that keeps the file to itself).
EXCLUSIVE = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA locking_mode = EXCLUSIVE")
db.execute("BEGIN IMMEDIATE")
db.execute("COMMIT")
"""


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    _warned.clear()  # each test's paths warn afresh


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == 30]


@contextmanager
def held(path: Path, lock: str) -> Iterator[Callable[[], None]]:
    """``lock`` taken on ``path`` by a child process; yields a function that makes the child
    let go (and waits until it has). The child is gone when the block ends."""
    code = textwrap.dedent(lock) + textwrap.dedent(
        """
        print("held", flush=True)
        sys.stdin.readline()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "held"

        def release() -> None:
            if child.poll() is None:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
                child.wait(60)

        yield release
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()
        _log_threads_end()


def _log_threads_end() -> None:
    """A look-up or write the call stopped waiting for ends by itself once the lock is gone."""
    for thread in threading.enumerate():
        if thread.name == "ollm-lite call log":
            thread.join(60)
            assert not thread.is_alive()


@pytest.fixture
def budgets(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The seconds each look-up and write of the test was given to wait for the log."""
    given: list[float] = []
    original = LogFile.connection

    def connection(self: LogFile, budget: float) -> Any:
        given.append(budget)
        return original(self, budget)

    monkeypatch.setattr(LogFile, "connection", connection)
    monkeypatch.setattr(_writer, "MAX_BUSY", 0.5)  # 5 s in real life; the same rule, sooner
    return given


def _a_log(path: Path) -> None:
    llm, _ = logging_client(path, "first")
    assert llm.ask("make it") == "first"
    llm.close()


def test_a_locked_shm_never_takes_a_call_past_its_deadline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite retries a ``-shm`` it cannot lock for about 10 s, whatever its busy timeout,
    and then fails with "locking protocol": a call with a 0.5 s deadline stops waiting long
    before that, so its warning says the log was busy, not that protocol error."""
    path = tmp_path / "logs.db"
    _a_log(path)
    with held(path, SHM_LOCK):
        llm, _ = logging_client(path, "second")
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            assert llm.ask("x", timeout=0.5) == "second"
    [warning] = _warnings(caplog)
    assert "busy" in warning and "protocol" not in warning
    llm.close()
    assert count_rows(path) == 1


def test_a_locked_shm_costs_a_cached_call_one_wait_in_all(
    tmp_path: Path, budgets: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    """The look-up spends the whole allowance on a ``-shm`` held by another process; the
    write gets no second one, only an attempt that waits for no lock (before: the look-up
    and the write each waited the full time, and each then spun on for about 10 s)."""
    path = tmp_path / "logs.db"
    _a_log(path)
    budgets.clear()
    with held(path, SHM_LOCK):
        llm, provider = logging_client(path, "second", cache=True)
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            assert llm.ask("x") == "second"
    llm.close()
    assert len(provider.requests) == 1  # the look-up that ran out of time was a miss
    assert budgets == [0.5, 0.0]
    [warning] = _warnings(caplog)
    assert "busy" in warning and "protocol" not in warning
    assert count_rows(path) == 1
    again, _ = logging_client(path, "third")
    assert again.ask("y") == "third"  # the next call tries again, with its own allowance
    assert count_rows(path) == 2


def test_an_exclusively_locked_log_costs_a_cached_call_one_wait_in_all(
    tmp_path: Path, budgets: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    """The same with the log held in exclusive locking mode, where SQLite's busy timeout
    applies: the look-up and the write share one allowance (before: 5 s each)."""
    path = tmp_path / "logs.db"
    _a_log(path)
    budgets.clear()
    with held(path, EXCLUSIVE):
        llm, _ = logging_client(path, "second", cache=True)
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            assert llm.ask("x") == "second"
    llm.close()
    assert budgets == [0.5, 0.0]
    assert len(_warnings(caplog)) == 1
    assert count_rows(path) == 1


def test_a_call_answered_when_its_time_is_spent_is_still_logged_on_a_free_log(
    tmp_path: Path, budgets: list[float]
) -> None:
    """The write's one attempt that waits for no lock is enough for a free log."""
    path = tmp_path / "logs.db"
    _a_log(path)
    budgets.clear()
    llm, _ = logging_client(path, "second")
    recorder_waits: list[_writer.LogWait] = []
    original = _writer.LogFile.write

    def write(self: LogFile, row: Any, turns: Any, search: Any, wait: _writer.LogWait) -> bool:
        wait.spent = _writer.MAX_BUSY  # as if its look-ups had used the whole allowance
        recorder_waits.append(wait)
        return original(self, row, turns, search, wait)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_writer.LogFile, "write", write)
        assert llm.ask("x") == "second"
    llm.close()
    assert budgets == [0.0] and len(recorder_waits) == 1
    assert count_rows(path) == 2

"""A log that cannot be written never changes a call's outcome: one WARNING per process and
path, the normal answer, and a later call tries again."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import pytest
from support.log_support import as_a_user, count_rows, logged, logging_client

from ollm_lite.call_log._writer import _warned

LOGGER = "ollm_lite.call_log"


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    _warned.clear()  # each test's paths warn afresh


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == 30]


def test_a_read_only_log_warns_once_and_a_later_call_tries_again(tmp_path: Path) -> None:
    """Run by a user whom the file's permissions bind (as root: ``nobody``)."""
    outcome = as_a_user(
        """
        path = FOLDER / "logs.db"
        first = client(path, "first")
        assert first.ask("make the file") == "first"
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        warnings = []
        class Keep(logging.Handler):
            def emit(self, record):
                if record.levelno == logging.WARNING:
                    warnings.append(record.getMessage())
        logging.getLogger("ollm_lite.call_log").addHandler(Keep())
        llm = client(path, "second", "third", "fourth")
        read_only(path)
        try:
            answers = [llm.ask("a"), llm.ask("b")]
        finally:
            writable(path)
        answers.append(llm.ask("c"))  # writable again: logged again
        with open_log(path) as log:
            texts = [c.text for c in reversed(log.calls())]
        done({"path": str(path), "answers": answers, "warnings": warnings, "texts": texts})
        """,
        tmp_path,
    )
    assert isinstance(outcome, dict)
    assert outcome["answers"] == ["second", "third", "fourth"]
    assert len(outcome["warnings"]) == 1
    assert outcome["path"] in outcome["warnings"][0]
    assert outcome["texts"] == ["first", "fourth"]


def test_a_file_that_is_no_database_costs_a_warning_not_the_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "logs.db"
    path.write_bytes(b"definitely not sqlite " * 500)
    llm, _ = logging_client(path, "fine", "still fine")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert llm.ask("x") == "fine"
        assert llm.stream("y") is not None and "".join(llm.stream("y")) == "still fine"
    assert len(_warnings(caplog)) == 1
    assert path.read_bytes() == b"definitely not sqlite " * 500


def test_a_database_of_something_else_is_never_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    before = path.read_bytes()
    llm, _ = logging_client(path, "fine", "still fine")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert llm.ask("x") == "fine"
        assert llm.ask("y") == "still fine"
    [warning] = _warnings(caplog)
    assert "something else" in warning
    assert path.read_bytes() == before


def test_a_damaged_file_costs_a_warning_not_the_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one", "two")
    llm.ask("make it")
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    data[4096:] = b"\xff" * (len(data) - 4096)  # every page after the first is garbage
    path.write_bytes(bytes(data))
    Path(f"{path}-wal").unlink(missing_ok=True)
    _warned.clear()
    other, _ = logging_client(path, "two")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert other.ask("again") == "two"
    assert len(_warnings(caplog)) == 1


def test_a_newer_log_is_left_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one")
    llm.ask("make it")
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 42")
    _warned.clear()
    newer, _ = logging_client(path, "answer")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert newer.ask("x") == "answer"
    assert len(_warnings(caplog)) == 1 and "newer" in _warnings(caplog)[0]
    assert count_rows(path) == 1


def test_a_locked_log_never_takes_a_call_past_its_deadline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one", "two", "three")
    llm.ask("make it")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            started = time.monotonic()
            assert llm.ask("x", timeout=0.3) == "two"
            elapsed = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # the 5 s the log may wait at most is cut to what is left of the call's 0.3 s
    assert elapsed < 4.0
    assert len(_warnings(caplog)) == 1
    assert llm.ask("y") == "three"
    assert count_rows(path) == 2


def test_a_full_disk_costs_a_warning_not_the_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one", "x" * 200_000, "three")
    llm.ask("make it")
    assert llm.call_log is not None
    with llm.call_log.file.connection(5.0) as db:  # the pooled one the next call takes
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL on the next page
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert llm.ask("a long answer") == "x" * 200_000
    assert len(_warnings(caplog)) == 1 and "full" in _warnings(caplog)[0]
    assert llm.ask("again") == "three"  # a fresh connection: logged again
    assert [c.text for c in logged(path)] == ["one", "three"]

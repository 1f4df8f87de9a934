"""A client's connections to its log: closed by ``close()``, shared safely by its threads, and
never stuck on a file that changed under them (made newer, removed)."""

from __future__ import annotations

import logging
import multiprocessing
import sqlite3
from pathlib import Path

import pytest
from support.log_support import count_rows, logged, logging_client

from ollm_lite.call_log._writer import _warned
from ollm_lite.client import Client

LOGGER = "ollm_lite.call_log"


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    _warned.clear()  # each test's paths warn afresh


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == 30]


def test_close_releases_the_log_and_a_later_call_opens_it_again(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one", "two")
    assert llm.ask("a") == "one"
    assert Path(f"{path}-wal").exists()  # a connection is open
    llm.close()
    # SQLite folds the WAL in and removes it when the last connection to the file closes
    assert not Path(f"{path}-wal").exists()
    assert llm.ask("b") == "two"
    llm.close()
    assert not Path(f"{path}-wal").exists()
    assert [c.text for c in logged(path)] == ["one", "two"]


def test_one_client_on_many_threads_loses_no_call(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, *[f"answer {n}" for n in range(40)])
    replies = llm.map([f"question {n}" for n in range(40)], concurrency=8)
    assert all(r.error is None for r in replies)
    llm.close()
    assert not Path(f"{path}-wal").exists()
    calls = logged(path)
    assert len(calls) == 40 and {c.source for c in calls} == {"map"}
    assert sorted(c.text for c in calls) == sorted(f"answer {n}" for n in range(40))


def test_a_log_made_newer_while_a_client_has_it_open_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one", "two")
    assert llm.ask("a") == "one"
    with sqlite3.connect(path) as db:  # a newer version upgrades the file meanwhile
        db.execute("PRAGMA user_version = 42")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert llm.ask("b") == "two"
    [warning] = _warnings(caplog)
    assert "newer" in warning and str(path) in warning
    assert count_rows(path) == 1


def test_a_log_removed_while_a_client_has_it_open_is_made_again(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one", "two")
    assert llm.ask("a") == "one"
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)  # `rm logs.db*` to start afresh
    assert llm.ask("b") == "two"
    assert [c.text for c in logged(path)] == ["two"]
    llm.close()


def _ask_in_child(llm: Client, n: int) -> None:
    assert llm.ask(f"child {n}") == "two"  # each child has its own copy of the script


def test_children_forked_from_a_logging_client_log_on_connections_of_their_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one", "two")
    assert llm.ask("parent") == "one"  # the parent has a pooled connection when it forks
    fork = multiprocessing.get_context("fork")
    children = [fork.Process(target=_ask_in_child, args=(llm, n)) for n in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
    assert [child.exitcode for child in children] == [0, 0, 0]
    assert llm.ask("parent again") == "two"
    llm.close()
    texts = [c.messages[-1]["content"] for c in logged(path)]
    assert texts[0] == "parent" and texts[-1] == "parent again"
    assert sorted(texts[1:4]) == ["child 0", "child 1", "child 2"]

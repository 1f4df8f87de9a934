"""``open_log``: list, search, get, stats, prune; missing, foreign and newer files."""

from __future__ import annotations

import sqlite3
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.log_support import as_a_user, count_rows, file_bytes, logged, logging_client

import ollm_lite
from ollm_lite import FinishEvent, ScriptedProvider, TextEvent, Usage
from ollm_lite.call_log import CallLog, CallStats, open_log
from ollm_lite.errors import ConfigError


def _fill(path: Path) -> None:
    llm, _ = logging_client(
        path,
        [TextEvent("Rayleigh scattering"), FinishEvent("stop", Usage(10, 4, 14))],
        [TextEvent("Paris"), FinishEvent("stop", Usage(6, 1, 7))],
        [TextEvent("Seven"), FinishEvent("stop", Usage(5, 2, 7))],
    )
    llm.ask("Why is the sky blue?")
    llm.ask("Capital of France?", model="other")
    llm.ask("How many seas?")


def test_a_missing_file_is_an_empty_log_and_none_is_created(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "logs.db"
    with open_log(path) as log:
        assert isinstance(log, CallLog)
        assert log.calls() == []
        assert log.stats() == []
        assert log.prune(older_than=0) == 0
        with pytest.raises(ConfigError):
            log.get("0123")
    assert not path.exists() and not path.parent.exists()


def test_open_log_none_follows_the_path_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert open_log().path == tmp_path / "data" / "ollm" / "logs.db"
    config = tmp_path / "config.toml"
    config.write_text(f'[log]\npath = "{tmp_path / "from-file.db"}"\n', "utf-8")
    monkeypatch.setenv("OLLM_CONFIG", str(config))
    assert open_log().path == tmp_path / "from-file.db"
    monkeypatch.setenv("OLLM_LOG", str(tmp_path / "from-env.db"))
    assert open_log().path == tmp_path / "from-env.db"


def test_calls_are_newest_first_and_filtered(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    with open_log(path) as log:
        assert [c.text for c in log.calls()] == ["Seven", "Paris", "Rayleigh scattering"]
        assert [c.text for c in log.calls(limit=1)] == ["Seven"]
        assert [c.text for c in log.calls(model="other")] == ["Paris"]
        assert [c.text for c in log.calls(search="France")] == ["Paris"]  # in the prompt
        assert [c.text for c in log.calls(search="scatter")] == ["Rayleigh scattering"]
        assert [c.text for c in log.calls(search="se")] == ["Seven"]  # short: LIKE
        assert log.calls(search="nowhere to be found") == []
        assert len(log.calls(since=3600)) == 3
        assert log.calls(since=datetime.now(UTC) + timedelta(seconds=5)) == []
        assert log.calls(until=timedelta(hours=1)) == []
        newest = log.calls(limit=1)[0]
        assert log.get(newest.id) == newest
        with pytest.raises(ConfigError):
            log.get("no-such-id")


@pytest.fixture
def _five_hours_east(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "ABC-5")  # a POSIX rule (no tz database needed): UTC+5
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("_five_hours_east")
def test_a_naive_datetime_is_local_time(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    with open_log(path) as log:
        assert len(log.calls(since=datetime.now() - timedelta(minutes=10))) == 3
        assert log.calls(until=datetime.now() - timedelta(minutes=10)) == []
        assert len(log.calls(until=datetime.now() + timedelta(minutes=10))) == 3
        assert len(log.stats(since=datetime.now() - timedelta(minutes=10))) == 2


def test_stats_by_each_key(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    with open_log(path) as log:
        by_model = {s.key: s for s in log.stats()}
        assert set(by_model) == {"m", "other"}
        m = by_model["m"]
        assert isinstance(m, CallStats)
        assert (m.calls, m.errors, m.cached) == (2, 0, 0)
        assert (m.prompt_tokens, m.completion_tokens) == (15, 6)
        assert 0 <= m.seconds_p50 <= m.seconds_p95
        [day] = log.stats(by="day")
        assert day.key == datetime.now(UTC).strftime("%Y-%m-%d") and day.calls == 3
        assert [s.key for s in log.stats(by="source")] == ["ask"]
        assert [s.calls for s in log.stats(by="host")] == [3]
        with pytest.raises(ConfigError):
            log.stats(by="week")  # type: ignore[arg-type]


def test_prune_removes_the_data_for_good(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "ZQXJ-old-answer-text", "fresh")
    llm.ask("ZQXJ-old-prompt-text")
    assert b"ZQXJ-old" in file_bytes(path)
    time.sleep(0.05)
    cutoff = time.time()
    llm.ask("a new one")
    with open_log(path) as log:
        removed = log.prune(older_than=timedelta(seconds=time.time() - cutoff + 0.02))
        assert removed == 1
        assert [c.text for c in log.calls()] == ["fresh"]
        assert log.calls(search="ZQXJ") == []
    assert count_rows(path, "turns") == 1
    assert b"ZQXJ-old" not in file_bytes(path)


def test_a_file_that_is_no_database_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    path.write_bytes(b"this is not a database at all, just some text\n" * 100)
    with pytest.raises(ConfigError):
        open_log(path)


def test_a_database_of_something_else_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    before = path.read_bytes()
    with pytest.raises(ConfigError, match="something else"):
        open_log(path)
    assert path.read_bytes() == before  # not even switched to WAL mode
    assert not Path(f"{path}-wal").exists()


def test_an_empty_file_reads_as_an_empty_log_and_stays_empty(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    path.touch()
    with open_log(path) as log:
        assert log.calls() == [] and log.stats() == []
    assert path.read_bytes() == b""


def test_a_newer_log_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(ConfigError, match="newer"):
        open_log(path)


#: :func:`_fill` for :func:`~log_support.as_a_user`'s child.
_FILL = """
def fill(path):
    llm = client(
        path,
        [TextEvent("Rayleigh scattering"), FinishEvent("stop", Usage(10, 4, 14))],
        [TextEvent("Paris"), FinishEvent("stop", Usage(6, 1, 7))],
        [TextEvent("Seven"), FinishEvent("stop", Usage(5, 2, 7))],
    )
    llm.ask("Why is the sky blue?")
    llm.ask("Capital of France?", model="other")
    llm.ask("How many seas?")
"""


def test_a_read_only_log_can_still_be_read(tmp_path: Path) -> None:
    """Run by a user whom the file's permissions bind (as root: ``nobody``)."""
    scenario = """
    path = FOLDER / "logs.db"
    fill(path)
    with sqlite3.connect(path) as db:  # fold the WAL in, as a closed log would be
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    read_only(path)
    try:
        with open_log(path) as log:
            texts = [c.text for c in log.calls()]
    finally:
        writable(path)
    done(texts)
    """
    texts = as_a_user(_FILL + textwrap.dedent(scenario), tmp_path)
    assert texts == ["Seven", "Paris", "Rayleigh scattering"]


def test_a_closed_read_only_log_in_a_read_only_folder_can_still_be_read(tmp_path: Path) -> None:
    """No ``-wal`` or ``-shm`` file next to it and none can be made (as root: ``nobody``)."""
    scenario = """
    path = FOLDER / "logs.db"
    fill(path)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for name in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)  # as the last writer leaves it when it closes
    read_only(path)  # the folder too: no -shm index can be made next to it
    try:
        with open_log(path) as log:
            texts = [c.text for c in log.calls()]
    finally:
        writable(path)
    done(texts)
    """
    texts = as_a_user(_FILL + textwrap.dedent(scenario), tmp_path)
    assert texts == ["Seven", "Paris", "Rayleigh scattering"]


def test_a_busy_log_can_still_be_read(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a writer holds the lock
    try:
        with open_log(path) as log:
            assert len(log.calls()) == 3
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_bad_arguments_are_config_errors(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    with open_log(path) as log:
        for bad in ({"since": "yesterday"}, {"limit": -1}, {"until": object()}):
            with pytest.raises(ConfigError):
                log.calls(**bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            log.prune(older_than=-1)


def test_the_top_level_open_log_is_the_same() -> None:
    assert ollm_lite.open_log is open_log
    assert ollm_lite.LoggedCall is ollm_lite.call_log.LoggedCall
    llm = ollm_lite.connect(ScriptedProvider([]), model="m")
    assert llm.call_log is None


def test_logged_helper_reads_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    assert logged(path)[0].text == "Rayleigh scattering"


def test_a_damaged_log_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    data[4096:] = b"\xff" * (len(data) - 4096)  # every page after the first is garbage
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigError), open_log(path) as log:
        log.calls()


class _NoFts5:
    """A connection as a SQLite build without FTS5 behaves for the migration."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    @property
    def in_transaction(self) -> bool:
        return self.db.in_transaction

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if "fts5" in sql:
            raise sqlite3.OperationalError("no such module: fts5")
        return self.db.execute(sql, *args)


def test_without_fts5_search_falls_back_to_like(tmp_path: Path) -> None:
    from ollm_lite.call_log._schema import has_fts, migrate

    path = tmp_path / "logs.db"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(_NoFts5(db))  # type: ignore[arg-type]
    assert not has_fts(db)
    db.close()
    _fill(path)
    with open_log(path) as log:
        assert [c.text for c in log.calls(search="France")] == ["Paris"]
        assert [c.text for c in log.calls(search="scatter")] == ["Rayleigh scattering"]
        assert log.prune(older_than=0) == 3
        assert log.calls(search="France") == []
    assert count_rows(path, "calls_fts") == 0

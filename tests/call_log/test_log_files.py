"""Which files are a call log, and what any path given for one comes to.

* A file is a call log by its own mark (``PRAGMA application_id``), never by its
  ``user_version``: another program's database — whatever version it carries — is never
  switched to WAL or written, and reading it is a ``ConfigError``, not an empty log. A log
  written before the mark (the first schema's ``calls`` and ``turns``) is read as before and
  gets the mark with its next write.
* Only a regular file is opened, looked at without blocking: a FIFO as the log is a
  ``ConfigError`` for ``open_log`` and the CLI, a warning for a call.
* Every folder the log makes on the way to its file is its owner's alone (0700).
* Any path given in code or in ``OLLM_LOG``: a working log or a ``ConfigError`` naming where it
  came from — at ``connect``, never on the first call that logs.
"""

from __future__ import annotations

import logging
import os
import pwd
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from support.log_support import cli, count_rows, logged, logging_client
from support.path_support import awkward_paths, outcome_within

import ollm_lite
from ollm_lite import ConfigError, ScriptedProvider
from ollm_lite.call_log import open_log
from ollm_lite.call_log._writer import _warned

LOGGER = "ollm_lite.call_log"
NO_SUCH_USER = "nosuchuser-ollm-lite"


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    _warned.clear()  # each test's paths warn afresh


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == 30]


def _files(path: Path) -> dict[str, bytes]:
    """The database and whatever SQLite keeps beside it, as bytes."""
    return {
        name: Path(f"{path}{name}").read_bytes()
        for name in ("", "-wal", "-shm", "-journal")
        if Path(f"{path}{name}").exists()
    }


def _header(path: Path) -> tuple[int, int, str]:
    """``application_id``, ``user_version`` and journal mode, read without changing the file."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        mark = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()
    return mark, version, mode


def _app_database(path: Path, version: int, tables: str = "notes (body TEXT)") -> None:
    db = sqlite3.connect(path)
    try:
        if tables:
            for table in tables.split(";"):
                db.execute(f"CREATE TABLE {table}")
        db.execute(f"PRAGMA user_version = {version}")
        db.commit()
    finally:
        db.close()


# --------------------------------------------------------------------------- what is a log

FOREIGN = {
    "version 1, a table": (1, "notes (body TEXT)"),
    "version 7, a table": (7, "notes (body TEXT)"),
    "version 1, no table": (1, ""),
    "version 7, no table": (7, ""),
    "calls and turns of another shape": (1, "calls (who TEXT, minutes INTEGER);turns (n)"),
}


@pytest.mark.parametrize("case", FOREIGN)
def test_another_programs_database_is_never_switched_to_wal_or_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    path = tmp_path / "app.db"
    _app_database(path, *FOREIGN[case])
    before = _files(path)
    llm, _ = logging_client(path, "fine", "still fine", cache=True)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert llm.ask("x") == "fine"
        assert llm.ask("y") == "still fine"
    llm.close()
    [warning] = _warnings(caplog)
    assert "something else" in warning
    with pytest.raises(ConfigError, match="something else") as raised:
        with open_log(path) as log:
            log.calls()
    assert raised.value.code == "CONFIG_INVALID"
    assert _files(path) == before
    assert _header(path)[2] == "delete"


def test_a_database_marked_by_another_program_is_not_a_log_even_with_calls_and_turns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one")
    llm.ask("make it")
    llm.close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA application_id = 1234")
    with pytest.raises(ConfigError, match="something else"):
        open_log(path)
    other, _ = logging_client(path, "two")
    assert other.ask("again") == "two"
    assert count_rows(path) == 1


def test_the_cli_refuses_another_programs_database(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    _app_database(path, 7)
    before = _files(path)
    for args in (("logs",), ("logs", "stats"), ("logs", "list", "--json")):
        done = cli(tmp_path, path, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "CONFIG_INVALID" in done.stderr and "INTERNAL" not in done.stderr
    assert _files(path) == before


def test_a_new_log_carries_its_mark(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one")
    llm.ask("x")
    llm.close()
    from ollm_lite.call_log._schema import APPLICATION_ID, MIGRATIONS

    assert _header(path) == (APPLICATION_ID, len(MIGRATIONS), "wal")


def test_a_log_written_before_the_mark_is_read_and_marked_on_its_next_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one")
    llm.ask("first")
    llm.close()
    with sqlite3.connect(path) as db:  # as the first version of the log left it
        db.execute("PRAGMA application_id = 0")
    assert _header(path)[0] == 0
    assert [c.text for c in logged(path)] == ["one"]
    assert _header(path)[0] == 0  # reading writes nothing
    from ollm_lite.call_log._schema import APPLICATION_ID

    again, _ = logging_client(path, "two")
    assert again.ask("second") == "two"
    again.close()
    assert _header(path)[0] == APPLICATION_ID
    assert [c.text for c in logged(path)] == ["one", "two"]


def test_an_empty_database_becomes_a_log(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    sqlite3.connect(path).close()  # a file of no bytes
    with open_log(path) as log:
        assert log.calls() == []
    llm, _ = logging_client(path, "one")
    llm.ask("x")
    assert [c.text for c in logged(path)] == ["one"]


# --------------------------------------------------------------------------- no regular file


def test_a_fifo_as_the_log_is_refused_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fifo = tmp_path / "logs.db"
    os.mkfifo(fifo)

    def read_it() -> object:
        with open_log(fifo) as log:
            return log.calls()

    outcome = outcome_within(read_it, [fifo])
    assert isinstance(outcome, ConfigError) and "FIFO" in outcome.message
    monkeypatch.setenv("OLLM_LOG", str(fifo))
    outcome = outcome_within(lambda: open_log().stats(), [fifo])
    assert isinstance(outcome, ConfigError) and "FIFO" in outcome.message
    llm = ollm_lite.connect(ScriptedProvider(["fine"]), model="m", log=str(fifo))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert outcome_within(lambda: llm.ask("x"), [fifo]) == "fine"
    assert len(_warnings(caplog)) == 1 and "FIFO" in _warnings(caplog)[0]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_the_cli_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "logs.db"
    os.mkfifo(fifo)
    for args in (("logs",), ("logs", "stats")):
        done = cli(tmp_path, fifo, *args)  # a hang would end in the helper's time limit
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "FIFO" in done.stderr and "INTERNAL" not in done.stderr


# --------------------------------------------------------------------------- folders


def test_every_folder_made_on_the_way_is_the_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "clients" / "acme" / "2024" / "calls.db"
    umask = os.umask(0o022)  # the usual one, which leaves a plain mkdir at 0755
    try:
        llm, _ = logging_client(path, "one")
        assert llm.ask("x") == "one"
    finally:
        os.umask(umask)
    for folder in (tmp_path / "clients", path.parent.parent, path.parent):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    "path", ["a\0b.db", "logs\0", "\ud800.db", f"~{NO_SUCH_USER}/x.db"], ids=repr
)
def test_a_path_that_is_no_path_is_a_config_error_at_connect(path: str) -> None:
    if path.startswith("~"):
        _no_such_user()
    for cache in (False, True):
        with pytest.raises(ConfigError) as raised:
            ollm_lite.connect(ScriptedProvider(["x"]), model="m", log=path, cache=cache)
        assert raised.value.code == "CONFIG_INVALID"
        assert "log" in raised.value.message
    with pytest.raises(ConfigError):
        open_log(path)


def _no_such_user() -> None:
    try:
        pwd.getpwnam(NO_SUCH_USER)
    except KeyError:
        return
    pytest.skip(f"this machine has a user {NO_SUCH_USER}")


def test_ollm_log_of_no_such_users_home_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_such_user()
    value = f"~{NO_SUCH_USER}/x.db"
    monkeypatch.setenv("OLLM_LOG", value)
    with pytest.raises(ConfigError, match="OLLM_LOG") as raised:
        ollm_lite.connect("local", host="http://127.0.0.1:9", model="m")  # nothing is sent
    assert raised.value.code == "CONFIG_INVALID"
    with pytest.raises(ConfigError, match="OLLM_LOG"):
        ollm_lite.connect(ScriptedProvider(["x"]), model="m", cache=True)
    with pytest.raises(ConfigError, match="OLLM_LOG"):
        open_log()
    assert ollm_lite.connect(ScriptedProvider(["x"]), model="m", log=False).ask("y") == "x"
    for args in (("logs",), ("logs", "stats"), ("config", "show")):
        done = cli(tmp_path, None, *args, OLLM_LOG=value)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "OLLM_LOG" in done.stderr and "INTERNAL" not in done.stderr


def test_validate_config_reports_a_log_path_of_no_such_users_home(tmp_path: Path) -> None:
    _no_such_user()
    config = tmp_path / "config.toml"
    config.write_text(f'[log]\npath = "~{NO_SUCH_USER}/x.db"\n', "utf-8")
    issues = ollm_lite.validate_config(ollm_lite.load_config(config, env={}))
    assert [i.path for i in issues] == ["log.path"]


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


@pytest.fixture(scope="module")
def awkward(folder: Path) -> dict[str, str]:
    return awkward_paths(folder / "awkward")


#: One step of a path inside the test's folder: any character but "/", never "..".
steps = st.text(st.characters(blacklist_characters="/"), min_size=1, max_size=20).filter(
    lambda step: step != ".."
)


@st.composite
def log_paths(draw: st.DrawFn, folder: Path, awkward: dict[str, str]) -> object:
    """A path inside ``folder`` (its ``~`` standing for it), an awkward one, or no path."""
    inside = "/".join(draw(st.lists(steps, min_size=1, max_size=3)))
    kind = draw(st.sampled_from(["inside", "home", "no such user", "awkward", "bytes", "other"]))
    if kind == "inside":
        return f"{folder}/{inside}"
    if kind == "home":
        return f"~/{inside}"
    if kind == "no such user":
        return f"~{NO_SUCH_USER}/{inside}"
    if kind == "awkward":
        return draw(st.sampled_from(sorted(awkward.values())))
    if kind == "bytes":
        return os.fsencode(str(folder)) + b"/" + draw(st.binary(min_size=1, max_size=20))
    return draw(st.sampled_from([5, 2.5, object(), ["a"]]))


@settings(max_examples=80)
@given(st.data())
def test_any_path_is_a_working_log_or_a_config_error(
    folder: Path, awkward: dict[str, str], data: st.DataObject
) -> None:
    _no_such_user()
    path = data.draw(log_paths(folder, awkward), label="path")
    if isinstance(path, bytes):
        path = path.replace(b"/..", b"/__")  # never out of the folder
    fifos = [awkward["fifo"]]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(folder / "home"))
        try:
            llm = ollm_lite.connect(ScriptedProvider(["answer"]), model="m", log=path)  # type: ignore[arg-type]
        except ConfigError as exc:
            assert exc.code == "CONFIG_INVALID"
        else:
            assert outcome_within(lambda: llm.ask("x"), fifos) == "answer"
            llm.close()

        def read() -> object:
            with open_log(path) as log:  # type: ignore[arg-type]
                return log.calls(), log.stats()

        outcome = outcome_within(read, fifos)
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, ConfigError), (path, outcome)


def test_the_cli_refuses_a_log_path_it_cannot_use(tmp_path: Path) -> None:
    """A path that is no regular file or cannot be looked at: exit 1 naming the path's
    trouble, never ``[INTERNAL]`` (a name too long used to escape as ``OSError``)."""
    paths = awkward_paths(tmp_path / "awkward")
    for name in ("too long", "symlink loop", "directory", "character device"):
        done = cli(tmp_path, Path(paths[name]), "logs")
        assert done.returncode == 1, (name, done.stdout, done.stderr)
        assert "CONFIG_INVALID" in done.stderr and "INTERNAL" not in done.stderr, name

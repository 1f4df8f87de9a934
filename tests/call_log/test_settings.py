"""Turning the log on: ``connect(log=, cache=)`` > ``OLLM_LOG`` > ``[log]``; the path rule;
``validate_config`` and ``config show`` know the table."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.log_support import cli

import ollm_lite
from ollm_lite import ScriptedProvider, load_config, validate_config
from ollm_lite.call_log._settings import resolve
from ollm_lite.errors import ConfigError


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(body, "utf-8")
    return path


def _log_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **keywords: object) -> Path | None:
    """Where a client of a real provider logs (no request is sent)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    llm = ollm_lite.connect(
        "openai-compatible",
        host="http://127.0.0.1:9",
        model="m",
        **keywords,  # type: ignore[arg-type]
    )
    return llm.call_log.path if llm.call_log is not None else None


DEFAULT = Path("data") / "ollm" / "logs.db"


@pytest.mark.parametrize("value", ["1", "true", "YES", "On", " on "])
def test_ollm_log_turns_it_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OLLM_LOG", value)
    assert _log_of(tmp_path, monkeypatch) == tmp_path / DEFAULT


@pytest.mark.parametrize("value", ["0", "false", "No", "OFF", ""])
def test_ollm_log_turns_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OLLM_LOG", value)
    config = _config(tmp_path, "[log]\nenabled = true\n")
    on_by_file = _log_of(tmp_path, monkeypatch, config=config)
    assert on_by_file == (tmp_path / DEFAULT if value == "" else None)


def test_a_path_in_ollm_log_turns_it_on_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLM_LOG", str(tmp_path / "env.db"))
    config = _config(tmp_path, f'[log]\nenabled = false\npath = "{tmp_path / "file.db"}"\n')
    assert _log_of(tmp_path, monkeypatch, config=config) == tmp_path / "env.db"
    assert _log_of(tmp_path, monkeypatch, config=config, log=str(tmp_path / "kw.db")) == (
        tmp_path / "kw.db"
    )
    assert _log_of(tmp_path, monkeypatch, config=config, log=False) is None


def test_the_file_turns_it_on_at_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path, f'[log]\nenabled = true\npath = "{tmp_path / "file.db"}"\n')
    assert _log_of(tmp_path, monkeypatch, config=config) == tmp_path / "file.db"
    monkeypatch.setenv("OLLM_LOG", "yes")
    assert _log_of(tmp_path, monkeypatch, config=config) == tmp_path / "file.db"
    off = _config(tmp_path, f'[log]\nenabled = false\npath = "{tmp_path / "file.db"}"\n')
    monkeypatch.delenv("OLLM_LOG")
    assert _log_of(tmp_path, monkeypatch, config=off) is None
    assert _log_of(tmp_path, monkeypatch, config=off, log=True) == tmp_path / "file.db"


def test_cache_implies_the_log_and_refuses_log_false(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _log_of(tmp_path, monkeypatch, cache=True) == tmp_path / DEFAULT
    with pytest.raises(ConfigError):
        _log_of(tmp_path, monkeypatch, cache=True, log=False)
    for bad in ({"log": 3}, {"cache": "yes"}, {"log": ""}):
        with pytest.raises(ConfigError):
            resolve(bad.get("log"), bad.get("cache"), None, {})


def test_validate_config_knows_the_log_table(tmp_path: Path) -> None:
    good = load_config(_config(tmp_path, '[log]\nenabled = true\npath = "x.db"\n'))
    assert validate_config(good) == []
    bad = load_config(_config(tmp_path, '[log]\nenabled = "maybe"\npath = 3\ncolour = 1\n'))
    assert sorted(i.path for i in validate_config(bad)) == ["log.colour", "log.enabled", "log.path"]
    wrong = load_config(_config(tmp_path, 'log = "on"\n'))
    assert [i.path for i in validate_config(wrong)] == ["log"]


def test_config_show_and_validate_on_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "config" / "ollm" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[log]\nenabled = true\npath = "{tmp_path / "mine.db"}"\n', "utf-8")
    shown = cli(tmp_path, None, "config", "show")
    assert shown.returncode == 0, shown.stderr
    assert "[log]" in shown.stdout and "enabled = true" in shown.stdout
    assert str(tmp_path / "mine.db") in shown.stdout
    assert cli(tmp_path, None, "config", "validate").returncode == 0
    config.write_text('[log]\nenabled = "sometimes"\n', "utf-8")
    done = cli(tmp_path, None, "config", "validate")
    assert done.returncode == 1 and "log.enabled" in done.stdout + done.stderr


def test_a_script_is_not_logged_by_the_environment_or_the_file_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay test must never write into the real log: ``OLLM_LOG`` and ``[log]`` do not
    turn it on for a ``ScriptedProvider``; ``log=`` and ``cache=`` given in code still do."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("OLLM_LOG", str(tmp_path / "real.db"))
    config = _config(tmp_path, f'[log]\nenabled = true\npath = "{tmp_path / "file.db"}"\n')
    for given in ({}, {"config": config}, {"cache": False}):
        llm = ollm_lite.connect(ScriptedProvider(["Paris."]), model="m", **given)  # type: ignore[arg-type]
        assert llm.call_log is None
        assert llm.ask("Capital of France?") == "Paris."
        with pytest.raises(ollm_lite.OllmError):
            llm.ask("The script is exhausted now")
    assert not (tmp_path / "real.db").exists() and not (tmp_path / "file.db").exists()
    explicit = ollm_lite.connect(ScriptedProvider([]), model="m", log=str(tmp_path / "kw.db"))
    assert explicit.call_log is not None and explicit.call_log.path == tmp_path / "kw.db"
    cached = ollm_lite.connect(ScriptedProvider([]), model="m", cache=True)
    assert cached.call_log is not None and cached.call_log.path == tmp_path / "real.db"

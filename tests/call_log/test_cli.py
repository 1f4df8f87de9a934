"""``ollm-lite logs`` and ``chat --log/--no-log``, run as subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import ollama_support as oll
from support.log_support import cli, logged, logging_client

from ollm_lite import FinishEvent, TextEvent, Usage
from ollm_lite.cli._logs import set_enabled
from ollm_lite.errors import ConfigError

LONG = "Rayleigh scattering makes the sky blue. " * 20


def _fill(path: Path) -> None:
    llm, _ = logging_client(
        path,
        [TextEvent(LONG), FinishEvent("stop", Usage(10, 40, 50))],
        [TextEvent("Paris"), FinishEvent("stop", Usage(6, 1, 7))],
    )
    llm.ask("Why is the sky blue?")
    llm.ask("Capital of France?", model="other")
    failing, _ = logging_client(path)
    with pytest.raises(Exception):  # noqa: B017  (the script is empty: any error)
        failing.ask("nothing to answer")


def test_logs_without_a_file_says_nothing_is_logged_yet(tmp_path: Path) -> None:
    done = cli(tmp_path, None, "logs")
    assert done.returncode == 0, done.stderr
    assert "nothing is logged yet" in done.stdout
    assert not (tmp_path / "data").exists()
    done = cli(tmp_path, None, "logs", "list", "--json")
    assert (done.returncode, json.loads(done.stdout)) == (0, [])
    done = cli(tmp_path, None, "logs", "stats", "--json")
    assert (done.returncode, json.loads(done.stdout)) == (0, [])


def test_logs_list_is_a_table_with_one_line_per_call(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    done = cli(tmp_path, path, "logs")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4  # a header and three calls, the long answer on one line
    assert "Rayleigh scattering" in done.stdout and LONG.strip() not in done.stdout
    assert cli(tmp_path, path, "logs", "list", "-n", "1").stdout.count("\n") == 2


def test_logs_list_json_and_its_filters(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    everything = json.loads(cli(tmp_path, path, "logs", "list", "--json").stdout)
    assert [c["text"] for c in everything] == ["", "Paris", LONG]
    assert set(everything[0]) >= {"id", "started", "seconds", "source", "messages", "turns"}
    only = json.loads(cli(tmp_path, path, "logs", "--model", "other", "--json").stdout)
    assert [c["text"] for c in only] == ["Paris"]
    found = json.loads(cli(tmp_path, path, "logs", "--search", "France", "--json").stdout)
    assert [c["text"] for c in found] == ["Paris"]
    errors = json.loads(cli(tmp_path, path, "logs", "--errors", "--json").stdout)
    assert len(errors) == 1 and errors[0]["error_code"]
    recent = json.loads(cli(tmp_path, path, "logs", "--since", "1h", "--json").stdout)
    assert len(recent) == 3


def test_logs_show_prints_one_call_in_full(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    first = logged(path)[0]
    done = cli(tmp_path, path, "logs", "show", first.id)
    assert done.returncode == 0, done.stderr
    assert LONG.strip() in done.stdout
    data = json.loads(cli(tmp_path, path, "logs", "show", first.id, "--json").stdout)
    assert data["id"] == first.id and data["text"] == LONG
    assert data["usage"]["completion_tokens"] == 40


@pytest.mark.parametrize(
    "args",
    [
        ("logs", "show", "no-such-id"),
        ("logs", "--since", "7x"),
        ("logs", "--since", "0"),
        ("logs", "--since", "-3d"),
        ("logs", "stats", "--since", "abc"),
        ("logs", "prune", "--older-than", "1.5h"),
        ("logs", "prune"),
        ("logs", "-n", "0"),
    ],
)
def test_bad_durations_and_unknown_ids_are_usage_errors(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    done = cli(tmp_path, path, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr


def test_logs_stats_by_each_key(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    stats = json.loads(cli(tmp_path, path, "logs", "stats", "--json").stdout)
    by_key = {s["key"]: s for s in stats}
    assert by_key["m"]["calls"] == 2 and by_key["m"]["errors"] == 1
    assert by_key["m"]["completion_tokens"] == 40
    assert set(by_key["m"]) == {
        "key", "calls", "errors", "cached", "prompt_tokens", "completion_tokens",
        "seconds_p50", "seconds_p95", "cost",
    }  # fmt: skip
    for key in ("day", "host", "source"):
        done = cli(tmp_path, path, "logs", "stats", "--by", key)
        assert done.returncode == 0 and key.upper() in done.stdout
    assert "CALLS" in cli(tmp_path, path, "logs", "stats").stdout


def test_logs_prune_and_path(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    assert cli(tmp_path, path, "logs", "path").stdout.strip() == str(path)
    done = cli(tmp_path, path, "logs", "prune", "--older-than", "1d")
    assert done.returncode == 0 and "removed 0" in done.stderr
    done = cli(tmp_path, None, "logs", "path")
    assert done.stdout.strip() == str(tmp_path / "data" / "ollm" / "logs.db")


def test_logs_on_and_off_keep_every_other_line(tmp_path: Path) -> None:
    config = tmp_path / "config" / "ollm" / "config.toml"
    done = cli(tmp_path, None, "logs", "on")
    assert done.returncode == 0, done.stderr
    assert config.read_text("utf-8") == "[log]\nenabled = true\n"
    text = '# mine\nmodel = "llama3.2"\n\n[log]\npath = "/x/y.db"  # here\nenabled = true\n\n'
    text += '[providers.local]\nbase_url = "http://127.0.0.1:11434"\n'
    config.write_text(text, "utf-8")
    assert cli(tmp_path, None, "logs", "off").returncode == 0
    assert config.read_text("utf-8") == text.replace("enabled = true", "enabled = false")
    done = cli(tmp_path, None, "logs", "on", OLLM_LOG="off")
    assert "OLLM_LOG" in done.stderr
    assert "enabled = true" in config.read_text("utf-8")
    assert "OLLM_LOG" not in cli(tmp_path, None, "logs", "on", OLLM_LOG="1").stderr


def test_chat_log_and_no_log(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    with oll.serve({("POST", "/api/chat"): oll.stream(oll.text_transcript())}) as server:
        base = ("--host", server.url, "--model", "llama3.2", "chat")
        done = cli(tmp_path, None, *base, "--log", "Why is the sky blue?", OLLM_LOG="0")
        assert done.returncode == 0, done.stderr
        done = cli(tmp_path, path, *base, "--no-log", "Not this one")
        assert done.returncode == 0, done.stderr
        done = cli(tmp_path, path, *base, "And this one?")
        assert done.returncode == 0, done.stderr
    default = tmp_path / "data" / "ollm" / "logs.db"
    [first] = logged(default)
    assert first.source == "cli" and first.messages[-1]["content"] == "Why is the sky blue?"
    assert first.text and first.host and first.host.startswith("http://127.0.0.1:")
    [second] = logged(path)
    assert second.messages[-1]["content"] == "And this one?"
    assert second.options.get("max_tokens") == 1024


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # an array of tables ends [log] as any header does
            '[log]\npath = "x.db"\n[[servers]]\nenabled = true\n',
            '[log]\nenabled = false\npath = "x.db"\n[[servers]]\nenabled = true\n',
        ),
        ('["log"] # quoted\nenabled = true\n', '["log"] # quoted\nenabled = false\n'),
        ('log.enabled = true\nmodel = "m"\n', 'log.enabled = false\nmodel = "m"\n'),
        ('log.path = "x.db"\n', 'log.enabled = false\nlog.path = "x.db"\n'),
        ('model = "m"\r\n[log]\r\nenabled = 1\r\n', 'model = "m"\r\n[log]\r\nenabled = false\r\n'),
        (  # a line of a multi-line string is no key
            '[log]\npath = """\nenabled = true\n"""\n',
            '[log]\nenabled = false\npath = """\nenabled = true\n"""\n',
        ),
    ],
)
def test_logs_off_changes_log_enabled_alone(tmp_path: Path, text: str, expected: str) -> None:
    config = tmp_path / "config.toml"
    config.write_bytes(text.encode("utf-8"))
    set_enabled(config, False)
    assert config.read_bytes().decode("utf-8") == expected


def test_logs_off_leaves_an_inline_log_table_to_the_user(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("log = { enabled = true }\n", "utf-8")
    with pytest.raises(ConfigError, match="by hand"):
        set_enabled(config, False)
    assert config.read_text("utf-8") == "log = { enabled = true }\n"
    done = cli(tmp_path, None, "--config", str(config), "logs", "off")
    assert done.returncode == 1 and "by hand" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("logs", "--model", "other", "--json"),
        ("logs", "list", "--model", "other", "--json"),
        ("logs", "list", "--json", "--model", "other"),
        ("logs", "--model", "other", "list", "--json"),
        ("--model", "other", "logs", "--json"),
        ("--model", "other", "logs", "list", "--json"),
    ],
)
def test_logs_model_filters_wherever_it_is_given(tmp_path: Path, args: tuple[str, ...]) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    done = cli(tmp_path, path, *args)
    assert done.returncode == 0, done.stderr
    assert [c["model"] for c in json.loads(done.stdout)] == ["other"]


@pytest.mark.parametrize(
    "args",
    [
        ("logs", "prune", "--older-than", "1s", "--model", "other"),
        ("--model", "other", "logs", "prune", "--older-than", "1s"),
        ("logs", "stats", "--model", "other"),
    ],
)
def test_model_is_refused_where_it_would_be_ignored(tmp_path: Path, args: tuple[str, ...]) -> None:
    """``--model`` filters ``logs list`` only: ``prune --model M`` used to remove every model's
    calls while the user meant one, so it is a usage error, and nothing is removed."""
    path = tmp_path / "logs.db"
    _fill(path)
    done = cli(tmp_path, path, *args)
    assert done.returncode == 2 and "--model does not apply" in done.stderr
    assert len(json.loads(cli(tmp_path, path, "logs", "--json").stdout)) == 3

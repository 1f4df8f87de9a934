"""``ollm-lite logs`` answers the morning's questions (what ran, when in local time, what it
said or why it failed, how long, cached or not, the totals), printing nothing a server sent
raw; run as subprocesses."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.log_support import cli, logged, logging_client

import ollm_lite
from ollm_lite import ErrorEvent, FinishEvent, TextEvent, Usage
from ollm_lite.types import ErrorInfo

HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"
EAST = {"TZ": "ABC-5"}
STARTED = datetime(
    2024, 1, 16, 6, 0, 12, 750_000, tzinfo=UTC
)  # a Tuesday  # a POSIX rule (no tz database needed): UTC+5


def _fill(path: Path) -> list[str]:
    """Four calls, oldest first: an answer, the same answer from the cache, a failure with a
    two-line message, and an answer to another model; their ids."""
    llm, _ = logging_client(
        path,
        [TextEvent("Paris is the capital."), FinishEvent("stop", Usage(6, 4, 10))],
        [ErrorEvent(ErrorInfo("the server said no\nand then more", "LLM_SERVER_ERROR"))],
        [TextEvent("Seven."), FinishEvent("stop", Usage(5, 2, 7))],
        cache=True,
    )
    llm.ask("Capital of France?", temperature=0.2, stop=["\n"])
    llm.ask("Capital of France?", temperature=0.2, stop=["\n"])
    with contextlib.suppress(ollm_lite.OllmError):
        llm.ask("Why?")
    llm.ask("How many seas?", model="other")
    llm.close()
    ids = [c.id for c in logged(path)]
    with sqlite3.connect(path) as db:  # the first call at a known time and duration
        db.execute(
            "UPDATE calls SET started = ?, started_ts = ?, seconds = 2.345678 WHERE id = ?",
            (STARTED.isoformat(), STARTED.timestamp(), ids[0]),
        )
    db.close()
    return [str(i) for i in ids]


def test_a_row_shows_local_start_with_weekday_model_seconds_cached_and_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "logs.db"
    first, cached, failed, other = _fill(path)
    done = cli(tmp_path, path, "logs", **EAST)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert list(lines) == [other, failed, cached, first]  # newest first
    assert "Tue 2024-01-16 11:00:12" in lines[first]  # 06:00 UTC, 5 hours east
    assert " m " in lines[first] and " other " in lines[other]
    assert "2.35" in lines[first] and "Paris is the capital." in lines[first]
    assert "cached" in lines[cached] and "cached" not in lines[first]
    assert "LLM_SERVER_ERROR" in lines[failed]
    assert "the server said no and then more" in lines[failed]  # the message, on its line
    assert len(done.stdout.splitlines()) == 5


def test_until_lists_the_calls_started_before(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    first, *recent = _fill(path)  # the first call started in January 2024
    with sqlite3.connect(path) as db:  # the others ten minutes ago, whatever the machine's pace
        for call_id in recent:
            (ts,) = db.execute("SELECT started_ts FROM calls WHERE id = ?", (call_id,)).fetchone()
            then = datetime.fromtimestamp(ts - 600, UTC)
            db.execute(
                "UPDATE calls SET started = ?, started_ts = ? WHERE id = ?",
                (then.isoformat(), then.timestamp(), call_id),
            )
    db.close()
    done = cli(tmp_path, path, "logs", "--until", "1h", "--json")
    assert done.returncode == 0, done.stderr
    assert [c["id"] for c in json.loads(done.stdout)] == [first]
    done = cli(tmp_path, path, "logs", "list", "--since", "1h", "--until", "5m", "--json")
    assert len(json.loads(done.stdout)) == 3


def test_show_takes_any_unique_prefix_of_an_id(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    ids = _fill(path)
    for call_id in ids:
        unique = next(
            call_id[:n] for n in range(1, len(call_id) + 1)
            if sum(i.startswith(call_id[:n]) for i in ids) == 1
        )  # fmt: skip
        done = cli(tmp_path, path, "logs", "show", unique, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["id"] == call_id
    shared = ids[0][:4]
    assert all(i.startswith(shared) for i in ids)  # made within the same second
    done = cli(tmp_path, path, "logs", "show", shared)
    assert done.returncode == 2 and "more than one" in done.stderr
    for unknown in ("zz", ids[0] + "0", ""):
        done = cli(tmp_path, path, "logs", "show", unknown)
        assert done.returncode == 2 and "no call" in done.stderr, done.stderr


def test_show_prints_seconds_rounded_and_options_as_key_value_lines(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    first, *_ = _fill(path)
    done = cli(tmp_path, path, "logs", "show", first, **EAST)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "seconds: 2.35" in lines
    assert "started: Tue 2024-01-16 11:00:12 (local time)" in lines
    options = lines[lines.index("options:") + 1 :]
    assert options[:2] == ["  temperature = 0.2", '  stop = ["\\n"]']
    assert "  prompt_tokens = 6" in lines and "  completion_tokens = 4" in lines
    assert "{'" not in done.stdout and "2.345678" not in done.stdout


def test_stats_ends_with_a_total_row_and_knows_by_script(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _fill(path)
    done = cli(tmp_path, path, "logs", "stats")
    assert done.returncode == 0, done.stderr
    header, *rows = [line.split() for line in done.stdout.splitlines()]
    assert header[:4] == ["MODEL", "CALLS", "ERRORS", "CACHED"]
    assert [r[0] for r in rows] == ["m", "other", "total"]
    assert rows[-1][1:6] == ["4", "1", "1", "11", "6"]  # calls, errors, cached, tokens
    script = logged(path)[0].script
    done = cli(tmp_path, path, "logs", "stats", "--by", "script")
    assert done.returncode == 0, done.stderr
    header, *rows = [line.split() for line in done.stdout.splitlines()]
    assert header[0] == "SCRIPT" and [r[0] for r in rows] == [script, "total"]
    stats = json.loads(cli(tmp_path, path, "logs", "stats", "--by", "script", "--json").stdout)
    assert [s["key"] for s in stats] == [script]  # JSON: the groups only


@pytest.mark.parametrize("command", [("logs",), ("logs", "show", "ID"), ("logs", "stats")])
def test_nothing_a_server_sent_reaches_the_terminal_raw(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(
        path,
        [TextEvent(f"an answer {HOSTILE} ends"), FinishEvent("stop")],
        [ErrorEvent(ErrorInfo(f"refused {HOSTILE} here", "LLM_SERVER_ERROR"))],
    )
    llm.ask("one")
    with contextlib.suppress(ollm_lite.OllmError):
        llm.ask("two", model=f"model{HOSTILE}")
    llm.close()
    ids = [str(c.id) for c in logged(path)]
    for call_id in ids:
        args = [call_id if a == "ID" else a for a in command]
        done = cli(tmp_path, path, *args)
        assert done.returncode == 0, done.stderr
        for control in ("\x1b", "\x07", "\x9b", "\x9d"):
            assert control not in done.stdout and control not in done.stderr
        if "show" in command:
            assert ("an answer" in done.stdout) or ("refused" in done.stdout)
        if "show" not in command:
            break

"""A row changed by hand or by another tool (bad JSON, JSON of the wrong shape, a bad
``started``, text that is not UTF-8) reads with the damaged field as ``None`` (a list as
``[]``) and one WARNING naming the row; a damaged cached answer is a miss."""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
from pathlib import Path

import pytest
from support.log_support import cli, logging_client

from ollm_lite import FinishEvent, ScriptedProvider, TextEvent, ToolCall, ToolCallEvent, Usage
from ollm_lite.call_log import LoggedCall, open_log
from ollm_lite.errors import ConfigError


def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


class Text(bytes):
    """Bytes stored as TEXT (not a BLOB): text that is not UTF-8."""


def log_one_call(path: Path) -> LoggedCall:
    """A log holding one call with every kind of field: two turns, a tool call and its
    result, usage, options."""
    call = ToolCall.from_arguments("c1", "lookup", {"city": "Oslo"})
    llm, _ = logging_client(
        path,
        [ToolCallEvent(call), FinishEvent("tool", Usage(5, 2, 7))],
        [TextEvent("Sunny."), FinishEvent("stop", Usage(9, 3, 12))],
    )
    assert llm.run("Weather in Oslo?", tools=[lookup], temperature=0.2).text == "Sunny."
    llm.close()
    with open_log(path) as log:
        [logged] = log.calls()
    return logged


def damage(path: Path, table: str, column: str, value: object) -> None:
    with sqlite3.connect(path) as db:
        if isinstance(value, Text):
            db.execute(f"UPDATE {table} SET {column} = CAST(? AS TEXT)", (bytes(value),))
        else:
            db.execute(f"UPDATE {table} SET {column} = ?", (value,))
    db.close()


NOT_UTF8 = Text(b"\xff\xfeabc")
DEEP = "[" * 100_000 + "]" * 100_000

#: (column, stored value, field, what the field reads as)
CASES: list[tuple[str, object, str, object]] = [
    ("text", NOT_UTF8, "text", None),
    ("text", b"\xff", "text", None),
    ("messages", "not json", "messages", []),
    ("messages", '{"role": "user"}', "messages", []),
    ("messages", "[5]", "messages", []),
    ("messages", DEEP, "messages", []),
    ("options", "[1, 2]", "options", None),
    ("options", "5", "options", None),
    ("tool_calls", '"xy"', "tool_calls", []),
    ("tool_calls", "[5]", "tool_calls", []),
    ("tool_calls", '[{"function": {"name": 5}}]', "tool_calls", []),
    ("tool_calls", '[{"function": {"name": "f", "arguments": [1]}}]', "tool_calls", []),
    ("tool_results", '[{"ok": "yes"}]', "tool_results", []),
    ("tool_results", '[{"ok": false, "error": "boom"}]', "tool_results", []),
    ("usage", '{"prompt_tokens": "many"}', "usage", None),
    ("usage", '{"extra": 5}', "usage", None),
    ("usage", "[", "usage", None),
    ("started", "yesterday", "started", None),
    ("started", "2024-01-01T00:00:00", "started", None),  # no offset: not UTC as written
    ("started", "0001-01-01T00:00:00+01:00", "started", None),  # before year 1 in UTC
    ("started", NOT_UTF8, "started", None),
    ("seconds", "slow", "seconds", None),
    ("seconds", float("inf"), "seconds", None),
    ("first_token_seconds", "soon", "first_token_seconds", None),
    ("cached", "yes", "cached", None),
    ("cached", 7, "cached", None),
    ("model", NOT_UTF8, "model", None),
    ("source", b"\xf0\x9f", "source", None),
    ("finish", b"\xc3", "finish", None),
    ("error_message", NOT_UTF8, "error_message", None),
    ("session_id", NOT_UTF8, "session_id", None),
]


def _expected(original: LoggedCall, field: str, value: object) -> LoggedCall:
    return dataclasses.replace(original, **{field: value})


@pytest.mark.parametrize(("column", "stored", "field", "reads"), CASES)
def test_a_damaged_field_reads_as_none_and_is_warned_of_once(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    column: str,
    stored: object,
    field: str,
    reads: object,
) -> None:
    path = tmp_path / "logs.db"
    original = log_one_call(path)
    damage(path, "calls", column, stored)
    caplog.set_level(logging.WARNING, logger="ollm_lite.call_log")
    with open_log(path) as log:
        [call] = log.calls()
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and repr(original.id) in warnings[0].getMessage()
        assert column in warnings[0].getMessage()
        assert call == _expected(original, field, reads)
        for by in ("model", "day", "host", "source", "script"):
            [stats] = log.stats(by=by)  # type: ignore[arg-type]
            assert stats.calls == 1
        if field == "started":
            with pytest.raises(ConfigError, match="damaged"):
                log.get(str(original.id))
        else:
            assert log.get(str(original.id)) == call
    replay = ScriptedProvider.from_log([call])
    assert replay.remaining == 2


@pytest.mark.parametrize("stored", [NOT_UTF8, None, b"\x80"])
def test_a_row_whose_id_cannot_be_read_is_listed_by_its_rowid(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, stored: object
) -> None:
    path = tmp_path / "logs.db"
    original = log_one_call(path)
    damage(path, "calls", "id", stored)
    with open_log(path) as log:
        [call] = log.calls()
        assert "rowid 1" in caplog.text
        # its turns are found by its id: none, then
        assert call == dataclasses.replace(original, id=None, turns=[])
        assert log.stats()[0].calls == 1
        with pytest.raises(ConfigError, match="no call"):
            log.get(str(original.id))
    assert ScriptedProvider.from_log([call]).remaining == 0


@pytest.mark.parametrize(
    ("column", "stored"),
    [
        ("answer", '{"text": "x", "tool_calls": "xy", "finish": "stop"}'),
        ("answer", '{"text": "x", "tool_calls": [5], "finish": "stop"}'),
        ("answer", '{"text": ' + DEEP[:50_000] + "}"),
        ("answer", NOT_UTF8),
        ("request", "{"),
        ("cached", "no"),
    ],
)
def test_a_damaged_turn_empties_turns_and_replays_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, column: str, stored: object
) -> None:
    path = tmp_path / "logs.db"
    original = log_one_call(path)
    damage(path, "turns", column, stored)
    with open_log(path) as log:
        [call] = log.calls()
    assert "turns" in caplog.text
    assert call == dataclasses.replace(original, turns=[])
    assert ScriptedProvider.from_log([call]).remaining == 0


@pytest.mark.parametrize(
    "answer",
    [
        '{"text": "old", "tool_calls": "xy", "finish": "stop"}',
        '{"text": "old", "tool_calls": [5], "finish": "stop"}',
        '{"text": "old", "tool_calls": ' + DEEP + ', "finish": "stop"}',
        '{"text": "old", "finish": 5}',
        '{"text": ["old"], "finish": "stop"}',
        '"old"',
        NOT_UTF8,
    ],
)
def test_a_damaged_cached_answer_is_a_miss(tmp_path: Path, answer: object) -> None:
    path = tmp_path / "logs.db"
    llm, provider = logging_client(path, "first", "second", cache=True)
    assert llm.ask("Why?") == "first"
    damage(path, "turns", "answer", answer)
    assert llm.ask("Why?") == "second"  # asked again: the server answers
    assert len(provider.requests) == 2
    llm.close()


def test_a_damaged_cached_answer_in_a_batch_line_is_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    first, _ = logging_client(path, "first", cache=True)
    assert first.ask("Why?") == "first"
    first.close()
    damage(path, "turns", "answer", '{"text": "old", "tool_calls": [5], "finish": "stop"}')
    llm, provider = logging_client(path, "second", cache=True)
    [result] = llm.map(["Why?"])
    assert result.text == "second" and len(provider.requests) == 1
    llm.close()


def _cli_damaged(tmp_path: Path, column: str, value: object) -> tuple[Path, LoggedCall]:
    path = tmp_path / "logs.db"
    original = log_one_call(path)
    damage(path, "calls", column, value)
    return path, original


@pytest.mark.parametrize(
    ("column", "value"),
    [("text", NOT_UTF8), ("messages", "[5]"), ("options", "{"), ("seconds", "x"),
     ("cached", "x"), ("usage", '{"extra": 1}'), ("model", NOT_UTF8)],
)  # fmt: skip
def test_the_cli_reads_a_damaged_row(tmp_path: Path, column: str, value: object) -> None:
    path, original = _cli_damaged(tmp_path, column, value)
    for args in (
        ("logs",),
        ("logs", "--json"),
        ("logs", "show", str(original.id)),
        ("logs", "show", str(original.id), "--json"),
        ("logs", "stats"),
        ("logs", "stats", "--json"),
    ):
        done = cli(tmp_path, path, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert "INTERNAL" not in done.stderr and "Traceback" not in done.stderr
        if "stats" not in args or column in ("seconds", "cached", "model"):  # what stats reads
            assert "is damaged" in done.stderr and repr(original.id) in done.stderr


def test_the_cli_names_a_call_whose_start_cannot_be_read(tmp_path: Path) -> None:
    path, original = _cli_damaged(tmp_path, "started", "yesterday")
    done = cli(tmp_path, path, "logs")
    assert done.returncode == 0 and "INTERNAL" not in done.stderr
    done = cli(tmp_path, path, "logs", "show", str(original.id))
    assert done.returncode == 1, done.stderr
    assert "CONFIG_INVALID" in done.stderr and str(original.id) in done.stderr

"""Prices and costs: ``connect(prices=)``, ``[prices."MODEL"]``, ``Reply.cost``,
``LoggedCall.cost``, ``CallStats.cost`` and the log's first schema migration."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from support.log_support import cli, logged, logging_client

import ollm_lite
from ollm_lite import FinishEvent, ScriptedProvider, TextEvent, ToolCall, ToolCallEvent, Usage
from ollm_lite.call_log import _reader, _schema, open_log
from ollm_lite.config import Config, validate_config
from ollm_lite.errors import ConfigError
from ollm_lite.gate._prices import Price, cached_tokens, turn_cost

PRICES = {"m": {"input": 2.0, "output": 8.0}}


def _turn(text: str, usage: Usage | None) -> list[Any]:
    return [TextEvent(text), FinishEvent("stop", usage)]


def test_a_reply_costs_its_tokens_at_the_prices_given() -> None:
    llm = ollm_lite.connect(
        ScriptedProvider([_turn("hi", Usage(1000, 500, 1500))]), model="m", prices=PRICES
    )
    reply = llm.run("hello")
    assert reply.cost == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)


def test_the_cached_part_of_a_prompt_is_priced_at_cached_input() -> None:
    openai = Usage(1000, 100, 1100, extra={"prompt_tokens_details": {"cached_tokens": 600}})
    anthropic = Usage(1000, 100, 1100, extra={"cache_read_input_tokens": 600})
    price = Price(2.0, 8.0, cached_input=0.5)
    expected = (400 * 2.0 + 600 * 0.5 + 100 * 8.0) / 1e6
    assert turn_cost(price, openai) == pytest.approx(expected)
    assert turn_cost(price, anthropic) == pytest.approx(expected)
    # without cached_input the cached part costs what any input does
    assert turn_cost(Price(2.0, 8.0), openai) == pytest.approx((1000 * 2.0 + 100 * 8.0) / 1e6)
    assert cached_tokens(Usage(5, 1, 6)) == 0


def test_cost_is_none_for_an_unpriced_model_or_a_turn_without_usage() -> None:
    unpriced = ollm_lite.connect(
        ScriptedProvider([_turn("a", Usage(10, 10, 20))]), model="other", prices=PRICES
    )
    assert unpriced.run("x").cost is None
    no_usage = ollm_lite.connect(ScriptedProvider([_turn("a", None)]), model="m", prices=PRICES)
    assert no_usage.run("x").cost is None
    no_prices = ollm_lite.connect(ScriptedProvider([_turn("a", Usage(1, 1, 2))]), model="m")
    assert no_prices.run("x").cost is None


def test_a_call_costs_the_sum_of_its_model_turns() -> None:
    call = ToolCall.from_arguments("c1", "add", {"a": 1, "b": 2})
    turns = [
        [ToolCallEvent(call), FinishEvent("tool", Usage(100, 10, 110))],
        _turn("3", Usage(200, 20, 220)),
    ]

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    llm = ollm_lite.connect(ScriptedProvider(turns), model="m", prices=PRICES)
    reply = llm.run("1+2?", tools=[add])
    assert reply.turns == 2
    assert reply.cost == pytest.approx((300 * 2.0 + 30 * 8.0) / 1e6)


def test_logged_calls_keep_their_cost_and_stats_sum_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(
        path,
        _turn("a", Usage(1000, 0, 1000)),
        _turn("b", Usage(1000, 0, 1000)),
        _turn("c", Usage(1000, 0, 1000)),
        prices=PRICES,
    )
    llm.ask("one")
    llm.ask("two")
    llm.ask("three", model="free")  # no price: no cost
    calls = logged(path)
    assert [c.cost for c in calls] == [pytest.approx(0.002), pytest.approx(0.002), None]
    with open_log(path) as log:
        by_model = {s.key: s for s in log.stats(by="model")}
    assert by_model["m"].cost == pytest.approx(0.004)
    assert by_model["free"].cost is None


def test_a_call_answered_from_the_cache_costs_nothing(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, provider = logging_client(
        path, _turn("a", Usage(1000, 0, 1000)), cache=True, prices=PRICES
    )
    assert llm.run("same").cost == pytest.approx(0.002)
    again = llm.run("same")
    assert again.cost == 0 and len(provider.requests) == 1
    assert [c.cost for c in logged(path)] == [pytest.approx(0.002), 0]


def test_prices_come_from_the_config_file_and_connect_wins(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[prices."m"]\ninput = 1.0\noutput = 1.0\n[prices."n"]\ninput = 3.0\noutput = 3.0\n'
    )
    turns = [_turn("a", Usage(1_000_000, 0, 1_000_000)) for _ in range(2)]
    llm = ollm_lite.connect(
        ScriptedProvider(turns),
        model="m",
        config=str(config),
        prices={"n": {"input": 5, "output": 5}},
    )
    assert llm.run("x").cost == pytest.approx(1.0)  # m from the file
    assert llm.run("x", model="n").cost == pytest.approx(5.0)  # n: connect wins


def test_bad_prices_are_a_config_error_or_a_reported_issue() -> None:
    with pytest.raises(ConfigError, match="prices"):
        ollm_lite.connect(ScriptedProvider([]), prices={"m": {"input": -1, "output": 1}})
    with pytest.raises(ConfigError, match="required"):
        ollm_lite.connect(ScriptedProvider([]), prices={"m": {"input": 1}})
    issues = validate_config(Config(prices={"m": {"input": "cheap", "output": 1, "x": 2}}))
    assert {i.path for i in issues} >= {"prices.m.input", "prices.m.x"}


def _version_1_log(path: Path) -> None:
    """A log as the first released schema wrote it, with one call."""
    db = sqlite3.connect(path, isolation_level=None)
    _schema.MIGRATIONS[0](db)
    db.execute("PRAGMA user_version = 1")
    db.execute(
        "INSERT INTO calls (id, started, started_ts, day, seconds, source, script, provider, "
        "messages, options, text, tool_calls, tool_results, finish, cached, prompt_tokens, "
        "completion_tokens) VALUES ('00000000000001aa', '2025-01-01T00:00:00+00:00', 1735689600, "
        "'2025-01-01', 0.5, 'ask', 's', 'scripted', '[]', '{}', 'old', '[]', '[]', 'complete', "
        "0, 3, 4)"
    )
    db.close()


def test_an_older_log_upgrades_in_place_when_written(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _version_1_log(path)
    llm, _ = logging_client(path, _turn("new", Usage(1000, 0, 1000)), prices=PRICES)
    llm.ask("q")
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(_schema.MIGRATIONS)
    old, new = logged(path)
    assert (old.text, old.cost) == ("old", None)
    assert (new.text, new.cost) == ("new", pytest.approx(0.002))


def test_a_read_only_older_log_still_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file this process may not write (its folder read-only) is read as it is."""
    path = tmp_path / "logs.db"
    _version_1_log(path)
    real = _reader.open_connection

    def read_only(path: Path, busy: float, *, readonly: bool = False, **kw: Any) -> Any:
        if not readonly:
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real(path, busy, readonly=True, **kw)

    monkeypatch.setattr(_reader, "open_connection", read_only)
    with open_log(path) as log:
        [call] = log.calls()
        [stats] = log.stats()
    assert (call.text, call.cost) == ("old", None)
    assert (stats.calls, stats.prompt_tokens, stats.cost) == (1, 3, None)
    with sqlite3.connect(path) as db:  # untouched
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1


def test_logs_stats_shows_a_cost_column_once_a_call_has_a_cost(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, _turn("a", Usage(1000, 0, 1000)))
    llm.ask("unpriced")
    done = cli(tmp_path, path, "logs", "stats")
    assert done.returncode == 0 and "COST" not in done.stdout
    llm, _ = logging_client(path, _turn("a", Usage(1000, 0, 1000)), prices=PRICES)
    llm.ask("priced")
    done = cli(tmp_path, path, "logs", "stats")
    assert done.returncode == 0 and "COST" in done.stdout and "0.0020" in done.stdout

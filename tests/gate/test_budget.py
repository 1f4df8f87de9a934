"""Budgets: a request at or past a limit is never sent; what is spent is what was logged."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from support.log_support import logged, logging_client

import ollm_lite
from ollm_lite import (
    Budget,
    BudgetExceeded,
    FinishEvent,
    ScriptedProvider,
    ScriptedTurn,
    TextEvent,
    Usage,
)
from ollm_lite.config import Config, validate_config
from ollm_lite.errors import ConfigError


def _turn(tokens: int = 10) -> list[Any]:
    return [TextEvent("ok"), FinishEvent("stop", Usage(tokens // 2, tokens - tokens // 2, tokens))]


def test_the_request_at_the_limit_is_not_sent() -> None:
    provider = ScriptedProvider([_turn() for _ in range(5)])
    llm = ollm_lite.connect(provider, model="m", budget=Budget(requests=2))
    llm.ask("1")
    llm.ask("2")
    with pytest.raises(BudgetExceeded) as raised:
        llm.ask("3")
    assert len(provider.requests) == 2
    assert raised.value.code == "LLM_BUDGET_EXCEEDED"
    assert raised.value.details == {"limit": 2, "spent": 2, "what": "requests", "per": "run"}


def test_a_call_ends_past_a_token_limit_by_at_most_its_own_answers() -> None:
    provider = ScriptedProvider([_turn(10) for _ in range(5)])
    llm = ollm_lite.connect(provider, model="m", budget=Budget(tokens=15))
    llm.ask("1")  # 0 spent: sent
    llm.ask("2")  # 10 spent: sent, ends at 20
    with pytest.raises(BudgetExceeded) as raised:
        llm.ask("3")
    assert raised.value.details is not None and raised.value.details["spent"] == 20
    assert len(provider.requests) == 2


def test_a_cost_limit_counts_priced_answers() -> None:
    provider = ScriptedProvider([_turn(1_000_000) for _ in range(3)])
    llm = ollm_lite.connect(
        provider,
        model="m",
        prices={"m": {"input": 1.0, "output": 1.0}},
        budget=Budget(cost=1.5),
    )
    assert llm.run("1").cost == pytest.approx(1.0)
    llm.ask("2")
    with pytest.raises(BudgetExceeded, match="cost"):
        llm.ask("3")


def test_an_answer_from_the_cache_is_never_refused(tmp_path: Path) -> None:
    llm, provider = logging_client(
        tmp_path / "logs.db", _turn(), cache=True, budget=Budget(requests=1)
    )
    assert llm.ask("same") == "ok"
    assert llm.ask("same") == "ok"  # the limit is reached, but nothing is sent
    with pytest.raises(BudgetExceeded):
        llm.ask("different")
    assert len(provider.requests) == 1


def test_a_refused_call_is_logged_with_its_code_and_no_turn(tmp_path: Path) -> None:
    llm, _ = logging_client(tmp_path / "logs.db", _turn(), budget=Budget(requests=0))
    reply = llm.events("x")
    events = list(reply)
    assert events[-1].type == "chat_finish"
    [call] = logged(tmp_path / "logs.db")
    assert call.error_code == "LLM_BUDGET_EXCEEDED" and call.turns == []


def test_day_budgets_are_counted_from_the_log_every_client_shares(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    day = Budget(requests=3, tokens=100, per="day")
    first, _ = logging_client(path, _turn(), _turn(), budget=day)
    first.ask("1")
    first.ask("2")
    second, provider = logging_client(path, _turn(), _turn(), budget=day)  # a later cron run
    second.ask("3")
    with pytest.raises(BudgetExceeded) as raised:
        second.ask("4")
    assert raised.value.details == {"limit": 3, "spent": 3, "what": "requests", "per": "day"}
    assert len(provider.requests) == 1


def test_a_day_budget_turns_the_log_on_and_log_false_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("OLLM_LOG", raising=False)
    llm = ollm_lite.connect(
        ScriptedProvider([_turn()]), model="m", config=Config(), budget=Budget(per="month")
    )
    assert llm.call_log is not None and llm.call_log.path == tmp_path / "data" / "ollm" / "logs.db"
    with pytest.raises(ConfigError, match="log"):
        ollm_lite.connect(ScriptedProvider([]), log=False, budget=Budget(requests=1, per="day"))


def test_bad_budgets_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        Budget(tokens=-1)
    with pytest.raises(ConfigError):
        Budget(per="week")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ollm_lite.connect(ScriptedProvider([]), budget={"tokens": 5})  # type: ignore[arg-type]
    issues = validate_config(Config(budget={"tokens": "many", "per": "year", "x": 1}))
    assert {i.path for i in issues} >= {"budget.tokens", "budget.per", "budget.x"}


def test_the_config_file_sets_the_budget(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[budget]\nrequests = 1\n")
    provider = ScriptedProvider([_turn(), _turn()])
    llm = ollm_lite.connect(provider, model="m", config=str(config))
    llm.ask("1")
    with pytest.raises(BudgetExceeded):
        llm.ask("2")


def test_threads_on_one_budget_send_exactly_the_limit() -> None:
    provider = ScriptedProvider([_turn() for _ in range(40)])
    llm = ollm_lite.connect(provider, model="m", budget=Budget(requests=7))
    replies = llm.map([f"q{i}" for i in range(40)], concurrency=8)
    refused = [r for r in replies if r.error is not None]
    assert len(provider.requests) == 7
    assert len(refused) == 33 and all(r.error.code == "LLM_BUDGET_EXCEEDED" for r in refused)  # type: ignore[union-attr]


def test_batch_lines_not_sent_are_failed_lines_a_later_run_retries(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    lines = [
        {
            "custom_id": f"l{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]},
        }
        for i in range(4)
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    tight = ollm_lite.connect(
        ScriptedProvider([_turn() for _ in range(4)]), model="m", budget=Budget(requests=2)
    )
    summary = ollm_lite.run_batch(source, out, client=tight, concurrency=1)
    assert (summary.done, summary.failed) == (2, 2)
    codes = [json.loads(line)["error"] for line in out.read_text().splitlines()]
    assert sum(1 for e in codes if e and e["code"] == "LLM_BUDGET_EXCEEDED") == 2
    loose = ollm_lite.connect(ScriptedProvider([_turn() for _ in range(2)]), model="m")
    again = ollm_lite.run_batch(source, out, client=loose, retry_failed=True)
    assert (again.done, again.failed, again.failed_in_output) == (2, 0, 0)


_limits = st.fixed_dictionaries(
    {
        "requests": st.none() | st.integers(0, 6),
        "tokens": st.none() | st.integers(0, 80),
        "cost": st.none() | st.floats(0, 0.0001, allow_nan=False),
    }
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    answers=st.lists(st.integers(0, 30), min_size=1, max_size=8),
    limits=_limits,
    per=st.sampled_from(["run", "day"]),
)
def test_no_request_is_sent_at_a_limit_and_the_spend_is_the_logged_usage(
    tmp_path_factory: pytest.TempPathFactory, answers: list[int], limits: dict[str, Any], per: str
) -> None:
    path = tmp_path_factory.mktemp("budget") / "logs.db"
    budget = Budget(per=per, **limits)  # type: ignore[arg-type]
    provider = ScriptedProvider([_turn(t) for t in answers])
    llm = ollm_lite.connect(
        provider,
        model="m",
        log=str(path),
        prices={"m": {"input": 1.0, "output": 1.0}},
        budget=budget,
    )
    spent = {"requests": 0, "tokens": 0, "cost": 0.0}
    for i, tokens in enumerate(answers):
        at_limit = any(limit is not None and spent[what] >= limit for what, limit in limits.items())
        sent_before = len(provider.requests)
        try:
            llm.ask(f"q{i}")
        except BudgetExceeded:
            assert at_limit and len(provider.requests) == sent_before  # never sent
            continue
        assert not at_limit
        spent["requests"] += 1
        spent["tokens"] += tokens
        spent["cost"] += tokens / 1e6
    calls = logged(path)
    usage = sum((c.usage.total_tokens or 0) for c in calls if c.usage is not None)
    assert spent["tokens"] == usage
    assert spent["requests"] == sum(len(c.turns) for c in calls) == len(provider.requests)
    counted = llm.gate.spending.spent()  # type: ignore[union-attr]
    assert (counted.requests, counted.tokens) == (spent["requests"], usage)
    assert counted.cost == pytest.approx(spent["cost"])
    llm.close()


def test_requests_in_flight_count(tmp_path: Path) -> None:
    """A request still on its way counts as sent: another thread's request is refused."""
    gate = threading.Event()
    slow = ScriptedTurn([TextEvent("slow")], hang=True)
    provider = ScriptedProvider([slow, _turn()])
    llm = ollm_lite.connect(provider, model="m", budget=Budget(requests=1))
    cancel = threading.Event()
    worker = threading.Thread(target=lambda: _quietly(llm, cancel, gate))
    worker.start()
    gate.wait(5)
    while not provider.requests:
        threading.Event().wait(0.01)
    with pytest.raises(BudgetExceeded):
        llm.ask("second")
    cancel.set()
    worker.join(5)
    assert len(provider.requests) == 1


def _quietly(llm: Any, cancel: threading.Event, started: threading.Event) -> None:
    started.set()
    with contextlib.suppress(ollm_lite.Cancelled):
        llm.ask("first", cancel=cancel)


def test_a_config_file_day_budget_leaves_a_scripted_test_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script's test never writes into the real log, nor is bound by its budget; in code
    the same budget turns the log on."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("OLLM_LOG", raising=False)
    config = tmp_path / "config.toml"
    config.write_text('[budget]\nrequests = 0\nper = "day"\n')
    llm = ollm_lite.connect(ScriptedProvider([_turn()]), model="m", config=str(config))
    assert llm.ask("x") == "ok" and llm.call_log is None
    in_code = ollm_lite.connect(
        ScriptedProvider([_turn()]), model="m", config=str(config), budget=Budget(per="day")
    )
    assert in_code.call_log is not None

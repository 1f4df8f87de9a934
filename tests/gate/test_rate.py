"""Rate limits: per client, shared by its threads; a wait bounded by the call's deadline and
ended by its cancel; a cached answer is never delayed."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.log_support import logging_client

import ollm_lite
from ollm_lite import (
    Budget,
    BudgetExceeded,
    Cancelled,
    FinishEvent,
    RateLimit,
    RequestTimeout,
    ScriptedProvider,
    TextEvent,
    Usage,
)
from ollm_lite.config import Config, validate_config
from ollm_lite.errors import ConfigError
from ollm_lite.gate._rate import RateLimiter


def _turn(tokens: int = 10) -> list[Any]:
    return [TextEvent("ok"), FinishEvent("stop", Usage(tokens, 0, tokens))]


def test_a_turn_after_the_deadline_is_refused_at_once() -> None:
    limiter = RateLimiter(RateLimit(requests_per_minute=2))
    limiter.acquire(None, None)
    limiter.acquire(None, None)
    with pytest.raises(RequestTimeout) as raised:
        limiter.acquire(None, time.monotonic() + 0.2)
    assert raised.value.code == "LLM_TIMEOUT"


def test_tokens_per_minute_hold_back_the_next_request() -> None:
    limiter = RateLimiter(RateLimit(tokens_per_minute=100))
    limiter.acquire(None, None)
    limiter.answered(60)
    limiter.acquire(None, None)  # 60 < 100: goes
    limiter.answered(60)
    with pytest.raises(RequestTimeout):  # 120 >= 100: waits past the deadline
        limiter.acquire(None, time.monotonic() + 0.2)


def test_cancel_ends_the_wait() -> None:
    limiter = RateLimiter(RateLimit(requests_per_minute=1))
    limiter.acquire(None, None)
    cancel = threading.Event()
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            limiter.acquire(cancel, None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=wait)
    worker.start()
    cancel.set()
    worker.join(10)
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], Cancelled)


def test_a_released_slot_is_free_again() -> None:
    limiter = RateLimiter(RateLimit(requests_per_minute=1))
    slot, waited = limiter.acquire(None, None)
    assert not waited
    limiter.release(slot)
    limiter.acquire(None, time.monotonic() + 0.2)  # no wait


def test_a_client_call_waits_within_its_timeout() -> None:
    provider = ScriptedProvider([_turn(), _turn()])
    llm = ollm_lite.connect(provider, model="m", rate=RateLimit(requests_per_minute=1))
    llm.ask("1")
    with pytest.raises(RequestTimeout):
        llm.ask("2", timeout=0.5)
    assert len(provider.requests) == 1


def test_a_client_call_cancelled_while_it_waits_raises_cancelled() -> None:
    provider = ScriptedProvider([_turn(), _turn()])
    llm = ollm_lite.connect(provider, model="m", rate=RateLimit(requests_per_minute=1))
    llm.ask("1")
    cancel = threading.Event()
    timer = threading.Timer(0.2, cancel.set)
    timer.start()
    try:
        with pytest.raises(Cancelled):
            llm.ask("2", cancel=cancel)
    finally:
        timer.cancel()
    assert len(provider.requests) == 1


def test_map_threads_share_the_client_limit() -> None:
    provider = ScriptedProvider([_turn() for _ in range(6)])
    llm = ollm_lite.connect(provider, model="m", rate=RateLimit(requests_per_minute=2))
    replies = llm.map([f"q{i}" for i in range(6)], concurrency=6, timeout=1)
    codes = sorted(r.error.code if r.error else "ok" for r in replies)
    assert codes == ["LLM_TIMEOUT"] * 4 + ["ok"] * 2
    assert len(provider.requests) == 2


def test_an_answer_from_the_cache_is_never_delayed(tmp_path: Path) -> None:
    llm, provider = logging_client(
        tmp_path / "logs.db", _turn(), cache=True, rate=RateLimit(requests_per_minute=1)
    )
    llm.ask("same")
    assert llm.ask("same", timeout=0.5) == "ok"
    assert len(provider.requests) == 1


def test_a_request_that_waited_is_checked_against_the_budget_again() -> None:
    """What others spent while it waited counts: it is refused, and its slot given back."""
    provider = ScriptedProvider([_turn()])
    llm = ollm_lite.connect(
        provider,
        model="m",
        budget=Budget(requests=1),
        rate=RateLimit(requests_per_minute=5),
    )
    gate = llm.gate
    assert gate is not None and gate.limiter is not None
    limiter = gate.limiter
    real = limiter.acquire

    def acquire_while_another_sends(cancel: Any, deadline: Any) -> tuple[float, bool]:
        slot, _ = real(cancel, deadline)
        gate.spending.sent(1)  # another thread's request went while this one waited
        return slot, True

    limiter.acquire = acquire_while_another_sends  # type: ignore[method-assign]
    with pytest.raises(BudgetExceeded):
        llm.ask("x")
    assert provider.requests == []
    assert len(limiter._sent) == 0
    assert gate.spending.run.requests == 1  # the other's request only


def test_the_config_file_sets_the_rate_and_bad_values_are_reported(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[rate]\nrequests_per_minute = 1\n")
    provider = ScriptedProvider([_turn(), _turn()])
    llm = ollm_lite.connect(provider, model="m", config=str(config))
    llm.ask("1")
    with pytest.raises(RequestTimeout):
        llm.ask("2", timeout=0.3)
    with pytest.raises(ConfigError):
        RateLimit(requests_per_minute=0)
    with pytest.raises(ConfigError):
        ollm_lite.connect(ScriptedProvider([]), rate={"requests_per_minute": 5})  # type: ignore[arg-type]
    issues = validate_config(Config(rate={"requests_per_minute": -3, "burst": 2}))
    assert {i.path for i in issues} >= {"rate.requests_per_minute", "rate.burst"}


def test_a_servers_429_retry_after_still_holds_under_a_rate_limit(tmp_path: Path) -> None:
    """The limiter lets the request go; the server's 429 with ``Retry-After`` is waited out
    by the transport as before, and the retry is the same request, not a second turn."""
    import json as jsonlib
    import socket

    from support.transport_support import Request, respond, serve

    calls: list[int] = []
    answer = {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "fine"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }

    def limited(client: socket.socket, req: Request) -> None:
        calls.append(1)
        if len(calls) == 1:
            respond(client, 429, b'{"error":{"message":"slow down"}}', headers={"Retry-After": "0"})
        else:
            respond(client, 200, jsonlib.dumps(answer).encode())

    with serve({"/v1/chat/completions": limited}) as server:
        llm = ollm_lite.connect(
            "llamacpp", host=server.url, model="m", rate=RateLimit(requests_per_minute=5)
        )
        source = tmp_path / "in.jsonl"
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": body}
        source.write_text(jsonlib.dumps(line) + "\n")
        try:  # a batch line: one whole request, as the JSON answer above
            summary = ollm_lite.run_batch(source, tmp_path / "out.jsonl", client=llm)
        finally:
            llm.close()
    assert (summary.done, summary.failed) == (1, 0)
    assert len(calls) == 2

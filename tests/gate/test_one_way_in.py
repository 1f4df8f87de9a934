"""Every model request of every surface passes the one gate; one list per fact.

The gate is a layer around the provider (``ollm_lite.gate``): each surface opens its call's
way in through it, and nothing reaches the provider around it. The names of the options that
make a cached answer "identical", and the options a batch line takes from the client, are the
dataclass's own fields: a field added to ``GenerationOptions`` follows in both.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.log_support import logged, logging_client

import ollm_lite
from ollm_lite import FinishEvent, GenerationOptions, ProviderRequest, TextEvent, Usage
from ollm_lite.batch._format import BatchInput
from ollm_lite.batch._translate import ChatJob, job_for, with_defaults
from ollm_lite.call_log._answers import answer_events
from ollm_lite.call_log._recorder import generation_dict
from ollm_lite.chat._call_settings import CallSettings
from ollm_lite.gate import Gate, GatedCall
from ollm_lite.providers.base import collect_result
from ollm_lite.types import Message


def _answer(text: str = "fine") -> list[Any]:
    return [TextEvent(text), FinishEvent("stop", Usage(3, 2, 5))]


def _batch_input(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "in.jsonl"
    lines = [
        {
            "custom_id": f"l{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]},
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    return path


def test_every_surface_opens_its_call_at_the_gate_and_sends_through_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ask, stream, run, events, map and batch lines: each call opens one way in, and every
    request the provider receives came through a gated call."""
    opened: Counter[str] = Counter()
    passed: list[ProviderRequest] = []
    real_call, real_stream = Gate.call, GatedCall.chat_stream

    def call(self: Gate, source: str, *args: Any, **kwargs: Any) -> GatedCall:
        opened[source] += 1
        return real_call(self, source, *args, **kwargs)

    def chat_stream(self: GatedCall, request: ProviderRequest) -> Any:
        passed.append(request)
        return real_stream(self, request)

    monkeypatch.setattr(Gate, "call", call)
    monkeypatch.setattr(GatedCall, "chat_stream", chat_stream)
    llm, provider = logging_client(tmp_path / "logs.db", *[_answer() for _ in range(8)])
    llm.ask("a")
    list(llm.stream("b"))
    llm.run("c")
    list(llm.events("d"))
    llm.map(["e", "f"], concurrency=2)
    ollm_lite.run_batch(_batch_input(tmp_path, 2), tmp_path / "out.jsonl", client=llm)
    assert opened == {"ask": 1, "stream": 1, "run": 1, "events": 1, "map": 2, "batch:in.jsonl": 2}
    assert len(provider.requests) == 8
    assert len(passed) == 6  # the chat surfaces' turns; batch lines are whole requests
    assert {c.source for c in logged(tmp_path / "logs.db")} == set(opened)


def test_a_client_with_nothing_to_pass_has_no_gate() -> None:
    llm = ollm_lite.connect(ollm_lite.ScriptedProvider(["x"]), model="m", log=False)
    assert llm.gate is None and llm.ask("hi") == "x"


@dataclass(frozen=True, slots=True)
class _Wider(GenerationOptions):
    """``GenerationOptions`` with one more option, as a later version may add."""

    min_p: float | None = None


def test_a_new_generation_option_counts_in_the_cache_key() -> None:
    """The options that make a turn identical are the dataclass's fields, not a list."""
    assert generation_dict(_Wider(min_p=0.05)) == {"min_p": 0.05}
    assert generation_dict(_Wider(min_p=0.05)) != generation_dict(_Wider(min_p=0.1))
    assert generation_dict(_Wider()) == {}


def test_a_new_generation_option_is_a_batch_default() -> None:
    """A client's default for a new option fills a batch line that does not set it."""
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    item = BatchInput("x", "/v1/chat/completions", body, 1)
    job = job_for(item, None, CallSettings(generation=_Wider(min_p=0.05)))
    assert isinstance(job, ChatJob)
    assert job.request.options == GenerationOptions()  # the line's own (no such field)
    wide = ProviderRequest("m", [Message.user("q")], options=_Wider())
    filled = with_defaults(wide, {}, CallSettings(generation=_Wider(min_p=0.05, seed=3)))
    assert filled.options == _Wider(min_p=0.05, seed=3)


def test_one_reading_of_a_logged_answer_serves_cache_replay_and_batch() -> None:
    """The cache's events carry no usage (nothing spent), a replay's carry the logged usage,
    and a batch line's result is their fold."""
    answer = {
        "text": "hi",
        "thinking": "hmm",
        "tool_calls": [],
        "finish": "stop",
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }
    cached = answer_events(answer, spent=False)
    replayed = answer_events(answer, spent=True)
    assert cached[:-1] == replayed[:-1]
    assert cached[-1] == FinishEvent("stop", None)
    assert replayed[-1] == FinishEvent("stop", Usage(1, 2, 3))
    result = collect_result(cached)
    assert (result.content, result.thinking, result.finish_reason) == ("hi", "hmm", "stop")
    failed = answer_events({"error": {"code": "LLM_TIMEOUT", "message": "late"}}, spent=True)
    assert failed[-1].type == "error"

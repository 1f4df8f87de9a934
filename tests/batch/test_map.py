"""Client.map and Client.map_unordered over a fleet and a scripted provider."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
from support.batch_support import EchoBackend

import ollm_lite
from ollm_lite.errors import HTTPStatusError
from ollm_lite.providers.scripted import ScriptedProvider


def test_map_keeps_input_order_and_reports_failures_per_item() -> None:
    llm = ollm_lite.connect(provider=EchoBackend(), model="m")
    prompts = [f"p{i}" for i in range(10)] + ["fail now"]
    replies = llm.map(prompts, concurrency=3)
    assert [r.text for r in replies[:10]] == [f"echo: p{i}" for i in range(10)]
    assert all(r.error is None and r.finish == "complete" for r in replies[:10])
    last = replies[-1]
    assert last.finish == "error" and isinstance(last.error, HTTPStatusError)
    assert last.error.code == "LLM_HTTP_ERROR"


def test_map_with_a_schema_gives_values() -> None:
    @dataclass
    class Label:
        label: str

    llm = ollm_lite.connect(
        provider=ScriptedProvider(['{"label": "a"}', '{"label": "b"}']), model="m"
    )
    replies = llm.map(["x", "y"], schema=Label, concurrency=1)
    assert [r.value for r in replies] == [Label("a"), Label("b")]


def test_map_rejects_unknown_keywords_before_any_request() -> None:
    backend = EchoBackend()
    llm = ollm_lite.connect(provider=backend, model="m")
    with pytest.raises(TypeError, match="temprature"):
        llm.map(["x"], temprature=0.1)
    assert backend.prompts == []


def test_map_unordered_yields_as_answers_finish_and_stops_cleanly() -> None:
    gate = threading.Event()
    backend = EchoBackend(gate)
    llm = ollm_lite.connect(provider=backend, model="m")
    results = llm.map_unordered(iter(["a", "b", "c"]), concurrency=2)
    gate.set()
    got = dict(results)
    assert {i: r.text for i, r in got.items()} == {0: "echo: a", 1: "echo: b", 2: "echo: c"}


def test_connect_with_hosts_builds_a_fleet() -> None:
    from ollm_lite.fleet import Fleet

    llm = ollm_lite.connect(
        provider="llamacpp",
        hosts=["http://127.0.0.1:1", "http://127.0.0.1:2"],
        per_host=3,
        model="m",
    )
    assert isinstance(llm.provider, Fleet)
    assert [s.url for s in llm.provider.status()] == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert llm.provider.capacity == 6
    llm.close()

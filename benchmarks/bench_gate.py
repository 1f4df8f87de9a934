"""The gate's cost, and a rate limit held over a real batch.

* per call: a one-turn ``ask`` on a :class:`~ollm_lite.ScriptedProvider` with the log alone,
  against the log with prices, ``Budget(cost=..., per="day")`` (the setting that reads the log
  before every request) and a rate limit that never binds, interleaved; the difference of the
  medians is what the gate adds beyond the log;
* rate: a batch of 1,000 lines on 8 threads against a loopback slot server with
  ``requests_per_minute=600``: the most requests sent in any 60 s window (each request
  stamped as it leaves the gate for the provider). It takes a little over a minute.
"""

from __future__ import annotations

import bisect
import json
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import ollm_lite
from ollm_lite import Budget, RateLimit, ScriptedProvider
from ollm_lite.batch import run_batch
from ollm_lite.gate import gate_for
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider

from ._common import Report, Settings, interleave, median
from ._slot_server import SlotServer

SECTION = "gate"
PROMPT = "Summarise this support ticket in one sentence: the printer on floor 3 jams daily."
ANSWER = "The floor 3 printer jams every day and needs a service visit."
MODEL = "bench"
PRICES = {"m": {"input": 0.40, "output": 1.60}}


def per_call(report: Report, settings: Settings) -> None:
    runs = max(5, settings.samples * 5)
    with tempfile.TemporaryDirectory() as tmp:
        log_only = ollm_lite.connect(
            ScriptedProvider([ANSWER] * (runs + 1)), model="m", log=str(Path(tmp) / "a.db")
        )
        gated = ollm_lite.connect(
            ScriptedProvider([ANSWER] * (runs + 1)),
            model="m",
            log=str(Path(tmp) / "b.db"),
            prices=PRICES,
            budget=Budget(cost=1000.0, per="day"),
            rate=RateLimit(requests_per_minute=1_000_000, tokens_per_minute=10**12),
        )
        times = interleave(
            {"log": lambda: log_only.ask(PROMPT), "gate": lambda: gated.ask(PROMPT)}, runs
        )
        log_only.close()
        gated.close()
    cost = (median(times["gate"]) - median(times["log"])) * 1000
    report.add("ask, log only (median)", median(times["log"]) * 1000, "ms")
    report.add(
        "ask, log + prices + day budget + rate limit (median)", median(times["gate"]) * 1000, "ms"
    )
    report.target("gate cost per one-turn ask beyond the log (median)", cost, 0.2, "ms")


class _Stamped:
    """The provider, each whole request stamped as the gate lets it go."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.stamps: list[float] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def chat(self, request: Any) -> Any:
        with self._lock:
            self.stamps.append(time.monotonic())
        return self.inner.chat(request)


def busiest_window(stamps: list[float], seconds: float = 60.0) -> int:
    """The most stamps in any window of ``seconds`` (a window starts at a stamp)."""
    ordered = sorted(stamps)
    return max(
        (bisect.bisect_left(ordered, t + seconds) - i for i, t in enumerate(ordered)), default=0
    )


def rate(report: Report, settings: Settings) -> None:
    full = settings.runs >= 9
    n, rpm = (1000, 600) if full else (16, 600)  # below the limit: the path, not the wait
    with SlotServer(slots=8, latency=0.0) as server, tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        provider = _Stamped(
            OpenAICompatibleProvider(base_url=server.url, backend="llamacpp", retries=0)
        )
        gate = gate_for(provider, log=None, rate=RateLimit(requests_per_minute=rpm))
        client = SimpleNamespace(provider=provider, model=MODEL, gate=gate)
        source = tmp / "in.jsonl"
        with open(source, "w") as f:
            for i in range(n):
                body = {"model": MODEL, "messages": [{"role": "user", "content": f"{PROMPT} #{i}"}]}
                line = {"custom_id": f"t{i}", "method": "POST", "url": "/v1/chat/completions"}
                f.write(json.dumps({**line, "body": body}) + "\n")
        summary = run_batch(source, tmp / "out.jsonl", client=client, concurrency=8)
        provider.inner.close()
    if summary.done != n:
        raise RuntimeError(f"the batch answered {summary.done} of {n}")
    busiest = busiest_window(provider.stamps)
    label = f"batch of {n} lines, 8 threads, requests_per_minute={rpm}"
    report.add(f"{label}: wall time", summary.seconds, "s")
    if full:
        report.target(f"{label}: busiest 60 s window", busiest, rpm, "requests")
        report.target(
            f"{label}: busiest 60 s window (at least)",
            busiest,
            rpm * 0.95,
            "requests",
            at_least=True,
        )
    else:
        report.add(f"{label}: busiest 60 s window", busiest, "requests")


def run(settings: Settings, server: Any = None) -> Report:
    """The gate's cost and a rate limit over a batch (its own servers)."""
    report = Report(SECTION)
    per_call(report, settings)
    rate(report, settings)
    return report

"""The call log's cost: per call, in a batch, a cache hit, and bytes per row.

* per call: a one-turn ``ask`` on a :class:`~ollm_lite.ScriptedProvider`, log on vs off,
  interleaved; the difference of the medians is what logging adds (the row built and committed
  in WAL mode with ``synchronous=NORMAL`` before the call returns);
* batch: 500 lines on 8 threads against a loopback slot server (8 slots, 50 ms per request),
  with and without the log; and the same at 0 ms latency, where only the client's CPU counts;
* cache: a cache hit against the same call to a loopback server answering after 50 ms;
* size: the log file's bytes per row for a typical one-turn call.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import ollm_lite
from ollm_lite import ScriptedProvider
from ollm_lite.batch import run_batch
from ollm_lite.call_log._recorder import CallLogger
from ollm_lite.fleet import Fleet
from ollm_lite.gate import gate_for
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider

from ._common import Report, Settings, interleave, median
from ._server import answer
from ._slot_server import SlotServer

SECTION = "call_log"
PROMPT = "Summarise this support ticket in one sentence: the printer on floor 3 jams daily."
ANSWER = (
    "The floor 3 printer jams every day and needs a service visit; the user asks for a "
    "replacement tray and a temporary alternative in the meantime, ideally before Friday."
)
MODEL = "bench"


def _scripted_client(path: Path | None, n: int) -> ollm_lite.Client:
    log: Any = str(path) if path is not None else False
    return ollm_lite.connect(ScriptedProvider([ANSWER] * n), model="m", log=log)


def per_call(report: Report, settings: Settings) -> None:
    runs = max(5, settings.samples * 5)
    with tempfile.TemporaryDirectory() as tmp:
        on = _scripted_client(Path(tmp) / "logs.db", runs + 1)
        off = _scripted_client(None, runs + 1)
        times = interleave({"on": lambda: on.ask(PROMPT), "off": lambda: off.ask(PROMPT)}, runs)
    cost = (median(times["on"]) - median(times["off"])) * 1000
    report.add("ask, log off (median)", median(times["off"]) * 1000, "ms")
    report.add("ask, log on (median)", median(times["on"]) * 1000, "ms")
    report.target("logging cost per one-turn ask (median)", cost, 1.0, "ms")


def _write_input(path: Path, n: int) -> Path:
    import json

    with open(path, "w") as f:
        for i in range(n):
            body = {"model": MODEL, "messages": [{"role": "user", "content": f"{PROMPT} #{i}"}]}
            line = {"custom_id": f"t{i}", "method": "POST", "url": "/v1/chat/completions"}
            f.write(json.dumps({**line, "body": body}) + "\n")
    return path


def _batch_rate(url: str, n: int, log: Path | None, tmp: Path, tag: str) -> float:
    fleet = Fleet([OpenAICompatibleProvider(base_url=url, backend="llamacpp", retries=0)])
    logger = CallLogger(log, cache=False, provider=fleet) if log is not None else None
    client = SimpleNamespace(provider=fleet, model=MODEL, gate=gate_for(fleet, log=logger))
    inp = _write_input(tmp / f"in-{tag}.jsonl", n)
    summary = run_batch(inp, tmp / f"out-{tag}.jsonl", client=client, concurrency=8)
    fleet.close()
    if summary.done != n:
        raise RuntimeError(f"the batch answered {summary.done} of {n}")
    return n / summary.seconds


def batch(report: Report, settings: Settings) -> None:
    n = 500 if settings.runs >= 9 else (100 if settings.runs > 1 else 16)
    rounds = 2 if settings.runs > 1 else 1
    for latency in (0.05, 0.0):
        rates: dict[str, list[float]] = {"on": [], "off": []}
        with SlotServer(slots=8, latency=latency) as server, tempfile.TemporaryDirectory() as t:
            tmp = Path(t)
            for r in range(rounds):
                rates["off"].append(_batch_rate(server.url, n, None, tmp, f"off{r}"))
                rates["on"].append(_batch_rate(server.url, n, tmp / "logs.db", tmp, f"on{r}"))
        ratio = median(rates["on"]) / median(rates["off"])
        label = f"batch of {n} lines on 8 threads, {latency * 1000:.0f} ms latency"
        report.add(f"{label}, log off", median(rates["off"]), "lines/s")
        report.add(f"{label}, log on", median(rates["on"]), "lines/s")
        if latency:
            report.target(f"{label}: throughput with the log", ratio, 0.9, "x", at_least=True)
        else:
            report.add(f"{label}: throughput with the log", ratio, "x", "client CPU only")


def _each(call: Any, n: int) -> list[float]:
    """Seconds of each of ``n`` calls in a row, after two untimed ones."""
    call()
    call()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def cache(report: Report, settings: Settings) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from support.transport_support import LoopbackServer

    def slow(conn: Any, req: Any) -> None:
        time.sleep(0.05)
        answer(conn, req)

    server = LoopbackServer({"/v1/chat/completions": slow}, keep_alive=True)
    runs = max(3, settings.samples)
    model = "text-event-8"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = str(Path(tmp) / "logs.db")
            live = ollm_lite.connect("llamacpp", host=server.url, model=model, log=False)
            cached = ollm_lite.connect(
                "llamacpp", host=server.url, model=model, log=path, cache=True
            )
            cached.ask(PROMPT)  # the one request that fills the cache
            # each in its own block: a hit right after a 50 ms wait would measure a cold CPU
            times = {
                "server": _each(lambda: live.ask(PROMPT), runs),
                "hit": _each(lambda: cached.ask(PROMPT), runs * 10),
            }
            with ollm_lite.open_log(path) as log:
                hits = sum(c.cached for c in log.calls(limit=None))
            live.close()
            cached.close()
    finally:
        server.close()
    if hits < runs * 10:
        raise RuntimeError(f"only {hits} of {runs * 10} calls were cache hits")
    report.add("ask to a server with 50 ms latency (median)", median(times["server"]) * 1000, "ms")
    report.add("the same ask, a cache hit (median)", median(times["hit"]) * 1000, "ms")
    report.add(
        "the same ask, a cache hit (mean)", sum(times["hit"]) / len(times["hit"]) * 1000, "ms"
    )
    speedup = median(times["server"]) / median(times["hit"])
    report.target("cache hit vs a 50 ms loopback server", speedup, 100, "x", at_least=True)


def size(report: Report, settings: Settings) -> None:
    n = 1000 if settings.runs > 1 else 20
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "logs.db"
        llm = _scripted_client(path, n)
        for i in range(n):
            llm.ask(f"{PROMPT} #{i}", temperature=0.2)
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        total = os.path.getsize(path)
    report.add("log file per one-turn call", total / n, "bytes/row", f"{n} calls")


def run(settings: Settings, server: Any = None) -> Report:
    """The call log's cost (its own servers; the shared one is not used)."""
    report = Report(SECTION)
    per_call(report, settings)
    batch(report, settings)
    cache(report, settings)
    size(report, settings)
    return report

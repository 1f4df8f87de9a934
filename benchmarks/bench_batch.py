"""Batches over a fleet: throughput against endpoints x slots, and where the client's time goes.

Each endpoint is a :class:`~benchmarks._slot_server.SlotServer` in its own process: ``k``
requests at a time, each answered after a fixed latency (50 ms), the rest queued, as a
llama.cpp server with ``-np k`` behaves. The ideal throughput is ``endpoints x k / latency``.

* ``ollm_lite``: :func:`ollm_lite.run_batch` over a :class:`~ollm_lite.fleet.Fleet` (limits
  found through ``/props``), writing the output file as it goes;
* ``openai-python``: the plain loop people write today, a ``ThreadPoolExecutor`` of
  ``endpoints x k`` workers over one ``OpenAI`` client per endpoint (round robin), results kept
  in memory only.

Then the client's own limit: zero latency, many slots, so only the client's CPU counts
(requests per second and CPU milliseconds per request), and a sequential breakdown of one
request: ``requests`` alone, the provider (ollm_lite's transport and wire mapping), and a
batch line (translation, the output line, the file write, the thread hand-off).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ollm_lite.batch import run_batch
from ollm_lite.fleet import Fleet
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.types import Message, ProviderRequest

from ._common import Report, Settings, peer
from ._server import ServerProcess
from ._slot_server import SlotServer

SECTION = "batch"
LATENCY = 0.05
GRID = ((1, 1), (1, 4), (2, 4), (4, 4), (2, 16), (4, 16))
MODEL = "bench"


def _seconds(settings: Settings) -> float:
    """Wall time aimed at per measured point."""
    if settings.runs <= 1:
        return 0.2
    return 1.0 if settings.runs < 9 else 2.5


def _write_input(path: Path, n: int) -> Path:
    with open(path, "w") as f:
        for i in range(n):
            body = {"model": MODEL, "messages": [{"role": "user", "content": f"ticket {i}"}]}
            line = {"custom_id": f"t{i}", "method": "POST", "url": "/v1/chat/completions"}
            f.write(json.dumps({**line, "body": body}) + "\n")
    return path


def _members(urls: list[str]) -> list[OpenAICompatibleProvider]:
    return [OpenAICompatibleProvider(base_url=u, backend="llamacpp", retries=0) for u in urls]


def _ollm_batch(urls: list[str], n: int, concurrency: int | None = None) -> tuple[float, float]:
    """(requests per second, CPU ms per request) of one run_batch over the fleet."""
    fleet = Fleet(_members(urls))
    with tempfile.TemporaryDirectory() as tmp:
        inp = _write_input(Path(tmp) / "in.jsonl", n)
        client = SimpleNamespace(provider=fleet, model=MODEL)
        run_batch(inp, Path(tmp) / "warm.jsonl", client=client, concurrency=concurrency)
        cpu = time.process_time()
        summary = run_batch(inp, Path(tmp) / "out.jsonl", client=client, concurrency=concurrency)
        cpu = time.process_time() - cpu
    fleet.close()
    if summary.done != n:
        raise RuntimeError(f"ollm_lite batch answered {summary.done} of {n}")
    return n / summary.seconds, cpu * 1000 / n


def _openai_loop(urls: list[str], n: int, workers: int) -> tuple[float, float] | None:
    openai = peer("openai")
    if openai is None:
        return None
    clients = [openai.OpenAI(base_url=u + "/v1", api_key="x", max_retries=0) for u in urls]

    def one(i: int) -> str:
        reply = clients[i % len(clients)].chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"ticket {i}"}]
        )
        return str(reply.choices[0].message.content)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(min(n, workers * 2))))  # warm-up: connections open
        cpu = time.process_time()
        started = time.perf_counter()
        answers = list(pool.map(one, range(n)))
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
    for client in clients:
        client.close()
    if len(answers) != n:
        raise RuntimeError("openai-python loop lost answers")
    return n / elapsed, cpu * 1000 / n


def _grid(report: Report, settings: Settings) -> None:
    grid = GRID if settings.runs > 1 else (GRID[0], GRID[2])  # the smoke test: two points
    for endpoints, slots in grid:
        ideal = endpoints * slots / LATENCY
        n = max(endpoints * slots * 2, int(ideal * _seconds(settings)))
        with ExitStack() as stack:
            servers = [
                stack.enter_context(SlotServer(slots=slots, latency=LATENCY))
                for _ in range(endpoints)
            ]
            urls = [s.url for s in servers]
            rate, cpu = _ollm_batch(urls, n)
            label = f"{endpoints} endpoint(s) x {slots} slot(s)"
            report.add(
                f"ollm_lite batch, {label}",
                rate,
                "req/s",
                f"ideal {ideal:.0f}, {rate / ideal:.0%}; {cpu:.2f} ms CPU/req",
            )
            if endpoints * slots == 16 and endpoints == 4:
                report.target(
                    "batch throughput at 4 endpoints x 4 slots (share of ideal)",
                    rate / ideal,
                    0.7,
                    "x",
                    at_least=True,
                )
            peer_rate = _openai_loop(urls, n, endpoints * slots)
            if peer_rate is not None:
                report.add(
                    f"openai-python ThreadPoolExecutor, {label}",
                    peer_rate[0],
                    "req/s",
                    f"ideal {ideal:.0f}, {peer_rate[0] / ideal:.0%}; {peer_rate[1]:.2f} ms CPU/req",
                )


def _client_limit(report: Report, settings: Settings) -> None:
    n = 200 if settings.runs <= 1 else (1500 if settings.runs < 9 else 4000)
    with SlotServer(slots=64, latency=0.0) as a, SlotServer(slots=64, latency=0.0) as b:
        for workers in (4, 16):
            rate, cpu = _ollm_batch([a.url, b.url], n, concurrency=workers)
            report.add(
                f"client limit, ollm_lite batch, {workers} in flight",
                rate,
                "req/s",
                f"zero latency; {cpu:.2f} ms CPU/req",
            )
            peer_rate = _openai_loop([a.url, b.url], n, workers)
            if peer_rate is not None:
                report.add(
                    f"client limit, openai-python loop, {workers} in flight",
                    peer_rate[0],
                    "req/s",
                    f"zero latency; {peer_rate[1]:.2f} ms CPU/req",
                )
        _breakdown(report, a.url, max(20, n // 8))


def _cpu_per_call(fn: Callable[[], Any], n: int) -> float:
    """CPU µs of this process per call of ``fn`` (the server runs in another process)."""
    fn()
    started = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - started) * 1e6 / n


def _batch_line_cpu(url: str, n: int) -> float:
    fleet = Fleet(_members([url]), per_host=1)
    with tempfile.TemporaryDirectory() as tmp:
        inp = _write_input(Path(tmp) / "in.jsonl", n)
        client = SimpleNamespace(provider=fleet, model=MODEL)
        started = time.process_time()
        run_batch(inp, os.path.join(tmp, "out.jsonl"), client=client, concurrency=1)
        cpu = (time.process_time() - started) * 1e6 / n
    fleet.close()
    return cpu


def _breakdown(report: Report, url: str, n: int) -> None:
    import requests

    body = {"model": MODEL, "messages": [{"role": "user", "content": "ticket"}], "stream": False}
    session = requests.Session()
    provider = OpenAICompatibleProvider(base_url=url, backend="llamacpp", retries=0)
    request = ProviderRequest(model=MODEL, messages=[Message.user("ticket")])
    cancellable = ProviderRequest(
        model=MODEL, messages=[Message.user("ticket")], cancel=threading.Event()
    )
    figures: dict[str, list[float]] = {"raw": [], "wire": [], "cancel": [], "line": []}
    for _ in range(3):  # interleaved rounds, best of three: the machine is shared
        figures["raw"].append(
            _cpu_per_call(
                lambda: session.post(url + "/v1/chat/completions", json=body, timeout=10).json(),
                n,
            )
        )
        figures["wire"].append(_cpu_per_call(lambda: provider.chat(request), n))
        figures["cancel"].append(_cpu_per_call(lambda: provider.chat(cancellable), n))
        figures["line"].append(_batch_line_cpu(url, n))
    session.close()
    provider.close()
    raw, wire, cancel, line = (min(figures[k]) for k in ("raw", "wire", "cancel", "line"))
    report.add("CPU per request, requests.Session.post + json", raw, "µs", "sequential")
    report.add(
        "CPU per request, provider.chat", wire, "µs", f"+{wire - raw:.0f} µs transport + wire"
    )
    report.add(
        "CPU per request, provider.chat with a cancel event",
        cancel,
        "µs",
        f"+{cancel - wire:.0f} µs the watcher thread that lets cancel interrupt a blocked read",
    )
    report.add(
        "CPU per batch line (fleet, concurrency 1)",
        line,
        "µs",
        f"+{line - cancel:.0f} µs routing, translation, output line, write, thread hand-off",
    )


def run(settings: Settings, server: ServerProcess | None = None) -> Report:
    """Measure the batch section (``server`` is unused: each endpoint has its own)."""
    report = Report(SECTION)
    _grid(report, settings)
    _client_limit(report, settings)
    report.notes.append(
        f"each endpoint serves k at a time with {LATENCY * 1000:.0f} ms latency, in its own "
        "process; client and servers share this machine's cores"
    )
    return report

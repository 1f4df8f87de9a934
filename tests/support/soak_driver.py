"""The soak run: many streamed chats and cancellations in one process, then a leak audit.

Used by ``tests/soak/test_soak.py`` (a short CI run) and ``benchmarks/soak.py`` (the full
1 000-chat run). The server runs in a *separate process* (``fault_server.py --soak``) so the
figures are the client's alone: open file descriptors, live threads and resident memory are
measured after a warm-up and again at the end.

Each chat goes through the whole stack — ``ChatClient`` → provider → transport → decoder —
rotating between Ollama's NDJSON, the OpenAI-compatible SSE and Gemini's SSE, each with a cancel
event (so the watcher thread of every request is exercised too). Each cancellation streams
from a server that sends one line and then goes silent; the event is set on the first text
and the time until the chat ends is recorded. Every tenth chat fails instead (an HTTP 500, or
a reset mid-stream) so the error paths are soaked as well.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ollm_lite.chat import ChatClient
from ollm_lite.http.policy import Timeouts
from ollm_lite.providers.anthropic import AnthropicProvider
from ollm_lite.providers.gemini import GeminiProvider
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from support.transport_support import ChildServer, open_fds, wait_for_threads

WORDS = 20
EXPECTED = "".join(f" w{i}" for i in range(WORDS))
_HERE = Path(__file__).resolve().parent


def rss_bytes() -> int:
    """Resident set size of this process (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class SoakReport:
    """What one soak run measured."""

    chats: int = 0
    cancels: int = 0
    errors: int = 0
    seconds: float = 0.0
    fds_before: int = 0
    fds_after: int = 0
    threads_before: int = 0
    threads_after: int = 0
    rss_before: int = 0
    rss_after: int = 0
    objects_before: int = 0
    objects_after: int = 0
    max_cancel_latency: float = 0.0
    failures: list[str] = field(default_factory=list)

    @property
    def rss_growth_mb(self) -> float:
        return (self.rss_after - self.rss_before) / (1024 * 1024)

    def summary(self) -> str:
        return (
            f"{self.chats} chats ({self.errors} failing on purpose) + {self.cancels} "
            f"cancellations in {self.seconds:.1f} s "
            f"({self.chats / self.seconds if self.seconds else 0:.0f} chats/s); "
            f"fds {self.fds_before} -> {self.fds_after}; "
            f"threads {self.threads_before} -> {self.threads_after}; "
            f"RSS {self.rss_before / 2**20:.1f} MB -> {self.rss_after / 2**20:.1f} MB "
            f"({self.rss_growth_mb:+.2f} MB); "
            f"live objects {self.objects_before} -> {self.objects_after}; "
            f"slowest cancellation {self.max_cancel_latency * 1000:.0f} ms; "
            f"failures {len(self.failures)}"
        )


def _server() -> ChildServer:
    """The soak server (``fault_server.py --soak``) in a child process."""
    return ChildServer([str(_HERE / "fault_server.py"), "--soak"])


def _chat(client: ChatClient, report: SoakReport) -> None:
    events = list(client.chat("hi", cancel=threading.Event()))
    text = "".join(e.value for e in events if e.type == "text")
    end = events[-1]
    if text != EXPECTED or end.type != "chat_finish" or end.reason != "complete":
        report.failures.append(f"chat: {end!r} text={text[:40]!r}")


def _failing(client: ChatClient, report: SoakReport) -> None:
    events = list(client.chat("hi", cancel=threading.Event()))
    errors = [e for e in events if e.type == "error"]
    end = events[-1]
    if len(errors) != 1 or end.type != "chat_finish" or end.reason != "error":
        report.failures.append(f"failing chat: {events[-2:]!r}")


def _cancel(client: ChatClient, report: SoakReport) -> None:
    cancel = threading.Event()
    set_at = 0.0
    events: list[Any] = []
    for event in client.chat("hi", cancel=cancel):
        events.append(event)
        if event.type == "text" and not cancel.is_set():
            set_at = time.monotonic()
            cancel.set()
    latency = time.monotonic() - set_at
    report.max_cancel_latency = max(report.max_cancel_latency, latency)
    end = events[-1]
    if end.type != "chat_finish" or end.reason != "cancelled" or not set_at:
        report.failures.append(f"cancel: {end!r}")


def _settle(threads: int) -> tuple[int, int]:
    """Thread and descriptor counts once short-lived threads had a moment to end."""
    gc.collect()
    count = wait_for_threads(threads, 5.0)
    return count, open_fds()


def run_soak(chats: int = 1000, cancels: int = 100, warmup: int = 20) -> SoakReport:
    """Run ``chats`` streamed chats and ``cancels`` cancellations; measure before and after."""
    server = _server()
    report = SoakReport()
    timeouts = Timeouts(connect=2.0, idle=10.0)
    providers = [
        LocalProvider(base_url=server.url, timeout=timeouts),
        OpenAICompatibleProvider(base_url=server.url, timeout=timeouts),
        GeminiProvider(base_url=server.url, api_key="soak-key", timeout=timeouts),
        AnthropicProvider(base_url=server.url, api_key="soak-key", timeout=timeouts),
    ]
    hang = LocalProvider(base_url=server.url + "/hang", timeout=timeouts)
    failing = [
        LocalProvider(base_url=server.url + "/err", timeout=timeouts, retries=0),
        OpenAICompatibleProvider(base_url=server.url + "/reset", timeout=timeouts, retries=0),
    ]
    limits = {"m": 100_000}
    clients = [ChatClient(p, model="m", context_limits=limits) for p in providers]
    hang_client = ChatClient(hang, model="m", context_limits=limits)
    failing_clients = [ChatClient(p, model="m", context_limits=limits) for p in failing]
    try:
        for i in range(warmup):
            _chat(clients[i % len(clients)], report)
        _cancel(hang_client, report)
        for c in failing_clients:
            _failing(c, report)
        report.failures.clear()
        threads0 = threading.active_count()
        report.threads_before, report.fds_before = _settle(threads0)
        report.rss_before = rss_bytes()
        report.objects_before = len(gc.get_objects())
        every = max(1, chats // cancels) if cancels else 0
        started = time.monotonic()
        for i in range(chats):
            if i % 10 == 9:
                _failing(failing_clients[(i // 10) % 2], report)
                report.errors += 1
            else:
                _chat(clients[i % len(clients)], report)
            report.chats += 1
            if every and i % every == every - 1 and report.cancels < cancels:
                _cancel(hang_client, report)
                report.cancels += 1
        while report.cancels < cancels:
            _cancel(hang_client, report)
            report.cancels += 1
        report.seconds = time.monotonic() - started
        # Against the settled count: threads0 may include threads of earlier tests that
        # ended meanwhile (a transport's watcher waits half a second for a next request).
        report.threads_after, report.fds_after = _settle(report.threads_before)
        report.rss_after = rss_bytes()
        report.objects_after = len(gc.get_objects())
    finally:
        for p in [*providers, hang, *failing]:
            p.close()
        server.close()
    return report

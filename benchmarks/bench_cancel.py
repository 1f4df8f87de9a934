"""Cancellation latency on a silent server: ``cancel.set()`` → the generator has returned.

A consumer thread iterates ``chat_stream`` (or ``ChatClient.chat``) against a server that
stops talking; once the consumer is blocked in the read, the main thread sets the cancel
event and the consumer notes when its loop ended (after the final
``FinishEvent("cancelled")`` / ``ChatFinishEvent("cancelled")``). Cases:

* SSE and NDJSON, server silent after the status line and headers (blocked mid-body);
* SSE, server silent before the status line (blocked waiting for the answer);
* the chat runtime (``ChatClient``) over SSE, server silent after the headers.

p50 / p99 / worst over ``samples`` runs each. Threads are counted before and after.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ollm_lite.chat import ChatClient
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.types import ChatFinishEvent, FinishEvent, Message, ProviderRequest

from ._common import Report, Settings, median, percentile
from ._server import ServerProcess

SECTION = "cancel"
#: How long the consumer is left blocked before the cancel (it must be inside the read).
BLOCKED_FOR = 0.015


def _cancel_once(start: Callable[[threading.Event], Iterator[Any]]) -> float:
    """Seconds from ``set()`` to the end of the consumer's loop."""
    cancel = threading.Event()
    done: list[float] = []
    last: list[Any] = [None]

    def consume() -> None:
        for event in start(cancel):
            last[0] = event
        done.append(time.perf_counter())

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    time.sleep(BLOCKED_FOR)
    t_set = time.perf_counter()
    cancel.set()
    worker.join(10.0)
    if not done:
        raise RuntimeError("the stream did not end within 10 s of the cancel")
    final = last[0]
    if not (isinstance(final, FinishEvent | ChatFinishEvent) and final.reason == "cancelled"):
        raise RuntimeError(f"a cancelled stream ended with {final!r}")
    return done[0] - t_set


def run(settings: Settings, server: ServerProcess | None = None) -> Report:
    """Cancellation latency percentiles per case; the p99 target."""
    report = Report(SECTION)
    own = server is None
    srv = server or ServerProcess()
    sse = OpenAICompatibleProvider(base_url=srv.url, retries=0)
    ndjson = LocalProvider(base_url=srv.url, retries=0)
    chat = ChatClient(sse, model="silent-event-0")

    def stream(provider: Any, model: str) -> Callable[[threading.Event], Iterator[Any]]:
        def start(cancel: threading.Event) -> Iterator[Any]:
            return provider.chat_stream(  # type: ignore[no-any-return]
                ProviderRequest(model=model, messages=[Message.user("hi")], cancel=cancel)
            )

        return start

    cases: dict[str, Callable[[threading.Event], Iterator[Any]]] = {
        "SSE, silent after headers": stream(sse, "silent-event-0"),
        "NDJSON, silent after headers": stream(ndjson, "silent-event-0"),
        "SSE, silent before the status line": stream(sse, "mute-event-0"),
        "ChatClient over SSE, silent after headers": lambda c: chat.chat("hi", cancel=c),
    }
    threads_before = threading.active_count()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for _ in range(max(settings.samples, 1)):
            for name, start in cases.items():
                samples[name].append(_cancel_once(start))
    finally:
        sse.close()
        ndjson.close()
        if own:
            srv.close()
    time.sleep(0.05)
    threads_after = threading.active_count()
    for name, values in samples.items():
        ms = [v * 1e3 for v in values]
        p99 = percentile(ms, 99)
        report.add(f"{name}: p50", median(ms), "ms")
        report.add(f"{name}: p99", p99, "ms", f"worst {max(ms):.1f} ms over {len(ms)} runs")
        report.target(f"cancellation p99, {name}", p99, 50.0, "ms", f"{len(ms)} runs")
    report.notes.append(f"threads before {threads_before}, after {threads_after}")
    return report

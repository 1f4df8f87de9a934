"""Group 6: cancellation at every stage of a request, for NDJSON and SSE (tools: see
``test_faults_chat.py``).

Each case sets the ``threading.Event`` from a timer while the request is blocked somewhere and
measures the time from ``set()`` to the stream's end: under ``LIMIT`` (generous, so that a
busy machine passes; ``benchmarks/`` measures the real latency), the partial text kept,
``FinishEvent("cancelled")`` (``Cancelled`` for non-streaming calls), and no thread or socket left.
``KeyboardInterrupt`` is never swallowed.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from support.fault_server import (
    NDJSON,
    Wire,
    chunks,
    headers_then_silence,
    oa_chunk,
    ollama_lines,
    openai_events,
    repeat_forever,
    sequence,
    sse_data,
    status,
    unanswered_connect,
)
from support.transport_support import Request, serve, silent

from ollm_lite.errors import Cancelled
from ollm_lite.http.policy import Timeouts
from ollm_lite.types import Message, ProviderRequest

LIMIT = 2.0
"""Seconds from ``cancel.set()`` to the end of the call: generous, so that a busy machine does
not fail the test, and still far below the 30 s idle limit the cancel has to beat (the
benchmarks measure the real latency: a few ms)."""


def req(cancel: threading.Event, **kw: object) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], cancel=cancel, **kw)  # type: ignore[arg-type]


class Canceller:
    """Sets an event after a delay and remembers when."""

    def __init__(self, after: float) -> None:
        self.event = threading.Event()
        self.set_at: float | None = None
        self._timer = threading.Timer(after, self._fire)
        self._timer.start()

    def _fire(self) -> None:
        self.set_at = time.monotonic()
        self.event.set()

    def latency(self) -> float:
        """Seconds from ``set()`` to now (the timer thread is joined first)."""
        now = time.monotonic()
        self._timer.join()
        assert self.set_at is not None, "the call ended before the cancel was set"
        return now - self.set_at


def drain(provider: object, cancel: Canceller) -> tuple[list[object], float]:
    events = list(provider.chat_stream(req(cancel.event)))  # type: ignore[attr-defined]
    return events, cancel.latency()


def assert_cancelled(events: list[object]) -> None:
    terms = [e for e in events if e.type in ("finish", "error")]  # type: ignore[attr-defined]
    assert len(terms) == 1 and terms[0] is events[-1]
    assert terms[0].type == "finish" and terms[0].reason == "cancelled", terms[0]  # type: ignore[attr-defined]


def content(wire: Wire, word: str) -> bytes:
    if wire.name == "ndjson":
        return ollama_lines([word], done=False)[0]
    return sse_data(oa_chunk({"content": word}))


def test_cancel_before_the_request(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """An event already set: nothing is sent, the stream ends ``cancelled`` at once."""
    cancel = threading.Event()
    cancel.set()
    with serve({wire.path: silent}) as server:
        provider = wire.provider(server.url)
        started = time.monotonic()
        events = list(provider.chat_stream(req(cancel)))
        elapsed = time.monotonic() - started
        with pytest.raises(Cancelled):
            provider.chat(req(cancel))
        provider.close()
        assert server.requests == []
    assert_cancelled(events)
    assert elapsed < LIMIT
    no_leaks()


def test_cancel_during_connect(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A TCP handshake that never completes is interrupted, long before the connect limit."""
    with unanswered_connect() as url:
        provider = wire.provider(url, timeout=Timeouts(connect=10.0, idle=30.0))
        events, latency = drain(provider, Canceller(0.2))
        provider.close()
    assert_cancelled(events)
    assert latency < LIMIT
    no_leaks()


def test_cancel_while_waiting_for_the_first_byte(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A server that accepted the request and says nothing: the blocked read is interrupted."""
    with serve({wire.path: silent}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=30.0))
        events, latency = drain(provider, Canceller(0.2))
        provider.close()
    assert_cancelled(events)
    assert latency < LIMIT
    no_leaks()


def test_cancel_after_headers_while_silent(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A 200 head and then silence: the blocked body read is interrupted."""
    with serve({wire.path: headers_then_silence(wire.content_type)}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=30.0))
        events, latency = drain(provider, Canceller(0.2))
        provider.close()
    assert_cancelled(events)
    assert latency < LIMIT
    no_leaks()


def close_delimited_then_silence(content_type: str) -> Callable[[socket.socket, Request], None]:
    """A 200 head with neither ``Content-Length`` nor ``Transfer-Encoding``, then nothing.

    ``http.client`` reads such a body until the connection closes, and so hands the socket
    over to the response and drops it from the connection object.
    """

    def script(client: socket.socket, req: Request) -> None:
        client.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n\r\n".encode())
        req.stop.wait(30)

    return script


def test_cancel_a_silent_close_delimited_answer_on_a_reused_connection(
    wire: Wire, no_leaks: Callable[..., None]
) -> None:
    """A first chat answered on a keep-alive connection, then a second chat on that same
    connection answered with a close-delimited head and silence: the blocked body read is
    interrupted, not left to the idle limit."""
    if wire.name == "ndjson":
        first = chunks(ollama_lines(["ok"]), keep_alive=True)
    else:
        first = chunks(openai_events(["ok"]), content_type="text/event-stream", keep_alive=True)
    script = sequence(first, close_delimited_then_silence(wire.content_type))
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=30.0))
        warm = list(provider.chat_stream(req(threading.Event())))
        assert warm[-1].type == "finish" and warm[-1].reason == "stop", warm[-1]
        events, latency = drain(provider, Canceller(0.2))
        assert len(server._clients) == 1, "the second chat did not reuse the connection"
        provider.close()
    assert_cancelled(events)
    assert latency < LIMIT
    no_leaks()


def test_cancel_mid_stream_keeps_the_text(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Content flowing every 10 ms: the text so far is kept, then ``cancelled``."""
    script = repeat_forever(content(wire, "x"), every=0.01, content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=30.0))
        events, latency = drain(provider, Canceller(0.25))
        provider.close()
    assert_cancelled(events)
    text = "".join(e.value for e in events if e.type == "text")  # type: ignore[attr-defined]
    assert text and set(text) == {"x"}
    assert latency < LIMIT
    no_leaks()


def test_cancel_during_retry_backoff(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A 503 asking to come back in 30 s: the backoff wait is interrupted."""
    script = status(503, {"error": "loading model"}, headers={"Retry-After": "30"})
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, retries=3)
        events, latency = drain(provider, Canceller(0.2))
        provider.close()
        assert len(server.requests) == 1
    assert_cancelled(events)
    assert latency < LIMIT
    no_leaks()


def test_cancel_non_streaming_chat(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """``chat()`` raises ``Cancelled`` (code ``CANCELLED``) promptly."""
    with serve({wire.path: silent}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=30.0))
        cancel = Canceller(0.2)
        with pytest.raises(Cancelled) as info:
            provider.chat(req(cancel.event))
        latency = cancel.latency()
        provider.close()
    assert info.value.code == "CANCELLED"
    assert latency < LIMIT
    no_leaks()


def test_cancel_during_a_model_pull(no_leaks: Callable[..., None]) -> None:
    """Ollama ``pull_model``: progress flowing, then cancel: ``Cancelled`` promptly."""
    line = b'{"status":"pulling 6a0746a1ec1a","digest":"sha256:6a07","total":100,"completed":1}\n'
    script = repeat_forever(line, every=0.01, first=[b'{"status":"pulling manifest"}\n'])
    seen: list[object] = []
    with serve({"/api/pull": script}) as server:
        provider = NDJSON.provider(server.url)
        cancel = Canceller(0.25)
        with pytest.raises(Cancelled):
            provider.pull_model("llama3.2", on_progress=seen.append, cancel=cancel.event)
        latency = cancel.latency()
        provider.close()
    assert len(seen) >= 2
    assert latency < LIMIT
    no_leaks()


def test_cancel_a_silent_model_pull(no_leaks: Callable[..., None]) -> None:
    """A pull whose server went quiet (verifying a layer) is still cancelled promptly."""
    with serve({"/api/pull": headers_then_silence()}) as server:
        provider = NDJSON.provider(server.url)
        cancel = Canceller(0.2)
        with pytest.raises(Cancelled):
            provider.pull_model("llama3.2", cancel=cancel.event)
        latency = cancel.latency()
        provider.close()
    assert latency < LIMIT
    no_leaks()


def test_many_concurrent_cancellations(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Eight streams on eight threads, one shared event: all end ``cancelled``, nothing
    left behind."""
    script = repeat_forever(content(wire, "y"), every=0.01, content_type=wire.content_type)
    results: list[list[object]] = []
    lock = threading.Lock()
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=30.0))
        cancel = threading.Event()

        def worker() -> None:
            events = list(provider.chat_stream(req(cancel)))
            with lock:
                results.append(events)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        cancel.set()
        set_at = time.monotonic()
        for t in threads:
            t.join(5)
        latency = time.monotonic() - set_at
        provider.close()
    assert len(results) == 8
    for events in results:
        assert_cancelled(events)
    assert latency < 2 * LIMIT
    no_leaks()


# --------------------------------------------------------------------------- KeyboardInterrupt


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` during the test, however the run was started (a run
    started with SIGINT ignored would otherwise never see the signal); restored afterwards."""
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        pytest.skip("signals are delivered to the main thread only")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_keyboard_interrupt_passes_through_a_blocked_read(
    wire: Wire, no_leaks: Callable[..., None], default_sigint: None
) -> None:
    """Ctrl-C while the stream waits on a silent server raises ``KeyboardInterrupt`` out of
    the generator (not an error event, not ``Cancelled``), and nothing is left behind."""
    with serve({wire.path: headers_then_silence(wire.content_type)}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=30.0))
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            for _event in provider.chat_stream(req(threading.Event())):
                pass
        elapsed = time.monotonic() - started
        timer.join()
        provider.close()
    assert elapsed < 0.2 + LIMIT
    no_leaks()


def test_keyboard_interrupt_from_a_progress_callback(no_leaks: Callable[..., None]) -> None:
    """A ``KeyboardInterrupt`` raised by the caller's own callback is not swallowed."""
    line = b'{"status":"pulling 6a07","total":100,"completed":1}\n'

    def interrupt(progress: object) -> None:
        raise KeyboardInterrupt

    with serve({"/api/pull": repeat_forever(line, every=0.01)}) as server:
        provider = NDJSON.provider(server.url)
        with pytest.raises(KeyboardInterrupt):
            provider.pull_model("llama3.2", on_progress=interrupt)
        provider.close()
    no_leaks()

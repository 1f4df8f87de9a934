"""``cancel_scope``: an ambient cancel event for requests made without ``cancel=``.

The runtime asks ``provider.context_length(model)`` and the like before a chat, through
signatures that have no ``cancel`` argument; ``with cancel_scope(cancel):`` makes every
transport request in the block obey ``cancel`` all the same. Each case blocks on a loopback
server that says nothing and measures the time from ``set()`` to ``Cancelled``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from transport_support import Request, respond, serve, silent, stream_script, wait_for_threads

from ollm_lite._cancel_scope import cancel_scope
from ollm_lite.errors import Cancelled
from ollm_lite.http.policy import RetryPolicy, Timeouts
from ollm_lite.http.transport import Transport
from ollm_lite.providers import LocalProvider

LIMIT = 0.5
"""Seconds from ``set()`` to ``Cancelled``."""

SLOW = Timeouts(connect=1.0, idle=30.0)


def make(url: str, **kw: object) -> Transport:
    kw.setdefault("retry", RetryPolicy(retries=0))
    kw.setdefault("timeouts", SLOW)
    return Transport(url, provider="test", **kw)  # type: ignore[arg-type]


def ok(client: socket.socket, req: Request) -> None:
    respond(client, 200, b'{"ok": true}')


ok.keep_alive = True  # type: ignore[attr-defined]


def set_later(event: threading.Event, after: float = 0.2) -> Callable[[], float]:
    """Set ``event`` after ``after`` seconds; the returned function gives the time since."""
    fired: list[float] = []

    def fire() -> None:
        fired.append(time.monotonic())
        event.set()

    timer = threading.Timer(after, fire)
    timer.start()

    def latency() -> float:
        now = time.monotonic()
        timer.join()
        assert fired, "the call ended before the event was set"
        return now - fired[0]

    return latency


@pytest.fixture
def threads_back() -> Iterator[None]:
    """No watcher or timer thread outlives the test."""
    baseline = threading.active_count()
    yield
    assert wait_for_threads(baseline) == baseline, [t.name for t in threading.enumerate()]


def test_scope_cancels_a_request_without_cancel(threads_back: None) -> None:
    """A request given no ``cancel=`` inside ``cancel_scope(ev)``: setting ``ev`` interrupts
    the read blocked on a silent server."""
    with serve({"/j": silent}) as server:
        transport = make(server.url)
        ev = threading.Event()
        latency = set_later(ev)
        with cancel_scope(ev), pytest.raises(Cancelled) as info:
            transport.request_json("POST", "/j", json_body={})
        assert latency() < LIMIT
        assert info.value.code == "CANCELLED"
        transport.close()


def test_scope_cancels_a_silent_stream_body(threads_back: None) -> None:
    """Headers and one chunk, then silence: the body read is interrupted too."""
    with serve({"/s": stream_script([b"data: 1\n\n"], then="hang")}) as server:
        transport = make(server.url)
        ev = threading.Event()
        got: list[bytes] = []
        latencies: list[Callable[[], float]] = []
        with cancel_scope(ev), pytest.raises(Cancelled):
            with transport.open_stream("POST", "/s", json_body={}) as resp:
                for chunk in resp.iter_chunks():
                    got.append(chunk)
                    # Set once the chunk is here (a timer from the start could fire before
                    # it is read on a busy machine): the read blocked on the silence follows.
                    latencies.append(set_later(ev, 0.1))
        assert [latency() < LIMIT for latency in latencies] == [True]
        assert got == [b"data: 1\n\n"]
        transport.close()


def test_scope_cancels_a_provider_call_that_has_no_cancel_argument(threads_back: None) -> None:
    """``LocalProvider.show_model`` (``POST /api/show``) on a silent server, inside the scope:
    ``Cancelled`` promptly, not the idle limit."""
    with serve({"/api/show": silent}) as server:
        provider = LocalProvider(base_url=server.url, timeout=SLOW, retries=0)
        ev = threading.Event()
        latency = set_later(ev)
        with cancel_scope(ev), pytest.raises(Cancelled):
            provider.show_model("m")
        assert latency() < LIMIT
        provider.close()


def test_scope_interrupts_the_wait_between_tries(threads_back: None) -> None:
    """A 503 asking to come back in 30 s: the backoff wait obeys the ambient event."""

    def busy(client: socket.socket, req: Request) -> None:
        respond(client, 503, b"{}", headers={"Retry-After": "30"})

    with serve({"/j": busy}) as server:
        transport = make(server.url, retry=RetryPolicy(retries=2, max_retry_after=60))
        ev = threading.Event()
        latency = set_later(ev)
        with cancel_scope(ev), pytest.raises(Cancelled):
            transport.request_json("GET", "/j")
        assert latency() < LIMIT
        assert len(server.requests) == 1
        transport.close()


def test_an_event_already_set_sends_nothing() -> None:
    """Inside a scope whose event is set, no request reaches the server."""
    with serve({"/j": ok}) as server:
        transport = make(server.url)
        ev = threading.Event()
        ev.set()
        with cancel_scope(ev), pytest.raises(Cancelled):
            transport.request_json("GET", "/j")
        time.sleep(0.05)
        assert server.requests == []
        transport.close()


def test_the_scope_ends_with_its_block() -> None:
    """After the block, a set event no longer cancels anything, even after an exception."""
    with serve({"/j": ok}) as server:
        transport = make(server.url)
        ev = threading.Event()
        with cancel_scope(ev):
            assert transport.request_json("GET", "/j") == {"ok": True}
        ev.set()
        assert transport.request_json("GET", "/j") == {"ok": True}
        with pytest.raises(RuntimeError), cancel_scope(threading.Event()):
            raise RuntimeError("boom")
        assert transport.request_json("GET", "/j") == {"ok": True}
        transport.close()


def test_the_scope_stays_in_its_thread() -> None:
    """A thread started inside the block does not inherit the scope."""
    with serve({"/j": ok}) as server:
        transport = make(server.url)
        ev = threading.Event()
        ev.set()
        results: list[object] = []
        with cancel_scope(ev):
            worker = threading.Thread(
                target=lambda: results.append(transport.request_json("GET", "/j"))
            )
            worker.start()
            worker.join(5)
        assert results == [{"ok": True}]
        transport.close()


def test_none_adds_nothing() -> None:
    """``cancel_scope(None)`` changes nothing, inside another scope or not."""
    with serve({"/j": ok}) as server:
        transport = make(server.url)
        with cancel_scope(None):
            assert transport.request_json("GET", "/j") == {"ok": True}
        ev = threading.Event()
        ev.set()
        with cancel_scope(ev), cancel_scope(None), pytest.raises(Cancelled):
            transport.request_json("GET", "/j")
        transport.close()


@pytest.mark.parametrize("which", ["explicit", "ambient"])
def test_explicit_and_ambient_are_both_watched(which: str, threads_back: None) -> None:
    """A request with its own ``cancel=`` inside a scope: setting either event interrupts it,
    and one watcher thread serves both."""
    with serve({"/j": silent}) as server:
        transport = make(server.url)
        explicit, ambient = threading.Event(), threading.Event()
        latency = set_later(explicit if which == "explicit" else ambient)
        watchers: list[int] = []
        probe = threading.Timer(
            0.1,
            lambda: watchers.append(
                sum(t.name == "ollm-cancel-watch" for t in threading.enumerate())
            ),
        )
        probe.start()
        with cancel_scope(ambient), pytest.raises(Cancelled):
            transport.request_json("POST", "/j", json_body={}, cancel=explicit)
        assert latency() < LIMIT
        probe.join()
        assert watchers == [1]
        transport.close()


@pytest.mark.parametrize("which", ["explicit", "ambient"])
def test_both_events_interrupt_the_wait_between_tries(which: str) -> None:
    """The backoff wait watches the request's own event and the ambient one."""

    def busy(client: socket.socket, req: Request) -> None:
        respond(client, 503, b"{}", headers={"Retry-After": "30"})

    with serve({"/j": busy}) as server:
        transport = make(server.url, retry=RetryPolicy(retries=2, max_retry_after=60))
        explicit, ambient = threading.Event(), threading.Event()
        latency = set_later(explicit if which == "explicit" else ambient)
        with cancel_scope(ambient), pytest.raises(Cancelled):
            transport.request_json("GET", "/j", cancel=explicit)
        assert latency() < LIMIT
        assert len(server.requests) == 1
        transport.close()


def test_nested_scopes_add_up_and_restore() -> None:
    """Inside nested blocks both events cancel; leaving the inner block restores the outer
    scope alone; leaving the outer one restores none."""
    with serve({"/j": ok}) as server:
        transport = make(server.url)
        outer, inner = threading.Event(), threading.Event()
        with cancel_scope(outer):
            with cancel_scope(inner):
                assert transport.request_json("GET", "/j") == {"ok": True}
                inner.set()
                with pytest.raises(Cancelled):
                    transport.request_json("GET", "/j")
                inner.clear()
                outer.set()
                with pytest.raises(Cancelled):
                    transport.request_json("GET", "/j")
                outer.clear()
                with cancel_scope(outer):  # the same event again: still watched once
                    assert transport.request_json("GET", "/j") == {"ok": True}
            inner.set()
            assert transport.request_json("GET", "/j") == {"ok": True}
            outer.set()
            with pytest.raises(Cancelled):
                transport.request_json("GET", "/j")
        assert transport.request_json("GET", "/j") == {"ok": True}
        transport.close()


def test_a_stream_opened_in_the_scope_stays_cancellable_after_it(threads_back: None) -> None:
    """The events are taken when the request is sent: leaving the block before reading the
    body does not make the stream deaf to them."""
    with serve({"/s": stream_script([b"data: 1\n\n"], then="hang")}) as server:
        transport = make(server.url)
        ev = threading.Event()
        with cancel_scope(ev):
            resp = transport.open_stream("POST", "/s", json_body={})
        latency = set_later(ev)
        with pytest.raises(Cancelled), resp:
            list(resp.iter_chunks())
        assert latency() < LIMIT
        transport.close()

"""One watcher thread per transport: shared by its requests, gone when it is idle or closed,
and unable to reach a connection once its request has finished."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest
from support.transport_support import Request, respond, serve, silent, stream_script

from ollm_lite.errors import Cancelled
from ollm_lite.http import cancel as cancel_module
from ollm_lite.http.cancel import Scope, Watchdog
from ollm_lite.http.policy import RetryPolicy
from ollm_lite.http.transport import Transport

WATCHER = "ollm-cancel-watch"


def watchers() -> set[int | None]:
    return {t.ident for t in threading.enumerate() if t.name == WATCHER}


def test_requests_of_one_transport_share_one_watcher_thread() -> None:
    """While a cancellable stream stays open, every other cancellable request of the same
    transport is watched by that same thread: no thread is started per request."""
    seen: list[set[int | None]] = []

    def answer(client: socket.socket, req: Request) -> None:
        seen.append(watchers())  # taken while the request is in flight
        respond(client, 200, b"{}")

    scripts = {"/hang": stream_script([b"data: x\n\n"], then="hang"), "/j": answer}
    with serve(scripts) as server:
        transport = Transport(server.url, provider="test", retry=RetryPolicy(retries=0))
        hang_cancel = threading.Event()
        with transport.open_stream("POST", "/hang", cancel=hang_cancel) as held:
            thread = transport._watchdog._thread
            assert thread is not None
            mine = thread.ident
            for _ in range(5):
                assert transport.request_json("GET", "/j", cancel=threading.Event()) == {}
            assert transport.request_json("GET", "/j", timeout=30.0) == {}  # a deadline only
            hang_cancel.set()
            with pytest.raises(Cancelled):
                list(held.iter_chunks())
        transport.close()
    assert len(seen) == 6
    assert all(mine in s for s in seen), (mine, seen)
    assert mine not in watchers(), "close() left the idle watcher thread running"


def test_the_watcher_starts_with_a_watched_request_and_close_ends_it() -> None:
    with serve({"/j": lambda client, req: respond(client, 200, b"{}")}) as server:
        transport = Transport(server.url, provider="test")
        assert transport.request_json("GET", "/j") == {}
        assert transport._watchdog._thread is None, "a request without cancel or deadline"
        assert transport.request_json("GET", "/j", cancel=threading.Event()) == {}
        thread = transport._watchdog._thread
        assert thread is not None and thread.name == WATCHER
        transport.close()
        assert not thread.is_alive()


def test_a_cancel_after_the_body_ended_spares_the_pooled_connection() -> None:
    """urllib3 returns the connection to the pool as soon as the body is read, before the
    response is closed: a cancel set in between must not shut down that connection, which the
    next request reuses."""
    events = [b'data: {"i": %d}\n\n' % i for i in range(3)]
    with serve({"/s": stream_script(events, keep_alive=True)}) as server:
        transport = Transport(server.url, provider="test", retry=RetryPolicy(retries=0))
        cancel = threading.Event()
        with transport.open_stream("POST", "/s", cancel=cancel) as first:
            assert list(first.iter_chunks()) == events  # the connection is back in the pool
            cancel.set()
            assert wait_until(lambda: first._scope.reason == "cancelled")
        with transport.open_stream("POST", "/s") as second:
            assert list(second.iter_chunks()) == events
        assert len(server._clients) == 1, "the pooled connection was shut down by the cancel"
        transport.close()


def test_a_finished_request_cannot_be_aborted() -> None:
    """Once finished (before its connection goes back to the pool), a request's cancel no
    longer reaches the connection: it may already carry the next request."""
    a, b = socket.socketpair()
    with a, b:
        scope = Scope()
        scope.attach(a)
        scope.finish()
        scope.abort("cancelled")
        scope.attach(a)  # a late registration is ignored as well
        scope.abort("cancelled")
        a.sendall(b"still open")
        assert b.recv(64) == b"still open"
        assert scope.reason is None


def test_an_unwatched_scope_is_left_alone_and_a_watched_one_aborted() -> None:
    watchdog = Watchdog()
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    with a, b, c, d:
        kept, aborted = Scope(), Scope()
        kept.attach(a)
        aborted.attach(c)
        cancel = threading.Event()
        watchdog.watch(kept, cancel, None)
        watchdog.watch(aborted, cancel, None)
        watchdog.unwatch(kept)
        cancel.set()
        assert wait_until(lambda: aborted.reason == "cancelled")
        assert d.recv(1) == b""  # shut down: the peer sees the end
        a.sendall(b"x")
        assert b.recv(1) == b"x"
        assert kept.reason is None
    thread = watchdog._thread
    watchdog.close()
    assert thread is not None and not thread.is_alive()


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Whether ``condition`` became true within the (generous) ``timeout``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.005)
    return False


def test_a_lingering_watcher_takes_up_a_new_request_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The idle watcher, waiting for a next request, starts watching it at once: a cancel
    does not wait for the linger to run out."""
    monkeypatch.setattr(cancel_module, "LINGER_S", 60.0)
    with serve({"/j": lambda c, r: respond(c, 200, b"{}"), "/silent": silent}) as server:
        transport = Transport(server.url, provider="test", retry=RetryPolicy(retries=0))
        assert transport.request_json("GET", "/j", cancel=threading.Event()) == {}
        thread = transport._watchdog._thread
        assert thread is not None and thread.is_alive()  # idle, lingering
        cancel = threading.Event()
        timer = threading.Timer(0.1, cancel.set)
        timer.start()
        started = time.monotonic()
        with pytest.raises(Cancelled):
            transport.request_json("GET", "/silent", cancel=cancel)
        assert time.monotonic() - started < 10.0, "the cancel waited for the linger"
        assert transport._watchdog._thread is thread, "a second thread was started"
        timer.join()
        transport.close()
        assert not thread.is_alive()

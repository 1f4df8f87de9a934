"""How a request is interrupted from another thread: cancel events and the total deadline.

A blocked ``recv()`` on a silent server wakes up only when its socket is shut down. Each request
keeps its sockets in a :class:`Scope`; one :class:`Watchdog` thread per transport polls the
cancel events and deadlines of all the requests in flight and shuts down the sockets of the
ones that must stop. The thread starts with the first watched request, serves every request
after it, and ends once nothing has been watched for :data:`LINGER_S` (or when the transport
is closed), so an idle transport holds no thread.

A connection leaves its request's scope when it goes back to the pool (:meth:`Scope.detach`,
called by the pool itself, also when urllib3 returns it on reading a body's end), and a closed
response finishes its scope (:meth:`Scope.finish`) before releasing its connection: no abort
can reach a socket that another request may already be using.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Literal

__all__ = ["CancelFlag", "Scope", "Watchdog", "current"]

#: How often the watcher looks at the cancel events; bounds cancellation latency.
CANCEL_POLL_S = 0.01
#: How long the watcher thread waits for a next request before it ends.
LINGER_S = 0.5

Reason = Literal["cancelled", "deadline"]


#: What a request watches: the caller's cancel event.
CancelFlag = threading.Event


class Scope:
    """The sockets of one request, so another thread can interrupt a blocked read."""

    __slots__ = ("_finished", "_lock", "conns", "reason", "reused")

    def __init__(self) -> None:
        self.conns: list[object] = []
        self.reason: Reason | None = None
        # The request went out on a pooled connection (which the server may have closed).
        self.reused = False
        self._finished = False
        self._lock = threading.Lock()

    def attach(self, conn: object) -> None:
        """Watch ``conn``, an ``http.client`` connection or a socket (shut down at once if
        the request was already aborted)."""
        with self._lock:
            if self._finished:
                return
            self.conns.append(conn)
            if self.reason is not None:
                shutdown(conn)

    def abort(self, reason: Reason) -> None:
        """Shut down every socket of the request, unless it already finished."""
        with self._lock:
            if self._finished:
                return
            if self.reason is None:
                self.reason = reason
            for conn in self.conns:
                shutdown(conn)

    def detach(self, conn: object) -> None:
        """Stop watching ``conn`` and its socket: it goes back to the pool, where a later
        abort of this request must not reach it."""
        sock = getattr(conn, "sock", None)
        with self._lock:
            self.conns = [c for c in self.conns if c is not conn and c is not sock]

    def finish(self) -> None:
        """The request is over: later aborts touch none of its (maybe pooled) sockets."""
        with self._lock:
            self._finished = True
            self.conns.clear()


def shutdown(conn: object) -> None:
    """Shut down the socket of ``conn`` for both directions; errors are ignored."""
    sock = conn if isinstance(conn, socket.socket) else getattr(conn, "sock", None)
    if sock is not None and not isinstance(sock, socket.socket):
        # urllib3's SSLTransport (TLS inside a TLS proxy tunnel) has no shutdown(); the
        # socket it reads from does.
        sock = getattr(sock, "socket", None)
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Current(threading.local):
    scope: Scope | None = None


#: The scope of the request the current thread is sending (read by the urllib3 hooks).
current = _Current()


class Watchdog:
    """One thread that interrupts the watched requests of a transport.

    :meth:`watch` a request's scope while it may block; :meth:`unwatch` it when it ends.
    """

    __slots__ = ("_cond", "_entries", "_stop", "_thread")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._entries: dict[Scope, tuple[CancelFlag | None, float | None]] = {}
        self._thread: threading.Thread | None = None
        self._stop = False

    def watch(self, scope: Scope, cancel: CancelFlag | None, deadline: float | None) -> None:
        """Abort ``scope`` when ``cancel`` is set or the monotonic ``deadline`` passes."""
        with self._cond:
            self._entries[scope] = (cancel, deadline)
            self._stop = False
            self._cond.notify()  # a thread waiting out its linger starts polling at once
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ollm-cancel-watch", daemon=True
                )
                self._thread.start()

    def unwatch(self, scope: Scope) -> None:
        """Stop watching ``scope`` (no effect when it is not watched)."""
        with self._cond:
            self._entries.pop(scope, None)

    def close(self) -> None:
        """End the thread now if nothing is watched, and wait for it."""
        with self._cond:
            thread = self._thread
            if thread is None or self._entries:
                return
            self._stop = True
            self._cond.notify_all()
        if thread is not threading.current_thread():
            thread.join(timeout=1.0)  # another thread may start a request meanwhile

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._entries:
                    if not self._stop:
                        self._cond.wait(LINGER_S)
                    if not self._entries:
                        self._thread = None
                        return
                fired = self._due(time.monotonic())
            for scope, reason in fired:
                scope.abort(reason)
            time.sleep(CANCEL_POLL_S)

    def _due(self, now: float) -> list[tuple[Scope, Reason]]:
        """The scopes to abort now, removed from the watch list (called under the lock)."""
        fired: list[tuple[Scope, Reason]] = []
        for scope, (cancel, deadline) in self._entries.items():
            if cancel is not None and cancel.is_set():
                fired.append((scope, "cancelled"))
            elif deadline is not None and now >= deadline:
                fired.append((scope, "deadline"))
        for scope, _ in fired:
            del self._entries[scope]
        return fired

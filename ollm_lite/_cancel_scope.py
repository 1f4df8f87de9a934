"""Cancel events: the ambient :func:`cancel_scope` the transport reads for every request, and
:class:`LinkedEvent`, the library's own event that follows a caller's one.

Standard library only, so the chat runtime can use them without importing ``requests``.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator

__all__ = ["LinkedEvent", "ambient_cancel_events", "cancel_scope"]

#: How often a wait on a :class:`LinkedEvent` looks at its parent; bounds cancel latency.
_PARENT_POLL_S = 0.02

#: The cancel events of the enclosing :func:`cancel_scope` blocks, outermost first.
_AMBIENT: contextvars.ContextVar[tuple[threading.Event, ...]] = contextvars.ContextVar(
    "ollm_lite_cancel_scope", default=()
)


@contextlib.contextmanager
def cancel_scope(cancel: threading.Event | None) -> Iterator[None]:
    """Make ``cancel`` cancel every request sent inside the block, ``cancel=`` given or not.

    For calls whose signature has no ``cancel`` argument (``provider.context_length(model)``,
    ``model_capabilities``, ``count_tokens``)::

        with cancel_scope(cancel):
            limit = provider.context_length(model)

    Every :class:`Transport` request sent in the block (retries and the waits between them
    included) watches ``cancel`` in addition to its own ``cancel=``: setting either one
    interrupts it, exactly as its own event would, with ``Cancelled``. Nested blocks add up:
    the events of all enclosing blocks are watched, and leaving a block restores the ones
    before it. ``None`` adds nothing. The events are taken when the request is sent and kept
    for its whole life, so a stream opened inside the block stays cancellable by ``cancel``
    after the block is left.

    The scope is a :mod:`contextvars` variable: it follows the current thread (and context),
    not other threads. Do not ``yield`` inside the block: a generator suspended there would
    leave the scope active in its caller's code. Open it around the calls, not around yields.

    Args:
        cancel: The event to watch, or ``None`` for no change.
    """
    if cancel is None:
        yield
        return
    outer = _AMBIENT.get()
    token = _AMBIENT.set(outer if cancel in outer else (*outer, cancel))
    try:
        yield
    finally:
        _AMBIENT.reset(token)


def ambient_cancel_events() -> tuple[threading.Event, ...]:
    """The events of the enclosing :func:`cancel_scope` blocks, outermost first."""
    return _AMBIENT.get()


class LinkedEvent(threading.Event):
    """An event of the library's own that also counts as set once ``parent`` is set.

    The caller's cancel event is read, never written: a chat that stops early (``break``,
    ``close()``, garbage collection) sets its own ``LinkedEvent`` only, so another chat sharing
    the caller's event goes on undisturbed. Everything downstream (requests, tools) receives
    the linked event and sees the caller's cancellation through it.

    Args:
        parent: The caller's event to follow, or ``None`` for a plain event.
    """

    def __init__(self, parent: threading.Event | None = None) -> None:
        super().__init__()
        self._parent = parent

    def is_set(self) -> bool:
        """True once this event or its parent was set."""
        if super().is_set():
            return True
        if self._parent is not None and self._parent.is_set():
            super().set()  # latch, so a plain wait on this event returns from now on
            return True
        return False

    def wait(self, timeout: float | None = None) -> bool:
        """Block until this event or its parent is set, or ``timeout`` seconds pass.

        Returns:
            True when set, False on timeout (as :meth:`threading.Event.wait`).
        """
        if self._parent is None:
            return super().wait(timeout)
        end = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = _PARENT_POLL_S if end is None else min(_PARENT_POLL_S, end - time.monotonic())
            if left <= 0:
                return False
            super().wait(left)  # returns at once when this event itself is set
        return True

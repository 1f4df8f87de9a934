"""The library's own cancel event that follows a caller's one: :class:`LinkedEvent`.

Standard library only, so the chat runtime can use it without importing ``requests``.
"""

from __future__ import annotations

import threading
import time

__all__ = ["LinkedEvent"]

#: How often a wait on a :class:`LinkedEvent` looks at its parent; bounds cancel latency.
_PARENT_POLL_S = 0.02


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

"""The library's own cancel event that follows a caller's one: :class:`LinkedEvent`.

A call's event also carries the call's deadline (:attr:`LinkedEvent.deadline`): the event is
what reaches every request made for the call (the chat, and the look-ups before it: model
discovery, metadata, token counting, tool calls), so each of them reads the deadline where it
reads the cancel (:func:`deadline_of`), however many layers it passed through.

Standard library only, so the chat runtime can use it without importing ``requests``.
"""

from __future__ import annotations

import threading
import time

__all__ = ["LinkedEvent", "deadline_for", "deadline_of", "past_deadline"]

#: How often a wait on a :class:`LinkedEvent` looks at its parent; bounds cancel latency.
_PARENT_POLL_S = 0.02


class LinkedEvent(threading.Event):
    """An event of the library's own that also counts as set once ``parent`` is set.

    The caller's cancel event is read, never written: a chat that stops early (``break``,
    ``close()``, garbage collection) sets its own ``LinkedEvent`` only, so another chat sharing
    the caller's event goes on undisturbed. Everything downstream (requests, tools) receives
    the linked event and sees the caller's cancellation through it.

    The event is not set when the deadline passes (a deadline is a timeout, not a cancel):
    whoever waits reads :attr:`deadline` and ends with ``LLM_TIMEOUT``.

    Args:
        parent: The caller's event to follow, or ``None`` for a plain event.
        deadline: ``time.monotonic()`` value by which everything done under this event must
            end; the parent's deadline, when earlier, wins.
    """

    def __init__(
        self, parent: threading.Event | None = None, *, deadline: float | None = None
    ) -> None:
        super().__init__()
        self._parent = parent
        inherited = deadline_of(parent)
        if inherited is not None and (deadline is None or inherited < deadline):
            deadline = inherited
        self.deadline = deadline
        """``time.monotonic()`` value by which everything done under this event must end."""

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


def deadline_of(event: threading.Event | None) -> float | None:
    """The deadline ``event`` carries (a :class:`LinkedEvent`'s), or ``None``."""
    deadline = getattr(event, "deadline", None)
    if isinstance(deadline, int | float) and not isinstance(deadline, bool):
        return float(deadline)
    return None


def past_deadline(event: threading.Event | None) -> bool:
    """Whether the deadline ``event`` carries has passed."""
    deadline = deadline_of(event)
    return deadline is not None and time.monotonic() >= deadline


def deadline_for(timeout: float | None, cancel: threading.Event | None) -> float | None:
    """The deadline of a request: its own ``timeout`` (seconds, given by whoever made the
    request directly: converted here, at the edge, once) or the deadline its cancel event
    carries (the call's), whichever comes first; ``None`` for neither."""
    deadline = deadline_of(cancel)
    if timeout is not None:
        own = time.monotonic() + timeout
        deadline = own if deadline is None else min(own, deadline)
    return deadline

"""The ambient cancel event: :func:`cancel_scope`, read by the transport for every request.

Standard library only, so the chat runtime can open a scope without importing ``requests``.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator

__all__ = ["ambient_cancel_events", "cancel_scope"]

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

"""Catch what the library's threads raise: every uncaught exception of a thread, and stderr.

Python hands an exception that ends a thread to :func:`threading.excepthook`, which prints
its traceback on stderr (Python docs, ``threading.excepthook``). :func:`thread_failures`
replaces that hook for the duration of a ``with`` block and collects each one instead, so a
test can assert that none of the threads the library started ended that way, whatever the
peer did.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections.abc import Iterator

__all__ = ["ThreadFailures", "thread_failures"]


class ThreadFailures(list[str]):
    """The formatted tracebacks of the threads that died with an uncaught exception."""

    def settle(self, names: tuple[str, ...] = ("ollm",), timeout: float = 10.0) -> None:
        """Wait until no thread whose name starts with one of ``names`` is alive (up to
        ``timeout`` seconds), so that a late failure is caught too."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(t.name.startswith(names) for t in threading.enumerate()):
                return
            time.sleep(0.02)


@contextlib.contextmanager
def thread_failures() -> Iterator[ThreadFailures]:
    """Collect the uncaught exceptions of every thread while the block runs."""
    seen = ThreadFailures()
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else "?"
        text = "".join(
            traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)
        )
        seen.append(f"thread {name}: {text}")

    threading.excepthook = hook
    try:
        yield seen
    finally:
        threading.excepthook = previous

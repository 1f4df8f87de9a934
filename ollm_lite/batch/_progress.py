"""Batch progress for people: a redrawn bar on a terminal, periodic plain lines otherwise.

On a TTY one line is redrawn at most ten times a second: a bar, lines finished of the total,
done / failed, the rate over the last half minute and the time left. In a log or a pipe (cron)
a plain line is written every :data:`PLAIN_EVERY_S` seconds and once at the end, so a night's
log stays short. The clock is injectable, so the output is testable.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TextIO

from ._summary import BatchSummary

__all__ = ["BatchProgressPrinter", "human_duration"]

_REDRAW_S = 0.1
PLAIN_EVERY_S = 10.0
_RATE_WINDOW_S = 30.0


def human_duration(seconds: float) -> str:
    """``seconds`` as ``42s``, ``3m05s`` or ``2h07m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class BatchProgressPrinter:
    """Writes a running :class:`BatchSummary` to ``stream``; call it after each line.

    Args:
        stream: Where to write (the CLI uses stderr).
        tty: Redraw a bar (``True``) or write plain lines; default ``stream.isatty()``.
        hosts: Returns a short fleet health note (``"hosts 2/3 up"``) or ``""``.
        clock: Monotonic seconds (injectable for tests).
        width: Bar width in characters.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        tty: bool | None = None,
        hosts: Callable[[], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        width: int = 24,
    ) -> None:
        self.stream = stream
        if tty is None:
            isatty = getattr(stream, "isatty", None)
            tty = bool(isatty()) if isatty is not None else False
        self.tty = tty
        self.hosts = hosts
        self.clock = clock
        self.width = width
        self._last = float("-inf")
        self._history: deque[tuple[float, int]] = deque()
        self._open_line = False
        self._drawn: BatchSummary | None = None

    def __call__(self, summary: BatchSummary) -> None:
        """Show ``summary`` if it is time to (always for the first and last line)."""
        now = self.clock()
        finished = summary.done + summary.failed
        self._history.append((now, finished))
        while len(self._history) > 2 and now - self._history[0][0] > _RATE_WINDOW_S:
            self._history.popleft()
        complete = summary.done + summary.failed + summary.skipped >= summary.total
        every = _REDRAW_S if self.tty else PLAIN_EVERY_S
        if not complete and now - self._last < every and self._last != float("-inf"):
            return
        self._last = now
        self._draw(summary, complete)

    def finish(self, summary: BatchSummary) -> None:
        """Draw the final state (unless just drawn) and end the line."""
        if self._drawn is None or _counts(self._drawn) != _counts(summary):
            self._draw(summary, True)
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False

    def _rate(self) -> float | None:
        if len(self._history) < 2:
            return None
        (t0, n0), (t1, n1) = self._history[0], self._history[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else None

    def line(self, summary: BatchSummary) -> str:
        """The status text (without a bar)."""
        finished = summary.done + summary.failed + summary.skipped
        parts = [
            f"{finished}/{summary.total}",
            f"done {summary.done}",
            f"failed {summary.failed}",
        ]
        if summary.skipped:
            parts.append(f"skipped {summary.skipped}")
        rate = self._rate()
        if rate:
            parts.append(f"{rate:.1f}/s")
            left = summary.total - finished
            if left > 0:
                parts.append(f"ETA {human_duration(left / rate)}")
        note = self.hosts() if self.hosts is not None else ""
        if note:
            parts.append(note)
        return " · ".join(parts) if self.tty else ", ".join(parts)

    def _draw(self, summary: BatchSummary, complete: bool) -> None:
        self._drawn = summary
        text = self.line(summary)
        if self.tty:
            total = max(1, summary.total)
            filled = int(self.width * (summary.done + summary.failed + summary.skipped) / total)
            bar = "#" * filled + "-" * (self.width - filled)
            self.stream.write(f"\r\x1b[2K[{bar}] {text}")
            self._open_line = True
        else:
            self.stream.write(f"batch: {text}\n")
        self.stream.flush()


def _counts(summary: BatchSummary) -> tuple[int, int, int, int]:
    return (summary.total, summary.done, summary.failed, summary.skipped)

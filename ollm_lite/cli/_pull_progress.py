"""Pull progress for the CLI: a redrawn bar on a terminal, plain throttled lines otherwise.

:class:`PullProgressPrinter` is the ``on_progress`` callback of ``pull_model``. On a TTY it
redraws one line per layer (status, bar, percent, bytes, rate) at most ten times a second; in
a log or a pipe it writes a line when the status changes and when a layer passes another 10 %,
so a cron job's log stays short. The clock is injectable, so the output is testable.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TextIO

from ..types import PullProgress

__all__ = ["PullProgressPrinter", "human_bytes"]

_REDRAW_S = 0.1  # TTY redraw interval
_RATE_WINDOW_S = 5.0  # the rate is measured over this much recent history
_STEP_PERCENT = 10  # plain mode: one line per this many percent


def human_bytes(n: float) -> str:
    """``n`` bytes in decimal units, as Ollama shows sizes (``2.0 GB``, ``512 B``)."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")  # pragma: no cover


class PullProgressPrinter:
    """Writes :class:`~ollm_lite.types.PullProgress` updates to ``stream``.

    Args:
        stream: Where to write (the CLI passes stdout).
        tty: Draw a bar (``True``) or plain lines; default: ``stream.isatty()``.
        clock: Seconds, monotonic (injectable for tests).
        width: Bar width in characters.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        width: int = 24,
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.clock = clock
        self.width = width
        self._status: str | None = None
        self._open_line = False  # TTY: a bar line is drawn and not yet ended
        self._last_draw = float("-inf")
        self._bucket = -1
        self._samples: deque[tuple[float, int]] = deque()

    def __call__(self, progress: PullProgress) -> None:
        now = self.clock()
        if progress.status != self._status:
            self._end_line()
            self._status = progress.status
            self._bucket = -1
            self._samples.clear()
            self._last_draw = float("-inf")
            if not progress.total:
                self._write_line(progress.status)
                return
        if not progress.total:
            return
        completed = progress.completed or 0
        self._samples.append((now, completed))
        while len(self._samples) > 2 and now - self._samples[0][0] > _RATE_WINDOW_S:
            self._samples.popleft()
        percent = min(100, int(completed * 100 / progress.total))
        if self.tty:
            done = completed >= progress.total
            if done or now - self._last_draw >= _REDRAW_S:
                self._last_draw = now
                self._draw(progress.status, completed, progress.total, percent)
        else:
            bucket = percent // _STEP_PERCENT
            if bucket > self._bucket:
                self._bucket = bucket
                self._write_line(self._describe(progress.status, completed, progress.total))

    def close(self) -> None:
        """End a bar line left open (call once the pull finished or failed)."""
        self._end_line()

    # ------------------------------------------------------------------ pieces

    def _rate(self) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, c0), (t1, c1) = self._samples[0], self._samples[-1]
        if t1 <= t0 or c1 < c0:
            return None
        return (c1 - c0) / (t1 - t0)

    def _describe(self, status: str, completed: int, total: int) -> str:
        percent = min(100, int(completed * 100 / total))
        text = f"{status}: {percent:3d}% ({human_bytes(completed)} / {human_bytes(total)}"
        rate = self._rate()
        if rate is not None:
            text += f", {human_bytes(rate)}/s"
        return text + ")"

    def _draw(self, status: str, completed: int, total: int, percent: int) -> None:
        filled = self.width * percent // 100
        bar = "#" * filled + "-" * (self.width - filled)
        text = f"{status} [{bar}] {percent:3d}% {human_bytes(completed)}/{human_bytes(total)}"
        rate = self._rate()
        if rate is not None:
            text += f"  {human_bytes(rate)}/s"
        self.stream.write("\r\x1b[K" + text)
        self.stream.flush()
        self._open_line = True

    def _write_line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def _end_line(self) -> None:
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False

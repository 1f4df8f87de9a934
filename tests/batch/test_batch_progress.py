"""The batch progress line: a redrawn bar on a terminal, periodic plain lines in a log."""

from __future__ import annotations

import io

from ollm_lite.batch import BatchSummary
from ollm_lite.batch._progress import PLAIN_EVERY_S, BatchProgressPrinter, human_duration


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _summary(done: int, failed: int = 0, total: int = 100, skipped: int = 0) -> BatchSummary:
    return BatchSummary(total, done, failed, skipped, 0.0)


def test_terminal_bar_shows_done_failed_rate_and_eta() -> None:
    out, clock = io.StringIO(), Clock()
    printer = BatchProgressPrinter(out, tty=True, clock=clock, hosts=lambda: "hosts 1/2 up")
    for i in range(1, 11):
        clock.now = i * 0.5
        printer(_summary(done=i * 2, failed=1))
    text = out.getvalue()
    last = text.split("\r")[-1]
    assert "21/100" in last and "done 20" in last and "failed 1" in last
    assert "/s" in last and "ETA" in last and "hosts 1/2 up" in last
    assert "[" in last and "#" in last
    printer.finish(_summary(done=20, failed=1))
    assert out.getvalue().endswith("\n")


def test_plain_lines_are_periodic_and_final() -> None:
    out, clock = io.StringIO(), Clock()
    printer = BatchProgressPrinter(out, tty=False, clock=clock)
    for i in range(1, 100):
        clock.now = i * 0.5
        printer(_summary(done=i))
    printer(_summary(done=100))
    printer.finish(_summary(done=100))
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert all(line.startswith("batch: ") for line in lines)
    assert len(lines) <= 2 + int(50 / PLAIN_EVERY_S)
    assert lines[-1].startswith("batch: 100/100")
    assert sum(line.startswith("batch: 100/100") for line in lines) == 1


def test_human_duration() -> None:
    assert [human_duration(s) for s in (0, 42, 185, 7620)] == ["0s", "42s", "3m05s", "2h07m"]

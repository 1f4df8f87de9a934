"""Soak run: 1 000 streamed chats and 100 cancellations in one process, then a leak audit.

Not a test (``tests/soak/test_soak.py`` is the short CI version of the same run). Run
``python benchmarks/soak.py [CHATS] [CANCELS]`` from the repository root. The loopback server
runs in a child process; the figures are the client's: open file descriptors, threads,
resident memory and live Python objects after a warm-up and at the end, and the slowest
cancellation. Exits 1 when anything leaked, memory grew by 10 MB or more, or a chat
misbehaved.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.soak_driver import run_soak  # noqa: E402


def main(argv: list[str]) -> int:
    chats = int(argv[1]) if len(argv) > 1 else 1000
    cancels = int(argv[2]) if len(argv) > 2 else 100
    report = run_soak(chats=chats, cancels=cancels)
    print(report.summary())
    for failure in report.failures[:10]:
        print("  failure:", failure)
    ok = (
        not report.failures
        and report.fds_after <= report.fds_before
        and report.threads_after <= report.threads_before
        and report.rss_growth_mb < 10.0
        and report.objects_after - report.objects_before < 200
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

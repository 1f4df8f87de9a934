"""Soak, CI mode: hundreds of streamed chats and dozens of cancellations in one process.

The full run (1 000 chats, 100 cancellations) is ``python benchmarks/soak.py``; this short run
checks the same invariants on every CI build: file descriptors and threads back to their
baseline, resident memory growth well under 10 MB, no chat or cancellation misbehaving, and
every cancellation ending within the 0.5 s bound. The server runs in a child process, so only
the client is measured.
"""

from __future__ import annotations

import pytest
from support.soak_driver import run_soak

CHATS = 300
CANCELS = 30


@pytest.mark.soak
def test_soak_ci() -> None:
    """300 chats over NDJSON and SSE (30 failing on purpose) and 30 cancellations leave
    nothing behind."""
    report = run_soak(chats=CHATS, cancels=CANCELS)
    print(report.summary())
    assert report.failures == []
    assert (report.chats, report.cancels) == (CHATS, CANCELS)
    assert report.errors == CHATS // 10
    assert report.fds_after <= report.fds_before, report.summary()
    assert report.threads_after <= report.threads_before, report.summary()
    assert report.rss_growth_mb < 10.0, report.summary()
    # Caches may settle a little; a per-chat leak would add thousands of objects.
    assert report.objects_after - report.objects_before < 200, report.summary()
    assert report.max_cancel_latency < 0.5, report.summary()

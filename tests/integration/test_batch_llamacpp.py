"""Batches against real llama.cpp servers: a fleet losing a server mid-batch, and a batch
process killed with SIGKILL at random moments, ten times, then resumed.

Both check the promise users rely on: every input line ends up in the output exactly once, as
one valid JSON line. Kept short (tiny answers from Gemma 3 270M) so CI runs them every time.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llamacpp  # scripts/, put on sys.path by conftest.py
import pytest

from ollm_lite.batch import BatchSummary, run_batch
from ollm_lite.fleet import Fleet
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider

pytestmark = pytest.mark.integration

MODEL = llamacpp.MODEL_ALIAS
#: Per-request idle timeout: generous for a busy 2-core machine, short of hanging CI.
REQUEST_TIMEOUT_S = 60.0
ROOT = Path(__file__).resolve().parents[2]


def _input(path: Path, n: int) -> Path:
    lines = [
        {
            "custom_id": f"ticket-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": MODEL,
                "messages": [{"role": "user", "content": f"Label ticket {i}: printer on fire"}],
                "max_tokens": 6,
                "temperature": 0,
            },
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _exactly_once(path: Path, n: int) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    records = [json.loads(line) for line in data.split(b"\n")[:-1]]  # every line valid JSON
    assert sorted(r["custom_id"] for r in records) == sorted(f"ticket-{i}" for i in range(n))
    return records


@pytest.fixture
def two_servers(
    llamacpp_native_server: llamacpp.ServerInfo,
) -> Iterator[list[llamacpp.ServerInfo]]:
    """The session's server and one of this test's own (the one that gets killed)."""
    own = llamacpp.start_server("native", ctx=1024)
    try:
        yield [llamacpp_native_server, own]
    finally:
        llamacpp.stop_server(own.pid)


def test_a_server_killed_mid_batch_every_line_completes_on_the_other(
    two_servers: list[llamacpp.ServerInfo], tmp_path: Path
) -> None:
    first, second = two_servers
    members = [
        OpenAICompatibleProvider(
            base_url=s.base_url, backend="llamacpp", retries=0, timeout=REQUEST_TIMEOUT_S
        )
        for s in two_servers
    ]
    fleet = Fleet(members)
    n = 16
    inp = _input(tmp_path / "in.jsonl", n)
    killed = threading.Event()

    def on_line(summary: BatchSummary) -> None:
        if summary.done >= 3 and not killed.is_set():
            killed.set()
            os.killpg(second.pid, signal.SIGKILL)  # no goodbye: a crash, not a shutdown

    client = type("C", (), {"provider": fleet, "model": MODEL})()
    try:
        summary = run_batch(inp, tmp_path / "out.jsonl", client=client, progress=on_line)
    finally:
        fleet.close()
    assert killed.is_set()
    assert (summary.done, summary.failed) == (n, 0)
    records = _exactly_once(tmp_path / "out.jsonl", n)
    assert all(r["error"] is None and r["response"]["status_code"] == 200 for r in records)
    assert [s.limit for s in fleet.status()] == [1, 1]  # llama-server -np 1: /props total_slots
    states = {s.url: s for s in fleet.status()}
    assert states[first.base_url].served > states[second.base_url].served
    assert states[second.base_url].failures >= 1


def test_sigkill_at_random_points_ten_times_then_resume_is_exactly_once(
    llamacpp_native_server: llamacpp.ServerInfo, tmp_path: Path
) -> None:
    n = 12
    inp = _input(tmp_path / "in.jsonl", n)
    out = tmp_path / "out.jsonl"
    cmd = [
        sys.executable, "-m", "ollm_lite", "--provider", "llamacpp", "--model", MODEL,
        "batch", "run", str(inp), "-o", str(out), "--host", llamacpp_native_server.base_url,
        "--concurrency", "2",
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    rng = random.Random(20261126)
    sizes: list[int] = []
    for _ in range(10):
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path
        )
        time.sleep(rng.uniform(0.2, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        sizes.append(out.read_bytes().count(b"\n") if out.exists() else 0)
    final = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert final.returncode == 0, final.stderr
    records = _exactly_once(out, n)
    assert all(r["error"] is None for r in records)
    assert sizes == sorted(sizes)  # whole lines accumulate across kills, none lost

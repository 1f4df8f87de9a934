"""Helpers of the MCP suite: the fake stdio server's command line and process checks."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

FAKE = Path(__file__).resolve().parent / "fake_mcp_server.py"


def fake_command(mode: str = "ok", arg: str = "") -> list[str]:
    """The fake server's command line in ``mode``."""
    return [sys.executable, str(FAKE), mode, *([arg] if arg else [])]


def alive(pid: int) -> bool:
    """Whether ``pid`` still exists (a zombie counts as gone: it has exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def wait_gone(pid: int, timeout: float = 15.0) -> bool:
    """Whether ``pid`` is gone within ``timeout`` seconds (generous: the machine is shared)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)

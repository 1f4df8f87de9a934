"""The stdio transport's threads end quietly, whatever the server does with its pipes.

A server may start a helper that leaves its process group (``setsid``, as daemons do) and keeps
writing to the stderr it inherited: closing the server then closes the pipe while the stderr
thread is still reading it. The thread must end without a traceback (Python hands an uncaught
exception to ``threading.excepthook``, which prints it on the user's stderr).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.mcp_support import alive
from support.thread_failures import thread_failures

from ollm_lite.mcp import stdio
from ollm_lite.mcp.stdio import StdioTransport

#: Forks a helper into a session of its own that writes to the inherited stderr without end,
#: records its pid, then writes to stderr itself until its stdin closes.
CHATTY = textwrap.dedent(
    """
    import os, sys, time
    pid = os.fork()
    if pid == 0:
        os.setsid()
        while True:
            try:
                os.write(2, b"helper: still here\\n" * 64)
            except OSError:
                os._exit(0)
            time.sleep(0.001)
    open(sys.argv[1], "w").write(str(pid))
    sys.stdin.read()
    """
)


@pytest.fixture
def helper_pid(tmp_path: Path) -> Iterator[Path]:
    """Where the server writes its helper's pid; the helper is killed after the test."""
    path = tmp_path / "helper.pid"
    yield path
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(path.read_text()), signal.SIGKILL)


def test_the_stderr_thread_ends_quietly_when_close_shuts_a_pipe_still_written(
    tmp_path: Path, helper_pid: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper outlives the server and keeps its stderr open: ``close`` gives up waiting
    for the stderr thread and closes the pipe; the thread ends without a traceback (before:
    ``ValueError: I/O operation on closed file``)."""
    monkeypatch.setattr(stdio, "TERM_GRACE_S", 0.3)  # the wait for each thread, kept short
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY)
    transport = StdioTransport([sys.executable, str(script), str(helper_pid)])
    messages: list[Any] = []
    with thread_failures() as failures:
        transport.start(messages.append, messages.append)
        deadline = time.monotonic() + 30
        while not (helper_pid.exists() and helper_pid.read_text()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert alive(int(helper_pid.read_text()))
        time.sleep(0.2)  # the stderr thread is reading the helper's lines
        transport.close()
        os.kill(int(helper_pid.read_text()), signal.SIGKILL)  # the pipe's last writer
        failures.settle(("ollm-mcp",))
    assert failures == []

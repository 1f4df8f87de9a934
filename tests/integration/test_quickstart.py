"""The quick start end to end: scripts/quickstart.sh serves the real model and chats once.

It needs the ``ollm-lite`` command line (``ollm_lite.cli``); the server is started and stopped by
the script itself, so this test also proves nothing is left running afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import llamacpp  # scripts/, put on sys.path by conftest.py
import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def default_sigint() -> None:
    """For ``preexec_fn``: Ctrl-C at its default disposition in the child. A non-interactive
    shell cannot undo a SIGINT ignored on entry, so a test run started with SIGINT ignored
    would otherwise hand the quick start a Ctrl-C that does nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ignore_sigint() -> None:
    """For ``preexec_fn``: start the child as ``nohup`` or a background job would."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def quickstart_env() -> dict[str, str]:
    """The environment for scripts/quickstart.sh (this worktree's code first); skips loudly
    while the command line it needs is missing."""
    if importlib.util.find_spec("ollm_lite.cli") is None:
        pytest.skip("!!! ollm_lite.cli (the ollm-lite command line) has not landed yet !!!")
    env = dict(os.environ, PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def stop_when_ready(
    env: dict[str, str],
    prompt: str,
    preexec_fn: Callable[[], None],
    stop: Callable[[subprocess.Popen[str]], None],
) -> tuple[int, str]:
    """Start the quick start in its own session, call ``stop`` on it once the server is ready
    (the chat is then under way), and return its exit code and the rest of its stderr."""
    proc = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "quickstart.sh"), prompt],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # a terminal's Ctrl-C reaches the whole foreground group
        preexec_fn=preexec_fn,
    )
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "ready at" in line:
                break
        assert any("ready at" in line for line in lines), lines
        stop(proc)
        rest = proc.stderr.read()
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return code, rest


def test_quickstart_streams_an_answer_and_stops_the_server(llamacpp_py_server):
    """One command: install (cached), serve, a visible answer on stdout, server stopped."""
    env = quickstart_env()
    before = {s.pid for s in llamacpp.recorded_servers()}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "quickstart.sh"), "Write a haiku about the sea."],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.strip(), done.stderr  # the model's streamed answer
    assert "server stopped" in done.stderr
    assert {s.pid for s in llamacpp.recorded_servers()} == before


def test_quickstart_ctrl_c_still_stops_the_server(llamacpp_py_server):
    """Ctrl-C while chatting: exit 130 and the server is stopped all the same."""
    env = quickstart_env()
    before = {s.pid for s in llamacpp.recorded_servers()}
    long_prompt = "Tell a very long story. " + " ".join(f"word{i}" for i in range(300))
    code, rest = stop_when_ready(
        env,
        long_prompt,
        default_sigint,  # the test needs Ctrl-C, whatever this run inherited
        lambda proc: os.killpg(proc.pid, signal.SIGINT),
    )
    assert code == 130, rest
    assert "server stopped" in rest
    assert {s.pid for s in llamacpp.recorded_servers()} == before


def test_quickstart_started_with_sigint_ignored_stops_the_server_on_sigterm(llamacpp_py_server):
    """Started with SIGINT ignored (nohup, a background job), the quick start is stopped with
    SIGTERM: it ends the chat, stops the server and exits 143 (128 + SIGTERM)."""
    env = quickstart_env()
    before = {s.pid for s in llamacpp.recorded_servers()}
    long_prompt = " ".join(f"word{i}" for i in range(300))
    code, rest = stop_when_ready(
        env,
        long_prompt,
        ignore_sigint,
        # the script execs python: this is the quick start
        lambda proc: proc.send_signal(signal.SIGTERM),
    )
    assert code == 128 + signal.SIGTERM, rest
    assert "server stopped" in rest
    assert {s.pid for s in llamacpp.recorded_servers()} == before

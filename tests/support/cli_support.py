"""Running ``python -m ollm_lite`` as a subprocess with a clean, offline environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

_PROVIDER_VARS = ("OLLM_", "OLLAMA_", "VLLM_", "OPENAI_COMPATIBLE_", "GEMINI_", "XDG_CONFIG")


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The test process's environment without provider settings, HOME pointing at ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_PROVIDER_VARS)}
    env.update(
        HOME=str(home),
        PYTHONUNBUFFERED="1",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
    )
    env.update(extra)
    return env


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ollm_lite", *args]


def run(
    home: Path,
    *args: str,
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 30,
) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion (cwd = the repository root)."""
    return subprocess.run(
        command(*args),
        cwd=ROOT,
        env=env if env is not None else cli_env(home),
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


def default_sigint() -> None:
    """For ``preexec_fn``: the child gets Ctrl-C's default disposition, however this test run
    was started (a run with SIGINT ignored would pass the ignore on to every child)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def popen(home: Path, *args: str, **kw: Any) -> subprocess.Popen[bytes]:
    """Start the CLI with pipes (bytes; the caller reads incrementally) and SIGINT at its
    default disposition (``preexec_fn=None`` keeps the inherited one)."""
    kw.setdefault("preexec_fn", default_sigint)
    return subprocess.Popen(
        command(*args),
        cwd=ROOT,
        env=kw.pop("env", None) or cli_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def assert_one_line_error(stderr: str, code: str) -> None:
    """stderr is exactly one line naming ``code``, without a traceback."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"ollm-lite: error [{code}]: "), stderr
    assert "Traceback" not in stderr

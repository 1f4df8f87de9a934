"""The code stays ``ruff`` and ``mypy --strict`` clean: CI runs both through the test suite.

Both tools come with the ``dev`` extra (the README's test command installs it), so they are
skipped only where someone runs the suite without that extra, and then loudly.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_tool(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: install the dev extra (pip install -e '.[dev]')")
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ruff_check_is_clean() -> None:
    done = run_tool("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean() -> None:
    done = run_tool("ruff", "format", "--check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_is_clean() -> None:
    # The configuration (strict, files = ollm_lite) lives in setup.cfg.
    done = run_tool("mypy", "--no-incremental")
    assert done.returncode == 0, done.stdout + done.stderr

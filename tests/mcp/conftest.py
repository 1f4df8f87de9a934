"""Fixtures of the MCP suite: the real servers, installed on first use.

The real servers (PyPI ``mcp-server-time`` and ``mcp-server-git``, npm
``@modelcontextprotocol/server-everything``) are installed, pinned, by
``scripts/mcp_servers.py`` into the shared cache on first use; a registry that cannot be
reached skips those tests with a loud reason, any other install failure is an error.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import mcp_servers  # scripts/ is not a package: found through the sys.path entry above

_installed: dict[str, list[str]] = {}


def _install(name: mcp_servers.ServerName) -> list[str]:
    if name not in _installed:
        try:
            mcp_servers.install([name])
        except mcp_servers.llamacpp.ScriptError as exc:
            text = str(exc).lower()
            offline = any(
                word in text
                for word in (
                    "network",
                    "resolve",
                    "resolution",
                    "connection",
                    "could not find a version",
                    "enotfound",
                    "eai_again",
                    "timed out",
                )
            )
            if offline:
                pytest.skip(
                    f"!!! REAL MCP SERVER TESTS SKIPPED: the package registry is unreachable "
                    f"({name}): {exc} !!!"
                )
            raise
        _installed[name] = mcp_servers.command(name)
    return _installed[name]


@pytest.fixture(scope="session")
def time_server_command() -> list[str]:
    """``mcp-server-time`` (PyPI, pinned) over stdio."""
    return _install("time")


@pytest.fixture(scope="session")
def git_server_command() -> list[str]:
    """``mcp-server-git`` (PyPI, pinned) over stdio."""
    return _install("git")


@pytest.fixture(scope="session")
def everything_command() -> list[str]:
    """``@modelcontextprotocol/server-everything`` (npm, pinned) over stdio."""
    return _install("everything")


@pytest.fixture
def fake_log(tmp_path: Path) -> Path:
    """A file for the fake server's record of what it received (pass as ``$FAKE_MCP_LOG``)."""
    return tmp_path / "received.jsonl"

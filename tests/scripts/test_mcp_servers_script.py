"""scripts/mcp_servers.py: pinned installs in the cache, the command lines, the PATH shims.

The installs themselves run once per cache (the MCP suite's fixtures use the same function);
here the empty-cache behaviour runs in a temporary cache root, and the shims are checked to
start the real servers by their usual names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import mcp_servers  # scripts/ is not a package: found through the sys.path entry above

SCRIPT = Path(mcp_servers.__file__)


def test_versions_are_pinned() -> None:
    for build in mcp_servers.BUILDS.values():
        assert build.version and build.version[0].isdigit()
        assert build.version in build.build.requirement


def test_command_of_a_server_not_installed_says_how_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "OLLM_LITE_CACHE": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "command", "time"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "mcp_servers.py install" in done.stderr


def test_install_writes_commands_and_shims() -> None:
    try:
        folders = mcp_servers.install(["time"])
    except mcp_servers.llamacpp.ScriptError as exc:  # pragma: no cover - offline machines
        pytest.skip(f"!!! PyPI unreachable, mcp-server-time not installed: {exc} !!!")
    assert (folders["time"] / ".complete").is_file()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "command", "time"], capture_output=True, text=True
    )
    command = json.loads(done.stdout)
    assert command == mcp_servers.command("time") and Path(command[0]).is_file()
    shim = mcp_servers.mcp_root() / "bin" / "mcp-server-time"
    assert os.access(shim, os.X_OK)
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})  # fmt: skip
    answer = subprocess.run(
        [str(shim)], input=line + "\n", capture_output=True, text=True, timeout=60
    )
    assert json.loads(answer.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "mcp-time"

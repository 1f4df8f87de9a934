"""The client against real MCP servers, installed pinned by ``scripts/mcp_servers.py``.

* ``mcp-server-time`` (PyPI): ``get_current_time``, ``convert_time``;
* ``mcp-server-git`` (PyPI): ``git_status``, ``git_log`` (and ``git_add``/``git_commit``) on
  a temporary repository;
* ``@modelcontextprotocol/server-everything`` (npm), over stdio and over streamable HTTP:
  ``echo``, ``get-sum``, ``trigger-long-running-operation`` with progress, an erroring call,
  ``get-structured-content``, ``get-tiny-image``, ``get-resource-reference``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from support.mcp_support import wait_gone

from ollm_lite import McpServer
from ollm_lite.errors import ConnectionFailed
from ollm_lite.tools import ToolRegistry
from ollm_lite.types import ToolCall


def test_time_server(time_server_command: list[str]) -> None:
    with McpServer.stdio(time_server_command) as server:
        assert server.protocol_version in ("2025-06-18", "2025-11-25")
        names = {t.name for t in server.tools()}
        assert {"get_current_time", "convert_time"} <= names
        now = server.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
        assert now.ok, now.error
        assert isinstance(now.data, dict) and now.data["timezone"] == "Asia/Tokyo"
        assert datetime.fromisoformat(now.data["datetime"]).utcoffset().total_seconds() == 9 * 3600
        converted = server.call_tool(
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Kolkata"},
        )
        assert converted.ok, converted.error
        assert converted.data["target"]["datetime"].endswith("17:30:00+05:30")
        bad = server.call_tool("get_current_time", {"timezone": "Not/AZone"})
        assert not bad.ok and bad.error is not None and bad.error.code == "TOOL_EXECUTION_FAILED"
        pid = server.pid
    assert pid is not None and wait_gone(pid)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git = shutil.which("git")
    if git is None:
        pytest.skip("!!! git is not installed: the git MCP server tests need it !!!")
    path = tmp_path / "repo"
    path.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid"}
    env.update(GIT_COMMITTER_NAME="T", GIT_COMMITTER_EMAIL="t@example.invalid")
    for args in (["init", "-q", "-b", "main"], ["config", "user.name", "T"]):
        subprocess.run([git, *args], cwd=path, check=True, env=env)
    subprocess.run([git, "config", "user.email", "t@example.invalid"], cwd=path, check=True)
    (path / "a.txt").write_text("first\n")
    subprocess.run([git, "add", "a.txt"], cwd=path, check=True, env=env)
    subprocess.run([git, "commit", "-q", "-m", "first commit"], cwd=path, check=True, env=env)
    (path / "b.txt").write_text("untracked\n")
    return path


def test_git_server(git_server_command: list[str], repo: Path) -> None:
    with McpServer.stdio([*git_server_command, "--repository", str(repo)], cwd=repo) as server:
        registry = ToolRegistry(server.tools())
        assert {"git_status", "git_log", "git_add", "git_commit"} <= set(registry.names())
        status = registry.execute(
            ToolCall.from_arguments("1", "git_status", {"repo_path": str(repo)})
        )
        assert status.ok, status.error
        assert "b.txt" in str(status.data)
        log = registry.execute(ToolCall.from_arguments("2", "git_log", {"repo_path": str(repo)}))
        assert log.ok, log.error
        assert "first commit" in str(log.data)
        added = server.call_tool("git_add", {"repo_path": str(repo), "files": ["b.txt"]})
        assert added.ok, added.error
        committed = server.call_tool("git_commit", {"repo_path": str(repo), "message": "second"})
        assert committed.ok, committed.error
        log = server.call_tool("git_log", {"repo_path": str(repo), "max_count": 1})
        assert "second" in str(log.data) and "first commit" not in str(log.data)
        missing = server.call_tool("git_status", {"repo_path": str(repo / "nope")})
        assert not missing.ok


def _exercise_everything(server: McpServer) -> None:
    names = {t.name for t in server.tools()}
    assert {"echo", "get-sum", "trigger-long-running-operation", "get-tiny-image"} <= names
    assert server.call_tool("echo", {"message": "héllo\u2028"}).data == "Echo: héllo\u2028"
    assert "3" in server.call_tool("get-sum", {"a": 1, "b": 2}).data
    seen: list[tuple[float, float | None, str | None]] = []
    long = server.call_tool(
        "trigger-long-running-operation",
        {"duration": 1, "steps": 3},
        on_progress=lambda *a: seen.append(a),
    )
    assert long.ok, long.error
    assert [s[0] for s in seen] == [1.0, 2.0, 3.0] and all(s[1] == 3.0 for s in seen)
    erroring = server.call_tool("get-sum", {"a": "one"})
    assert not erroring.ok and erroring.error is not None
    assert erroring.error.code == "TOOL_EXECUTION_FAILED"
    structured = server.call_tool("get-structured-content", {"location": "Chicago"})
    assert structured.ok and isinstance(structured.data, dict)
    assert {"temperature", "conditions", "humidity"} <= set(structured.data)
    image = server.call_tool("get-tiny-image", {})
    kinds = [item["type"] for item in image.data]
    assert "image" in kinds
    picture = next(item for item in image.data if item["type"] == "image")
    assert picture["mimeType"] == "image/png" and picture["data"].startswith("iVBOR")
    resource = server.call_tool("get-resource-reference", {"resourceType": "Text", "resourceId": 1})
    assert any(item["type"] == "resource" and item.get("uri") for item in resource.data)
    timed_out = server.call_tool(
        "trigger-long-running-operation", {"duration": 30, "steps": 30}, timeout=1.0
    )
    assert not timed_out.ok and timed_out.error is not None
    assert timed_out.error.code == "TOOL_TIMEOUT"
    server.ping()


def test_everything_server_over_stdio(everything_command: list[str]) -> None:
    with McpServer.stdio(everything_command) as server:
        assert server.protocol_version == "2025-11-25"
        _exercise_everything(server)
        results: list[str] = []
        threads = [
            threading.Thread(
                target=lambda i=i: results.append(
                    server.call_tool("echo", {"message": str(i)}).data
                )
            )
            for i in range(10)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(results) == sorted(f"Echo: {i}" for i in range(10))
        pid = server.pid
    assert pid is not None and wait_gone(pid)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def everything_http(everything_command: list[str]) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [*everything_command[:-1], "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_everything_server_over_streamable_http(everything_http: str) -> None:
    with McpServer.http(everything_http) as server:
        assert server.protocol_version == "2025-11-25"
        transport = server._session.transport
        assert getattr(transport, "session_id", None)  # the server gave one; we send it back
        _exercise_everything(server)


def test_http_to_nothing_is_connection_failed() -> None:
    with pytest.raises(ConnectionFailed):
        McpServer.http(f"http://127.0.0.1:{_free_port()}/mcp", start_timeout=10)

"""``[mcp.servers.NAME]`` in the configuration file, ``ollm-lite mcp list NAME`` and
``ollm-lite chat --tools NAME`` (as subprocesses, against the fake server and a loopback
Ollama-shaped model server)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

from support.cli_support import run
from support.mcp_support import fake_command
from support.ollama_support import Seen, chunk, final, lines, serve

from ollm_lite.config import load_config, redacted, validate_config


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def _write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(body)
    return path


def test_servers_load_and_validate(tmp_path: Path) -> None:
    path = _write_config(
        tmp_path,
        f"""
[mcp.servers.fake]
command = {_toml_list(fake_command())}
env = {{ A = "1" }}
timeout = 5
[mcp.servers.web]
url = "https://mcp.example.invalid/mcp"
headers = {{ Authorization = "Bearer ${{TOKEN:-s3cr3t-token}}" }}
""",
    )
    config = load_config(path, env={})
    assert set(config.mcp_servers) == {"fake", "web"}
    assert config.mcp_servers["fake"].command == fake_command()
    assert config.mcp_servers["fake"].env == {"A": "1"}
    assert config.mcp_servers["web"].headers == {"Authorization": "Bearer s3cr3t-token"}
    assert validate_config(config) == []
    shown = json.dumps(redacted(config))
    assert "s3cr3t-token" not in shown and "mcp.example.invalid" in shown


def test_bad_tables_are_reported_with_their_paths(tmp_path: Path) -> None:
    path = _write_config(
        tmp_path,
        """
[mcp]
other = 1
[mcp.servers.none]
timeout = 5
[mcp.servers.both]
command = ["x"]
url = "http://h/mcp"
[mcp.servers.badcmd]
command = "mcp-server-time"
[mcp.servers.badurl]
url = "ftp://h"
env = { A = "1" }
[mcp.servers.badtimeout]
command = ["x"]
timeout = -1
headers = { A = "b" }
[mcp.servers.typo]
comand = ["x"]
command = ["x"]
""",
    )
    paths = {issue.path for issue in validate_config(load_config(path, env={}))}
    assert {
        "mcp.other",
        "mcp.servers.none",
        "mcp.servers.both",
        "mcp.servers.badcmd.command",
        "mcp.servers.badurl.url",
        "mcp.servers.badurl.env",
        "mcp.servers.badtimeout.timeout",
        "mcp.servers.badtimeout.headers",
        "mcp.servers.typo.comand",
    } <= paths


def test_mcp_list_prints_one_line_per_tool(tmp_path: Path) -> None:
    config = _write_config(
        tmp_path, f"[mcp.servers.fake]\ncommand = {_toml_list(fake_command())}\n"
    )
    done = run(tmp_path, "mcp", "list", "fake", "--config", str(config), timeout=120)
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert len(rows) == 10
    assert rows[0].split(None, 1) == ["echo", "Echo the text."]
    assert rows[1].split(None, 1) == ["add", "Add two numbers."]


def test_mcp_list_of_an_unknown_name_exits_2(tmp_path: Path) -> None:
    config = _write_config(
        tmp_path, f"[mcp.servers.fake]\ncommand = {_toml_list(fake_command())}\n"
    )
    done = run(tmp_path, "mcp", "list", "nope", "--config", str(config))
    assert done.returncode == 2
    assert "nope" in done.stderr and "fake" in done.stderr
    assert run(tmp_path, "mcp", "--config", str(config)).returncode == 2


def test_mcp_list_of_a_server_that_fails_exits_1(tmp_path: Path) -> None:
    command = _toml_list(fake_command("exit"))
    config = _write_config(tmp_path, f"[mcp.servers.broken]\ncommand = {command}\n")
    done = run(tmp_path, "mcp", "list", "broken", "--config", str(config), timeout=120)
    assert done.returncode == 1
    assert "CONNECTION_FAILED" in done.stderr and "Traceback" not in done.stderr


def _tool_then_text(model: str) -> Any:
    calls = {"n": 0}
    lock = threading.Lock()

    def handler(client: socket.socket, req: Seen) -> None:
        with lock:
            calls["n"] += 1
            first = calls["n"] == 1
        if first:
            call = {"function": {"name": "echo", "arguments": {"text": "from mcp"}}}
            body = lines([chunk(model, 0, tool_calls=[call]), final(model, 1)])
        else:
            body = lines([chunk(model, 0, content="The tool said: from mcp"), final(model, 1)])
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
        data = b"".join(body)
        client.sendall(head + b"Content-Length: %d\r\n\r\n" % len(data) + data)

    return handler


def test_chat_with_tools_from_a_configured_server(tmp_path: Path) -> None:
    with serve({("POST", "/api/chat"): _tool_then_text("m")}) as ollama:
        config = _write_config(
            tmp_path,
            f'provider = "local"\nmodel = "m"\n[providers.local]\nbase_url = "{ollama.url}"\n'
            f"[mcp.servers.fake]\ncommand = {_toml_list(fake_command())}\n",
        )
        done = run(
            tmp_path, "chat", "say it", "--tools", "fake", "--config", str(config), timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert "The tool said: from mcp" in done.stdout
        chats = [s.json for s in ollama.seen if s.path == "/api/chat"]
        assert {t["function"]["name"] for t in chats[0]["tools"]} >= {"echo", "add", "slow"}
        tool_message = next(m for m in chats[1]["messages"] if m["role"] == "tool")
        assert json.loads(tool_message["content"]) == {"ok": True, "data": "from mcp"}


def test_chat_with_an_unknown_tools_name_exits_2(tmp_path: Path) -> None:
    config = _write_config(tmp_path, 'provider = "local"\nmodel = "m"\n')
    done = run(tmp_path, "chat", "hi", "--tools", "nope,other", "--config", str(config))
    assert done.returncode == 2
    assert "nope" in done.stderr

"""Never a secret in the log: keys, header values, URL user-info, MCP env and header values —
also inside error messages and answers that echo them. A canary grep of the file and its WAL."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import ollama_support as oll
from support.log_support import file_bytes, logged

import ollm_lite

KEY = "sk-canary-KEY-7f3a9c1e5b"
HEADER = "hdr-canary-VALUE-2d8e4f"
PASSWORD = "pw-canary-USERINFO-9b1c"
MCP_ENV = "mcp-canary-ENV-4a6d2e"
MCP_HEADER = "mcp-canary-HEADER-8c3f1a"
CANARIES = (KEY, HEADER, PASSWORD, MCP_ENV, MCP_HEADER)


def _echo_everything() -> list[bytes]:
    words = [f"echo {secret} " for secret in CANARIES]
    return oll.text_transcript(words=words)


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(
        "[mcp.servers.tool]\n"
        'command = ["true"]\n'
        f'env = {{ PLAIN_SETTING = "{MCP_ENV}" }}\n'
        "[mcp.servers.remote]\n"
        'url = "http://127.0.0.1:9/mcp"\n'
        f'headers = {{ X-Whatever = "{MCP_HEADER}" }}\n',
        "utf-8",
    )
    return config


def test_no_secret_reaches_the_file_or_its_wal(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    routes = {("POST", "/api/chat"): oll.stream(_echo_everything())}
    with oll.serve(routes) as server:
        host = server.url.replace("http://", f"http://user:{PASSWORD}@")
        llm = ollm_lite.connect(
            "local", host=host, api_key=KEY, model="llama3.2", log=str(path),
            config=_config(tmp_path),
        )  # fmt: skip
        answer = llm.ask(f"repeat {KEY} and {HEADER}", headers={"X-Trace": HEADER})
        llm.close()
    assert KEY in answer  # the caller gets the answer unchanged
    [call] = logged(path)
    data = file_bytes(path)
    for secret in CANARIES:
        assert secret.encode() not in data, secret
    assert "***" in call.text and "***" in call.messages[-1]["content"]
    assert call.host is not None and "user" not in call.host and PASSWORD not in call.host
    assert "headers" not in call.options


def test_an_error_echoing_the_key_is_stored_masked(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    routes = {("POST", "/api/chat"): oll.json_answer({"error": f"unknown key {KEY}"}, 400)}
    with oll.serve(routes) as server:
        llm = ollm_lite.connect(
            "local", host=server.url, api_key=KEY, model="llama3.2", log=str(path)
        )
        with pytest.raises(ollm_lite.OllmError):
            llm.ask("hello")
        llm.close()
    [call] = logged(path)
    assert call.error_code is not None
    assert KEY.encode() not in file_bytes(path)

"""The stdio client against the scripted fake server: protocol features and fault cases.

Every fault ends in a typed error (or an ``ok=False`` tool result) within its bound, and the
server process is gone afterwards (checked with ``os.kill(pid, 0)``, zombies counted as gone).
Bounds are generous: these tests assert outcomes, not speed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.mcp_support import alive, fake_command, wait_gone

from ollm_lite import McpServer
from ollm_lite.errors import BadResponse, ConfigError, ConnectionFailed, RequestTimeout
from ollm_lite.mcp import LATEST_PROTOCOL_VERSION, PROTOCOL_VERSIONS
from ollm_lite.mcp.stdio import StdioTransport


def _received(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_handshake_offers_the_newest_version_and_sends_initialized(fake_log: Path) -> None:
    """initialize carries the newest version, clientInfo and capabilities; then initialized."""
    with McpServer.stdio(fake_command(), env={"FAKE_MCP_LOG": str(fake_log)}) as server:
        assert server.protocol_version == LATEST_PROTOCOL_VERSION
        assert server.name == "fake"
        server.ping()
    received = _received(fake_log)
    init = received[0]
    assert init["method"] == "initialize"
    assert init["params"]["protocolVersion"] == PROTOCOL_VERSIONS[0] == "2025-11-25"
    assert init["params"]["clientInfo"]["name"] == "ollm-lite"
    assert init["params"]["capabilities"] == {}
    assert received[1] == {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_each_implemented_version_is_accepted(version: str) -> None:
    with McpServer.stdio(fake_command("version", version)) as server:
        assert server.protocol_version == version


@pytest.mark.parametrize("version", ["2024-11-05", "2099-01-01", ""])
def test_an_unknown_version_is_a_config_error_and_the_server_is_closed(version: str) -> None:
    transports: list[StdioTransport] = []
    original = StdioTransport.start

    def spy(self: StdioTransport, *a: Any) -> None:
        transports.append(self)
        original(self, *a)

    StdioTransport.start = spy  # type: ignore[method-assign]
    try:
        with pytest.raises(ConfigError) as info:
            McpServer.stdio(fake_command("version", version or "none"))
    finally:
        StdioTransport.start = original  # type: ignore[method-assign]
    assert "2025-11-25" in info.value.message
    assert transports and transports[0].pid is not None
    assert wait_gone(transports[0].pid)


def test_a_stateless_only_server_is_a_clear_config_error() -> None:
    with pytest.raises(ConfigError, match="stateless"):
        McpServer.stdio(fake_command("stateless"))


def test_tools_list_follows_every_page_and_keeps_input_schemas() -> None:
    with McpServer.stdio(fake_command()) as server:
        tools = server.tools()
    names = [t.name for t in tools]
    assert names[:3] == ["echo", "add", "slow"]
    assert len(names) == 10  # five pages of two
    add = tools[1]
    assert add.parameters == {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    }
    assert add.description == "Add two numbers."
    dotted = tools[-1]
    assert dotted.name == "dotted_name_x" and dotted.remote_name == "dotted.name/x"


def test_calls_map_results() -> None:
    with McpServer.stdio(fake_command()) as server:
        assert server.call_tool("add", {"a": 2, "b": 3}).data == "5"
        failed = server.call_tool("fail")
        assert not failed.ok and failed.error is not None
        assert failed.error.code == "TOOL_EXECUTION_FAILED" and "it broke" in failed.error.message
        assert server.call_tool("structured").data == {"t": 1}
        image = server.call_tool("image").data
        assert image == [{"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}]
        unknown = server.call_tool("nope")
        assert not unknown.ok and unknown.error is not None
        assert unknown.error.details is not None and unknown.error.details["code"] == "MCP_ERROR"
        dotted = {t.name: t for t in server.tools()}["dotted_name_x"].as_tool()
        assert dotted.fn().data == "dotted"


def test_parallel_calls_from_many_threads_get_their_own_answers() -> None:
    """Ids are matched to answers on one connection, whatever the order they come back in."""
    with McpServer.stdio(fake_command()) as server:
        results: dict[int, Any] = {}

        def work(i: int) -> None:
            results[i] = server.call_tool("echo", {"text": f"n{i}"}).data

        threads = [threading.Thread(target=work, args=(i,)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert results == {i: f"n{i}" for i in range(40)}


def test_answers_out_of_order_reach_the_right_callers() -> None:
    with McpServer.stdio(fake_command("out_of_order")) as server:
        results: dict[str, Any] = {}

        def work(text: str) -> None:
            results[text] = server.call_tool("echo", {"text": text}).data

        first = threading.Thread(target=work, args=("first",))
        first.start()
        time.sleep(0.3)  # ordering of the two requests only; no time is asserted
        second = threading.Thread(target=work, args=("second",))
        second.start()
        first.join(60)
        second.join(60)
        pid = server.pid
    assert results == {"first": "first", "second": "second"}
    assert pid is not None and wait_gone(pid)


def test_a_timeout_cancels_the_call_on_the_server(fake_log: Path) -> None:
    env = {"FAKE_MCP_LOG": str(fake_log)}
    with McpServer.stdio(fake_command(), env=env, timeout=1.0) as server:
        result = server.call_tool("slow", {"seconds": 60})
        assert not result.ok and result.error is not None
        assert result.error.code == "TOOL_TIMEOUT"
        assert server.call_tool("echo", {"text": "still here"}).data == "still here"
    call = next(m for m in _received(fake_log) if m.get("method") == "tools/call")
    cancels = [m for m in _received(fake_log) if m.get("method") == "notifications/cancelled"]
    assert cancels and cancels[0]["params"]["requestId"] == call["id"]
    assert cancels[0]["params"]["reason"]


def test_the_cancel_event_cancels_the_call_on_the_server(fake_log: Path) -> None:
    env = {"FAKE_MCP_LOG": str(fake_log)}
    cancel = threading.Event()
    with McpServer.stdio(fake_command(), env=env) as server:
        threading.Timer(0.5, cancel.set).start()
        result = server.call_tool("slow", {"seconds": 60}, cancel=cancel)
    assert not result.ok and result.error is not None and result.error.code == "CANCELLED"
    assert any(m.get("method") == "notifications/cancelled" for m in _received(fake_log))


def test_progress_notifications_reach_the_callback() -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    with McpServer.stdio(fake_command()) as server:
        result = server.call_tool("progress", on_progress=lambda *a: seen.append(a))
    assert result.data == "done"
    assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


def test_server_requests_logs_and_list_changed(
    fake_log: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Unknown server requests get -32601, ping gets {}, logs reach logging, lists refresh."""
    env = {"FAKE_MCP_LOG": str(fake_log)}
    caplog.set_level(logging.DEBUG, logger="ollm_lite.mcp")
    with McpServer.stdio(fake_command(), env=env) as server:
        before = server.tools()
        assert server.call_tool("ask_client").data == "asked"
        deadline = time.monotonic() + 30
        while server._tools is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.tools() == [
            type(t)(t.name, t.description, t.parameters, server, t.remote_name) for t in before
        ]
        server.ping()  # the answers below were written before this round trip completed
    answers = {m.get("id"): m for m in _received(fake_log) if "method" not in m}
    assert answers["srv-1"]["error"]["code"] == -32601
    assert answers["srv-2"]["result"] == {}
    lists = [m for m in _received(fake_log) if m.get("method") == "tools/list"]
    assert len(lists) == 10  # listed twice, five pages each
    warnings = [r for r in caplog.records if r.name == "ollm_lite.mcp.server"]
    assert any("careful" in r.getMessage() and r.levelno == logging.WARNING for r in warnings)


# --------------------------------------------------------------------------- faults


def test_a_server_that_exits_at_start_is_connection_failed_with_its_stderr() -> None:
    with pytest.raises(ConnectionFailed) as info:
        McpServer.stdio(fake_command("exit"), start_timeout=60)
    assert "exited with code 3" in info.value.message
    assert "missing configuration" in info.value.message


def test_a_missing_command_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot start"):
        McpServer.stdio(["/nonexistent/mcp-server-nothing"])
    with pytest.raises(ConfigError):
        McpServer.stdio([])
    with pytest.raises(ConfigError):
        McpServer.stdio("mcp-server-time")  # a string, not a list


def _record_started_pids(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pid of every stdio server started from now on, in start order."""
    pids: list[int] = []
    original = StdioTransport.start

    def spy(self: StdioTransport, *a: Any) -> None:
        original(self, *a)
        assert self.pid is not None
        pids.append(self.pid)

    monkeypatch.setattr(StdioTransport, "start", spy)
    return pids


def test_garbage_on_stdout_is_a_bad_response_within_start_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pids = _record_started_pids(monkeypatch)
    with pytest.raises(BadResponse, match="not MCP"):
        McpServer.stdio(fake_command("garbage"), start_timeout=3)
    assert wait_gone(pids[0])


def test_a_server_that_never_answers_times_out_and_is_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pids = _record_started_pids(monkeypatch)
    with pytest.raises(RequestTimeout, match="initialize"):
        McpServer.stdio(fake_command("silent"), start_timeout=2)
    assert wait_gone(pids[0])


def test_a_flood_of_notifications_does_not_stop_the_answer() -> None:
    with McpServer.stdio(fake_command("flood", "20000"), timeout=120) as server:
        assert server.call_tool("echo", {"text": "after the flood"}).data == "after the flood"
        pid = server.pid
    assert pid is not None and wait_gone(pid)


def test_a_flood_without_an_answer_times_out() -> None:
    with McpServer.stdio(fake_command("flood", "1000000"), timeout=2.0) as server:
        result = server.call_tool("echo", {"text": "never"})
        assert not result.ok and result.error is not None
        assert result.error.code == "TOOL_TIMEOUT"
        pid = server.pid
    assert pid is not None and wait_gone(pid)


def test_a_20_mb_result_arrives_whole() -> None:
    size = 20 * 1000 * 1000
    with McpServer.stdio(fake_command(), timeout=120) as server:
        result = server.call_tool("big", {"size": size})
        assert result.ok and isinstance(result.data, str) and len(result.data) == size
        assert server.call_tool("echo", {"text": "next"}).data == "next"
        pid = server.pid
    assert pid is not None and wait_gone(pid)


def test_a_result_over_the_limit_is_an_error_not_a_truncation() -> None:
    with McpServer.stdio(fake_command(), max_message_bytes=1_000_000, timeout=120) as server:
        result = server.call_tool("big", {"size": 2_000_000})
        assert not result.ok and result.error is not None
        assert result.error.code == "TOOL_RESULT_TOO_LARGE"
        assert server.call_tool("echo", {"text": "next"}).data == "next"


def test_a_result_over_64_mib_is_an_error() -> None:
    with McpServer.stdio(fake_command(), timeout=300) as server:
        result = server.call_tool("big", {"size": 64 * 1024 * 1024 + 10})
        assert not result.ok and result.error is not None
        assert result.error.code == "TOOL_RESULT_TOO_LARGE"


def test_a_server_that_dies_mid_call_gives_a_tool_error_at_once() -> None:
    server = McpServer.stdio(fake_command("die_on_call"), timeout=600)
    try:
        started = time.monotonic()
        result = server.call_tool("slow", {"seconds": 600})
        assert time.monotonic() - started < 300  # not the 600 s timeout: the exit ended it
        assert not result.ok and result.error is not None
        assert result.error.code == "TOOL_EXECUTION_FAILED"
        assert result.error.details is not None
        assert result.error.details["code"] == "CONNECTION_FAILED"
        assert "exited with code 7" in result.error.message
        later = server.call_tool("echo", {"text": "x"})
        assert not later.ok
    finally:
        server.close()


def test_close_kills_a_server_that_ignores_eof_and_sigterm() -> None:
    server = McpServer.stdio(fake_command("ignore_term"))
    pid = server.pid
    assert pid is not None and alive(pid)
    server.close()
    assert not alive(pid)
    server.close()  # twice is fine


def test_close_leaves_no_process_and_no_thread() -> None:
    before = {t.ident for t in threading.enumerate()}
    server = McpServer.stdio(fake_command())
    pid = server.pid
    assert pid is not None
    server.tools()
    server.close()
    assert not alive(pid)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        extra = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
        if not extra:
            break
        time.sleep(0.05)
    assert not extra, extra

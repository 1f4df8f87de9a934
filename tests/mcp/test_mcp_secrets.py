"""What the caller configures an MCP server with is a secret; what the server says is text.

The values of a stdio server's ``env`` and of an HTTP server's ``headers`` appear in no
exception (message, details, chain), ``repr``, log record or CLI output, however the server
echoes them; an HTTP server's headers do not follow a redirect to another host; and the CLI
prints a server's descriptions and error text without control characters (docs/mcp.md).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from support.cli_support import run
from support.log_records import Records, captured_records

from ollm_lite import McpServer
from ollm_lite.errors import AuthenticationError, OllmError

TOKEN = "mcp-CANARY-9d2e77aa01"

#: A stdio MCP server steered by its environment: ``LEAK`` names a variable it prints to
#: stderr before exiting 3; ``SAY`` names one it puts in a log notification, in garbage on
#: stdout and in the error answering ``tools/list``; ``DESC`` is its one tool's description;
#: ``ERRMSG`` the message of the error answering ``tools/list``, as a JSON string (a
#: configured ``env`` value is masked wherever it is quoted: the server decodes it).
SERVER = r"""
import json, os, sys
env = os.environ
if env.get("LEAK"):
    sys.stderr.write("starting with token " + env[env["LEAK"]] + "\n")
    sys.stderr.flush()
    sys.exit(3)
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "tiny", "version": "1"}}})
    elif method == "tools/list":
        said = env[env["SAY"]] if env.get("SAY") else ""
        if said:
            send({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "error", "logger": said, "data": {"token": said}}})
            sys.stdout.write("not json " + said + "\n")
            sys.stdout.flush()
        if said or env.get("ERRMSG"):
            message = json.loads(env.get("ERRMSG", '""')) + (" bad token " + said if said else "")
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32000, "message": message, "data": {"echo": said}}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
            {"name": "t", "description": env.get("DESC", "A tool."),
             "inputSchema": {"type": "object"}}]}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
"""


@pytest.fixture
def records() -> Iterator[Records]:
    with captured_records() as handler:
        yield handler


@pytest.fixture
def server_command(tmp_path: Path) -> list[str]:
    path = tmp_path / "tiny_mcp_server.py"
    path.write_text(SERVER)
    return [sys.executable, str(path)]


def chain(exc: BaseException | None) -> list[str]:
    """The text of an exception and everything it is chained to."""
    texts: list[str] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts += [str(exc), repr(exc), repr(getattr(exc, "__dict__", ""))]
        exc = exc.__cause__ or exc.__context__
    return texts


# --------------------------------------------------------------------------- stdio env


def test_env_values_printed_by_a_dying_server_are_masked(
    server_command: list[str], records: Records
) -> None:
    """A server printing its ``env`` value to stderr and exiting: the error says it exited
    and quotes its stderr, with the value masked there, in the details and in the logs."""
    env = {"LEAK": "SECRET_TOKEN", "SECRET_TOKEN": TOKEN}
    with pytest.raises(OllmError) as info:
        McpServer.stdio(server_command, env=env, start_timeout=60)
    assert info.value.code == "CONNECTION_FAILED"
    assert "exited with code 3" in info.value.message
    assert "starting with token ***" in info.value.message
    texts = [*chain(info.value), repr(info.value.to_info()), *records.texts]
    assert [t for t in texts if TOKEN in t] == []
    assert any("starting with token ***" in t for t in records.texts)  # DEBUG was on


def test_env_values_echoed_by_a_running_server_are_masked(
    server_command: list[str], records: Records
) -> None:
    """A server echoing its ``env`` value in a log notification, in garbage on stdout and in
    a JSON-RPC error: none of them shows it (the error's ``data`` included)."""
    env = {"SAY": "API_TOKEN", "API_TOKEN": TOKEN}
    with McpServer.stdio(server_command, env=env, start_timeout=60) as server:
        with pytest.raises(OllmError) as info:
            server.tools()
        text = repr(server)
    assert "bad token ***" in info.value.message
    texts = [*chain(info.value), repr(info.value.to_info()), text, *records.texts]
    assert [t for t in texts if TOKEN in t] == []
    assert any("not json ***" in t for t in records.texts)  # the garbage was logged, masked


#: Secrets that an environment can hold; each has a ``~`` so that none is ordinary text.
env_secrets = st.builds(
    lambda head, tail: f"{head}~{tail}",
    st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1),
    st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.+/=!$%&*~ ", min_size=2, max_size=30),
)


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=env_secrets, how=st.sampled_from(["LEAK", "SAY"]))
def test_any_env_value_echoed_any_way_is_masked(
    server_command: list[str], records: Records, secret: str, how: str
) -> None:
    """Any ``env`` value, echoed on stderr before dying or in a log notification, garbage
    and a JSON-RPC error of a running server: in no exception, ``repr`` or log record."""
    before = len(records.texts)
    env = {how: "HANDED", "HANDED": secret}
    texts: list[str] = []
    try:
        with McpServer.stdio(server_command, env=env, start_timeout=60) as server:
            texts.append(repr(server))
            server.tools()
    except OllmError as exc:
        texts += [*chain(exc), repr(exc.to_info())]
    assert texts and "***" in texts[-1]  # the server did echo it, masked
    leaks = [t for t in texts + records.texts[before:] if secret in t]
    assert leaks == [], leaks[:2]


def _toml(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


@pytest.mark.parametrize("debug", [False, True])
def test_mcp_list_error_line_masks_env_values(
    tmp_path: Path, server_command: list[str], debug: bool
) -> None:
    """``ollm-lite mcp list`` on a server that prints its env value and dies: exit 1, the
    error line masks the value (with ``--debug``: the traceback and the log lines too)."""
    config = tmp_path / "config.toml"
    config.write_text(
        f"[mcp.servers.leaky]\ncommand = {_toml(server_command)}\n"
        f'env = {{ LEAK = "PLAIN", PLAIN = "{TOKEN}" }}\n'
    )
    flags = ["--debug"] if debug else []
    done = run(tmp_path, "mcp", "list", "leaky", "--config", str(config), *flags, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "CONNECTION_FAILED" in done.stderr and "starting with token ***" in done.stderr
    assert TOKEN not in done.stderr + done.stdout


# --------------------------------------------------------------------------- CLI text


def test_mcp_list_strips_control_characters_from_descriptions(
    tmp_path: Path, server_command: list[str]
) -> None:
    """A description holding escape sequences (clear screen, window title, colour) is
    printed without its control characters; the rest of its text stays."""
    desc = "Reads\x1b[2J a file\x1b]0;owned\x07 in \x1b[31mred\x1b[0m\x9b1m\x7f."
    config = tmp_path / "config.toml"
    config.write_text(
        f"[mcp.servers.tiny]\ncommand = {_toml(server_command)}\n"
        f"env = {{ DESC = {json.dumps(desc)} }}\n"
    )
    done = run(tmp_path, "mcp", "list", "tiny", "--config", str(config), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("t  Reads")
    assert "a file" in done.stdout and "red" in done.stdout
    printed = done.stdout.rstrip("\n")
    assert not [c for c in printed if ord(c) < 32 or 0x7F <= ord(c) <= 0x9F]


def test_cli_error_line_strips_control_characters(
    tmp_path: Path, server_command: list[str]
) -> None:
    """A server's error message holding escape sequences reaches the error line without
    its control characters."""
    message = "no\x1b[2J\x1b]0;owned\x07 way"
    config = tmp_path / "config.toml"
    config.write_text(
        f"[mcp.servers.tiny]\ncommand = {_toml(server_command)}\n"
        f"env = {{ ERRMSG = {json.dumps(json.dumps(message))} }}\n"
    )
    done = run(tmp_path, "mcp", "list", "tiny", "--config", str(config), timeout=120)
    assert done.returncode == 1
    line = next(x for x in done.stderr.splitlines() if "MCP_ERROR" in x)
    assert "no" in line and "way" in line
    assert not [c for c in line if ord(c) < 32 or 0x7F <= ord(c) <= 0x9F]


# --------------------------------------------------------------------------- HTTP headers

HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "X-Auth-Token": f"x-{TOKEN}",
    "Private-Token": f"p-{TOKEN}",
}


class _Server:
    """A loopback MCP endpoint over streamable HTTP (JSON answers) that records headers;
    ``status`` answers every POST with that status and the request's headers echoed;
    ``location`` redirects every request there with a 307."""

    def __init__(self, *, status: int = 200, location: str | None = None) -> None:
        self.seen: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def _redirected(self) -> bool:
                outer.seen.append(dict(self.headers))
                if location is None:
                    return False
                self.send_response(307)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True

            def do_GET(self) -> None:
                if not self._redirected():
                    self.send_response(405)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            def do_DELETE(self) -> None:
                self.do_GET()

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self._redirected():
                    return
                msg = json.loads(body)
                if status != 200:
                    said = {"error": f"rejected {json.dumps(dict(self.headers))}"}
                    self._answer(status, said)
                elif "id" not in msg:
                    self._answer(202, None)
                elif msg["method"] == "initialize":
                    result = {
                        "protocolVersion": msg["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "web", "version": "1"},
                    }
                    self._answer(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})
                else:
                    tools = [{"name": "t", "inputSchema": {"type": "object"}}]
                    result = {"tools": tools} if msg["method"] == "tools/list" else {}
                    self._answer(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})

            def _answer(self, code: int, obj: Any) -> None:
                raw = b"" if obj is None else json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/mcp"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.mark.parametrize("status", [401, 403])
def test_http_header_values_echoed_in_a_rejection_are_masked(status: int, records: Records) -> None:
    """A 401/403 whose body echoes the request's headers: the ``AuthenticationError`` names
    the server and the names of its headers, shows no value, and does not blame an API
    key given to a provider."""
    server = _Server(status=status)
    try:
        with pytest.raises(AuthenticationError) as info:
            McpServer.http(server.url, name="search", headers=HEADERS, start_timeout=30)
    finally:
        server.close()
    assert all(h.get("X-Auth-Token") == f"x-{TOKEN}" for h in server.seen)
    message = info.value.message
    assert "'search'" in message and "X-Auth-Token" in message and "Private-Token" in message
    assert "API key" not in message
    texts = [*chain(info.value), repr(info.value.to_info()), *records.texts]
    assert [t for t in texts if TOKEN in t] == []


def test_http_url_credentials_are_masked_and_kept_out_of_the_label(records: Records) -> None:
    """``http://user:password@host/mcp``: the password is sent as basic auth and appears in
    no message, ``repr`` or log record."""
    server = _Server()
    url = server.url.replace("http://", f"http://user:{TOKEN}@")
    try:
        with McpServer.http(url, start_timeout=30) as mcp:
            assert [t.name for t in mcp.tools()] == ["t"]
            shown = repr(mcp)
    finally:
        server.close()
    assert server.seen and all(h.get("Authorization", "").startswith("Basic ") for h in server.seen)
    assert TOKEN not in shown and [t for t in records.texts if TOKEN in t] == []


@pytest.mark.parametrize("elsewhere", ["host", "port"])
def test_http_headers_do_not_follow_a_redirect_to_another_host(
    elsewhere: str, records: Records
) -> None:
    """Every request redirected (307) to another host or port: that host receives none of
    the configured headers (custom ones included), every later message too, while the
    session works through it."""
    target = _Server()
    url = target.url if elsewhere == "port" else target.url.replace("127.0.0.1", "localhost")
    first = _Server(location=url)
    try:
        with McpServer.http(first.url, headers=HEADERS, start_timeout=30) as mcp:
            assert [t.name for t in mcp.tools()] == ["t"]
            mcp.ping()
    finally:
        first.close()
        target.close()
    assert all(h.get("X-Auth-Token") == f"x-{TOKEN}" for h in first.seen)
    assert len(target.seen) >= 3  # initialize, initialized, tools/list, ping ...
    for headers in target.seen:
        assert TOKEN not in repr(headers), headers
        assert "Authorization" not in headers
    assert [t for t in records.texts if TOKEN in t] == []


def test_every_env_value_is_masked_in_the_configuration_display(tmp_path: Path) -> None:
    """``config show`` and ``validate_config`` show no ``env`` value, whatever its name
    (only the names of the variables)."""
    from ollm_lite.config import load_config, redacted, validate_config

    path = tmp_path / "config.toml"
    path.write_text(
        f'[mcp.servers.s]\ncommand = ["srv"]\nenv = {{ PLAIN = "{TOKEN}" }}\ntimeout = "{TOKEN}"\n'
    )
    config = load_config(path, env={})
    shown = json.dumps(redacted(config)) + repr(config) + repr(validate_config(config))
    assert "PLAIN" in shown and "timeout" in shown
    assert TOKEN not in shown

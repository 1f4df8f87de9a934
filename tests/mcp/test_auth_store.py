"""The MCP token store (docs/mcp.md, "Signing in"): its place and modes, a file that is not
JSON, the lock, and two processes sharing one stored token whose refresh token rotates."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from support.oauth_server import OAuthServer

from ollm_lite import McpAuth, McpServer
from ollm_lite.errors import Cancelled
from ollm_lite.mcp.auth.store import TokenStore, default_path

REPO = Path(__file__).resolve().parents[2]


def test_default_path_follows_xdg_data_home(tmp_path: Path) -> None:
    assert default_path({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "ollm" / "mcp-tokens.json"
    home = Path.home() / ".local" / "share" / "ollm" / "mcp-tokens.json"
    assert default_path({}) == home
    assert default_path({"XDG_DATA_HOME": "relative/ignored"}) == home


def test_written_file_is_0600_in_a_new_0700_folder(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "a" / "b" / "mcp-tokens.json")
    old = os.umask(0)
    try:
        with store.locked() as data:
            data["tokens"]["k"] = {"access_token": "x"}
    finally:
        os.umask(old)
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    for folder in (tmp_path / "a", tmp_path / "a" / "b"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert store.token("k") == {"access_token": "x"}


def test_a_file_that_is_not_json_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "mcp-tokens.json"
    path.write_text("{not json")
    store = TokenStore(path)
    assert store.read()["tokens"] == {}
    with store.locked() as data:
        data["clients"]["https://as"] = {"client_id": "c"}
    assert json.loads(path.read_text())["clients"] == {"https://as": {"client_id": "c"}}


def test_waiting_for_the_lock_follows_the_stop_event(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "mcp-tokens.json")
    stop = threading.Event()
    with store.locked():
        threading.Timer(0.2, stop.set).start()
        with pytest.raises(Cancelled), store.locked(stop):
            pass


_CLIENT = """
import logging, sys
from ollm_lite import McpAuth, McpServer

logging.basicConfig(stream=sys.stderr, format="%(message)s")
logging.getLogger("ollm_lite.mcp.auth.store").setLevel(logging.DEBUG)

def nobody(url):
    raise RuntimeError("no person here")

with McpServer.http(sys.argv[1], auth=McpAuth.login(open_url=nobody)) as server:
    print([t.name for t in server.tools()])
"""


def test_two_processes_share_one_refresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_home = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with OAuthServer() as server:
        store = TokenStore(data_home / "ollm" / "mcp-tokens.json")
        auth = McpAuth.login(open_url=lambda url: requests.get(url, timeout=10).close())
        with McpServer.http(server.url, auth=auth) as mcp:
            mcp.tools()
        with store.locked() as content:  # the stored token has expired: both must refresh
            for entry in content["tokens"].values():
                entry["expires_at"] = time.time() - 10
        with store.locked():
            procs = [
                subprocess.Popen(
                    [sys.executable, "-c", _CLIENT, server.url],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for _ in range(2)
            ]
            # Both read the expired token and wait for the lock before either may refresh.
            for proc in procs:
                assert proc.stderr is not None
                for line in proc.stderr:
                    if "waiting for the lock" in line:
                        break
        outputs = [p.communicate(timeout=60) for p in procs]
        refreshes = server.world.count("/token", grant_type="refresh_token")
        logins = server.world.count("/authorize")
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "whoami" in out
    assert refreshes == 1  # the rotating refresh token was spent once; the other process reused
    assert logins == 1  # nobody signed in again

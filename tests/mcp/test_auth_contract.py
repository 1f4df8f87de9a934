"""The MCP sign-in against the letter of docs/mcp.md ("Signing in"), beyond the main flow: a
person's time apart from the machine's deadlines, the authorization server's ``iss`` (RFC
9207), the scope held when a token answer leaves it out, ``ollm-lite mcp login`` reading the
server's own challenge, and where the authorization URL goes without ``open_url``."""

from __future__ import annotations

import io
import json
import threading
import time
import webbrowser
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from support.oauth_server import OAuthServer

from ollm_lite import McpAuth, McpServer
from ollm_lite.cli import _mcp as mcp_cli
from ollm_lite.config import load_config
from ollm_lite.errors import AuthenticationError, RequestTimeout
from ollm_lite.mcp.auth import flow
from ollm_lite.mcp.server import from_config


@pytest.fixture(autouse=True)
def _data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    return home


@pytest.fixture
def server() -> Iterator[OAuthServer]:
    with OAuthServer() as running:
        yield running


def follow(url: str) -> None:
    """What a person's browser does: follow the authorization URL to the redirect."""
    requests.get(url, timeout=10).close()


def _redirect_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ollm-mcp-redirect"]


# --------------------------------------------------------------- a person's time


def test_a_person_slower_than_start_timeout_still_signs_in(server: OAuthServer) -> None:
    def slow_person(url: str) -> None:
        time.sleep(3.0)  # reading the consent page: longer than the machine's start_timeout
        follow(url)

    auth = McpAuth.login(open_url=slow_person)
    with McpServer.http(server.url, auth=auth, start_timeout=2.0) as mcp:
        assert [t.name for t in mcp.tools()] == ["whoami"]


def test_a_person_slower_than_a_tool_call_timeout_still_steps_up(server: OAuthServer) -> None:
    world = server.world
    world.method_scopes = {"tools/call": ["mcp:write"]}
    shown: list[str] = []

    def person(url: str) -> None:
        shown.append(url)
        if len(shown) == 2:  # the step-up: a person reads what more is asked
            time.sleep(3.0)
        follow(url)

    with McpServer.http(server.url, auth=McpAuth.login(open_url=person), timeout=2.0) as mcp:
        assert mcp.call_tool("whoami").ok
    assert len(shown) == 2


def test_a_sign_in_nobody_finishes_ends_at_the_sign_in_bound(
    server: OAuthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flow, "SIGN_IN_TIMEOUT_S", 0.5)
    before = set(_redirect_threads())
    shown: list[str] = []
    with pytest.raises(RequestTimeout) as caught:
        McpServer.http(server.url, auth=McpAuth.login(open_url=shown.append), start_timeout=60)
    assert "sign-in" in caught.value.message and len(shown) == 1
    for thread in set(_redirect_threads()) - before:
        thread.join(5)
        assert not thread.is_alive()
    assert server.world.count("/token") == 0


# --------------------------------------------------------------- RFC 9207


@pytest.mark.parametrize(
    ("supported", "iss", "ok"),
    [
        (True, "issuer", True),
        (True, None, False),  # advertised, then left out
        (True, "https://evil.example", False),
        (False, "https://evil.example", False),  # sent: compared even when not advertised
        (False, None, True),
        (False, "issuer", True),
    ],
)
def test_the_redirect_iss_names_the_authorization_server(
    server: OAuthServer, supported: bool, iss: str | None, ok: bool
) -> None:
    server.world.iss_supported, server.world.iss = supported, iss
    auth = McpAuth.login(open_url=follow)
    if ok:
        with McpServer.http(server.url, auth=auth) as mcp:
            assert mcp.tools()
        return
    with pytest.raises(AuthenticationError) as caught:
        McpServer.http(server.url, auth=auth)
    assert "RFC 9207" in caught.value.message
    assert server.world.count("/token", grant_type="authorization_code") == 0


# --------------------------------------------------------------- scopes held


def test_a_token_answer_without_scope_holds_the_scope_asked(server: OAuthServer) -> None:
    world = server.world
    world.echo_scope = False
    world.method_scopes = {"tools/call": ["mcp:write"]}
    with McpServer.http(server.url, auth=McpAuth.login(scope="mcp:read", open_url=follow)):
        pass
    # Another process (a new connection) is told it needs more: it asks for both.
    with McpServer.http(server.url, auth=McpAuth.login(open_url=follow)) as mcp:
        assert mcp.call_tool("whoami").ok
    scopes = [s.query.get("scope") for s in world.seen if s.path == "/authorize"]
    assert scopes == ["mcp:read", "mcp:read mcp:write"]


def test_a_refresh_answer_without_scope_keeps_the_scope_held(
    server: OAuthServer, _data_home: Path
) -> None:
    world = server.world
    world.echo_scope = False
    world.expires_in = 30  # inside the refresh margin: refreshed before the next request
    with McpServer.http(server.url, auth=McpAuth.login(scope="mcp:read", open_url=follow)) as mcp:
        mcp.ping()
    assert world.count("/token", grant_type="refresh_token") >= 1
    stored = json.loads((_data_home / "ollm" / "mcp-tokens.json").read_text())
    (entry,) = stored["tokens"].values()
    assert entry["scope"] == "mcp:read"


# --------------------------------------------------------------- ollm-lite mcp login


def test_mcp_login_reads_the_servers_challenge(
    server: OAuthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = server.world
    world.prm_path = "/meta/guarded.json"  # named by the challenge only
    world.challenge_scope = "mcp:read"
    world.scopes_supported = ["mcp:read", "mcp:write", "mcp:admin"]
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[mcp.servers.guarded]\nurl = "{server.url}"\nauth = "login"\n')
    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: follow(url) or True)
    err = io.StringIO()
    assert mcp_cli.login("guarded", load_config(cfg), err) == 0
    (authorize,) = [s for s in world.seen if s.path == "/authorize"]
    assert authorize.query.get("scope") == "mcp:read"
    assert world.count("/meta/guarded.json") == 1


# --------------------------------------------------------------- without open_url


@pytest.mark.parametrize("browser", ["none", "broken"])
def test_without_a_browser_the_url_is_printed_on_stderr(
    server: OAuthServer,
    browser: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    followers: list[threading.Thread] = []

    def no_browser(url: str, *args: object, **kwargs: object) -> bool:
        # The person copies the printed address into a browser elsewhere.
        followers.append(threading.Thread(target=follow, args=(url,)))
        followers[-1].start()
        if browser == "broken":
            raise webbrowser.Error("could not locate runnable browser")
        return False

    monkeypatch.setattr(webbrowser, "open", no_browser)
    with McpServer.http(server.url, auth=McpAuth.login()) as mcp:
        assert mcp.tools()
    for thread in followers:
        thread.join(10)
    err = capsys.readouterr().err
    assert f"{server.world.base}/authorize?" in err


def test_mcp_login_asks_for_the_scope_a_server_used_by_name_was_refused(
    server: OAuthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = server.world
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f'[mcp.servers.guarded]\nurl = "{server.url}"\nauth = "login"\nscope = "mcp:read"\n'
    )
    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: follow(url) or True)
    assert mcp_cli.login("guarded", load_config(cfg), io.StringIO()) == 0
    world.method_scopes = {"tools/call": ["mcp:write"]}  # the server now wants more
    with from_config("guarded", load_config(cfg)) as mcp:
        result = mcp.call_tool("whoami")
    assert not result.ok and result.error is not None
    assert "ollm-lite mcp login guarded" in result.error.message
    assert "mcp:write" in result.error.message
    assert world.count("/authorize") == 1  # no browser for a server used by name
    assert mcp_cli.login("guarded", load_config(cfg), io.StringIO()) == 0
    assert [s.query.get("scope") for s in world.seen if s.path == "/authorize"] == [
        "mcp:read",
        "mcp:read mcp:write",
    ]
    with from_config("guarded", load_config(cfg)) as mcp:
        assert mcp.call_tool("whoami").ok


def test_a_server_without_s256_is_refused_before_anyone_signs_in(server: OAuthServer) -> None:
    server.world.pkce_methods = ["plain"]
    shown: list[str] = []
    with pytest.raises(AuthenticationError) as caught:
        McpServer.http(server.url, auth=McpAuth.login(open_url=shown.append))
    assert "S256" in caught.value.message and shown == []


def test_a_scope_refused_after_a_step_up_is_not_asked_again(server: OAuthServer) -> None:
    world = server.world
    world.method_scopes = {"tools/call": ["mcp:admin"]}
    world.withheld = {"mcp:admin"}
    shown: list[str] = []

    def person(url: str) -> None:
        shown.append(url)
        follow(url)

    with McpServer.http(server.url, auth=McpAuth.login(open_url=person)) as mcp:
        first, second = mcp.call_tool("whoami"), mcp.call_tool("whoami")
    assert not first.ok and not second.ok and second.error is not None
    assert second.error.details["code"] == "LLM_AUTH_FAILED"
    assert "mcp:admin" in second.error.message
    assert len(shown) == 2  # the first sign-in and one step-up; the second call asks nobody

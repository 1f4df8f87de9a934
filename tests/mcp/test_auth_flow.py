"""Signing in to an MCP server that requires OAuth, against a loopback authorization server
(docs/mcp.md, "Signing in"): discovery, dynamic registration, PKCE, the stored token reused,
refresh before expiry and after a 401, step-up on ``insufficient_scope``, client
credentials, a server configured by name that never asks a person, and the failures."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from support.oauth_server import OAuthServer

from ollm_lite import McpAuth, McpServer, mcp_tools
from ollm_lite.config import load_config
from ollm_lite.errors import AuthenticationError, ConfigError


@pytest.fixture(autouse=True)
def _data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    return home


def store_file(home: Path) -> Path:
    return home / "ollm" / "mcp-tokens.json"


class Browser:
    """What a person's browser does: follow the authorization URL to the redirect."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def __call__(self, url: str) -> None:
        self.urls.append(url)
        requests.get(url, timeout=10).close()


@pytest.fixture
def server() -> Iterator[OAuthServer]:
    with OAuthServer() as running:
        yield running


def _login(browser: Browser | None = None, **kw: object) -> McpAuth:
    return McpAuth.login(open_url=browser or Browser(), **kw)  # type: ignore[arg-type]


def test_login_discovers_registers_and_signs_in(server: OAuthServer, _data_home: Path) -> None:
    browser = Browser()
    with McpServer.http(server.url, auth=_login(browser)) as mcp:
        result = mcp.tools()[0].as_tool().runner({}, None)  # type: ignore[misc]
    assert result.ok and "signed in" in json.dumps(result.data)
    world = server.world
    paths = [s.path for s in world.seen]
    assert paths.index("/.well-known/oauth-protected-resource/mcp") < paths.index("/register")
    assert world.count("/register") == 1
    (asked,) = browser.urls
    assert "code_challenge_method=S256" in asked and "resource=" in asked
    authorize = next(s for s in world.seen if s.path == "/authorize")
    assert authorize.query["resource"] == server.url
    assert authorize.query["redirect_uri"].startswith("http://127.0.0.1:")
    token = next(s for s in world.seen if s.form.get("grant_type") == "authorization_code")
    assert token.form["resource"] == server.url and token.form["code_verifier"]
    # every MCP request after the sign-in carried the token
    mcp_posts = [s for s in world.seen if s.path == "/mcp" and s.method == "POST"]
    assert all(s.headers.get("authorization", "").startswith("Bearer ") for s in mcp_posts[1:])
    path = store_file(_data_home)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_stored_token_is_used_without_a_person(server: OAuthServer) -> None:
    with McpServer.http(server.url, auth=_login()) as mcp:
        mcp.tools()
    nobody = Browser()
    with McpServer.http(server.url, auth=_login(nobody)) as mcp:
        assert [t.name for t in mcp.tools()] == ["whoami"]
    assert nobody.urls == []
    assert server.world.count("/register") == 1  # the registration was kept too


def test_refresh_before_expiry(server: OAuthServer) -> None:
    server.world.expires_in = 30  # inside the refresh margin: refreshed before it is sent
    with McpServer.http(server.url, auth=_login()) as mcp:
        mcp.tools()
    assert server.world.count("/token", grant_type="refresh_token") >= 1
    refresh = next(s for s in server.world.seen if s.form.get("grant_type") == "refresh_token")
    assert refresh.form["resource"] == server.url


def test_refresh_once_after_a_401(server: OAuthServer) -> None:
    browser = Browser()
    with McpServer.http(server.url, auth=_login(browser)) as mcp:
        mcp.tools()
        server.world.revoke_all()  # the access token stops working; the refresh token not
        assert mcp.ping() is None
    assert server.world.count("/token", grant_type="refresh_token") == 1
    assert len(browser.urls) == 1


def test_a_refused_refresh_signs_in_again_through_open_url(server: OAuthServer) -> None:
    browser = Browser()
    with McpServer.http(server.url, auth=_login(browser)) as mcp:
        mcp.tools()
        server.world.revoke_all()
        server.world.refuse_refresh = True
        mcp.ping()
    assert len(browser.urls) == 2


def test_a_configured_server_never_asks_a_person(
    server: OAuthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[mcp.servers.guarded]\nurl = "{server.url}"\nauth = "login"\n')
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url, *a, **k: opened.append(url) or True)
    with pytest.raises(AuthenticationError) as caught:
        mcp_tools("guarded", config=load_config(cfg))
    assert "ollm-lite mcp login guarded" in caught.value.message
    assert "guarded" in caught.value.message
    assert opened == [] and server.world.count("/authorize") == 0


def test_without_auth_a_bearer_challenge_says_sign_in_is_required(server: OAuthServer) -> None:
    with pytest.raises(AuthenticationError) as caught:
        McpServer.http(server.url, name="guarded")
    assert "requires sign-in" in caught.value.message and "guarded" in caught.value.message


def test_step_up_asks_for_the_union_of_scopes_once(server: OAuthServer) -> None:
    world = server.world
    world.challenge_scope = "mcp:read"
    world.method_scopes = {"tools/call": ["mcp:read", "mcp:write"]}
    browser = Browser()
    with McpServer.http(server.url, auth=_login(browser)) as mcp:
        result = mcp.call_tool("whoami")
    assert result.ok
    scopes = [s.query.get("scope") for s in world.seen if s.path == "/authorize"]
    assert scopes == ["mcp:read", "mcp:read mcp:write"]


def test_a_second_403_is_an_authentication_failure(server: OAuthServer) -> None:
    world = server.world
    world.method_scopes = {"tools/call": ["mcp:admin"]}
    world.withheld = {"mcp:admin"}
    browser = Browser()
    with McpServer.http(server.url, auth=_login(browser, scope="mcp:read")) as mcp:
        result = mcp.call_tool("whoami")
    assert not result.ok and result.error is not None
    assert result.error.details["code"] == "LLM_AUTH_FAILED"
    assert world.count("/authorize") == 2  # the first sign-in and one step-up, no more


def test_client_credentials_with_basic_authentication(server: OAuthServer) -> None:
    world = server.world
    world.client_id, world.client_secret = "cron-job", "s3cret~value"
    world.auth_methods = ["client_secret_basic"]
    world.scopes_supported = ["mcp:read"]
    auth = McpAuth.client_credentials("cron-job", "s3cret~value")
    with McpServer.http(server.url, auth=auth) as mcp:
        assert mcp.call_tool("whoami").ok
    grant = next(s for s in world.seen if s.form.get("grant_type") == "client_credentials")
    assert grant.headers["authorization"].startswith("Basic ")
    assert "client_secret" not in grant.form
    assert grant.form["scope"] == "mcp:read" and grant.form["resource"] == server.url
    assert world.count("/register") == 0


def test_pre_registered_client_with_post_authentication(server: OAuthServer) -> None:
    world = server.world
    world.client_id, world.client_secret = "desk-app", "post~secret"
    world.auth_methods = ["client_secret_post"]
    world.registration = False
    with McpServer.http(server.url, auth=_login(client_id="desk-app", client_secret="post~secret")):
        pass
    code = next(s for s in world.seen if s.form.get("grant_type") == "authorization_code")
    assert code.form["client_secret"] == "post~secret" and "authorization" not in code.headers


def test_a_server_without_resource_metadata_is_its_own_authorization_server(
    server: OAuthServer,
) -> None:
    server.world.prm = False
    with McpServer.http(server.url, auth=_login()) as mcp:
        assert mcp.tools()
    assert server.world.count("/.well-known/oauth-authorization-server") == 1


def test_resource_metadata_for_another_resource_stops_the_sign_in(server: OAuthServer) -> None:
    server.world.prm_resource = "https://elsewhere.example/mcp"
    browser = Browser()
    with pytest.raises(AuthenticationError) as caught:
        McpServer.http(server.url, auth=_login(browser))
    assert "elsewhere.example" in caught.value.message
    assert browser.urls == [] and server.world.count("/register") == 0


def test_a_https_client_id_needs_a_server_that_accepts_metadata_documents(
    server: OAuthServer,
) -> None:
    with pytest.raises(AuthenticationError) as caught:
        McpServer.http(server.url, auth=_login(client_id="https://app.example/client.json"))
    assert "client ID metadata document" in caught.value.message


@pytest.mark.parametrize("fault", ["wrong_state", "deny"])
def test_a_bad_redirect_exchanges_nothing(server: OAuthServer, fault: str) -> None:
    setattr(server.world, fault, True)
    with pytest.raises(AuthenticationError):
        McpServer.http(server.url, auth=_login())
    assert server.world.count("/token", grant_type="authorization_code") == 0


def test_mcp_auth_is_immutable_and_keeps_its_secret_out_of_repr() -> None:
    auth = McpAuth.client_credentials("id", "very~secret", scope=["a", "b a"])
    assert "very~secret" not in repr(auth) and auth.scope == "a b"
    with pytest.raises(AttributeError):
        auth.client_id = "other"  # type: ignore[misc]
    with pytest.raises(ConfigError):
        McpAuth.login(redirect_port=70000)
    with pytest.raises(ConfigError):
        McpServer.http("http://127.0.0.1:9/mcp", auth="token")  # type: ignore[arg-type]


def test_the_store_folder_is_private_whatever_the_umask(
    server: OAuthServer, _data_home: Path
) -> None:
    old = os.umask(0o022)
    try:
        with McpServer.http(server.url, auth=_login()):
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE(store_file(_data_home).parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(_data_home.stat().st_mode) == 0o700

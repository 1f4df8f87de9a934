"""The pure parts of the MCP sign-in: the Bearer challenge, the discovery URLs in the MCP
specification's order, resource matching (RFC 8707), the token endpoint authentication
method, PKCE (RFC 7636) and scope unions."""

from __future__ import annotations

import base64
import hashlib

import pytest

from ollm_lite.errors import AuthenticationError
from ollm_lite.mcp.auth.challenge import Challenge, parse_challenge
from ollm_lite.mcp.auth.discovery import (
    canonical_resource,
    resource_covers,
    resource_metadata_urls,
    server_metadata_urls,
)
from ollm_lite.mcp.auth.flow import union_scopes
from ollm_lite.mcp.auth.pkce import Pkce
from ollm_lite.mcp.auth.tokens import choose_auth_method


def test_bearer_challenge_parameters() -> None:
    header = (
        'Basic realm="x", Bearer resource_metadata="https://s/.well-known/oauth-protected-'
        'resource/mcp", scope="a  b", error="insufficient_scope", error_description="say \\"hi\\""'
    )
    got = parse_challenge(header)
    assert got.bearer and got.scope == "a b" and got.error == "insufficient_scope"
    assert got.resource_metadata == "https://s/.well-known/oauth-protected-resource/mcp"
    assert got.error_description == 'say "hi"'
    assert parse_challenge('Basic realm="x"') == Challenge(bearer=False)
    assert parse_challenge(None) == Challenge(bearer=False)
    assert parse_challenge("bearer error=invalid_token").error == "invalid_token"


def test_resource_metadata_urls_header_then_path_then_root() -> None:
    challenge = Challenge(bearer=True, resource_metadata="/custom/meta.json")
    assert resource_metadata_urls("https://h:8/a/mcp", challenge) == [
        "https://h:8/custom/meta.json",
        "https://h:8/.well-known/oauth-protected-resource/a/mcp",
        "https://h:8/.well-known/oauth-protected-resource",
    ]
    assert resource_metadata_urls("https://h/", Challenge(bearer=True)) == [
        "https://h/.well-known/oauth-protected-resource"
    ]


def test_server_metadata_urls_in_the_specifications_order() -> None:
    assert server_metadata_urls("https://as/tenant1") == [
        "https://as/.well-known/oauth-authorization-server/tenant1",
        "https://as/.well-known/openid-configuration/tenant1",
        "https://as/tenant1/.well-known/openid-configuration",
    ]
    assert server_metadata_urls("https://as") == [
        "https://as/.well-known/oauth-authorization-server",
        "https://as/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(
    ("resource", "server", "covers"),
    [
        ("https://h/mcp", "https://h/mcp", True),
        ("https://h", "https://h/mcp", True),
        ("https://H/mcp/", "https://h/mcp", True),
        ("https://h/mc", "https://h/mcp", False),
        ("https://evil.example/mcp", "https://h/mcp", False),
        ("http://h/mcp", "https://h/mcp", False),
        ("https://h:444/mcp", "https://h/mcp", False),
    ],
)
def test_resource_covers(resource: str, server: str, covers: bool) -> None:
    assert resource_covers(resource, server) is covers


def test_canonical_resource_drops_the_fragment_and_lowers_the_host() -> None:
    assert canonical_resource("HTTPS://Host.Example/Mcp#x") == "https://host.example/Mcp"


@pytest.mark.parametrize(
    ("listed", "secret", "registered", "chosen"),
    [
        (["client_secret_basic"], True, None, "client_secret_basic"),
        (["client_secret_post"], True, None, "client_secret_post"),
        (["client_secret_post", "client_secret_basic"], True, None, "client_secret_basic"),
        (["none"], False, None, "none"),
        (["none", "client_secret_basic"], False, None, "none"),
        (None, True, None, "client_secret_basic"),
        (None, False, None, "none"),
        (["client_secret_basic"], True, "client_secret_post", "client_secret_post"),
    ],
)
def test_token_endpoint_authentication(
    listed: list[str] | None, secret: bool, registered: str | None, chosen: str
) -> None:
    assert choose_auth_method(listed, secret, registered) == chosen


@pytest.mark.parametrize(("secret", "chosen"), [(True, "client_secret_basic"), (False, "none")])
def test_an_empty_list_of_methods_is_none_listed(secret: bool, chosen: str) -> None:
    assert choose_auth_method([], secret, None) == chosen


def test_only_key_based_methods_listed_is_refused() -> None:
    with pytest.raises(AuthenticationError, match="private_key_jwt"):
        choose_auth_method(["private_key_jwt"], True, None)


def test_pkce_s256_and_fresh_values() -> None:
    one, two = Pkce(), Pkce()
    assert one.verifier != two.verifier and one.state != two.state
    assert 43 <= len(one.verifier) <= 128
    digest = hashlib.sha256(one.verifier.encode()).digest()
    assert one.challenge == base64.urlsafe_b64encode(digest).decode().rstrip("=")
    assert one.verifier not in repr(one)


def test_union_of_scopes_keeps_order_once() -> None:
    assert union_scopes("a b", None, "b c") == "a b c"
    assert union_scopes(None, "") is None


def test_the_redirect_keeps_its_code_out_of_repr() -> None:
    from ollm_lite.mcp.auth.listener import Redirect

    got = Redirect("the~code", "st", None, None, "https://as.example")
    assert "the~code" not in repr(got) and "st" in repr(got)

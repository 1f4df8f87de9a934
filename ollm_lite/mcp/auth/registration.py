"""Who the client is to the authorization server, first that applies (MCP specification
2025-11-25, Basic > Authorization > Client Registration Approaches):

1. a ``client_id`` given that is an ``https://`` URL: a client ID metadata document, used when
   the server's metadata says ``client_id_metadata_document_supported`` (otherwise the
   sign-in stops: the server would not know the client);
2. any other ``client_id`` given: pre-registered, with its secret when it has one;
3. none given: dynamic client registration (RFC 7591) at the server's
   ``registration_endpoint``, done once per authorization server and kept in the token store.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ...errors import AuthenticationError, HTTPStatusError
from ...http.secrets import Redactor
from .credentials import McpAuth
from .discovery import Discovered
from .store import TokenStore
from .tokens import ClientAuth, choose_auth_method
from .wire import OAuthWire

__all__ = ["CLIENT_NAME", "known_client", "register"]

CLIENT_NAME = "ollm-lite"


def known_client(
    auth: McpAuth, found: Discovered, store: TokenStore, redact: Redactor, label: str
) -> ClientAuth | None:
    """The client without registering: given, or registered earlier; ``None`` when a
    registration is needed.

    Raises:
        AuthenticationError: a client ID metadata document URL with a server that does not
            accept them.
    """
    given = auth.client_id
    if given is not None and given.lower().startswith("https://"):
        if not found.cimd_supported:
            raise AuthenticationError(
                f"the client_id {given} is a client ID metadata document URL, but the "
                f"authorization server {found.issuer} of {label} does not accept them "
                "(no client_id_metadata_document_supported): give a pre-registered client_id, "
                "or none to register dynamically",
                details={"issuer": found.issuer},
            )
        return ClientAuth(given, None, "none")
    if given is not None:
        secret = auth.client_secret
        return ClientAuth(given, secret, choose_auth_method(found.auth_methods, bool(secret), None))
    record = store.client(found.issuer)
    if not _usable(record):
        return None
    assert record is not None
    secret = record.get("client_secret") if isinstance(record.get("client_secret"), str) else None
    redact.add([secret] if secret else [])
    method = choose_auth_method(
        found.auth_methods, bool(secret), record.get("token_endpoint_auth_method")
    )
    return ClientAuth(str(record["client_id"]), secret, method)


def register(
    found: Discovered,
    wire: OAuthWire,
    store: TokenStore,
    redirect_uri: str,
    stop: threading.Event,
    redact: Redactor,
    label: str,
) -> ClientAuth:
    """Register this client dynamically (RFC 7591 §3) and keep the registration.

    Raises:
        AuthenticationError: the server offers no registration, or refused it.
    """
    endpoint = found.registration_endpoint
    if endpoint is None:
        raise AuthenticationError(
            f"the authorization server {found.issuer} of {label} offers no dynamic client "
            "registration: give the client_id registered there (McpAuth.login(client_id=...), "
            "or client_id in [mcp.servers.NAME])",
            details={"issuer": found.issuer},
        )
    listed = found.auth_methods
    if listed is None or "none" in listed:
        ask = "none"  # a native application is a public client (RFC 8252 §8.4)
    else:
        ask = next(
            (m for m in ("client_secret_basic", "client_secret_post") if m in listed), "none"
        )
    body = {
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": ask,
    }
    try:
        answer = wire.post(endpoint, stop, json_body=body)
    except HTTPStatusError as exc:
        raise AuthenticationError(
            f"the authorization server {found.issuer} of {label} refused to register the "
            f"client: {exc.details.get('server_message') or exc.message}",
            status=exc.status,
            details={**exc.details},
        ) from None
    client_id = answer.get("client_id") if isinstance(answer, dict) else None
    if not isinstance(client_id, str) or not client_id:
        raise AuthenticationError(
            f"the registration endpoint {endpoint} answered without a client_id",
            details={"issuer": found.issuer},
        )
    secret = answer.get("client_secret")
    secret = secret if isinstance(secret, str) and secret else None
    redact.add([secret] if secret else [])
    method = choose_auth_method(listed, bool(secret), answer.get("token_endpoint_auth_method"))
    record: dict[str, Any] = {
        "client_id": client_id,
        "client_secret": secret,
        "token_endpoint_auth_method": method,
        "redirect_uris": [redirect_uri],
        "client_secret_expires_at": answer.get("client_secret_expires_at") or 0,
        "registered_at": time.time(),
    }
    with store.locked(stop) as data:
        data["clients"][found.issuer] = record
    return ClientAuth(client_id, secret, method)


def registered_port(store: TokenStore, issuer: str) -> int | None:
    """The loopback port of the redirect URI registered with ``issuer`` (reused when free:
    some servers match the port exactly, RFC 8252 §7.3 notwithstanding)."""
    record = store.client(issuer)
    uris = record.get("redirect_uris") if isinstance(record, dict) else None
    if not isinstance(uris, list) or not uris or not isinstance(uris[0], str):
        return None
    tail = uris[0].removeprefix("http://127.0.0.1:").split("/", 1)[0]
    return int(tail) if tail.isdigit() and 0 < int(tail) < 65536 else None


def _usable(record: dict[str, Any] | None) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("client_id"), str):
        return False
    expires = record.get("client_secret_expires_at")
    return not (isinstance(expires, int | float) and expires > 0 and expires <= time.time())

"""Finding a protected MCP server's authorization server and its endpoints.

MCP specification 2025-11-25, Basic > Authorization > Authorization Server Discovery:

1. Protected resource metadata (RFC 9728): the URL in the challenge's
   ``resource_metadata``, else ``/.well-known/oauth-protected-resource`` with the server's
   path, then at the root. Its ``resource`` must be the server's URL (the same origin, and
   the server's path at or below the resource's, as RFC 8707 resource indicators are
   compared), else the sign-in stops with ``AuthenticationError``: a token asked for another
   resource must not be sent here. Its first ``authorization_servers`` entry is used.
2. Authorization server metadata, for an issuer with a path (``https://as/tenant1``):
   ``/.well-known/oauth-authorization-server/tenant1`` (RFC 8414 §3.1),
   ``/.well-known/openid-configuration/tenant1`` (RFC 8414 §5), then
   ``/tenant1/.well-known/openid-configuration`` (OpenID Connect Discovery 1.0 §4); without
   a path, ``/.well-known/oauth-authorization-server`` then
   ``/.well-known/openid-configuration``. A 4xx tries the next; anything else stops.
3. A server without resource metadata follows the 2025-03-26 revision: the authorization
   server is the MCP server's origin (its path discarded); when it publishes no metadata
   either, its endpoints are ``/authorize``, ``/token`` and ``/register`` there.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from ...errors import AuthenticationError, BadResponse, HTTPStatusError, OllmError
from .challenge import Challenge
from .wire import OAuthWire

__all__ = ["Discovered", "canonical_resource", "discover", "resource_covers"]

logger = logging.getLogger(__name__)

_PRM = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True, slots=True)
class Discovered:
    """What discovery found for one MCP server."""

    resource: str
    """The resource indicator (RFC 8707) to ask tokens for."""
    issuer: str
    """The authorization server (its issuer identifier, or the MCP server's origin)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The authorization server's metadata (endpoints filled in by the fallbacks)."""
    scopes_supported: tuple[str, ...] | None = None
    """The protected resource metadata's ``scopes_supported``."""
    has_resource_metadata: bool = True

    @property
    def token_endpoint(self) -> str:
        return str(self.metadata["token_endpoint"])

    @property
    def authorization_endpoint(self) -> str | None:
        value = self.metadata.get("authorization_endpoint")
        return value if isinstance(value, str) and value else None

    @property
    def registration_endpoint(self) -> str | None:
        value = self.metadata.get("registration_endpoint")
        return value if isinstance(value, str) and value else None

    @property
    def auth_methods(self) -> list[str] | None:
        value = self.metadata.get("token_endpoint_auth_methods_supported")
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else None

    @property
    def cimd_supported(self) -> bool:
        return self.metadata.get("client_id_metadata_document_supported") is True


def canonical_resource(url: str) -> str:
    """``url`` as a resource indicator: scheme and host lower-case, no fragment (RFC 8707 §2)."""
    parts = urlsplit(url)
    return urlunsplit(
        parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower(), fragment="")
    )


def resource_covers(resource: str, server_url: str) -> bool:
    """Whether tokens for ``resource`` are meant for ``server_url``: the same origin, and the
    server's path is the resource's path or below it."""
    have, want = urlsplit(resource), urlsplit(server_url)
    if (have.scheme.lower(), have.netloc.lower()) != (want.scheme.lower(), want.netloc.lower()):
        return False
    base = have.path if have.path.endswith("/") else have.path + "/"
    path = want.path if want.path.endswith("/") else want.path + "/"
    return path.startswith(base)


def discover(
    server_url: str, challenge: Challenge, wire: OAuthWire, stop: threading.Event, label: str
) -> Discovered:
    """Discover the authorization server of ``server_url`` (see the module text).

    Raises:
        AuthenticationError: ``LLM_AUTH_FAILED`` when the resource metadata names another
            resource, or no authorization server can be found.
        Cancelled, RequestTimeout, ConnectionFailed: from the requests.
    """
    prm = _resource_metadata(server_url, challenge, wire, stop)
    if prm is None:
        return _legacy(server_url, wire, stop, label)
    resource = prm.get("resource")
    if not isinstance(resource, str) or not resource_covers(resource, server_url):
        raise AuthenticationError(
            f"{label} published protected resource metadata for {resource!r}, not for "
            f"{server_url}: no token is asked for it (RFC 8707, RFC 9728 §3.3)",
            details={"resource": resource, "server_url": server_url},
        )
    servers = prm.get("authorization_servers")
    issuer = (
        next((s for s in servers if isinstance(s, str) and s), None)
        if isinstance(servers, list)
        else None
    )
    if issuer is None:
        raise AuthenticationError(
            f"{label}'s protected resource metadata names no authorization server",
            details={"server_url": server_url},
        )
    metadata = _server_metadata(issuer, wire, stop)
    if metadata is None:
        raise AuthenticationError(
            f"the authorization server {issuer} of {label} publishes no metadata "
            "(RFC 8414 or OpenID Connect discovery)",
            details={"issuer": issuer},
        )
    _check_endpoints(metadata, issuer)
    scopes = prm.get("scopes_supported")
    return Discovered(
        resource=canonical_resource(resource),
        issuer=issuer,
        metadata=metadata,
        scopes_supported=tuple(s for s in scopes if isinstance(s, str))
        if isinstance(scopes, list)
        else None,
    )


def resource_metadata_urls(server_url: str, challenge: Challenge) -> list[str]:
    """Where the protected resource metadata may be, in the order tried."""
    parts = urlsplit(server_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    urls: list[str] = []
    if challenge.resource_metadata:
        urls.append(urljoin(server_url, challenge.resource_metadata))
    path = parts.path.rstrip("/")
    if path:
        urls.append(f"{origin}{_PRM}{path}")
    urls.append(f"{origin}{_PRM}")
    return list(dict.fromkeys(urls))


def server_metadata_urls(issuer: str) -> list[str]:
    """Where an authorization server's metadata may be, in the MCP specification's order."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path:
        return [
            f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration",
        ]
    return [
        f"{origin}/.well-known/oauth-authorization-server",
        f"{origin}/.well-known/openid-configuration",
    ]


def _resource_metadata(
    server_url: str, challenge: Challenge, wire: OAuthWire, stop: threading.Event
) -> dict[str, Any] | None:
    for url in resource_metadata_urls(server_url, challenge):
        try:
            document = wire.get_json(url, stop)
        except (HTTPStatusError, BadResponse) as exc:
            logger.debug("no protected resource metadata at %s (%s)", url, exc)
            continue
        except OllmError as exc:
            if exc.code in ("CANCELLED", "LLM_TIMEOUT"):
                raise
            logger.debug("no protected resource metadata at %s (%s)", url, exc)
            continue
        if isinstance(document, dict):
            return document
    return None


def _server_metadata(issuer: str, wire: OAuthWire, stop: threading.Event) -> dict[str, Any] | None:
    for url in server_metadata_urls(issuer):
        try:
            document = wire.get_json(url, stop)
        except HTTPStatusError as exc:
            if exc.status is not None and 400 <= exc.status < 500:
                logger.debug("no authorization server metadata at %s (%s)", url, exc.status)
                continue
            raise
        except BadResponse:
            continue
        if isinstance(document, dict):
            return document
    return None


def _legacy(server_url: str, wire: OAuthWire, stop: threading.Event, label: str) -> Discovered:
    parts = urlsplit(server_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    metadata = _server_metadata(origin, wire, stop)
    if metadata is None:
        metadata = {
            "authorization_endpoint": f"{origin}/authorize",
            "token_endpoint": f"{origin}/token",
            "registration_endpoint": f"{origin}/register",
        }
    _check_endpoints(metadata, origin)
    logger.debug("%s has no protected resource metadata: its own authorization server", label)
    return Discovered(
        resource=canonical_resource(server_url),
        issuer=origin,
        metadata=metadata,
        has_resource_metadata=False,
    )


def _check_endpoints(metadata: dict[str, Any], issuer: str) -> None:
    for key in ("authorization_endpoint", "token_endpoint"):
        value = metadata.get(key)
        if value is not None and (
            not isinstance(value, str) or not value.startswith(("http://", "https://"))
        ):
            raise AuthenticationError(
                f"the authorization server {issuer} gives {key} {value!r}, not an http(s) URL",
                details={"issuer": issuer},
            )
    if not isinstance(metadata.get("token_endpoint"), str):
        raise AuthenticationError(
            f"the authorization server {issuer} publishes no token_endpoint",
            details={"issuer": issuer},
        )

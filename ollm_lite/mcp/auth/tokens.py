"""The token endpoint: the three grants, the client's authentication, the answer checked.

OAuth 2.1 (draft-ietf-oauth-v2-1) §3.2 and RFC 6749 §2.3: the client authenticates with HTTP
Basic (``client_secret_basic``: id and secret form-urlencoded, then base64), in the form
(``client_secret_post``), or not at all (``none``: a public client sends its ``client_id``).
Every token request carries ``resource`` (RFC 8707 §2.2). The answer (RFC 6749 §5.1) must hold
an ``access_token`` of type ``Bearer``; ``expires_in`` becomes an absolute expiry (seconds
since the epoch, so another process reads it right).
"""

from __future__ import annotations

import base64
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from ...errors import AuthenticationError, BadResponse, HTTPStatusError
from ...http.secrets import Redactor
from .wire import OAuthWire

__all__ = ["AUTH_METHODS", "ClientAuth", "Token", "choose_auth_method", "request_token"]

#: The token endpoint authentication methods offered (the ones needing keys are not).
AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")


@dataclass(frozen=True, slots=True)
class ClientAuth:
    """A client as the token endpoint sees it."""

    client_id: str
    client_secret: str | None
    method: str

    def __repr__(self) -> str:
        secret = "'***'" if self.client_secret else "None"
        return (
            f"ClientAuth(client_id={self.client_id!r}, client_secret={secret}, "
            f"method={self.method!r})"
        )


@dataclass(frozen=True, slots=True)
class Token:
    """An issued token (every field but the scope and expiry is a secret)."""

    access_token: str
    refresh_token: str | None
    expires_at: float | None
    scope: str | None

    def __repr__(self) -> str:
        return f"Token(expires_at={self.expires_at!r}, scope={self.scope!r})"


def choose_auth_method(listed: list[str] | None, has_secret: bool, registered: str | None) -> str:
    """The method to authenticate with: the one registered, else one the server lists, else
    ``client_secret_basic`` with a secret and ``none`` without (RFC 8414 §2's default).

    Raises:
        AuthenticationError: the server lists only methods this client does not offer.
    """
    if registered in AUTH_METHODS and (registered == "none" or has_secret):
        return registered
    if not listed:  # absent, or an empty list: the server lists none
        return "client_secret_basic" if has_secret else "none"
    if has_secret:
        for method in ("client_secret_basic", "client_secret_post"):
            if method in listed:
                return method
    if "none" in listed:
        return "none"
    raise AuthenticationError(
        "the authorization server accepts only the token endpoint authentication methods "
        f"{', '.join(listed)}; ollm_lite offers {', '.join(AUTH_METHODS)}"
        + ("" if has_secret else " (a client secret is needed)"),
        details={"listed": listed},
    )


def request_token(
    wire: OAuthWire,
    endpoint: str,
    client: ClientAuth,
    params: dict[str, str],
    stop: threading.Event,
    redact: Redactor,
    *,
    asked: str | None = None,
) -> Token:
    """POST one token request; the token issued.

    ``asked`` is the scope asked for where the request itself does not carry it (the
    authorization request did): an answer without ``scope`` was granted that (RFC 6749 §5.1).

    Raises:
        AuthenticationError: the server refused (``details["oauth_error"]`` its error code,
            e.g. ``invalid_grant`` for a spent refresh token) or answered without a Bearer
            token.
        OllmError: the request failed otherwise.
    """
    form = dict(params)
    headers: dict[str, str] = {}
    if client.method == "client_secret_basic" and client.client_secret is not None:
        pair = f"{quote_plus(client.client_id)}:{quote_plus(client.client_secret)}"
        basic = base64.b64encode(pair.encode("utf-8")).decode("ascii")
        redact.add([basic, quote_plus(client.client_secret)])
        headers["Authorization"] = f"Basic {basic}"
    elif client.method == "client_secret_post" and client.client_secret is not None:
        form["client_id"] = client.client_id
        form["client_secret"] = client.client_secret
    else:
        form["client_id"] = client.client_id
    try:
        answer = wire.post(endpoint, stop, form=form, headers=headers)
    except HTTPStatusError as exc:
        if isinstance(exc, AuthenticationError) or exc.status == 400:
            error = AuthenticationError(
                f"the token endpoint {endpoint} refused the {params.get('grant_type')} request: "
                f"{exc.details.get('server_message') or exc.message}",
                status=exc.status,
                details={**exc.details},
            )
        else:
            raise
        raise error from None
    return _token(answer, endpoint, params.get("scope") or asked, redact)


def _token(answer: Any, endpoint: str, asked: str | None, redact: Redactor) -> Token:
    if not isinstance(answer, dict):
        raise BadResponse(f"the token endpoint {endpoint} answered without a JSON object")
    access = answer.get("access_token")
    if not isinstance(access, str) or not access:
        raise BadResponse(f"the token endpoint {endpoint} answered without an access_token")
    refresh = answer.get("refresh_token")
    refresh = refresh if isinstance(refresh, str) and refresh else None
    redact.add([access, *([refresh] if refresh else [])])
    kind = answer.get("token_type")
    if isinstance(kind, str) and kind.lower() != "bearer":
        raise AuthenticationError(
            f"the token endpoint {endpoint} issued a {kind!r} token; ollm_lite sends Bearer "
            "tokens only (DPoP is not offered)",
            details={"token_type": kind},
        )
    expires_in = answer.get("expires_in")
    if isinstance(expires_in, str) and expires_in.strip().isdigit():
        expires_in = int(expires_in)
    expires_at = (
        time.time() + float(expires_in)
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool)
        else None
    )
    scope = answer.get("scope")
    return Token(
        access_token=access,
        refresh_token=refresh,
        expires_at=expires_at,
        scope=" ".join(scope.split()) if isinstance(scope, str) else asked,
    )

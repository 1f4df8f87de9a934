"""The sign-in of one MCP server: the token to send, and what to do on a 401 or 403.

:class:`Authorizer` is what the streamable HTTP transport consults around every request:

* :meth:`Authorizer.header` before sending: the token in use, else one the token store holds
  for this server and client (another process may have signed in), refreshed first when it
  expires within a minute;
* :meth:`Authorizer.unauthorized` after a ``401``: discovery (:mod:`.discovery`), then a newer
  token from the store, else one refresh with the refresh token (under the store's lock),
  else a new authorization: the client credentials grant, or a person signing in (the
  authorization code grant with PKCE through :mod:`.listener`). A sign-in that must not ask
  a person (a server configured with ``auth = "login"`` and used by name) fails naming the
  command that signs in;
* :meth:`Authorizer.forbidden` after a ``403`` with ``error="insufficient_scope"``: a new
  authorization asking for the union of the scopes held and those the server names.

Scope, first that applies: the one given, the challenge's ``scope``, the resource metadata's
``scopes_supported``; else none is sent. Every step follows the call's ``stop`` event (its
deadline and cancel). Concurrent requests share one sign-in: a thread that finds a newer
token than the one its server refused uses it.

A person's time is not the machine's: from the moment the authorization URL is shown until the
redirect arrives, the wait is bounded by :data:`SIGN_IN_TIMEOUT_S` (the caller's cancel still
ends it at once), not by the request's deadline, and :meth:`Authorizer.person_seconds` tells
the session how long it waited on a person, so that ``start_timeout`` and a tool call's
``timeout`` count only the machine's part.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import webbrowser
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

from ..._cancel_link import past_deadline
from ...errors import AuthenticationError, Cancelled, RequestTimeout
from ...http.secrets import Redactor
from .challenge import Challenge, parse_challenge
from .credentials import McpAuth
from .discovery import Discovered, discover
from .listener import RedirectListener
from .pkce import Pkce
from .registration import known_client, register, registered_port
from .store import TokenStore, token_key
from .tokens import ClientAuth, Token, choose_auth_method, request_token
from .wire import OAuthWire

__all__ = ["Authorizer", "union_scopes"]

logger = logging.getLogger(__name__)

#: A token expiring within this many seconds is refreshed before it is sent.
EXPIRY_MARGIN_S = 60.0
#: The longest a person may take to sign in, from the authorization URL shown to the redirect
#: (the same for ``ollm-lite mcp login`` and a sign-in started from code).
SIGN_IN_TIMEOUT_S = 600.0
_POLL_S = 0.02


def union_scopes(*scopes: str | None) -> str | None:
    """The scopes of all ``scopes`` (space-separated), in order, each once."""
    merged = dict.fromkeys(p for s in scopes if s for p in s.split())
    return " ".join(merged) or None


class Authorizer:
    """Tokens for one MCP server (see the module text).

    Args:
        auth: How to sign in.
        server_url: The MCP endpoint.
        label: The server as messages name it.
        redact: The server's redactor: every secret learnt here joins it.
        store: The token store (default: the one at its default path).
    """

    def __init__(
        self,
        auth: McpAuth,
        server_url: str,
        *,
        label: str,
        redact: Redactor,
        store: TokenStore | None = None,
    ) -> None:
        self.auth = auth
        self.server_url = server_url
        self.label = label
        self.redact = redact
        self.store = store if store is not None else TokenStore()
        self._identity = auth.client_id or ""
        self._wire = OAuthWire(server_url, redact)
        self._found: Discovered | None = None
        self._client: ClientAuth | None = None
        self._entry: dict[str, Any] | None = None
        self._asked: str | None = None
        self._lock = threading.Lock()
        self._refused: set[str] = set()
        self._person_lock = threading.Lock()
        self._person_total = 0.0
        self._person_since: float | None = None
        if auth.client_secret:
            redact.add([auth.client_secret])

    def close(self) -> None:
        self._wire.close()

    def person_seconds(self) -> float:
        """Seconds spent so far waiting on a person signing in (the current wait included)."""
        with self._person_lock:
            since = self._person_since
            ongoing = time.monotonic() - since if since is not None else 0.0
            return self._person_total + ongoing

    # ------------------------------------------------------------------ the transport's calls

    def header(self, stop: threading.Event) -> dict[str, str]:
        """``{"Authorization": "Bearer ..."}`` for the token to send now; ``{}`` before any."""
        entry = self._entry
        if entry is None:
            entry = self.store.find(self.server_url, self._identity)
            if entry is None:
                return {}
            self._adopt(entry)
        if _expiring(entry) and entry.get("refresh_token"):
            with self._locked(stop):
                if self._entry is entry:  # not refreshed by another thread meanwhile
                    self._refresh(entry, stop)
        current = self._entry
        return {"Authorization": f"Bearer {current['access_token']}"} if current else {}

    def unauthorized(
        self, www_authenticate: str | None, sent: dict[str, str], stop: threading.Event
    ) -> None:
        """Get a token after a 401 to ``sent`` (see the module text).

        Raises:
            AuthenticationError: no token can be had (the reason in the message).
            Cancelled, RequestTimeout, ConnectionFailed ...: a request failed.
        """
        challenge = parse_challenge(www_authenticate)
        with self._locked(stop):
            if self._newer_than(sent):
                return
            found = self._discover(challenge, stop)
            client = self._known(found)
            if client is not None:
                entry = self.store.token(token_key(found.resource, client.client_id))
                if entry is not None and not _same(entry, sent) and not _expiring(entry):
                    self._adopt(entry)
                    return
                if entry is not None and entry.get("refresh_token") and self._refresh(entry, stop):
                    return
            scope = self.auth.scope or challenge.scope or _joined(found.scopes_supported)
            self._authorize(found, scope, stop)

    def forbidden(
        self, www_authenticate: str | None, sent: dict[str, str], stop: threading.Event
    ) -> bool:
        """Step up after a 403: ``False`` when it is not ``insufficient_scope``.

        Raises:
            AuthenticationError, OllmError: as :meth:`unauthorized`.
        """
        challenge = parse_challenge(www_authenticate)
        if challenge.error != "insufficient_scope":
            return False
        named = set((challenge.scope or "").split())
        if named and named <= self._refused:
            raise AuthenticationError(
                f"{self.label} needs the scope {challenge.scope}, which its authorization "
                "server did not grant when this connection asked for it (not asked again)",
                status=403,
                details={"scope": challenge.scope, "server_url": self.server_url},
            )
        with self._locked(stop):
            if self._newer_than(sent):
                return True
            found = self._discover(challenge, stop)
            held = self._entry.get("scope") if self._entry else None
            wanted = challenge.scope or _joined(found.scopes_supported)
            scope = union_scopes(self._asked, held if isinstance(held, str) else None, wanted)
            logger.debug("%s: insufficient scope; authorizing again for %s", self.label, scope)
            self._remember_needed(scope, stop)
            self._authorize(found, scope, stop, f"the server asks for the scope {scope}")
        return True

    def step_up_refused(self, www_authenticate: str | None) -> None:
        """The server answered ``403`` again after a step-up: the scopes it names are not
        asked for again on this connection (a person would be asked on every call)."""
        scope = parse_challenge(www_authenticate).scope
        if scope:
            self._refused.update(scope.split())

    def sign_in(self, stop: threading.Event) -> None:
        """Sign in now, whether or not a token is stored (``ollm-lite mcp login``).

        Raises:
            AuthenticationError, OllmError: as :meth:`unauthorized`.
        """
        with self._locked(stop):
            # The server's own challenge, as a request would get it: where its resource
            # metadata is, and the scope it wants.
            challenge = parse_challenge(self._wire.challenge(self.server_url, stop))
            if not challenge.bearer:
                challenge = Challenge(bearer=True)
            found = self._discover(challenge, stop)
            stored = self.store.find(self.server_url, self._identity) or {}
            held, needed = stored.get("scope"), stored.get("needed_scope")
            scope = union_scopes(
                self.auth.scope or challenge.scope or _joined(found.scopes_supported),
                held if isinstance(held, str) else None,
                needed if isinstance(needed, str) else None,
            )
            self._authorize(found, scope, stop)

    # ------------------------------------------------------------------ steps

    def _discover(self, challenge: Challenge, stop: threading.Event) -> Discovered:
        if self._found is None:
            self._found = discover(self.server_url, challenge, self._wire, stop, self.label)
        return self._found

    def _known(self, found: Discovered) -> ClientAuth | None:
        if self._client is None:
            self._client = known_client(self.auth, found, self.store, self.redact, self.label)
        return self._client

    def _authorize(
        self,
        found: Discovered,
        scope: str | None,
        stop: threading.Event,
        why: str = "no valid token is stored, or the server refused its refresh",
    ) -> None:
        """A new authorization (no refresh): client credentials, or a person signing in."""
        self._asked = scope
        if self.auth.grant == "client_credentials":
            client = self._known(found)
            assert client is not None  # a client_credentials McpAuth always has an id
            params = {"grant_type": "client_credentials", "resource": found.resource}
            if scope:
                params["scope"] = scope
            token = request_token(
                self._wire, found.token_endpoint, client, params, stop, self.redact
            )
            self._save(found, client, token, stop)
            return
        command = self.auth.login_command
        if command is not None:
            raise AuthenticationError(
                f"{self.label} needs a person to sign in ({why}): run `{command}`",
                details={"command": command, "server_url": self.server_url},
            )
        self._login(found, scope, stop)

    def _login(self, found: Discovered, scope: str | None, stop: threading.Event) -> None:
        endpoint = found.authorization_endpoint
        if endpoint is None:
            raise AuthenticationError(
                f"the authorization server {found.issuer} of {self.label} publishes no "
                "authorization_endpoint: a person cannot sign in there",
                details={"issuer": found.issuer},
            )
        methods = found.metadata.get("code_challenge_methods_supported")
        if isinstance(methods, list) and "S256" not in methods:
            raise AuthenticationError(
                f"the authorization server {found.issuer} of {self.label} does not offer PKCE "
                f"with S256 (it lists {', '.join(map(str, methods)) or 'none'}): no sign-in "
                "without it",
                details={"issuer": found.issuer},
            )
        port = self.auth.redirect_port
        reuse = None if port is not None else registered_port(self.store, found.issuer)
        pkce = Pkce()
        self.redact.add([pkce.verifier])
        with RedirectListener(port or reuse, fallback=port is None) as listener:
            client = self._known(found)
            if client is None:
                client = register(
                    found,
                    self._wire,
                    self.store,
                    listener.redirect_uri,
                    stop,
                    self.redact,
                    self.label,
                )
                self._client = client
            query = {
                "response_type": "code",
                "client_id": client.client_id,
                "redirect_uri": listener.redirect_uri,
                "code_challenge": pkce.challenge,
                "code_challenge_method": "S256",
                "state": pkce.state,
                "resource": found.resource,
            }
            if scope:
                query["scope"] = scope
            joiner = "&" if "?" in endpoint else "?"
            with self._person():
                self._show(f"{endpoint}{joiner}{urlencode(query)}")
                redirect = listener.wait(stop, time.monotonic() + SIGN_IN_TIMEOUT_S)
        if redirect is None:
            if stop.is_set():
                raise Cancelled(f"the sign-in to {self.label} was stopped before it completed")
            raise RequestTimeout(
                f"nobody completed the sign-in to {self.label} within {SIGN_IN_TIMEOUT_S:g} s",
                details={"timeout": SIGN_IN_TIMEOUT_S, "server_url": self.server_url},
            )
        self._check_issuer(found, redirect.iss)
        if redirect.error is not None:
            said = f": {redirect.error_description}" if redirect.error_description else ""
            raise AuthenticationError(
                f"the authorization server {found.issuer} refused the sign-in to {self.label} "
                f"({self.redact(redirect.error)}{self.redact(said)})",
                details={"oauth_error": self.redact(redirect.error)},
            )
        if redirect.state != pkce.state:
            raise AuthenticationError(
                f"the sign-in to {self.label} came back with another state than it was sent "
                "with (a forged or stale redirect): nothing was exchanged",
                details={"issuer": found.issuer},
            )
        code = redirect.code or ""
        self.redact.add([code])
        params = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": listener.redirect_uri,
            "code_verifier": pkce.verifier,
            "resource": found.resource,
        }
        token = request_token(
            self._wire, found.token_endpoint, client, params, stop, self.redact, asked=scope
        )
        self._save(found, client, token, stop)

    @contextlib.contextmanager
    def _person(self) -> Iterator[None]:
        """Count the block's time as time spent waiting on a person."""
        with self._person_lock:
            self._person_since = time.monotonic()
        try:
            yield
        finally:
            with self._person_lock:
                assert self._person_since is not None
                self._person_total += time.monotonic() - self._person_since
                self._person_since = None

    def _check_issuer(self, found: Discovered, iss: str | None) -> None:
        """RFC 9207 §2.4: the redirect's ``iss`` must name the authorization server the
        request went to, and one that says it sends ``iss`` must send it (a mix-up attack
        otherwise hands this client another server's code)."""
        issuer = found.metadata.get("issuer")
        required = found.metadata.get("authorization_response_iss_parameter_supported") is True
        if iss is None and not required:
            return
        if iss is not None and (not isinstance(issuer, str) or iss == issuer):
            return
        if iss is None:
            message = (
                f"the authorization server {issuer or found.issuer} of {self.label} says it "
                "names itself in the redirect (authorization_response_iss_parameter_supported), "
                "but the redirect came without iss"
            )
        else:
            message = (
                f"the sign-in to {self.label} came back naming the authorization server "
                f"{iss!r}, not {issuer!r} where it was sent (a mix-up)"
            )
        raise AuthenticationError(
            f"{message}: nothing was exchanged (RFC 9207)", details={"issuer": found.issuer}
        )

    def _remember_needed(self, scope: str | None, stop: threading.Event) -> None:
        """Keep the scope a step-up asks for with the stored token: a server used by name
        cannot ask a person, and ``ollm-lite mcp login`` then asks for it."""
        entry = self._entry
        if entry is None or not scope:
            return
        key = token_key(str(entry.get("resource")), str(entry.get("client_id")))
        with self.store.locked(stop) as data:
            stored = data["tokens"].get(key)
            if isinstance(stored, dict):
                stored["needed_scope"] = scope

    def _show(self, url: str) -> None:
        """Hand the authorization URL to ``open_url``, else the browser, else stderr."""
        opener = self.auth.open_url
        if opener is not None:
            try:
                opener(url)
            except Exception as exc:  # the caller's code: reported, never let through
                raise AuthenticationError(
                    f"open_url failed while signing in to {self.label}: "
                    f"{type(exc).__name__}: {self.redact(str(exc))}",
                    details={"server_url": self.server_url},
                ) from None
            return
        try:
            opened = webbrowser.open(url)
        except webbrowser.Error:
            opened = False
        if not opened:
            print(
                f"To sign in to {self.label}, open this address in a browser:\n  {url}",
                file=sys.stderr,
                flush=True,
            )

    def _refresh(self, entry: dict[str, Any], stop: threading.Event) -> bool:
        """Refresh ``entry`` under the store's lock; whether a valid token is now in use.

        Another process may have refreshed it already: its newer token is used instead.
        """
        key = token_key(str(entry.get("resource")), str(entry.get("client_id")))
        with self.store.locked(stop) as data:
            latest = data["tokens"].get(key)
            if isinstance(latest, dict) and not _same(latest, _bearer(entry)):
                if not _expiring(latest):
                    self._adopt(latest)
                    return True
                entry = latest
            refresh = entry.get("refresh_token")
            if not isinstance(refresh, str) or not refresh:
                return False
            client = self._client_of(entry)
            params = {
                "grant_type": "refresh_token",
                "refresh_token": refresh,
                "resource": str(entry.get("resource")),
            }
            try:
                token = request_token(
                    self._wire, str(entry["token_endpoint"]), client, params, stop, self.redact
                )
            except AuthenticationError as exc:
                logger.debug("%s: the refresh was refused: %s", self.label, exc.message)
                spent = dict(entry, refresh_token=None)
                data["tokens"][key] = spent
                self._entry = None
                return False
            fresh = _entry_of(entry, token)
            data["tokens"][key] = fresh
        self._adopt(fresh)
        return True

    def _client_of(self, entry: dict[str, Any]) -> ClientAuth:
        """The client a stored token was issued to (its secret from ``auth`` or the store)."""
        client_id = str(entry.get("client_id"))
        if self._client is not None and self._client.client_id == client_id:
            return self._client
        secret = self.auth.client_secret if self.auth.client_id == client_id else None
        if secret is None and not self.auth.client_id:
            record = self.store.client(str(entry.get("issuer")))
            value = record.get("client_secret") if isinstance(record, dict) else None
            secret = value if isinstance(value, str) and value else None
            self.redact.add([secret] if secret else [])
        method = choose_auth_method(None, bool(secret), entry.get("auth_method"))
        return ClientAuth(client_id, secret, method)

    def _save(
        self, found: Discovered, client: ClientAuth, token: Token, stop: threading.Event
    ) -> None:
        key = token_key(found.resource, client.client_id)
        base = {
            "server_url": self.server_url,
            "identity": self._identity,
            "resource": found.resource,
            "client_id": client.client_id,
            "issuer": found.issuer,
            "token_endpoint": found.token_endpoint,
            "auth_method": client.method,
        }
        entry = _entry_of(base, token)
        with self.store.locked(stop) as data:
            data["tokens"][key] = entry
        self._adopt(entry)

    def _adopt(self, entry: dict[str, Any]) -> None:
        self.redact.add(
            [
                v
                for v in (entry.get("access_token"), entry.get("refresh_token"))
                if isinstance(v, str)
            ]
        )
        self._entry = entry

    def _newer_than(self, sent: dict[str, str]) -> bool:
        """Whether a token other than the one ``sent`` is in use (and not expiring)."""
        entry = self._entry
        return entry is not None and not _same(entry, sent) and not _expiring(entry)

    def _locked(self, stop: threading.Event) -> _Held:
        return _Held(self._lock, stop, self.label)


class _Held:
    """``with`` a thread lock, waiting for it no longer than ``stop`` allows."""

    def __init__(self, lock: threading.Lock, stop: threading.Event, label: str) -> None:
        self._lock, self._stop, self._label = lock, stop, label

    def __enter__(self) -> None:
        while not self._lock.acquire(timeout=_POLL_S):
            if self._stop.is_set() or past_deadline(self._stop):
                raise Cancelled(f"stopped while another request signed in to {self._label}")

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _entry_of(base: dict[str, Any], token: Token) -> dict[str, Any]:
    entry = dict(base)
    entry.update(
        access_token=token.access_token,
        # RFC 6749 §6: without a new refresh token, the old one stays valid.
        refresh_token=token.refresh_token or base.get("refresh_token"),
        expires_at=token.expires_at,
        # RFC 6749 §5.1, §6: an answer without scope was granted the scope held before.
        scope=token.scope if token.scope is not None else base.get("scope"),
        saved_at=time.time(),
    )
    return entry


def _bearer(entry: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {entry.get('access_token')}"}


def _same(entry: dict[str, Any], sent: dict[str, str]) -> bool:
    return sent.get("Authorization") == f"Bearer {entry.get('access_token')}"


def _expiring(entry: dict[str, Any]) -> bool:
    expires = entry.get("expires_at")
    if not isinstance(expires, int | float) or isinstance(expires, bool):
        return False
    return expires - time.time() < EXPIRY_MARGIN_S


def _joined(scopes: tuple[str, ...] | None) -> str | None:
    return " ".join(scopes) if scopes else None

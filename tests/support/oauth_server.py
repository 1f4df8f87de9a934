"""A loopback MCP server that requires OAuth, and its authorization server, in one process.

One ``ThreadingHTTPServer`` on 127.0.0.1 plays both parts (as the conformance suite's
scenarios do): ``/mcp`` answers JSON-RPC (``initialize``, ``tools/list``, ``tools/call``) when
the bearer token is valid and has the scopes the method needs, else 401 (or 403
``insufficient_scope``) with a ``WWW-Authenticate: Bearer`` challenge; the well-known
documents describe it (RFC 9728, RFC 8414); ``/register``, ``/authorize`` (approves at once and
redirects with the code, as a person clicking "allow" would) and ``/token`` (authorization
code with PKCE, refresh with rotation, client credentials) issue tokens. Everything it is
asked is recorded in :attr:`OAuthWorld.seen`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    query: dict[str, str]
    form: dict[str, str]
    body: Any = None


@dataclass
class OAuthWorld:
    """The server's behaviour (change it between requests) and what it saw."""

    prm: bool = True
    """Whether it publishes protected resource metadata (else: 2025-03-26, own AS)."""
    prm_resource: str | None = None
    """The ``resource`` its metadata names (default: its own ``/mcp`` URL)."""
    scopes_supported: list[str] | None = None
    challenge_scope: str | None = None
    """The ``scope`` of its 401 challenge."""
    method_scopes: dict[str, list[str]] = field(default_factory=dict)
    """Scopes a method needs beyond a valid token (else ``403 insufficient_scope``)."""
    auth_methods: list[str] | None = field(default_factory=lambda: ["none"])
    registration: bool = True
    expires_in: int | None = 3600
    refresh: bool = True
    client_id: str | None = None
    client_secret: str | None = None
    """A pre-registered client (then Basic or post authentication is checked)."""
    echo_secrets: bool = False
    """Quote every header and form field in its error answers (a leaky server)."""
    refuse_refresh: bool = False
    refuse_code: bool = False
    """Refuse every code exchange (``invalid_grant``)."""
    reject_tokens: bool = False
    """Answer 401 to every token (a server that changed its mind)."""
    fixed_token: str | None = None
    """The access token to issue (else a random one)."""
    fixed_code: str | None = None
    """The authorization code to issue (else a random one)."""
    wrong_state: bool = False
    deny: bool = False
    iss: str | None = None
    """The ``iss`` it adds to its redirect (RFC 9207): ``"issuer"`` for its own issuer."""
    iss_supported: bool = False
    """Whether its metadata says ``authorization_response_iss_parameter_supported``."""
    echo_scope: bool = True
    """Whether its token answers name the scope granted (RFC 6749 §5.1: optional when it is
    the one asked for)."""
    pkce_methods: list[str] = field(default_factory=lambda: ["S256"])
    """Its ``code_challenge_methods_supported``."""
    prm_path: str | None = None
    """Publish the resource metadata only there (named by the challenge alone)."""
    withheld: set[str] = field(default_factory=set)
    """Scopes never granted, whatever is asked."""
    open_paths: set[str] = field(default_factory=set)
    """JSON-RPC methods answered without a token (``initialize`` for step-up tests)."""
    seen: list[Seen] = field(default_factory=list)
    tokens: dict[str, list[str]] = field(default_factory=dict)
    refreshes: dict[str, str] = field(default_factory=dict)
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    registered: dict[str, str | None] = field(default_factory=dict)
    base: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, path: str, **form: str) -> int:
        return sum(
            1
            for s in self.seen
            if s.path == path and all(s.form.get(k) == v for k, v in form.items())
        )

    def revoke_all(self) -> None:
        with self.lock:
            self.tokens.clear()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # ------------------------------------------------------------------ plumbing

    def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def _record(self) -> Seen:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        ctype = self.headers.get("Content-Type", "")
        form: dict[str, str] = {}
        body: Any = None
        if "x-www-form-urlencoded" in ctype:
            form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        elif raw:
            body = json.loads(raw)
        seen = Seen(
            self.command,
            parts.path,
            {k.lower(): v for k, v in self.headers.items()},
            {k: v[0] for k, v in parse_qs(parts.query).items()},
            form,
            body,
        )
        world = self.server.world
        with world.lock:
            world.seen.append(seen)
        return seen

    def _error(self, status: int, error: str, seen: Seen) -> None:
        said = error
        if self.server.world.echo_secrets:
            said += " " + json.dumps({"headers": seen.headers, "form": seen.form})
        self._answer(status, {"error": said, "error_description": said})

    # ------------------------------------------------------------------ routes

    def do_GET(self) -> None:
        seen = self._record()
        world = self.server.world
        base = world.base
        prm_at = seen.path == world.prm_path
        if world.prm_path is None:
            prm_at = seen.path.startswith("/.well-known/oauth-protected-resource")
        if prm_at and world.prm:
            doc: dict[str, Any] = {
                "resource": world.prm_resource or f"{base}/mcp",
                "authorization_servers": [base],
            }
            if world.scopes_supported is not None:
                doc["scopes_supported"] = world.scopes_supported
            self._answer(200, doc)
        elif seen.path == "/.well-known/oauth-authorization-server":
            meta: dict[str, Any] = {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "code_challenge_methods_supported": world.pkce_methods,
            }
            if world.registration:
                meta["registration_endpoint"] = f"{base}/register"
            if world.iss_supported:
                meta["authorization_response_iss_parameter_supported"] = True
            if world.auth_methods is not None:
                meta["token_endpoint_auth_methods_supported"] = world.auth_methods
            self._answer(200, meta)
        elif seen.path == "/authorize":
            self._authorize(seen)
        elif seen.path == "/mcp":
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._answer(404, {"error": "not_found"})

    def do_DELETE(self) -> None:
        self._record()
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        seen = self._record()
        if seen.path == "/register":
            self._register(seen)
        elif seen.path == "/token":
            self._token(seen)
        elif seen.path == "/mcp":
            self._mcp(seen)
        else:
            self._answer(404, {"error": "not_found"})

    def _authorize(self, seen: Seen) -> None:
        world = self.server.world
        q = seen.query
        target = q["redirect_uri"]
        if world.deny:
            args = {"error": "access_denied", "state": q.get("state", "")}
        else:
            code = world.fixed_code or secrets.token_urlsafe(16)
            with world.lock:
                world.codes[code] = q
            state = "forged" if world.wrong_state else q.get("state", "")
            args = {"code": code, "state": state}
        if world.iss is not None:
            args["iss"] = world.base if world.iss == "issuer" else world.iss
        self.send_response(302)
        self.send_header("Location", f"{target}?{urlencode(args)}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _register(self, seen: Seen) -> None:
        world = self.server.world
        client_id = f"dyn-{secrets.token_hex(4)}"
        method = seen.body.get("token_endpoint_auth_method", "client_secret_basic")
        secret = None if method == "none" else f"dyn~secret-{secrets.token_hex(8)}"
        with world.lock:
            world.registered[client_id] = secret
        answer = {"client_id": client_id, "token_endpoint_auth_method": method, **seen.body}
        if secret:
            answer["client_secret"] = secret
        self._answer(201, answer)

    def _client_ok(self, seen: Seen) -> str | None:
        """The authenticated client's id, or ``None``."""
        world = self.server.world
        auth = seen.headers.get("authorization", "")
        if auth.startswith("Basic "):
            cid, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        else:
            cid, secret = seen.form.get("client_id", ""), seen.form.get("client_secret", "")
        if world.client_id is not None and cid == world.client_id:
            return cid if secret == world.client_secret else None
        if cid in world.registered:
            expected = world.registered[cid]
            return cid if expected is None or secret == expected else None
        return None

    def _token(self, seen: Seen) -> None:
        world = self.server.world
        form = seen.form
        client = self._client_ok(seen)
        if client is None:
            self._error(401, "invalid_client", seen)
            return
        grant = form.get("grant_type")
        if grant == "authorization_code":
            with world.lock:
                asked = world.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            digest = hashlib.sha256(verifier.encode()).digest()
            challenge = base64.urlsafe_b64encode(digest).decode().rstrip("=")
            if world.refuse_code or asked is None or asked.get("code_challenge") != challenge:
                self._error(400, "invalid_grant", seen)
                return
            scope = asked.get("scope", "")
        elif grant == "refresh_token":
            with world.lock:
                scope_of = world.refreshes.pop(form.get("refresh_token", ""), None)
            if scope_of is None or world.refuse_refresh:
                self._error(400, "invalid_grant", seen)
                return
            scope = scope_of
        elif grant == "client_credentials":
            scope = form.get("scope", "")
        else:
            self._error(400, "unsupported_grant_type", seen)
            return
        scope = " ".join(s for s in scope.split() if s not in world.withheld)
        token = world.fixed_token or f"at~{secrets.token_hex(8)}"
        answer: dict[str, Any] = {"access_token": token, "token_type": "Bearer"}
        with world.lock:
            world.tokens[token] = scope.split()
            if world.refresh and grant != "client_credentials":
                refresh = f"rt~{secrets.token_hex(8)}"
                world.refreshes[refresh] = scope
                answer["refresh_token"] = refresh
        if world.expires_in is not None:
            answer["expires_in"] = world.expires_in
        if scope and world.echo_scope:
            answer["scope"] = scope
        self._answer(200, answer)

    def _mcp(self, seen: Seen) -> None:
        world = self.server.world
        msg = seen.body or {}
        method = msg.get("method", "")
        if method not in world.open_paths and not method.startswith("notifications/"):
            auth = seen.headers.get("authorization", "")
            token = auth[7:] if auth.startswith("Bearer ") else None
            with world.lock:
                scopes = world.tokens.get(token) if token else None
            prm = world.prm_path or "/.well-known/oauth-protected-resource/mcp"
            params = [f'resource_metadata="{world.base}{prm}"']
            if not world.prm:
                params = ['error="invalid_token"']
            if scopes is None or world.reject_tokens:
                if world.echo_secrets:
                    self._error(401, "invalid_token", seen)
                    return
                if world.challenge_scope:
                    params.append(f'scope="{world.challenge_scope}"')
                self._answer(
                    401,
                    {"error": "invalid_token"},
                    {"WWW-Authenticate": "Bearer " + ", ".join(params)},
                )
                return
            needed = world.method_scopes.get(method, [])
            if not all(s in scopes for s in needed):
                params += ['error="insufficient_scope"', f'scope="{" ".join(needed)}"']
                self._answer(
                    403,
                    {"error": "insufficient_scope"},
                    {"WWW-Authenticate": "Bearer " + ", ".join(params)},
                )
                return
        if "id" not in msg:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if method == "initialize":
            result: Any = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "guarded", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
        elif method == "ping":
            result = {}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "you are signed in"}]}
        else:
            self._answer(
                200, {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}
            )
            return
        self._answer(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    world: OAuthWorld


class OAuthServer:
    """The loopback server (``with`` starts and stops it)."""

    def __init__(self, world: OAuthWorld | None = None) -> None:
        self.world = world or OAuthWorld()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.world = self.world
        self.world.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        return f"{self.world.base}/mcp"

    def __enter__(self) -> OAuthServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

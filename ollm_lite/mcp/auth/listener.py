"""The loopback listener that receives the authorization response (RFC 8252 §7.3).

It binds ``127.0.0.1`` (a given port, else a free one) and listens *before* the authorization
URL is shown, so a caller's ``open_url`` may follow the URL to the end itself. The first
request to ``/callback`` carrying ``code`` or ``error`` ends it: the page tells the person they
may close the window; anything else is answered 404 and waited past. The serving thread ends
when :meth:`RedirectListener.close` runs (``with`` does it).
"""

from __future__ import annotations

import http.server
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ...errors import ConfigError

__all__ = ["CALLBACK_PATH", "Redirect", "RedirectListener"]

CALLBACK_PATH = "/callback"
_PAGE = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>ollm-lite</title></head>"
    b"<body><p>Signed in: you may close this window.</p></body></html>"
)
_FAILED_PAGE = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>ollm-lite</title></head>"
    b"<body><p>The sign-in did not succeed; see the program's message.</p></body></html>"
)


@dataclass(frozen=True, slots=True)
class Redirect:
    """What the authorization server sent back (RFC 6749 §4.1.2)."""

    code: str | None = field(repr=False)  # a secret: never shown
    state: str | None
    error: str | None
    error_description: str | None
    iss: str | None


class _Server(http.server.HTTPServer):
    redirect: Redirect | None
    arrived: threading.Event


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items() if v}
        if (
            parts.path != CALLBACK_PATH
            or ("code" not in query and "error" not in query)
            or self.server.arrived.is_set()
        ):
            self.send_error(404)
            return
        self.server.redirect = Redirect(
            query.get("code"),
            query.get("state"),
            query.get("error"),
            query.get("error_description"),
            query.get("iss"),
        )
        page = _PAGE if "code" in query else _FAILED_PAGE
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(page)
        self.server.arrived.set()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the query holds the code, a secret."""


class RedirectListener:
    """A one-shot HTTP listener on ``127.0.0.1`` for the redirect with the code.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the port cannot be bound.
    """

    def __init__(self, port: int | None = None, *, fallback: bool = False) -> None:
        try:
            self._server = _Server(("127.0.0.1", port or 0), _Handler)
        except OSError as exc:
            if not (fallback and port):
                raise ConfigError(
                    f"cannot listen on 127.0.0.1:{port} for the sign-in redirect: {exc}"
                ) from None
            self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.redirect = None
        self._server.arrived = threading.Event()
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="ollm-mcp-redirect",
            daemon=True,
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    def wait(self, stop: threading.Event, until: float, poll: float = 0.05) -> Redirect | None:
        """The redirect once it arrived; ``None`` when ``stop`` was set or ``until`` (a
        ``time.monotonic()`` value) passed first.

        ``stop``'s own deadline is not read: it bounds the machine's work, and a person
        signing in is bounded by ``until`` instead.
        """
        while not self._server.arrived.wait(poll):
            if stop.is_set() or time.monotonic() >= until:
                return None
        return self._server.redirect

    def close(self) -> None:
        """Stop serving and close the socket (waits for the serving thread)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> RedirectListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""HTTP to authorization servers and metadata documents, through the library's transport.

Every request follows the call's ``stop`` event (its timeout and cancel), and every error is
masked by the server's redactor, which by then holds the secrets of the sign-in (client
secret, code, verifier, tokens). Metadata GETs are retried as any idempotent request
(connection errors, 5xx); POSTs to the token and registration endpoints are sent once (a
code must not be spent twice).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from ...errors import AuthenticationError, BadResponse, HTTPStatusError, OllmError
from ...http.policy import RetryPolicy, Timeouts
from ...http.secrets import Redactor
from ...http.transport import Transport

__all__ = ["OAuthWire"]

_MAX_DOCUMENT = 1 << 20


class OAuthWire:
    """JSON documents and form posts for one MCP server's sign-in."""

    def __init__(self, server_url: str, redact: Redactor) -> None:
        self.redact = redact
        self._http = Transport(
            server_url,
            provider="oauth",
            timeouts=Timeouts(connect=10.0, idle=60.0),
            retry=RetryPolicy(retries=2),
            start_hint="check the authorization server's URL and that it is reachable",
            auth_hint="Check the client id and secret given for the MCP server.",
        )

    def close(self) -> None:
        self._http.close()

    def get_json(self, url: str, stop: threading.Event) -> Any:
        """The JSON document at ``url``.

        Raises:
            HTTPStatusError: the server answered an error status (``.status``).
            BadResponse: the answer is not JSON.
            OllmError: the request failed otherwise.
        """
        return self._masked(self._get, url, stop)

    def post(
        self,
        url: str,
        stop: threading.Event,
        *,
        form: Mapping[str, str] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """POST a form (or JSON) to ``url`` once; its JSON answer.

        Raises:
            HTTPStatusError: an error status; ``details["oauth_error"]`` holds the server's
                ``error`` code (RFC 6749 §5.2) when it gave one.
            BadResponse, OllmError: as :meth:`get_json`.
        """
        return self._masked(self._post, url, stop, form, json_body, headers)

    def challenge(self, url: str, stop: threading.Event) -> str | None:
        """The ``WWW-Authenticate`` value the MCP server at ``url`` answers a request without
        a token with (a JSON-RPC ``ping``, which opens no session); ``None`` when it answers
        anything but a 401 with a challenge.

        Raises:
            OllmError: the request failed (the server is unreachable, the call was stopped).
        """
        try:
            with self._http.open_stream(
                "POST",
                url,
                json_body={"jsonrpc": "2.0", "id": "ollm-lite-sign-in", "method": "ping"},
                protocol_headers={"Accept": "application/json, text/event-stream"},
                cancel=stop,
                retry=False,
            ):
                return None
        except AuthenticationError as exc:
            value = exc.details.get("www_authenticate")
            return value if isinstance(value, str) else None
        except HTTPStatusError:
            return None

    def _get(self, url: str, stop: threading.Event) -> Any:
        with self._http.open_stream(
            "GET", url, protocol_headers={"Accept": "application/json"}, cancel=stop
        ) as response:
            return _decoded(url, response.read_body(_MAX_DOCUMENT))

    def _post(
        self,
        url: str,
        stop: threading.Event,
        form: Mapping[str, str] | None,
        json_body: Any,
        headers: Mapping[str, str] | None,
    ) -> Any:
        try:
            with self._http.open_stream(
                "POST",
                url,
                form_body=form,
                json_body=json_body,
                headers=headers,
                protocol_headers={"Accept": "application/json"},
                cancel=stop,
                retry=False,
            ) as response:
                return _decoded(url, response.read_body(_MAX_DOCUMENT))
        except HTTPStatusError as exc:
            code = exc.details.get("server_message")
            if isinstance(code, str) and code.replace("_", "").isalpha():
                exc.details["oauth_error"] = code
            raise

    def _masked(self, call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except OllmError as exc:
            error = self.redact.error(exc)
            if error is exc:
                raise
        raise error


def _decoded(url: str, raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise BadResponse(f"{url} did not answer with JSON") from None

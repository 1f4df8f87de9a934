"""Secrets kept out of messages: the one redactor, and the check that a key can be sent.

:class:`Redactor` replaces the provider's secrets with ``***`` wherever text from the server
reaches an error (configuration display uses it too); :func:`check_sendable` refuses, before
any request, a key or header value that no HTTP header can carry, without quoting it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError

__all__ = ["MIN_SECRET", "Redactor", "basic_token", "check_sendable", "unsendable"]

#: Shorter "keys" are not masked inside other text (they would garble ordinary words); the
#: one threshold for every message the library builds, configuration display included.
MIN_SECRET = 4


class Redactor:
    """Replaces secrets in text with ``***``: the one redactor of the library.

    Every quote of a server's text is masked first and cut afterwards: a secret straddling
    the cut would otherwise survive but for its last characters.
    """

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Sequence[str]) -> None:
        kept = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET}
        self._secrets = tuple(sorted(kept, key=len, reverse=True))  # longest first

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def event(self, event: Any) -> Any:
        """An ``ErrorEvent`` with its message and details redacted; other events unchanged.

        For errors a server reports *inside* a 200 stream, which never pass the status
        mapping (a server echoing the key mid-stream must not leak it).
        """
        error = getattr(event, "error", None)
        if error is None or not self._secrets:
            return event
        return type(event)(type(error)(self(error.message), error.code, self.obj(error.details)))

    def obj(self, value: Any) -> Any:
        """``value`` with every string inside it (dict values, list items) redacted."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {k: self.obj(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.obj(v) for v in value]
        return value


def unsendable(value: str) -> str | None:
    """Why ``value`` cannot go into an HTTP header value, or ``None`` when it can.

    ``requests`` refuses a line break or a leading blank, and ``http.client`` a character
    outside Latin-1 (RFC 9110 §5.5: field values are visible ASCII, blanks inside, and
    obs-text); a key with a blank around it is a copy-and-paste accident.
    """
    if value != value.strip():
        return "a leading or trailing blank or line break"
    if any(ch < " " or ch == "\x7f" for ch in value):
        return "a control character"
    if not value.isascii():
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            return "a character outside Latin-1"
    return None


def check_sendable(provider: str, keys: Sequence[str], headers: Mapping[str, str]) -> None:
    """Refuse, before any request, API keys and header values that cannot be sent.

    Raised outside any ``except`` block and without the value, so the key is in no
    exception of the chain, no message and no log record.

    Raises:
        ConfigError: ``CONFIG_INVALID``.
    """
    for key in keys:
        why = unsendable(key) if isinstance(key, str) else "a value that is not text"
        if why:
            raise ConfigError(
                f"the API key for {provider} holds {why}, which cannot be sent in an HTTP "
                "header: check the variable or file it came from (a trailing newline?)"
            )
    for name, value in headers.items():
        why = unsendable(value) if isinstance(value, str) else "a value that is not text"
        if why:
            raise ConfigError(f"the {name} header for {provider} holds {why}, which cannot be sent")


def basic_token(user: str, password: str) -> str:
    """The ``Authorization: Basic`` token of ``user``/``password`` (masked like a key: a
    server echoing the request's headers must not show it)."""
    return base64.b64encode(f"{user}:{password}".encode()).decode("ascii")

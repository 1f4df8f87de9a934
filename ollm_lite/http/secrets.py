"""Secrets kept out of messages: the one redactor, and the check that a key can be sent.

A secret is every value the caller hands the library as configuration of a connection: API
keys, URL user-info, the value of every header it supplies (configured, per call, an MCP
server's ``headers``) and of every ``env`` entry it gives an MCP server. :class:`Redactor`
replaces them with ``***`` wherever the library writes text: exception messages, details and
the exceptions they are chained to, log records, the CLI's output, batch files (configuration
display uses it too). Values shorter than :data:`MIN_SECRET` characters are not masked.
:func:`headers_masked_repr` is the ``repr`` of a value that carries headers (a request, a
call's settings): every field shown, every header value as ``***``.
:func:`check_sendable` refuses, before any request, a key or header value that no HTTP header
can carry, without quoting it.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ..errors import ConfigError, OllmError

__all__ = [
    "MIN_SECRET",
    "Redactor",
    "basic_token",
    "check_sendable",
    "headers_masked_repr",
    "unsendable",
]

#: Shorter "keys" are not masked inside other text (they would garble ordinary words); the
#: one threshold for every message the library builds, configuration display included.
MIN_SECRET = 4

_E = TypeVar("_E", bound=BaseException)

#: Attributes of error subclasses that may quote a server (``ConnectionFailed.url``, an MCP
#: error's ``data``).
_QUOTING_ATTRIBUTES = ("url", "data")

#: Serialises :meth:`Redactor.add` (readers see the old tuple or the new one, never a mix).
_ADD_LOCK = threading.Lock()


class Redactor:
    """Replaces secrets in text with ``***``: the one redactor of the library.

    Every quote of a server's text is masked first and cut afterwards: a secret straddling
    the cut would otherwise survive but for its last characters.
    """

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str]) -> None:
        kept = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET}
        self._secrets = tuple(sorted(kept, key=len, reverse=True))  # longest first

    def __bool__(self) -> bool:
        """Whether there is anything to mask."""
        return bool(self._secrets)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values masked (for a writer that masks them in its own way: the call log)."""
        return self._secrets

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def plus(self, secrets: Iterable[str]) -> Redactor:
        """A redactor masking ``secrets`` as well (``self`` when they add nothing)."""
        added = [s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET]
        if not added or set(added) <= set(self._secrets):
            return self
        return Redactor([*self._secrets, *added])

    def add(self, secrets: Iterable[str]) -> None:
        """Mask ``secrets`` from now on as well: credentials learnt while connected (OAuth
        access and refresh tokens, authorization codes, PKCE verifiers, a registered client's
        secret), for every holder of this redactor."""
        with _ADD_LOCK:
            kept = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET}
            if not kept <= set(self._secrets):
                merged = kept | set(self._secrets)
                self._secrets = tuple(sorted(merged, key=len, reverse=True))

    def leaks(self, text: str) -> bool:
        """Whether ``text`` holds one of the secrets."""
        return any(secret in text for secret in self._secrets)

    def event(self, event: Any) -> Any:
        """An ``ErrorEvent`` with its message, details and exception redacted; other events
        unchanged.

        For errors a server reports *inside* a 200 stream, which never pass the status
        mapping (a server echoing the key mid-stream must not leak it).
        """
        error = getattr(event, "error", None)
        if error is None or not self._secrets:
            return event
        info = type(error)(self(error.message), error.code, self.obj(error.details))
        exception = getattr(event, "exception", None)
        if exception is None:
            return type(event)(info)
        return type(event)(info, exception=self.error(exception))

    def error(self, exc: _E) -> _E:
        """``exc`` with the secrets masked in its text and along its chain.

        An :class:`~ollm_lite.errors.OllmError` holding a secret (message, details, its
        causes) is replaced by a masked copy (class, code, traceback and chain kept); the
        chain is cut before a foreign exception whose text holds one. Other exceptions are
        returned as they are. ``exc`` itself is never changed.
        """
        if not self._secrets or not isinstance(exc, OllmError):
            return exc
        return self._error(exc, 0)

    def _error(self, exc: _E, depth: int) -> _E:
        via_cause = exc.__cause__ is not None
        link = exc.__cause__ if via_cause else exc.__context__
        masked: BaseException | None = link
        if link is not None:
            if depth >= 20 or (not isinstance(link, OllmError) and self._leaks_exc(link)):
                masked = None
            elif isinstance(link, OllmError):
                masked = self._error(link, depth + 1)
        if masked is link and not self._leaks_exc(exc):
            return exc
        out = copy.copy(exc)
        if isinstance(out, OllmError):
            out.message = self(out.message)
            out.details = self.obj(out.details)
            out.args = (out.message, *out.args[1:])
        for name in _QUOTING_ATTRIBUTES:  # what subclasses quote besides the message
            if getattr(out, name, None) is not None:
                setattr(out, name, self.obj(getattr(out, name)))
        out.__traceback__ = exc.__traceback__
        if via_cause:
            out.__cause__, out.__context__ = masked, None
            out.__suppress_context__ = True
        else:
            out.__cause__, out.__context__ = None, masked
            out.__suppress_context__ = exc.__suppress_context__
        return out

    def _leaks_exc(self, exc: BaseException) -> bool:
        try:
            text = str(exc)
        except Exception:  # a foreign __str__ may fail: it is not quoted anywhere then
            return False
        if self.leaks(text):
            return True
        if isinstance(exc, OllmError):
            quoted = [exc.details, *(getattr(exc, n, None) for n in _QUOTING_ATTRIBUTES)]
            return self._holds(quoted)
        return False

    def _holds(self, value: Any) -> bool:
        """Whether a string inside ``value`` (as :meth:`obj` walks it) holds a secret."""
        if isinstance(value, str):
            return self.leaks(value)
        if isinstance(value, dict):
            return any(self._holds(k) or self._holds(v) for k, v in value.items())
        if isinstance(value, list) or type(value) is tuple:
            return any(self._holds(v) for v in value)
        return False

    def obj(self, value: Any) -> Any:
        """``value`` with every string inside it (dict keys and values, list and tuple items)
        redacted."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self.obj(k): self.obj(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.obj(v) for v in value]
        if type(value) is tuple:
            return tuple(self.obj(v) for v in value)
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


def headers_masked_repr(value: Any) -> str:
    """The dataclass ``repr`` of ``value`` with its ``headers`` values shown as ``***``,
    and masked wherever else the text quotes them (a message echoing one)."""
    headers = getattr(value, "headers", None)
    shown: Any = headers
    secrets: list[str] = []
    if isinstance(headers, Mapping):
        shown = dict.fromkeys(headers, "***")
        secrets = [s for v in headers.values() if isinstance(v, str) for s in _repr_spellings(v)]
    elif headers:
        shown = "***"
    fields = ", ".join(
        f"{f.name}={shown if f.name == 'headers' else getattr(value, f.name)!r}"
        for f in dataclasses.fields(value)
        if f.repr
    )
    return Redactor(secrets)(f"{type(value).__qualname__}({fields})")


def _repr_spellings(value: str) -> set[str]:
    """``value`` as ``repr`` may write it inside a longer string (escaped, either quote)."""
    inner = repr(value)[1:-1]
    return {value, inner, inner.replace("\\'", "'"), inner.replace("'", "\\'")}

"""The exception tree. Every failure the library reports is an :class:`OllmError`.

::

    OllmError                              .code .message .details .provider .model
    ├─ ConfigError(…, ValueError)          CONFIG_INVALID
    ├─ ConnectionFailed                    CONNECTION_FAILED   .url
    ├─ RequestTimeout                      LLM_TIMEOUT
    ├─ HTTPStatusError                     LLM_HTTP_ERROR      .status
    │  ├─ AuthenticationError              LLM_AUTH_FAILED     401/403, Gemini API_KEY_INVALID
    │  ├─ ModelNotFound                    MODEL_NOT_FOUND     404 for a model
    │  └─ RateLimited                      LLM_RATE_LIMITED    .retry_after
    ├─ BadResponse                         LLM_BAD_RESPONSE    bad SSE/NDJSON, error mid-stream
    ├─ Cancelled                           CANCELLED
    ├─ TokenLimitExceeded                  TOKEN_LIMIT_EXCEEDED
    ├─ ProviderNotFound(…, KeyError)       PROVIDER_NOT_FOUND
    └─ UnsupportedOperation(…, NotImplementedError)  UNSUPPORTED_OPERATION

``code`` is a class attribute and never changes. Streaming methods report the same failures
as an ``ErrorEvent`` carrying :meth:`OllmError.to_info`; non-streaming methods raise.

Invariants: constructors have no side effects; every exception survives ``pickle``; no
exception text contains a secret — the transport (and an MCP session) masks API keys, URL
passwords, header and ``env`` values before raising (:mod:`ollm_lite.http.secrets`).
"""

from __future__ import annotations

from typing import Any

from .types import ErrorInfo

__all__ = [
    "AuthenticationError",
    "BadResponse",
    "BudgetExceeded",
    "Cancelled",
    "ConfigError",
    "ConnectionFailed",
    "HTTPStatusError",
    "ModelNotFound",
    "OllmError",
    "ProviderNotFound",
    "RateLimited",
    "RequestTimeout",
    "TokenLimitExceeded",
    "UnsupportedOperation",
    "error_from_code",
]


class OllmError(Exception):
    """Root of every error the library raises.

    Attributes:
        code: Stable machine-readable code (class attribute).
        message: Human-readable text saying what went wrong and what to do next.
        details: Extra structured facts (never secrets).
        provider: Name of the provider involved, when known.
        model: Name of the model involved, when known.
    """

    code: str = "OLLM_ERROR"

    def __init__(
        self,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        provider: str | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = dict(details) if details else {}
        self.provider = provider
        self.model = model

    def _state(self) -> dict[str, Any]:
        return {"details": self.details, "provider": self.provider, "model": self.model}

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only constructor arguments are lost by Exception's default pickling.
        return (_rebuild, (type(self), self.message, self._state()))

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"

    def to_info(self) -> ErrorInfo:
        """This error as an :class:`ErrorInfo` (for ``ErrorEvent`` and tool results)."""
        details = dict(self.details)
        if self.provider:
            details.setdefault("provider", self.provider)
        if self.model:
            details.setdefault("model", self.model)
        return ErrorInfo(message=self.message, code=self.code, details=details or None)


def _rebuild(cls: type[OllmError], message: str, state: dict[str, Any]) -> OllmError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.message = message
    for key, value in state.items():
        setattr(err, key, value)
    return err


class ConfigError(OllmError, ValueError):
    """The configuration could not be read or is invalid."""

    code = "CONFIG_INVALID"


def check_positive_int(name: str, value: object, *, optional: bool = False) -> None:
    """Raise ``ConfigError`` unless ``value`` is an ``int`` of at least 1 (``None`` if optional).

    ``bool`` is not accepted although it is an ``int``. The message names the argument and shows
    the value given.
    """
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


class ConnectionFailed(OllmError):
    """The server could not be reached (refused, unresolvable, reset before a response)."""

    code = "CONNECTION_FAILED"

    def __init__(self, message: str, *, url: str | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.url = url

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "url": self.url}


class RequestTimeout(OllmError):
    """The server took too long: to connect, between bytes, or past the total deadline."""

    code = "LLM_TIMEOUT"


class HTTPStatusError(OllmError):
    """The server answered with an error status; ``message`` is the server's own text."""

    code = "LLM_HTTP_ERROR"

    def __init__(self, message: str, *, status: int | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.status = status

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "status": self.status}


class AuthenticationError(HTTPStatusError):
    """The server rejected the credentials (HTTP 401/403, or Gemini's API_KEY_INVALID)."""

    code = "LLM_AUTH_FAILED"


class ModelNotFound(HTTPStatusError):
    """The model does not exist on the server."""

    code = "MODEL_NOT_FOUND"


class RateLimited(HTTPStatusError):
    """The server asked to slow down; ``retry_after`` is its wait in seconds when it said."""

    code = "LLM_RATE_LIMITED"

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "retry_after": self.retry_after}


class BadResponse(OllmError):
    """The server sent something the protocol does not allow, or reported an error mid-stream."""

    code = "LLM_BAD_RESPONSE"


class Cancelled(OllmError):
    """The caller's cancel event was set."""

    code = "CANCELLED"


class TokenLimitExceeded(OllmError):
    """The request would not fit in the model's context window."""

    code = "TOKEN_LIMIT_EXCEEDED"


class BudgetExceeded(OllmError):
    """A budget's limit is reached: the request was not sent.

    ``details``: ``limit``, ``spent``, ``what`` (``"tokens"``, ``"cost"`` or ``"requests"``)
    and ``per`` (``"run"``, ``"day"`` or ``"month"``).
    """

    code = "LLM_BUDGET_EXCEEDED"


class ProviderNotFound(OllmError, KeyError):
    """No provider is registered under that name."""

    code = "PROVIDER_NOT_FOUND"


class UnsupportedOperation(OllmError, NotImplementedError):
    """The provider does not offer this operation."""

    code = "UNSUPPORTED_OPERATION"


_BY_CODE: dict[str, type[OllmError]] = {
    cls.code: cls
    for cls in (
        ConfigError,
        ConnectionFailed,
        RequestTimeout,
        HTTPStatusError,
        AuthenticationError,
        ModelNotFound,
        RateLimited,
        BadResponse,
        Cancelled,
        TokenLimitExceeded,
        ProviderNotFound,
        UnsupportedOperation,
        BudgetExceeded,
    )
}


def error_from_code(info: ErrorInfo) -> OllmError:
    """Rebuild an exception from an :class:`ErrorInfo` (e.g. to raise a streamed error)."""
    cls = _BY_CODE.get(info.code, OllmError)
    details = dict(info.details or {})
    err = cls(
        info.message,
        details=details,
        provider=details.get("provider"),
        model=details.get("model"),
    )
    if cls is OllmError:
        err.code = info.code
    if isinstance(err, HTTPStatusError):
        status = details.get("status")
        err.status = status if isinstance(status, int) and not isinstance(status, bool) else None
    if isinstance(err, RateLimited):
        err.retry_after = details.get("retry_after")
    return err

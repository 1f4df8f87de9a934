"""HTTP error answers as exceptions.

:func:`error_for_status` is the one mapping from a server's error answer (status, body, headers)
to the exception tree of :mod:`ollm_lite.errors`; it quotes the server's own message (OpenAI,
Ollama, Google and FastAPI error shapes, HTML pages from proxies), never the whole body, masked
by the caller's redactor (:mod:`ollm_lite.http.secrets`). :func:`parse_retry_after` reads
``retry-after-ms`` / ``Retry-After``.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..errors import (
    AuthenticationError,
    HTTPStatusError,
    ModelNotFound,
    OllmError,
    RateLimited,
    RequestTimeout,
)

__all__ = ["error_for_status", "parse_retry_after"]

#: Google's ``error.status`` names for a key that is missing, invalid or not allowed.
_GOOGLE_AUTH_STATUSES = frozenset({"UNAUTHENTICATED", "PERMISSION_DENIED"})
#: Anthropic's ``error.type`` names for a bad key and for a key without the permission.
_ANTHROPIC_AUTH_TYPES = frozenset({"authentication_error", "permission_error"})
#: Anthropic's ``error.type`` names of an answer to try again later.
_ANTHROPIC_LATER_TYPES = frozenset({"rate_limit_error", "overloaded_error"})


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date).

    Negative, unparseable or absent values give ``None``.
    """
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000.0
            if value >= 0 and value == value and value != float("inf"):
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    raw = raw.strip()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        return float(raw)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


# --------------------------------------------------------------------------- error mapping


def _server_message(
    body: bytes, content_type: str, redact: Callable[[str], str]
) -> tuple[str, dict[str, Any]]:
    """The server's own error text and a few structured facts, never the whole body.

    The text is masked before it is cut (a key straddling the cut must not leave its head).
    """
    facts: dict[str, Any] = {}
    text = body.decode("utf-8", "replace").strip()
    try:
        obj: Any = json.loads(text) if text else None
    except (ValueError, RecursionError):
        obj = None
    if isinstance(obj, list) and len(obj) == 1:  # Gemini's streamed array form
        obj = obj[0]
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        message: Any = None
        if isinstance(err, str):
            message = err
        elif isinstance(err, dict):
            message = err.get("message") or err.get("msg")
            # Under their own keys: ``details["status"]`` is always the HTTP status number.
            for key, fact in (("status", "server_status"), ("type", "type"), ("code", "code")):
                if isinstance(err.get(key), str | int) and not isinstance(err.get(key), bool):
                    facts[fact] = err[key]
            details = err.get("details")
            # Google's ``details`` is a list of objects; any other shape carries no fact.
            for item in details if isinstance(details, list) else ():
                if not isinstance(item, dict):
                    continue
                if isinstance(item.get("reason"), str):
                    facts["reason"] = item["reason"]
                if isinstance(item.get("retryDelay"), str):
                    facts["retry_delay"] = item["retryDelay"]
        if message is None and "detail" in obj:  # FastAPI (llama-cpp-python's server)
            detail = obj["detail"]
            if isinstance(detail, list):
                message = "; ".join(
                    str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail[:5]
                )
            else:
                message = detail
        if message is not None:
            return redact(str(message))[:1000], facts
    if "html" in content_type.lower() or text.lstrip().lower().startswith(("<!doctype", "<html")):
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
        summary = redact(title.group(1).strip()) if title else "an HTML page"
        return f"{summary[:200]} (HTML error page, probably from a proxy)", facts
    if obj is None and text:
        return redact(text)[:300], facts
    return "", facts


def error_for_status(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    provider: str,
    url: str,
    model: str | None = None,
    not_found: Literal["model", "route"] = "route",
    redact: Callable[[str], str] = lambda s: s,
    model_hint: str = "",
    auth_hint: str = "",
) -> OllmError:
    """The one mapping from an HTTP error answer to an exception.

    401/403 (and Gemini's ``API_KEY_INVALID``, Anthropic's ``authentication_error`` and
    ``permission_error``) → ``AuthenticationError``; 404 →
    ``ModelNotFound`` when ``not_found == "model"`` (or Google says ``NOT_FOUND``), else
    ``HTTPStatusError``; 429, and Anthropic's 529 ``overloaded_error``, → ``RateLimited`` with
    ``retry_after``; 408/504 →
    ``RequestTimeout``; anything else → ``HTTPStatusError``. ``details`` holds ``status``,
    ``url``, the server's own ``server_message`` (masked, at most 1000 characters), a
    401/403's ``WWW-Authenticate`` challenge (``www_authenticate``), its
    error ``type``/``code`` where it gave them, and ``retry_after`` (seconds) for any status
    whose answer said when to come back (``Retry-After``, ``retry-after-ms``). ``auth_hint``
    says what to check after a rejected request (default: the API key given to the provider).
    """
    message, facts = _server_message(body, headers.get("content-type", ""), redact)
    # The structured facts come from the same body: a server echoing the request can put
    # the key in its error code or type as easily as in its message.
    facts = {k: redact(v) if isinstance(v, str) else v for k, v in facts.items()}
    google_status = _google_status(facts)
    details: dict[str, Any] = {"status": status, "url": url, **facts}
    if message:  # the server's own words, apart (a batch output line quotes them)
        details["server_message"] = message
    where = f"{provider} at {url}"
    server_says = f": {message}" if message else ""
    kw: dict[str, Any] = {"details": details, "provider": provider, "model": model}
    retry_after = _retry_after(headers, facts)
    if retry_after is not None:  # a 503's too: a fleet rests that server for as long
        details["retry_after"] = retry_after

    if _is_auth_failure(status, facts):
        challenge = headers.get("www-authenticate")
        if challenge:  # RFC 6750 §3: what the server wants instead (an OAuth resource server)
            details["www_authenticate"] = redact(challenge)[:2000]
        return AuthenticationError(
            f"{where} rejected the credentials (HTTP {status}){server_says}. "
            f"{auth_hint or 'Check the API key given to the provider.'}",
            status=status,
            **kw,
        )
    if status in (429, 529) or google_status == "RESOURCE_EXHAUSTED" or _overloaded(facts):
        details["retry_after"] = retry_after
        return RateLimited(
            f"{where} is rate limiting requests (HTTP {status}){server_says}",
            status=status,
            retry_after=retry_after,
            **kw,
        )
    if status == 404 and model and (not_found == "model" or google_status == "NOT_FOUND"):
        hint = f" {model_hint.format(model=model)}" if model_hint else ""
        return ModelNotFound(
            f"model {model!r} not found on {where}{server_says}.{hint}", status=status, **kw
        )
    if status in (408, 504):
        return RequestTimeout(f"{where} timed out (HTTP {status}){server_says}", **kw)
    return HTTPStatusError(f"{where} answered HTTP {status}{server_says}", status=status, **kw)


def _google_status(facts: Mapping[str, Any]) -> str | None:
    """Google's ``error.status`` name (``"NOT_FOUND"`` …), where the body had one."""
    server_status = facts.get("server_status")
    return server_status if isinstance(server_status, str) else None


def _is_auth_failure(status: int, facts: Mapping[str, Any]) -> bool:
    """401/403, or Google's or Anthropic's words for a missing, bad or unauthorised key (any
    status)."""
    return (
        status in (401, 403)
        or facts.get("reason") == "API_KEY_INVALID"
        or _google_status(facts) in _GOOGLE_AUTH_STATUSES
        or facts.get("type") in _ANTHROPIC_AUTH_TYPES
    )


def _overloaded(facts: Mapping[str, Any]) -> bool:
    """Anthropic's error types for "come back later" (https://platform.claude.com/docs/en/api/errors):
    ``rate_limit_error`` (429) and ``overloaded_error`` (529), whatever status carried them."""
    return facts.get("type") in _ANTHROPIC_LATER_TYPES


def _retry_after(headers: Mapping[str, str], facts: Mapping[str, Any]) -> float | None:
    """``retry-after-ms`` / ``Retry-After``, else Google's ``RetryInfo.retryDelay`` (``"12s"``)."""
    retry_after = parse_retry_after(headers)
    delay = facts.get("retry_delay")
    if retry_after is None and isinstance(delay, str):
        match = re.fullmatch(r"(\d+(?:\.\d+)?)s", delay)
        retry_after = float(match.group(1)) if match else None
    return retry_after

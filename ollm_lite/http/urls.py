"""The one base-URL parser: validation, the scheme-less forms, and URL credentials.

Every base URL (a provider's ``base_url=``, the configuration's ``base_url``, ``OLLAMA_HOST``)
is read by :func:`parse_base_url`. Besides ``http(s)://host[:port][/path]`` it accepts what
Ollama's own ``OLLAMA_HOST`` parsing accepts (https://github.com/ollama/ollama/blob/main/envconfig/config.go):
``host``, ``host:port``, ``:port`` and ``[v6]:port``, each meaning ``http://``; a bare IPv6
address (``::1``) only where asked (Ollama). A mistyped scheme (``http:/x``, ``http//x``,
``htp:/x``) is an error, never a host named ``http``. Messages never show user-info.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import ConfigError

__all__ = [
    "BaseURL",
    "URLProblem",
    "leaves_origin",
    "normalize_base_url",
    "parse_base_url",
    "split_userinfo",
    "without_userinfo",
]

_ANY_USERINFO = re.compile(r"[^/@\s]+@")
_MANGLED_HTTP = re.compile(r"(https?)(?::(?!//)|/)", re.IGNORECASE)
_NO_COLON = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)//")


class URLProblem(ValueError):
    """What is wrong with a base URL (the reason only: the caller names the URL)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class BaseURL:
    """A valid base URL, split.

    Attributes:
        url: The URL with its scheme (``http://`` added where it was left out), otherwise as
            written: user-info, path and a trailing ``/`` kept.
        scheme: ``http`` or ``https`` (lower case).
        userinfo: ``user:password`` as written (percent-encoded), or ``None``.
        host: Host name or address, without the brackets of an IPv6 address.
        port: The port written, or ``None``.
        path: What follows host and port (path, query), as written, or ``""``.
        explicit_scheme: Whether the text named its scheme.
    """

    url: str
    scheme: str
    userinfo: str | None
    host: str
    port: int | None
    path: str
    explicit_scheme: bool


def parse_base_url(url: str, *, bare_ipv6: bool = False) -> BaseURL:
    """Read ``url`` as a base URL.

    Args:
        url: The text; surrounding white space is ignored.
        bare_ipv6: Accept an IPv6 address without brackets (``::1``), as ``OLLAMA_HOST`` does.

    Raises:
        URLProblem: what is wrong, without quoting the URL.
    """
    text = url.strip()
    if not text:
        raise URLProblem("must not be empty")
    explicit = "://" in text
    if not explicit:
        problem = _schemeless_problem(text, bare_ipv6=bare_ipv6)
        if problem:
            raise URLProblem(problem)
        hostport = text.partition("/")[0].rpartition("@")[2]
        if ":" in hostport and not hostport.startswith("[") and _is_ip(hostport):
            text = text.replace(hostport, f"[{hostport}]", 1)
        elif text.startswith(":"):
            text = "127.0.0.1" + text
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise URLProblem("bad port") from None
    if parts.scheme not in ("http", "https"):
        raise URLProblem(f"the scheme must be http or https, not {parts.scheme!r}")
    if not parts.hostname:
        raise URLProblem("expected http(s)://host[:port]")
    if port == 0:
        raise URLProblem("bad port")
    if any(ch.isspace() for ch in text):
        raise URLProblem("contains white space")
    userinfo, at, _ = parts.netloc.rpartition("@")
    rest = text.partition("://")[2][len(parts.netloc) :]  # path, query and fragment as written
    return BaseURL(
        text, parts.scheme, userinfo if at else None, parts.hostname, port, rest, explicit
    )


def _schemeless_problem(text: str, *, bare_ipv6: bool) -> str | None:
    """What is wrong with a base URL written without ``scheme://``, or ``None``.

    Rejected: a mistyped scheme (``http:/x``, ``http//x``, ``htp:/x``), an empty port
    (``host:``) and, unless ``bare_ipv6``, an IPv6 address without brackets.
    """
    mangled = _MANGLED_HTTP.match(text)
    if mangled:
        scheme = mangled.group(1)
        return f"expected {scheme.lower()}://host[:port] ({scheme!r} must be followed by '://')"
    hostport = text.partition("/")[0].rpartition("@")[2]
    if ":" in hostport and not hostport.startswith("[") and _is_ip(hostport):
        if bare_ipv6:
            return None
        return f"an IPv6 address needs brackets: http://[{hostport}]:port"
    if hostport.endswith(":"):
        return (
            f"empty port after {hostport!r} (a misspelt scheme? expected "
            "http(s)://host[:port] or host:port)"
        )
    slashes = _NO_COLON.match(text)
    if slashes:
        scheme = slashes.group(1) + "//"
        return f"{scheme!r} lacks the ':' of a scheme: expected http(s)://host[:port]"
    return None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def without_userinfo(url: str) -> str:
    """``url`` for a message: anything like ``user:password@`` replaced by ``***@``, wherever
    a (possibly mistyped) scheme leaves it."""
    return _ANY_USERINFO.sub("***@", url)


def normalize_base_url(url: str, *, strip_suffix: str | tuple[str, ...] | None = None) -> str:
    """Validate a base URL (:func:`parse_base_url`); drop trailing ``/`` and ``strip_suffix``.

    ``strip_suffix`` may be several suffixes; the first that matches is dropped. A bare
    ``host``, ``host:port`` or ``:port`` gets ``http://``.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a URL that is not http(s) or has no host.
    """
    try:
        text = parse_base_url(url).url.rstrip("/")
    except URLProblem as exc:
        raise ConfigError(f"invalid base URL {without_userinfo(url)!r}: {exc.reason}") from None
    suffixes = (strip_suffix,) if isinstance(strip_suffix, str) else strip_suffix or ()
    for suffix in suffixes:
        if text.endswith(suffix):
            text = text[: -len(suffix)].rstrip("/")
            break
    return text


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``http://user:pw@host/x`` → ``("http://host/x", ("user", "pw"))``; others unchanged.

    Credentials in a URL become HTTP basic auth and leave the URL, so the address shown in
    ``repr`` and in error messages never carries them.
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    bare = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    return bare, (unquote(user), unquote(password))


_DEFAULT_PORTS = {"http": 80, "https": 443}


def leaves_origin(old_url: str, new_url: str) -> bool:
    """Whether a redirect from ``old_url`` to ``new_url`` goes to another host.

    Another host, another port (the scheme's default port counts as written), or ``https``
    to ``http``: the cases in which ``requests`` drops ``Authorization``
    (``Session.should_strip_auth``), decided here so that every header the caller supplied
    is dropped by the same rule. ``http`` to ``https`` on the same host and default ports
    stays (the usual upgrade to TLS).
    """
    old, new = urlsplit(old_url), urlsplit(new_url)
    old_scheme, new_scheme = old.scheme.lower(), new.scheme.lower()
    try:
        old_port = old.port or _DEFAULT_PORTS.get(old_scheme)
        new_port = new.port or _DEFAULT_PORTS.get(new_scheme)
    except ValueError:  # a port that is not a number: treat as elsewhere
        return True
    if (old.hostname or "").lower() != (new.hostname or "").lower():
        return True
    if old_scheme == "https" and new_scheme != "https":
        return True
    if old_scheme == "http" and new_scheme == "https":
        return not (old_port == 80 and new_port == 443)
    return old_port != new_port

"""What a record must not hold, and how it is masked: the call log's and a saved session's.

:class:`Masker` masks secrets with the library's one redactor
(:class:`~ollm_lite.http.secrets.Redactor`) in the values a record is made of, *as they
decode*: a string that is JSON text (a tool call's ``arguments``, a tool message's
``content``, a structured answer) is masked in its decoded values, so that a secret written
with escapes (``"sk-abc\\/def"``, ``"\\u00e9"``) does not come back in clear from the reader
that parses it. The JSON text the record is written as is masked once more, in every
spelling a standard encoder gives a secret (raw, escaped, ``\\/`` for ``/``, ``\\uXXXX``).

The secrets of a record are gathered here too: the connection's (:func:`provider_secrets`,
configured keys and MCP values), the call's own (:func:`call_secrets`: its header values
and the secrets of the MCP servers whose tools it was given) and those an earlier call left in
the history the call carries (a ``Session`` remembers them, see
:class:`~ollm_lite.client.Session`). A secret stays one for the life of the data it touched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..http.secrets import MIN_SECRET, Redactor
from ._records import dumps

if TYPE_CHECKING:
    from ..client._prepare import Call

__all__ = ["Masker", "call_secrets", "client_secrets", "provider_secrets", "tool_secrets"]

_USERINFO = re.compile(r'(?<=://)[^/@\s"\\]+@')

#: Structures nested deeper than this are masked as their JSON text only (every spelling of
#: a secret is still found there); decoding further would only cost stack.
_MAX_DEPTH = 64


class Masker:
    """Masks secrets and URL user-info in the values of a record and in their JSON text.

    Args:
        secrets: The values to mask (shorter than
            :data:`~ollm_lite.http.secrets.MIN_SECRET` characters: not masked).
    """

    __slots__ = ("redact",)

    def __init__(self, secrets: Iterable[str]) -> None:
        kept = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET}
        self.redact = Redactor(_spellings(kept))

    def __repr__(self) -> str:
        return f"Masker({len(self.redact.secrets)} spellings)"

    def text(self, value: str) -> str:
        """``value`` masked; JSON text is masked in its decoded values as well."""
        return self._plain(self._decoded(value, 0))

    def value(self, value: Any) -> Any:
        """``value`` (dicts, lists, tuples, strings, numbers) with every string in it masked
        as :meth:`text` masks it, dict keys included; a new value, ``value`` is not changed."""
        return self._value(value, 0)

    def json(self, value: Any) -> str:
        """``value`` as compact JSON text, masked (its decoded strings, then the text)."""
        if not self.redact.secrets:
            # Nothing to mask but URL user-info, which needs an "@" (or its escape): most
            # records have neither, and skip the walk through every value.
            text = dumps(value)
            if "@" not in text and "\\u0040" not in text.lower():
                return text
        return self._plain(dumps(self._value(value, 0)))

    def _plain(self, value: str) -> str:
        if "@" in value:
            value = _USERINFO.sub("***@", value)
        return self.redact(value)

    def _decoded(self, value: str, depth: int) -> str:
        # Without a backslash a JSON text spells every string as it is: the text mask sees
        # them all. With one, a secret may be escaped: mask the decoded values.
        if "\\" not in value or depth >= _MAX_DEPTH or value.lstrip()[:1] not in ("{", "[", '"'):
            return value
        try:
            decoded = json.loads(value)
        except (ValueError, RecursionError):
            return value
        masked = self._value(decoded, depth + 1)
        return value if masked == decoded else dumps(masked)

    def _value(self, value: Any, depth: int) -> Any:
        if isinstance(value, str):
            return self._plain(self._decoded(value, depth))
        if depth >= _MAX_DEPTH:
            return value
        if isinstance(value, dict):
            return {self._value(k, depth + 1): self._value(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._value(v, depth + 1) for v in value]
        return value


def _spellings(secrets: Iterable[str]) -> Iterator[str]:
    """Each secret as JSON encoders write it inside a string: raw, escaped with and without
    ``ensure_ascii``, and with ``/`` as ``\\/`` (PHP's ``json_encode`` and others)."""
    for secret in secrets:
        forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
        yield from forms
        yield from (form.replace("/", "\\/") for form in forms if "/" in form)


def provider_secrets(provider: Any) -> list[str]:
    """The secrets a provider's transports mask (API keys, custom auth header values)."""
    found: list[str] = []
    members = getattr(provider, "providers", None)
    for member in members if isinstance(members, list) else [provider]:
        redact = getattr(getattr(member, "_transport", None), "redact", None)
        found.extend(getattr(redact, "secrets", ()))
        key = getattr(member, "api_key", None)
        if isinstance(key, str):
            found.append(key)
    return found


def tool_secrets(tools: Any) -> list[str]:
    """The secrets of the MCP servers whose tools ``tools`` (a registry) holds: ``env`` and
    ``headers`` values, URL credentials (a server built in code, not only a configured one)."""
    found: list[str] = []
    for item in tools or ():
        server = getattr(getattr(item, "runner", None), "server", None)
        if server is not None:
            from ..mcp.server import McpServer  # only a call with remote tools gets here

            if isinstance(server, McpServer):
                found.extend(server._secret_values)
    return found


def call_secrets(call: Call) -> list[str]:
    """The secrets one call carries: its header values (the client's default headers
    included), those of the MCP servers whose tools it was given, and those its history was
    handed by earlier calls (:attr:`Call.secrets <ollm_lite.client._prepare.Call.secrets>`)."""
    found = [v for v in call.settings.headers.values() if isinstance(v, str)]
    found.extend(tool_secrets(call.loop.get("tools")))
    found.extend(call.secrets)
    return found


def client_secrets(client: Any) -> list[str]:
    """The secrets of a script client's connection: its provider's keys and auth values,
    its default headers' values, and the configured ones its call log masks (keys, MCP
    ``env`` and ``headers`` values)."""
    found = provider_secrets(getattr(client, "provider", None))
    found.extend(getattr(getattr(client, "call_log", None), "secrets", ()))
    options = getattr(client, "options", None)
    headers = options.get("headers") if isinstance(options, dict) else None
    if isinstance(headers, dict):
        found.extend(v for v in headers.values() if isinstance(v, str))
    return found

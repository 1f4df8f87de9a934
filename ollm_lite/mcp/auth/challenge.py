"""The ``WWW-Authenticate: Bearer`` challenge of a protected MCP server, parsed.

RFC 6750 §3 gives the Bearer challenge its parameters (``scope``, ``error``,
``error_description``), RFC 9728 §5.1 adds ``resource_metadata`` (where the protected resource
metadata is); values are quoted strings or tokens (RFC 9110 §11.2, §5.6.4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Challenge", "parse_challenge"]

_SCHEME = re.compile(r"(?:^|,)\s*([A-Za-z0-9!#$%&'*+.^_`|~-]+)(?=\s|,|$)")
_PARAM = re.compile(r'\s*([A-Za-z0-9_.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*,?')


@dataclass(frozen=True, slots=True)
class Challenge:
    """The Bearer challenge's parameters (``None`` when absent)."""

    bearer: bool
    """Whether the header holds a ``Bearer`` challenge at all."""
    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None


def parse_challenge(header: str | None) -> Challenge:
    """The Bearer challenge in a ``WWW-Authenticate`` value (others in it are skipped)."""
    if not header:
        return Challenge(bearer=False)
    match = next((m for m in _SCHEME.finditer(header) if m.group(1).lower() == "bearer"), None)
    if match is None:
        return Challenge(bearer=False)
    params: dict[str, str] = {}
    pos = match.end()
    while pos < len(header):
        found = _PARAM.match(header, pos)
        if found is None:
            break  # the next challenge (another scheme) starts here
        name, value = found.group(1).lower(), found.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params.setdefault(name, value)
        pos = found.end()
    return Challenge(
        bearer=True,
        resource_metadata=params.get("resource_metadata") or None,
        scope=" ".join(params["scope"].split()) or None if "scope" in params else None,
        error=params.get("error") or None,
        error_description=params.get("error_description") or None,
    )

"""PKCE (RFC 7636) and the ``state`` of an authorization request.

The verifier is 64 random bytes in base64url (86 characters of the unreserved set, within
RFC 7636 §4.1's 43-128); the challenge is ``BASE64URL(SHA256(verifier))`` without padding
(``S256``, §4.2), the one method the MCP specification allows when the client can compute it.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field

__all__ = ["Pkce", "s256"]


def s256(verifier: str) -> str:
    """The ``S256`` code challenge of ``verifier``."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def _token() -> str:
    return secrets.token_urlsafe(64)


@dataclass(frozen=True, slots=True)
class Pkce:
    """One authorization request's verifier and state (both secrets)."""

    verifier: str = field(default_factory=_token, repr=False)
    state: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)

    @property
    def challenge(self) -> str:
        return s256(self.verifier)

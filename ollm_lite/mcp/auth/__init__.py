"""Signing in to MCP servers that require authorization (OAuth 2.1), headless first.

MCP specification 2025-11-25, Basic > Authorization, with ``requests`` and the standard
library only. A module per concern:

* :mod:`.credentials`: :class:`McpAuth`, what the caller gives (``login`` for a person,
  ``client_credentials`` for a machine);
* :mod:`.challenge`: the ``WWW-Authenticate: Bearer`` challenge;
* :mod:`.discovery`: protected resource metadata (RFC 9728) and authorization server
  metadata (RFC 8414, OpenID Connect discovery), with the 2025-03-26 fallbacks;
* :mod:`.registration`: the client's identity (pre-registered, client ID metadata document,
  dynamic client registration, RFC 7591);
* :mod:`.pkce` and :mod:`.listener`: PKCE (RFC 7636) and the loopback redirect listener;
* :mod:`.tokens`: the token endpoint (the grants, the client's authentication);
* :mod:`.store`: the token store shared by processes (``mcp-tokens.json``, ``flock``);
* :mod:`.wire`: HTTP to authorization servers through the library's transport;
* :mod:`.flow`: :class:`~.flow.Authorizer`, which the streamable HTTP transport consults on
  every request.

See ``docs/mcp.md`` ("Signing in") for the user's view.
"""

from __future__ import annotations

from .credentials import McpAuth

__all__ = ["McpAuth"]

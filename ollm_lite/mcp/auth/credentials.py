"""``McpAuth``: how ollm_lite signs in to an MCP server that requires authorization.

Two ways (MCP specification 2025-11-25, Basic > Authorization): :meth:`McpAuth.login`, the
authorization code grant with PKCE for a person who signs in once in a browser, and
:meth:`McpAuth.client_credentials`, the client credentials grant for a machine (a cron job,
CI) with no person involved. The object only describes the sign-in; what it yields (tokens, a
registered client) lives in the token store (:mod:`~ollm_lite.mcp.auth.store`), and the work
is done per server by :class:`~ollm_lite.mcp.auth.flow.Authorizer`.

The client secret is a secret: never in ``repr`` or any message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from ...errors import ConfigError
from ...http.secrets import unsendable

__all__ = ["McpAuth", "OpenUrl"]

#: ``open_url(url)``: shows the authorization URL to a person (or follows it itself).
OpenUrl = Callable[[str], object]

Grant = Literal["authorization_code", "client_credentials"]


class McpAuth:
    """How to sign in to an MCP server that requires authorization (OAuth 2.1).

    Build one with :meth:`login` or :meth:`client_credentials` and give it to
    ``McpServer.http(url, auth=...)``. Immutable; one may serve many servers.

    Attributes:
        grant: ``"authorization_code"`` (:meth:`login`) or ``"client_credentials"``.
        client_id: The pre-registered client id (or a client ID metadata document URL);
            ``None``: dynamic client registration.
        scope: The scopes to ask for (space-separated), ``None``: the server's.
        redirect_port: The loopback port for the redirect (``None``: a free one).
        open_url: Called with the authorization URL (``None``: the browser).
    """

    __slots__ = (
        "_client_secret",
        "_login_command",
        "client_id",
        "grant",
        "open_url",
        "redirect_port",
        "scope",
    )

    grant: Grant
    client_id: str | None
    scope: str | None
    redirect_port: int | None
    open_url: OpenUrl | None
    _client_secret: str | None
    _login_command: str | None

    def __init__(
        self,
        grant: Grant,
        client_id: str | None,
        client_secret: str | None,
        scope: str | Sequence[str] | None,
        redirect_port: int | None,
        open_url: OpenUrl | None,
        login_command: str | None = None,
    ) -> None:
        """Prefer :meth:`login` and :meth:`client_credentials`.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for a value of the wrong kind.
        """
        for name, value in (("client_id", client_id), ("client_secret", client_secret)):
            if value is None:
                continue
            if not isinstance(value, str) or not value:
                raise ConfigError(f"McpAuth {name} must be a non-empty string")
            why = unsendable(value)
            if why:  # said without the value: it may be the secret
                raise ConfigError(f"McpAuth {name} holds {why}, which cannot be sent")
        if redirect_port is not None and (
            isinstance(redirect_port, bool)
            or not isinstance(redirect_port, int)
            or not 0 < redirect_port < 65536
        ):
            raise ConfigError(f"redirect_port must be a port number, not {redirect_port!r}")
        if open_url is not None and not callable(open_url):
            raise ConfigError("open_url must be a callable taking the authorization URL")
        object.__setattr__(self, "grant", grant)
        object.__setattr__(self, "client_id", client_id)
        object.__setattr__(self, "_client_secret", client_secret)
        object.__setattr__(self, "scope", _scope(scope))
        object.__setattr__(self, "redirect_port", redirect_port)
        object.__setattr__(self, "open_url", open_url)
        object.__setattr__(self, "_login_command", login_command)

    @classmethod
    def client_credentials(
        cls, client_id: str, client_secret: str, *, scope: str | Sequence[str] | None = None
    ) -> McpAuth:
        """Sign in as a machine: the OAuth client credentials grant, no person involved.

        Args:
            client_id: The client's id, registered with the authorization server.
            client_secret: Its secret (never shown in any message).
            scope: Scopes to ask for (a space-separated string or a list); default: the
                ones the server names in its challenge, else its resource metadata's.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for a missing id or secret.
        """
        if client_id is None or client_secret is None:
            raise ConfigError("McpAuth.client_credentials needs a client_id and a client_secret")
        return cls("client_credentials", client_id, client_secret, scope, None, None)

    @classmethod
    def login(
        cls,
        client_id: str | None = None,
        client_secret: str | None = None,
        *,
        scope: str | Sequence[str] | None = None,
        redirect_port: int | None = None,
        open_url: OpenUrl | None = None,
    ) -> McpAuth:
        """Sign in as a person, once: authorization code with PKCE through a browser.

        The tokens are stored and refreshed; the browser is needed again only when no valid
        token can be had without a person.

        Args:
            client_id: A pre-registered client id, or an ``https://`` client ID metadata
                document URL; ``None``: register dynamically (once, kept in the store).
            client_secret: The pre-registered client's secret, if it has one.
            scope: Scopes to ask for (default: the server's, as :meth:`client_credentials`).
            redirect_port: The port of the loopback redirect listener (default: a free one).
            open_url: Called with the authorization URL once the listener listens; it may
                follow the URL itself before it returns. Default: open the browser, else
                print the URL on stderr.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for a value of the wrong kind.
        """
        return cls("authorization_code", client_id, client_secret, scope, redirect_port, open_url)

    # ------------------------------------------------------------------ internals

    @property
    def client_secret(self) -> str | None:
        """The client secret (never shown by ``repr``)."""
        return self._client_secret

    @property
    def login_command(self) -> str | None:
        """The command a person runs to sign in, when this sign-in may not open a browser."""
        return self._login_command

    def headless(self, command: str) -> McpAuth:
        """A copy that never asks a person: a sign-in that would fails naming ``command``."""
        return McpAuth(
            self.grant,
            self.client_id,
            self._client_secret,
            self.scope,
            self.redirect_port,
            self.open_url,
            command,
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("McpAuth is immutable")

    def __repr__(self) -> str:
        maker = "login" if self.grant == "authorization_code" else "client_credentials"
        parts = [f"client_id={self.client_id!r}"]
        if self._client_secret is not None:
            parts.append("client_secret='***'")
        if self.scope is not None:
            parts.append(f"scope={self.scope!r}")
        if self.redirect_port is not None:
            parts.append(f"redirect_port={self.redirect_port}")
        return f"McpAuth.{maker}({', '.join(parts)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, McpAuth):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[object, ...]:
        return (
            self.grant,
            self.client_id,
            self._client_secret,
            self.scope,
            self.redirect_port,
            self.open_url,
            self._login_command,
        )


def _scope(scope: str | Sequence[str] | None) -> str | None:
    if scope is None:
        return None
    if isinstance(scope, str):
        parts = scope.split()
    elif isinstance(scope, Sequence) and all(isinstance(s, str) for s in scope):
        parts = [p for s in scope for p in s.split()]
    else:
        raise ConfigError("scope must be a string of space-separated scopes or a list of them")
    return " ".join(dict.fromkeys(parts)) or None

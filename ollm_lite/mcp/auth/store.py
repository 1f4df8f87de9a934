"""The token store: tokens and registered clients, kept between processes.

One JSON file, ``$XDG_DATA_HOME/ollm/mcp-tokens.json`` (``~/.local/share/ollm/...`` when the
variable is unset; XDG Base Directory Specification), readable by its owner only (``0600``;
folders created for it are ``0700``). It holds:

* ``tokens``: per protected resource and client id, the access token, its expiry (seconds
  since the epoch), the refresh token and scope, and what a refresh needs (the token
  endpoint, the client's authentication method, the server URL it was used for);
* ``clients``: per authorization server, the client registered there dynamically (RFC 7591),
  registered once and reused.

Every read-modify-write happens under an exclusive ``fcntl.flock`` on a lock file beside it,
so processes sharing the store see each other's tokens: a process that finds a newer token
than the one its server refused uses it instead of refreshing again (a rotating refresh
token is spent once). Waiting for the lock follows the call's ``stop`` event. The file is
replaced atomically (written aside, then renamed).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..._cancel_link import past_deadline
from ...errors import Cancelled, ConfigError

__all__ = ["TokenStore", "default_path", "token_key"]

logger = logging.getLogger(__name__)

_VERSION = 1
_POLL_S = 0.02


def default_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/ollm/mcp-tokens.json``, else ``~/.local/share/ollm/mcp-tokens.json``."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / "ollm" / "mcp-tokens.json"


def token_key(resource: str, client_id: str) -> str:
    """The key of a token: the protected resource and the client it was issued to."""
    return f"{resource} {client_id}"


class TokenStore:
    """The file of tokens and registrations (see the module text).

    Args:
        path: The file (default: :func:`default_path`).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    def __repr__(self) -> str:
        return f"TokenStore({str(self.path)!r})"

    # ------------------------------------------------------------------ reading

    def read(self) -> dict[str, Any]:
        """The store's content now (no lock: a snapshot for a look-up)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return _empty()
        except OSError as exc:
            raise ConfigError(f"cannot read the MCP token store {self.path}: {exc}") from None
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            logger.warning("the MCP token store %s is not JSON; starting afresh", self.path)
            return _empty()
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            logger.warning("the MCP token store %s has an unknown layout; ignored", self.path)
            return _empty()
        for part in ("tokens", "clients"):
            if not isinstance(data.get(part), dict):
                data[part] = {}
        return data

    def token(self, key: str) -> dict[str, Any] | None:
        entry = self.read()["tokens"].get(key)
        return entry if isinstance(entry, dict) else None

    def client(self, issuer: str) -> dict[str, Any] | None:
        entry = self.read()["clients"].get(issuer)
        return entry if isinstance(entry, dict) else None

    def find(self, server_url: str, identity: str) -> dict[str, Any] | None:
        """The newest token used for ``server_url`` by the client ``identity`` (the given
        client id, or ``""`` for a dynamically registered one)."""
        found = [
            e
            for e in self.read()["tokens"].values()
            if isinstance(e, dict)
            and e.get("server_url") == server_url
            and e.get("identity") == identity
        ]
        return max(found, key=lambda e: e.get("saved_at", 0), default=None)

    # ------------------------------------------------------------------ writing

    @contextlib.contextmanager
    def locked(self, stop: threading.Event | None = None) -> Iterator[dict[str, Any]]:
        """The content under the exclusive lock; what the block leaves in it is saved.

        Raises:
            Cancelled: ``stop`` was set while waiting for the lock.
            ConfigError: the store's folder cannot be created or written.
        """
        self._ensure_folder()
        try:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ConfigError(
                f"cannot open the MCP token store lock {self._lock_path}: {exc}"
            ) from None
        try:
            waited = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise ConfigError(f"cannot lock {self._lock_path}: {exc}") from None
                if not waited:
                    waited = True
                    logger.debug("waiting for the lock of %s", self.path)
                if stop is None:
                    time.sleep(_POLL_S)
                elif stop.wait(_POLL_S) or past_deadline(stop):
                    raise Cancelled("stopped while waiting for the MCP token store's lock")
            data = self.read()
            before = json.dumps(data, sort_keys=True)
            yield data
            if json.dumps(data, sort_keys=True) != before:
                self._write(data)
        finally:
            os.close(fd)  # releases the lock

    def _ensure_folder(self) -> None:
        folder = self.path.parent
        missing: list[Path] = []
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        for made in reversed(missing):
            try:
                made.mkdir(mode=0o700)
            except FileExistsError:
                continue
            except OSError as exc:
                raise ConfigError(f"cannot create {made} for the MCP token store: {exc}") from None
            os.chmod(made, 0o700)  # whatever the umask

    def _write(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
        text = json.dumps(data, indent=1, sort_keys=True) + "\n"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.fchmod(fd, 0o600)  # an older file of the same name may have other bits
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise ConfigError(f"cannot write the MCP token store {self.path}: {exc}") from None

    def forget(self, server_url: str) -> int:
        """Remove every token used for ``server_url``; how many went."""
        with self.locked() as data:
            gone = [k for k, e in data["tokens"].items() if e.get("server_url") == server_url]
            for key in gone:
                del data["tokens"][key]
        return len(gone)


def _empty() -> dict[str, Any]:
    return {"version": _VERSION, "tokens": {}, "clients": {}}

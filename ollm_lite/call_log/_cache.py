"""The cache: a model turn answered from the log when an identical one is there.

Identical means the same provider, base URL (for a fleet: the same set of hosts), model,
messages, system prompt, tools, schema, ``tool_choice``, ``think`` and generation options;
the base URL whole, path included (two deployments behind one gateway, ``/team-a/v1`` and
``/team-b/v1``, never share answers), without its credentials;
``timeout``, ``cancel``, ``headers`` and streamed-or-not do not count. The key is the SHA-256
of that request as canonical JSON; only turns that ended without an error or a cancel (and
were answered by a server, not by the cache) are looked up. A cached answer is the same text
as before, not a new sample.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from ._rows import answer_of, loads
from ._schema import NewerSchema

if TYPE_CHECKING:
    from ._writer import LogFile, LogWait

__all__ = ["cache_key", "endpoint", "lookup", "servers"]

logger = logging.getLogger("ollm_lite.call_log")

#: The ends of a turn the log marks as servable (``ok``).
_GOOD_FINISH = frozenset({"stop", "length", "tool", "tool_calls", "content_filter", "refusal"})
#: What a cached answer replays (its usage is not: a cached turn spends nothing).
_SERVED = ("text", "thinking", "tool_calls", "finish", "provider_blocks")


class Connection(Protocol):
    """What a cache key reads of a call logger: the connection its calls go to."""

    @property
    def provider_name(self) -> str: ...

    @property
    def hosts(self) -> list[str]: ...


def endpoint(url: str) -> tuple[str, str] | None:
    """``(scheme://host:port, path)`` of one base URL: the port written or the scheme's
    default, the host in lower case, the path (and query) as written less a trailing ``/``,
    the credentials left out (``None``: no host to be read)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    path = parts.path.rstrip("/") + (f"?{parts.query}" if parts.query else "")
    return f"{parts.scheme}://{name}:{port}", path


def servers(base_url: str | None) -> list[str]:
    """The servers a connection's calls go to, as the cache tells them apart: each base URL
    (a fleet's ``", "``-joined list: each member's) without credentials, path included,
    sorted (a fleet is the same set of hosts in any order); ``[""]`` for none."""
    found = {endpoint(url) for url in (base_url or "").split(", ")}
    return sorted("".join(e) for e in found if e is not None) or [""]


def cache_key(log: Connection, request: dict[str, Any]) -> str:
    """The identity of a model turn's request on this connection."""
    identity = {"provider": log.provider_name, "hosts": log.hosts, "request": request}
    text = json.dumps(identity, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def lookup(file: LogFile, key: str, wait: LogWait) -> dict[str, Any] | None:
    """The latest good answer logged for ``key``, or ``None`` (a log that cannot be read in
    the time ``wait`` leaves, or an answer that is not of the shape the log writes, is a miss:
    the request goes to the server)."""

    def latest(db: sqlite3.Connection, _: object) -> Any:
        return db.execute(
            "SELECT answer FROM turns WHERE cache_key = ? AND ok = 1 ORDER BY rowid DESC LIMIT 1",
            (key,),
        ).fetchone()

    try:
        row = file.run(latest, wait)
    except (sqlite3.Error, OSError, NewerSchema) as exc:
        logger.debug("cache lookup in %s failed: %s", file.path, exc)
        return None
    if row is None:
        return None
    answer = answer_of(loads(row[0]))
    if answer is None or answer.get("finish") not in _GOOD_FINISH or "error" in answer:
        # changed by hand or by another tool: a miss, never a failed call
        logger.debug("cache entry in %s cannot be read: a miss", file.path)
        return None
    return {name: answer[name] for name in _SERVED if name in answer}

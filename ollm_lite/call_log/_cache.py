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
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from ..types import FinishEvent, ProviderEvent, TextEvent, ThinkingEvent, ToolCallEvent
from ._records import blocks_from_list, tool_call_from_dict
from ._schema import NewerSchema

if TYPE_CHECKING:
    from ._writer import LogFile, LogWait

__all__ = ["cache_key", "cached_events", "endpoint", "lookup", "servers"]

logger = logging.getLogger("ollm_lite.call_log")


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
    the time ``wait`` leaves is a miss: the request goes to the server)."""

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
    try:
        answer = json.loads(row[0])
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def cached_events(answer: dict[str, Any]) -> Iterator[ProviderEvent]:
    """A logged answer as the provider events it stands for (no usage: nothing was spent)."""
    if answer.get("thinking"):
        yield ThinkingEvent(str(answer["thinking"]))
    if answer.get("text"):
        yield TextEvent(str(answer["text"]))
    for call in answer.get("tool_calls") or ():
        yield ToolCallEvent(tool_call_from_dict(call))
    blocks = blocks_from_list(answer.get("provider_blocks"))
    yield FinishEvent(answer.get("finish") or "stop", None, provider_blocks=blocks)

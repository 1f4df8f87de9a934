"""The cache: a model turn answered from the log when an identical one is there.

Identical means the same provider, base URL (for a fleet: the same set of hosts), model,
messages, system prompt, tools, schema, ``tool_choice``, ``think`` and generation options;
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

from ._schema import NewerSchema

if TYPE_CHECKING:
    from ._writer import LogFile

__all__ = ["cache_key", "lookup"]

logger = logging.getLogger("ollm_lite.call_log")


class Connection(Protocol):
    """What a cache key reads of a call logger: the connection its calls go to."""

    @property
    def provider_name(self) -> str: ...

    @property
    def hosts(self) -> list[str]: ...


def cache_key(log: Connection, request: dict[str, Any]) -> str:
    """The identity of a model turn's request on this connection."""
    identity = {"provider": log.provider_name, "hosts": log.hosts, "request": request}
    text = json.dumps(identity, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def lookup(file: LogFile, key: str, budget: float) -> dict[str, Any] | None:
    """The latest good answer logged for ``key``, or ``None`` (a log that cannot be read is
    a miss: the request goes to the server)."""
    try:
        with file.connection(max(0.0, budget)) as db:
            row = db.execute(
                "SELECT answer FROM turns WHERE cache_key = ? AND ok = 1 "
                "ORDER BY rowid DESC LIMIT 1",
                (key,),
            ).fetchone()
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

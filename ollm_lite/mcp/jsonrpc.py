"""JSON-RPC 2.0 messages of the Model Context Protocol, sans-IO.

MCP frames every message as one JSON-RPC 2.0 object (JSON-RPC batches were removed in MCP
2025-06-18). Over stdio "messages are delimited by newlines, and MUST NOT contain embedded
newlines" (MCP specification, Basic > Transports > stdio); over streamable HTTP each message is
a POST body, a JSON answer or the ``data`` of one Server-Sent Event.

This module turns bytes into typed messages and back and never touches a socket:

* :func:`parse_message` classifies one decoded message as :class:`Request`,
  :class:`Notification`, :class:`Response` or :class:`ErrorResponse`, or raises
  :class:`~ollm_lite.errors.BadResponse` (code ``LLM_BAD_RESPONSE``) — never anything else;
* :func:`encode_message` writes one line of compact JSON (no embedded newline: JSON escapes
  every control character inside strings);
* :class:`LineSplitter` cuts a byte stream at LF (a trailing CR is dropped) with a size limit:
  a longer line is skipped to its end and reported as an :class:`Oversized` marker carrying
  the request id when the line's head or tail shows it, so the caller can fail that request
  instead of truncating anything silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import BadResponse, OllmError

__all__ = [
    "MAX_MESSAGE_BYTES",
    "ErrorResponse",
    "Failed",
    "Incoming",
    "LineSplitter",
    "McpError",
    "Notification",
    "OnClose",
    "OnMessage",
    "Oversized",
    "Request",
    "Response",
    "encode_message",
    "message_object",
    "parse_message",
]

#: Largest message accepted (64 MiB); a larger one is reported, never cut short.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

# Standard JSON-RPC 2.0 error codes (JSON-RPC 2.0 specification, section 5.1).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: MCP's UnsupportedProtocolVersionError of the stateless revision (server/discover era).
UNSUPPORTED_PROTOCOL_VERSION = -32022

RequestId = int | str


class McpError(OllmError):
    """The MCP server answered a request with a JSON-RPC error.

    Attributes:
        rpc_code: The JSON-RPC error code (``-32601`` method not found, ...).
        data: The error's ``data`` member, when the server sent one.
    """

    code = "MCP_ERROR"

    def __init__(
        self, message: str, *, rpc_code: int = INTERNAL_ERROR, data: Any = None, **kw: Any
    ) -> None:
        super().__init__(message, **kw)
        self.rpc_code = rpc_code
        self.data = data

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "rpc_code": self.rpc_code, "data": self.data}


@dataclass(frozen=True, slots=True)
class Request:
    """A request: expects a response with the same ``id``."""

    id: RequestId
    method: str
    params: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Notification:
    """A one-way message: no ``id``, no response."""

    method: str
    params: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Response:
    """A successful answer to the request with the same ``id``."""

    id: RequestId
    result: Any


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """A failed answer; ``id`` is ``None`` when the server could not read the request's id."""

    id: RequestId | None
    code: int
    message: str
    data: Any = None


@dataclass(frozen=True, slots=True)
class Oversized:
    """A message longer than the limit, skipped; ``id`` is its id when it could be seen."""

    size: int
    id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """Transport-side failure of one request (an HTTP error, a broken stream)."""

    id: RequestId
    error: OllmError


Message = Request | Notification | Response | ErrorResponse
#: What a transport hands its session: a message, a message skipped for its size, output that
#: is not JSON-RPC (reported, not raised), or the transport-side failure of one request.
Incoming = Message | Oversized | BadResponse | Failed
#: The session's callbacks into a transport: each incoming item, and the end of the connection.
OnMessage = Callable[[Incoming], None]
OnClose = Callable[[OllmError], None]


def encode_message(message: Message) -> bytes:
    """One message as a line of compact UTF-8 JSON ending in LF.

    Raises:
        ValueError: the params or result hold something JSON cannot carry (NaN, a set ...).
    """
    text = json.dumps(
        message_object(message), ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )
    return text.encode("utf-8") + b"\n"


def message_object(message: Message) -> dict[str, Any]:
    """One message as the JSON-RPC 2.0 object (a new dict)."""
    obj: dict[str, Any] = {"jsonrpc": "2.0"}
    if isinstance(message, Request | Response | ErrorResponse):
        obj["id"] = message.id
    if isinstance(message, Request | Notification):
        obj["method"] = message.method
        if message.params is not None:
            obj["params"] = message.params
    elif isinstance(message, Response):
        obj["result"] = message.result
    else:
        error: dict[str, Any] = {"code": message.code, "message": message.message}
        if message.data is not None:
            error["data"] = message.data
        obj["error"] = error
    return obj


def parse_message(raw: bytes | str) -> Message:
    """Decode and classify one JSON-RPC 2.0 message.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` for text that is not UTF-8 JSON, a JSON-RPC batch, or
            an object that is no valid request, notification or response.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        obj = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadResponse(
            f"the MCP server sent a message that is not JSON: {_preview(raw)}",
            details={"message": _preview(raw)},
        ) from exc
    if not isinstance(obj, dict):
        kind = "a JSON-RPC batch" if isinstance(obj, list) else f"JSON {type(obj).__name__}"
        raise BadResponse(f"the MCP server sent {kind}, not a JSON-RPC 2.0 object")
    return _classify(obj)


def _classify(obj: dict[str, Any]) -> Message:
    if obj.get("jsonrpc") != "2.0":
        raise _invalid("its 'jsonrpc' member is not \"2.0\"", obj)
    method = obj.get("method")
    if method is not None:
        if not isinstance(method, str):
            raise _invalid("its 'method' is not a string", obj)
        params = obj.get("params")
        if params is not None and not isinstance(params, dict):
            raise _invalid("its 'params' is not an object", obj)
        if "id" not in obj:
            return Notification(method, params)
        return Request(_request_id(obj["id"], obj), method, params)
    if "result" in obj:
        if "error" in obj:
            raise _invalid("it has both 'result' and 'error'", obj)
        return Response(_request_id(obj.get("id"), obj), obj["result"])
    error = obj.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        rid = obj.get("id")
        return ErrorResponse(
            None if rid is None else _request_id(rid, obj),
            code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
            message if isinstance(message, str) else "(no message)",
            error.get("data"),
        )
    raise _invalid("it is neither a request, a notification nor a response", obj)


def _request_id(value: Any, obj: dict[str, Any]) -> RequestId:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _invalid("its 'id' is not a string or an integer", obj)


def _invalid(why: str, obj: dict[str, Any]) -> BadResponse:
    preview = _preview(json.dumps(obj, ensure_ascii=False, default=str))
    return BadResponse(
        f"the MCP server sent an invalid JSON-RPC message ({why}): {preview}",
        details={"message": preview},
    )


def _preview(raw: bytes | str, limit: int = 200) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return text if len(text) <= limit else text[:limit] + "…"


# --------------------------------------------------------------------------- line framing

_EDGE = 4096
# The top-level "id" of a response: written first ({"jsonrpc","id","result"}: Python SDK) or
# last ({"result","jsonrpc","id"}: TypeScript SDK); both edges of a skipped line are kept.
_HEAD_ID = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"[^"\\]{0,256}")')
_TAIL_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"[^"\\]{0,256}")\s*\}\s*$')


class LineSplitter:
    """Cuts a byte stream into LF-terminated lines of at most ``limit`` bytes.

    ``feed`` returns complete lines (without the LF or a trailing CR) and :class:`Oversized`
    markers for lines over the limit; blank lines are dropped. Memory stays bounded by
    ``limit`` plus one chunk whatever the peer sends.
    """

    def __init__(self, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """Add bytes; return the lines (and oversize markers) they completed."""
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            self._add(piece)
            if end < 0:
                return out
            line = self._finish()
            if line is not None and (isinstance(line, Oversized) or line.strip()):
                out.append(line)
            start = end + 1

    def flush(self) -> list[bytes | Oversized]:
        """The unterminated last line, if any (the peer closed its end mid-line)."""
        line = self._finish()
        if line is None or (isinstance(line, bytes) and not line.strip()):
            return []
        return [line]

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        self._size += len(piece)
        if self._skipping:
            self._tail = (self._tail + piece)[-_EDGE:]
            return
        self._parts.append(piece)
        if self._size > self.limit:
            joined = b"".join(self._parts)
            self._head, self._tail = joined[:_EDGE], joined[-_EDGE:]
            self._parts = []
            self._skipping = True

    def _finish(self) -> bytes | Oversized | None:
        size = self._size
        if self._skipping:
            marker = Oversized(size, _edge_id(self._head, self._tail))
            self._skipping, self._head, self._tail = False, b"", b""
            self._size = 0
            return marker
        if not self._parts:
            self._size = 0
            return None
        line = b"".join(self._parts)
        self._parts, self._size = [], 0
        return line[:-1] if line.endswith(b"\r") else line


def _edge_id(head: bytes, tail: bytes) -> RequestId | None:
    found = _HEAD_ID.search(head) or _TAIL_ID.search(tail.rstrip(b"\r"))
    if found is None:
        return None
    token = found.group(1)
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if isinstance(value, int | str) else None

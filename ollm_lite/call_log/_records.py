"""The values of the call log: :class:`LoggedCall`, :class:`CallStats`, and their JSON forms.

Messages, tool calls, tool results and usage are stored as JSON text. Messages take the
OpenAI chat format (``{"role", "content", ...}``); an image part becomes
``{"type": "image", "sha256", "bytes", "mime"}`` of its decoded bytes, never the bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..types import (
    ErrorInfo,
    ImagePart,
    Message,
    ProviderBlock,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
)

__all__ = [
    "blocks_from_list",
    "blocks_to_list",
    "CallStats",
    "LoggedCall",
    "call_to_json",
    "dumps",
    "message_dict",
    "result_from_dict",
    "result_to_dict",
    "stats_to_json",
    "tool_call_dict",
    "tool_call_from_dict",
    "usage_dict",
    "usage_from_dict",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggedCall:
    """One call as the log keeps it.

    Attributes:
        id: Sorts by time (later calls have greater ids).
        started: When the call started (an aware UTC datetime).
        seconds: How long the call took.
        first_token_seconds: Seconds to the first streamed piece of the answer from the
            server; ``None`` when nothing was streamed from a server (a cached answer).
        source: ``"ask"``, ``"stream"``, ``"run"``, ``"events"``, ``"map"``,
            ``"batch:<input file's base name>"`` or ``"cli"``.
        script: The base name of ``sys.argv[0]`` of the process that made the call.
        provider: The provider's name (``local``, ``openai-compatible`` …).
        host: ``scheme://host:port`` of the server (a fleet: its hosts, comma-separated).
        model: The model asked.
        messages: The first turn's messages as OpenAI-format dicts.
        options: The effective generation options (never headers).
        text: The final answer's text.
        thinking: Reasoning text, if any.
        tool_calls: Every tool call the model made.
        tool_results: The results of the calls that ran.
        finish: How the call ended, as ``Reply.finish``.
        error_code: The error's stable code when the call failed.
        error_message: Its message (secrets masked).
        usage: Token counts summed over the turns (``None`` when none were reported).
        cached: Whether every model turn was answered from the log.
        session_id: Links the calls of one ``Session``.
        custom_id: The batch line's ``custom_id``.
        turns: Each model turn: ``{"request": {...}, "answer": {...}, "cached": bool}``.
        cost: What the call cost by the prices its client was given (``None``: unknown: a
            model without a price, a turn without usage, or a log older than costs).

    A field that a damaged row (changed by hand or by another tool) holds in a form that
    cannot be read is ``None`` (a list field ``[]``): ``calls()`` and ``stats()`` still
    return the row, and log one WARNING naming it.
    """

    id: str | None
    started: datetime | None
    seconds: float | None
    first_token_seconds: float | None
    source: str | None
    script: str | None
    provider: str | None
    host: str | None
    model: str | None
    messages: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, Any] | None = field(default_factory=dict)
    text: str | None = ""
    thinking: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    finish: str | None = "complete"
    error_code: str | None = None
    error_message: str | None = None
    usage: Usage | None = None
    cached: bool | None = False
    session_id: str | None = None
    custom_id: str | None = None
    turns: list[dict[str, Any]] = field(default_factory=list)
    cost: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CallStats:
    """Figures for one group of calls (``log.stats(by=...)``).

    Attributes:
        key: The model, the day (``YYYY-MM-DD`` in UTC), the host, the source or the script
            (``""`` when the calls have none; ``None`` when it cannot be read).
        calls: Calls in the group.
        errors: Calls that ended with an error.
        cached: Calls answered wholly from the log.
        prompt_tokens: Prompt tokens spent (cached calls spend none).
        completion_tokens: Completion tokens spent (cached calls spend none).
        seconds_p50: The median duration of a call.
        seconds_p95: The 95th percentile duration.
        cost: The sum of the known costs of its calls (``None`` when none is known).
    """

    key: str | None
    calls: int
    errors: int
    cached: int
    prompt_tokens: int
    completion_tokens: int
    seconds_p50: float
    seconds_p95: float
    cost: float | None = None


def dumps(data: Any) -> str:
    """Compact JSON that keeps non-ASCII text readable (``default=str`` for odd values).

    Text holding a lone surrogate (which Python strings allow and UTF-8 cannot carry) is
    written with ASCII escapes instead, so it still reads back exactly.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    if isinstance(storable(text), str):
        return text
    return json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str)


def storable(value: Any) -> Any:
    """``value`` as SQLite can keep it: a string with a lone surrogate becomes its bytes
    (``surrogatepass``) in a BLOB, which :func:`stored_text` turns back into the same string."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass")
    return value


def stored_text(value: Any) -> Any:
    """A stored text column back as the string that was written (see :func:`storable`)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogatepass")
    return value


def searchable(text: str) -> str:
    """``text`` for the full-text index, where a lone surrogate becomes U+FFFD."""
    stored = storable(text)
    return stored.decode("utf-8", "replace") if isinstance(stored, bytes) else text


def image_dict(part: ImagePart) -> dict[str, Any]:
    """An image as the log keeps it: hash, size and type of its decoded bytes."""
    try:
        raw = base64.b64decode(part.data, validate=False)
    except (binascii.Error, ValueError):
        raw = part.data.encode("utf-8", "replace")
    return {
        "type": "image",
        "sha256": hashlib.sha256(raw).hexdigest(),
        "bytes": len(raw),
        "mime": part.mime_type,
    }


def tool_call_dict(call: ToolCall) -> dict[str, Any]:
    """A tool call in the OpenAI format."""
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def tool_call_from_dict(data: dict[str, Any]) -> ToolCall:
    """The :class:`ToolCall` of :func:`tool_call_dict`."""
    function = data.get("function") or {}
    return ToolCall.from_arguments(
        str(data.get("id", "")), str(function.get("name", "")), function.get("arguments")
    )


def message_dict(message: Message) -> dict[str, Any]:
    """``message`` in the OpenAI chat format (images by hash, never their bytes)."""
    parts = message.parts
    content: Any
    if all(isinstance(p, TextPart) for p in parts):
        content = "".join(p.text for p in parts if isinstance(p, TextPart))
    else:
        content = [
            {"type": "text", "text": p.text} if isinstance(p, TextPart) else image_dict(p)
            for p in parts
        ]
    out: dict[str, Any] = {"role": message.role, "content": content}
    if message.name is not None:
        out["name"] = message.name
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        out["tool_calls"] = [tool_call_dict(c) for c in message.tool_calls]
    return out


def blocks_to_list(blocks: Iterable[ProviderBlock]) -> list[dict[str, Any]]:
    """A turn's provider blocks (thinking blocks, signatures) as JSON data."""
    return [{"wire": b.wire, "data": b.data} for b in blocks]


def blocks_from_list(data: Any) -> tuple[ProviderBlock, ...]:
    """The provider blocks of :func:`blocks_to_list` (malformed entries are skipped)."""
    if not isinstance(data, list):
        return ()
    return tuple(
        ProviderBlock(b["wire"], b["data"])
        for b in data
        if isinstance(b, dict)
        and isinstance(b.get("wire"), str)
        and isinstance(b.get("data"), dict)
    )


def result_to_dict(result: ToolResult) -> dict[str, Any]:
    """A tool result as JSON data (``{"ok", "data"}`` or ``{"ok", "error"}``)."""
    if result.ok:
        return {"ok": True, "data": result.data}
    error = result.error
    info = (
        {"code": error.code, "message": error.message, "details": error.details}
        if error is not None
        else None
    )
    return {"ok": False, "error": info}


def result_from_dict(data: dict[str, Any]) -> ToolResult:
    """The :class:`ToolResult` of :func:`result_to_dict`."""
    if data.get("ok"):
        return ToolResult(True, data.get("data"))
    error = data.get("error")
    info = (
        ErrorInfo(str(error.get("message", "")), str(error.get("code", "")), error.get("details"))
        if isinstance(error, dict)
        else None
    )
    return ToolResult(False, error=info)


def usage_dict(usage: Usage | None) -> dict[str, Any] | None:
    """Usage as JSON data."""
    if usage is None:
        return None
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "extra": dict(usage.extra),
    }


def usage_from_dict(data: Any) -> Usage | None:
    """The :class:`Usage` of :func:`usage_dict`."""
    if not isinstance(data, dict):
        return None
    return Usage(
        data.get("prompt_tokens"),
        data.get("completion_tokens"),
        data.get("total_tokens"),
        dict(data.get("extra") or {}),
    )


def call_to_json(call: LoggedCall) -> dict[str, Any]:
    """``call`` as JSON data, keyed by the field names of :class:`LoggedCall`."""
    return {
        "id": call.id,
        "started": call.started.isoformat() if call.started is not None else None,
        "seconds": call.seconds,
        "first_token_seconds": call.first_token_seconds,
        "source": call.source,
        "script": call.script,
        "provider": call.provider,
        "host": call.host,
        "model": call.model,
        "messages": call.messages,
        "options": call.options,
        "text": call.text,
        "thinking": call.thinking,
        "tool_calls": [tool_call_dict(c) for c in call.tool_calls],
        "tool_results": [result_to_dict(r) for r in call.tool_results],
        "finish": call.finish,
        "error_code": call.error_code,
        "error_message": call.error_message,
        "usage": usage_dict(call.usage),
        "cached": call.cached,
        "session_id": call.session_id,
        "custom_id": call.custom_id,
        "turns": call.turns,
        "cost": call.cost,
    }


def stats_to_json(stats: CallStats) -> dict[str, Any]:
    """``stats`` as JSON data, keyed by the field names of :class:`CallStats`."""
    return {
        "key": stats.key,
        "calls": stats.calls,
        "errors": stats.errors,
        "cached": stats.cached,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "seconds_p50": stats.seconds_p50,
        "seconds_p95": stats.seconds_p95,
        "cost": stats.cost,
    }

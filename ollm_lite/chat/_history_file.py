"""The saved-conversation format: messages as JSON-ready data and back.

:func:`write_conversation` stores what :meth:`ollm_lite.chat.Conversation.save` writes
(``version``, ``system_prompt`` and every message as :func:`message_to_dict` gives it);
:func:`read_conversation` and :func:`message_from_dict` read it back and check every field,
since a file on disk may have been damaged or edited: anything :func:`message_to_dict` would
not have written is a ``ValueError`` naming the field, never an ``AttributeError`` or
``KeyError`` from deep inside, and :func:`read_conversation` reports it as ``CONFIG_INVALID``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .._safe_text import exception_text, json_type, type_name
from ..errors import ConfigError
from ..types import ImagePart, Message, Part, TextPart, ToolCall

__all__ = [
    "conversation_to_dict",
    "json_kind",
    "message_from_dict",
    "message_to_dict",
    "optional_str",
    "read_conversation",
    "write_conversation",
]


def conversation_to_dict(system_prompt: str | None, messages: Iterable[Message]) -> dict[str, Any]:
    """A conversation as JSON-ready data (``version``, ``system_prompt``, ``messages``)."""
    return {
        "version": 1,
        "system_prompt": system_prompt,
        "messages": [message_to_dict(m) for m in messages],
    }


def write_conversation(
    path: str | os.PathLike[str], data: Mapping[str, Any], what: str = "conversation"
) -> None:
    """Write ``data`` as JSON, atomically: a crash never leaves half a file.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the file cannot be written (``what`` names
            the saved thing in the message).
    """
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), "utf-8")
        tmp.replace(target)
    except OSError as exc:
        raise ConfigError(f"cannot save the {what} to {target}: {exc.strerror}") from exc


def read_conversation(path: str | os.PathLike[str]) -> tuple[str | None, list[Message]]:
    """The system prompt and messages of a file :func:`write_conversation` wrote.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the file is unreadable, is not JSON, or any
            part of it is not what :func:`write_conversation` writes (nothing else escapes).
    """
    try:
        data = json.loads(Path(path).read_text("utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, found {json_kind(data)}")
        if data.get("version", 1) != 1:
            raise ValueError(f"unsupported version {data.get('version')!r} (expected 1)")
        raw_messages = data.get("messages")
        if not isinstance(raw_messages, list):
            raise ValueError(f"'messages' must be a list, found {json_kind(raw_messages)}")
        messages = [message_from_dict(m) for m in raw_messages]
        return optional_str(data, "system_prompt"), messages
    except (OSError, ValueError, TypeError, RecursionError) as exc:
        raise ConfigError(
            f"cannot load a conversation from {path}: {exception_text(exc)}",
            details={"path": str(path)},
        ) from exc


def message_to_dict(message: Message) -> dict[str, Any]:
    """A message as JSON-ready data (the history file format)."""
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        else:
            parts.append({"type": "image", "data": part.data, "mime_type": part.mime_type})
    out: dict[str, Any] = {"role": message.role, "parts": parts}
    if message.name is not None:
        out["name"] = message.name
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    return out


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """The inverse of :func:`message_to_dict`; every field is checked, nothing is trusted.

    Raises:
        ValueError: for anything :func:`message_to_dict` would not have written (a field of
            the wrong JSON type, an unknown role or part type, a missing key).
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a message must be an object, found {json_kind(data)}")
    role = data.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise ValueError(f"unknown role {role!r}")
    parts = [_part_from_dict(part) for part in _list_field(data, "parts")]
    calls = [_call_from_dict(c) for c in _list_field(data, "tool_calls")]
    return Message(
        role,
        parts,
        name=optional_str(data, "name"),
        tool_call_id=optional_str(data, "tool_call_id"),
        tool_calls=calls,
    )


def _part_from_dict(part: object) -> Part:
    if not isinstance(part, Mapping):
        raise ValueError(f"a message part must be an object, found {json_kind(part)}")
    kind = part.get("type")
    if kind == "text":
        return TextPart(_required_str(part, "text"))
    if kind == "image":
        return ImagePart(_required_str(part, "data"), _required_str(part, "mime_type"))
    raise ValueError(f"unknown part type {kind!r}")


def _call_from_dict(call: object) -> ToolCall:
    if not isinstance(call, Mapping):
        raise ValueError(f"a tool call must be an object, found {json_kind(call)}")
    arguments = call.get("arguments", "")
    if arguments is not None and not isinstance(arguments, str | dict):
        raise ValueError(f"tool call arguments must be a string, found {json_kind(arguments)}")
    return ToolCall.from_arguments(
        _required_str(call, "id"), _required_str(call, "name"), arguments
    )


def _list_field(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise ValueError(f"{key!r} must be a list, found {json_kind(value)}")
    return value


def _required_str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key!r} must be a string, found {json_kind(value)}")
    return value


def optional_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key!r} must be a string or null, found {json_kind(value)}")
    return value


def json_kind(value: object) -> str:
    """The JSON name of a parsed value's type, for messages about a damaged file."""
    kind = json_type(value)
    if kind is None:
        return f"a {type_name(value)}"
    return _KIND_TEXT.get(kind, f"a {kind}")


#: How messages name a JSON type, where that is not "a" and its JSON Schema name.
_KIND_TEXT = {
    "null": "null",
    "integer": "a number",
    "number": "a number",
    "array": "an array",
    "object": "an object",
}

"""The saved-conversation format: messages as JSON-ready data and back.

:func:`message_to_dict` writes what :meth:`ollm_lite.chat.Conversation.save` stores;
:func:`message_from_dict` reads it back and checks every field, since a file on disk may have
been damaged or edited: anything :func:`message_to_dict` would not have written is a
``ValueError`` naming the field, never an ``AttributeError`` or ``KeyError`` from deep inside.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._safe_text import type_name
from .types import ImagePart, Message, Part, TextPart, ToolCall

__all__ = ["json_kind", "message_from_dict", "message_to_dict", "optional_str"]


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
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type_name(value)}"

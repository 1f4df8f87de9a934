"""The saved-history format: sessions and conversations as JSON-ready data and back.

One format, one reader and one writer for :meth:`ollm_lite.Session.save` and
:meth:`ollm_lite.chat.Conversation.save`. A file holds ``version`` (1), the system prompt
(``system`` in a session file, ``system_prompt`` in a conversation file; either is read),
``messages`` as :func:`message_to_dict` gives them, a session file ``"format":
"ollm-lite-session"``, and may hold a ``session_id`` (a string); other top-level keys are
ignored, so a file written by a later version that adds one still loads.

:func:`read_history` checks every field, since a file on disk may have been damaged or edited:
anything :func:`message_to_dict` would not have written is reported as ``CONFIG_INVALID``
naming the file and the field, never an ``AttributeError``, ``KeyError`` or
``RecursionError`` from deep inside. Files are read and written through
:mod:`~ollm_lite._files`: a regular file of at most :data:`HISTORY_LIMIT` bytes, replaced
atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from .._files import MiB, path_text, read_file, size_text, write_file
from .._safe_text import exception_text, json_type, short_repr, type_name
from ..errors import ConfigError
from ..types import ImagePart, Message, Part, ProviderBlock, TextPart, ToolCall

__all__ = [
    "HISTORY_LIMIT",
    "SavedHistory",
    "conversation_to_dict",
    "json_kind",
    "message_from_dict",
    "message_to_dict",
    "optional_str",
    "read_history",
    "write_history",
]

#: The most bytes a saved session or conversation may hold (room for many images at their
#: own limit); ``save`` refuses to write a file that ``load`` would refuse to read.
HISTORY_LIMIT = 256 * MiB

SESSION_FORMAT = "ollm-lite-session"


class SavedHistory(NamedTuple):
    """What a saved session or conversation file holds."""

    system: str | None
    messages: list[Message]
    session_id: str | None = None


def conversation_to_dict(system_prompt: str | None, messages: Iterable[Message]) -> dict[str, Any]:
    """A conversation as JSON-ready data (``version``, ``system_prompt``, ``messages``)."""
    return {
        "version": 1,
        "system_prompt": system_prompt,
        "messages": [message_to_dict(m) for m in messages],
    }


def write_history(
    path: str | os.PathLike[str], data: Mapping[str, Any], what: str = "conversation"
) -> None:
    """Write ``data`` as JSON, atomically: a crash never leaves half a file.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the file cannot be written or would be larger
            than :data:`HISTORY_LIMIT` (``what`` names the saved thing in the message).
    """
    try:
        text = json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: kept as a \u escape, which reads back
        text = json.dumps(data, indent=1).encode("ascii")
    if len(text) > HISTORY_LIMIT:
        raise ConfigError(
            f"cannot save the {what}: it would be larger than {size_text(HISTORY_LIMIT)}, "
            "the most a saved history may hold"
        )
    write_file(path, text, what)


def read_history(path: str | os.PathLike[str], what: str = "conversation") -> SavedHistory:
    """The system prompt, messages and session id of a file :func:`write_history` wrote.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the file is unreadable, not a regular file,
            larger than :data:`HISTORY_LIMIT`, not JSON, or any part of it is not what
            :func:`write_history` writes (nothing else escapes).
    """
    raw = read_file(path, HISTORY_LIMIT, f"{what} file")
    try:
        return _history_from_dict(json.loads(raw.decode("utf-8")))
    except (ValueError, TypeError, RecursionError) as exc:
        raise ConfigError(
            f"cannot load a {what} from {path_text(path)}: {exception_text(exc)}",
            details={"path": path_text(path)},
        ) from exc


def _history_from_dict(data: Any) -> SavedHistory:
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, found {json_kind(data)}")
    if data.get("version", 1) != 1:
        raise ValueError(f"unsupported version {short_repr(data.get('version'))} (expected 1)")
    if data.get("format", SESSION_FORMAT) != SESSION_FORMAT:
        raise ValueError(f"unknown format {short_repr(data.get('format'))}")
    raw_messages = data.get("messages")
    if not isinstance(raw_messages, list):
        raise ValueError(f"'messages' must be a list, found {json_kind(raw_messages)}")
    messages = [message_from_dict(m) for m in raw_messages]
    system = optional_str(data, "system" if "system" in data else "system_prompt")
    return SavedHistory(system, messages, optional_str(data, "session_id"))


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
    if message.provider_blocks:  # thinking blocks and signatures the server wants back
        out["provider_blocks"] = [{"wire": b.wire, "data": b.data} for b in message.provider_blocks]
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
        raise ValueError(f"unknown role {short_repr(role)}")
    parts = [_part_from_dict(part) for part in _list_field(data, "parts")]
    calls = [_call_from_dict(c) for c in _list_field(data, "tool_calls")]
    blocks = tuple(_block_from_dict(b) for b in _list_field(data, "provider_blocks"))
    return Message(
        role,
        parts,
        name=optional_str(data, "name"),
        tool_call_id=optional_str(data, "tool_call_id"),
        tool_calls=calls,
        provider_blocks=blocks,
    )


def _block_from_dict(block: object) -> ProviderBlock:
    if not isinstance(block, Mapping):
        raise ValueError(f"a provider block must be an object, found {json_kind(block)}")
    data = block.get("data")
    if not isinstance(data, dict):
        raise ValueError(f"a provider block's 'data' must be an object, found {json_kind(data)}")
    return ProviderBlock(_required_str(block, "wire"), data)


def _part_from_dict(part: object) -> Part:
    if not isinstance(part, Mapping):
        raise ValueError(f"a message part must be an object, found {json_kind(part)}")
    kind = part.get("type")
    if kind == "text":
        return TextPart(_required_str(part, "text"))
    if kind == "image":
        return ImagePart(_required_str(part, "data"), _required_str(part, "mime_type"))
    raise ValueError(f"unknown part type {short_repr(kind)}")


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

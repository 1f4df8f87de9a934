"""Inputs as people hold them, turned into the library's types.

* prompts: a ``str``, a ``Message``, or a list of ``Message`` / ``{"role", "content"}`` dicts
  (OpenAI's message shape: ``content`` may be text or a list of ``text`` / ``image_url``
  parts; ``tool_calls``, ``tool_call_id`` and ``name`` are read too);
* images: a path (``str`` / ``os.PathLike``) of a regular file, ``bytes``, a ``data:`` URL or
  an ``ImagePart``, at most :data:`IMAGE_LIMIT` (10 MiB) decoded in every form (the MIME type
  comes from the file's first bytes, else its extension);
* tools: ``@tool`` functions, plain typed functions, a ``ToolRegistry``, an MCP server's
  tools (``McpServer.tools()``: schemas bound to their server, run there), and tools without a
  handler here — OpenAI-format dicts (``{"type": "function", "function": {...}}``) or plain
  ``ToolSchema`` values — that the caller runs itself.

Nothing given is changed: messages are copied, lists are new. Every bad input raises
``ConfigError`` (``CONFIG_INVALID``) naming what was wrong.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import mimetypes
import os
from collections.abc import Iterable, Mapping
from typing import Any, cast

from .._files import MiB, read_file, size_text
from .._safe_text import short_repr, type_name
from ..errors import ConfigError
from ..tools import Tool, ToolDefinitionError, ToolRegistry
from ..types import ImagePart, Message, Part, Role, TextPart, ToolCall, ToolSchema

__all__ = [
    "IMAGE_LIMIT",
    "as_image",
    "as_images",
    "as_messages",
    "as_tools",
    "checked_copy",
    "message_from_mapping",
]

#: The most bytes an image may hold once decoded, whatever its form. Its base64 text
#: (4/3 of it) still fits a 16 MiB line of a batch file with room to spare.
IMAGE_LIMIT = 10 * MiB
_ENCODED_LIMIT = 4 * ((IMAGE_LIMIT + 2) // 3)

_ROLES = ("system", "user", "assistant", "tool")
_ROLE_TEXT = "'system', 'user', 'assistant' or 'tool'"

#: Magic numbers of the image formats vision models read.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)


# --------------------------------------------------------------------------- messages


def as_messages(prompt: Any) -> list[Message]:
    """The prompt as new ``Message`` values (the caller's are copied, never changed).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an empty prompt or an item that is no message.
    """
    if isinstance(prompt, str):
        if not prompt:
            raise ConfigError("the prompt is empty: give some text")
        return [Message.user(prompt)]
    if isinstance(prompt, Message):
        return [checked_copy(prompt)]
    if isinstance(prompt, Mapping):
        return [message_from_mapping(prompt)]
    if isinstance(prompt, bytes | bytearray) or not isinstance(prompt, Iterable):
        raise ConfigError(
            "the prompt must be a str, a Message, or a list of messages "
            f"(Message or {{'role', 'content'}} dicts), not {type_name(prompt)}"
        )
    messages = []
    for index, item in enumerate(prompt):
        if not isinstance(item, Message | Mapping):
            raise ConfigError(
                f"message {index} must be a Message or a {{'role', 'content'}} dict, "
                f"not {type_name(item)}"
            )
        try:
            messages.append(
                checked_copy(item) if isinstance(item, Message) else message_from_mapping(item)
            )
        except ConfigError as exc:
            raise ConfigError(f"message {index}: {exc.message}") from exc
    if not messages:
        raise ConfigError("the prompt is an empty list of messages")
    return messages


def checked_copy(message: Message) -> Message:
    """A new ``Message`` equal to ``message``, every field checked (it is mutable: a caller
    may have set anything on it).

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming the field that is not what ``Message`` says.
    """
    if not isinstance(message.role, str) or message.role not in _ROLES:
        raise ConfigError(f"role must be {_ROLE_TEXT}, not {short_repr(message.role)}")
    parts, calls = message.parts, message.tool_calls
    if not isinstance(parts, list | tuple) or not isinstance(calls, list | tuple):
        raise ConfigError("a Message's parts and tool_calls must be lists")
    checked: list[Part] = []
    for part in parts:
        if isinstance(part, TextPart) and isinstance(part.text, str):
            checked.append(part)
        elif isinstance(part, ImagePart):
            checked.append(_checked_part(part))
        else:
            raise ConfigError(
                f"a message part must be a TextPart or an ImagePart, not {short_repr(part)}"
            )
    for call in calls:
        if not (
            isinstance(call, ToolCall)
            and isinstance(call.id, str)
            and isinstance(call.name, str)
            and isinstance(call.args, dict)
            and isinstance(call.arguments, str)
        ):
            raise ConfigError(
                f"a message's tool calls must be ToolCall values, not {short_repr(call)}"
            )
    _optional_str(message.name, "name")
    _optional_str(message.tool_call_id, "tool_call_id")
    return dataclasses.replace(message, parts=checked, tool_calls=list(calls))


def message_from_mapping(data: Mapping[str, Any]) -> Message:
    """A message from OpenAI's chat shape ``{"role", "content", ...}``.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an unknown role or a field of the wrong type.
    """
    role = data.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        raise ConfigError(f"role must be {_ROLE_TEXT}, not {short_repr(role)}")
    parts = _parts(data.get("content"))
    calls = data.get("tool_calls")
    if calls is not None and not isinstance(calls, list | tuple):
        raise ConfigError(f"tool_calls must be a list, not {type_name(calls)}")
    return Message(
        cast("Role", role),
        parts,
        name=_optional_str(data.get("name"), "name"),
        tool_call_id=_optional_str(data.get("tool_call_id"), "tool_call_id"),
        tool_calls=[_call(c) for c in calls or ()],
    )


def _optional_str(value: Any, field: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{field} must be a str, not {type_name(value)}")
    return value


def _parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    if not isinstance(content, list | tuple):
        raise ConfigError(f"content must be a str or a list of parts, not {type_name(content)}")
    parts: list[Part] = []
    for piece in content:
        kind = piece.get("type") if isinstance(piece, Mapping) else None
        if kind == "text" and isinstance(piece.get("text"), str):
            parts.append(TextPart(piece["text"]))
        elif kind == "image_url":
            image = piece.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else None
            if not isinstance(url, str):
                raise ConfigError("an image_url part must look like {'image_url': {'url': str}}")
            parts.append(as_image(url))
        else:
            raise ConfigError(f"unsupported content part {short_repr(piece)}")
    return parts


def _call(data: Any) -> ToolCall:
    function = data.get("function") if isinstance(data, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ConfigError(f"a tool call must look like OpenAI's, not {short_repr(data)}")
    call_id = _optional_str(data.get("id"), "a tool call's id") or ""
    arguments = function.get("arguments")
    if isinstance(arguments, Mapping):
        try:  # the JSON text, and args parsed back from it: not the caller's dict
            arguments = json.dumps(arguments, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ConfigError("tool call arguments must be a JSON object") from exc
    elif not isinstance(arguments, str | type(None)):
        raise ConfigError("tool call arguments must be JSON text or an object")
    return ToolCall.from_arguments(call_id, function["name"], arguments)


# --------------------------------------------------------------------------- images


def as_images(images: Any) -> list[ImagePart]:
    """Every item of ``images`` as an ``ImagePart`` (``None``: none).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an unreadable file or an item of another type.
    """
    if images is None:
        return []
    if isinstance(images, str | bytes | bytearray | os.PathLike | ImagePart):
        return [as_image(images)]
    if isinstance(images, Mapping) or not isinstance(images, Iterable):
        raise ConfigError(f"images must be a list, not {type_name(images)}")
    return [as_image(item) for item in images]


def as_image(item: Any) -> ImagePart:
    """One image as an ``ImagePart``: a path, ``bytes``, a ``data:`` URL or an ``ImagePart``.

    Whatever its form, an image holds at most :data:`IMAGE_LIMIT` bytes once decoded; a path
    must name a regular file, of which at most that much (plus one byte) is read.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a missing or unreadable file, one that is not a
            regular file, an empty or too large image, an ``http(s)`` URL (download it
            first) or another type.
    """
    if isinstance(item, ImagePart):
        return _checked_part(item)
    if isinstance(item, bytes | bytearray):
        return _from_bytes(bytes(item), None)
    if isinstance(item, str) and item.startswith("data:"):
        return _from_data_url(item)
    if isinstance(item, str) and item.startswith(("http://", "https://")):
        raise ConfigError(f"images are sent inline: download {item} and pass the file instead")
    if isinstance(item, str | os.PathLike):
        data = read_file(item, IMAGE_LIMIT, "image")
        return _from_bytes(data, _file_name(item))
    raise ConfigError(f"an image must be a path, bytes or an ImagePart, not {type_name(item)}")


def _file_name(path: str | os.PathLike[Any]) -> str:
    return os.path.basename(os.fsdecode(os.fspath(path)))


def _from_bytes(data: bytes, filename: str | None) -> ImagePart:
    if not data:
        raise ConfigError(f"the image {filename or ''} is empty".replace("  ", " "))
    if len(data) > IMAGE_LIMIT:
        raise ConfigError(_too_large(filename))
    return ImagePart(base64.b64encode(data).decode("ascii"), _mime(data, filename))


def _too_large(filename: str | None) -> str:
    name = f"the image {filename}" if filename else "an image"
    return f"{name} is larger than {size_text(IMAGE_LIMIT)}, the most an image may hold"


def _mime(data: bytes, filename: str | None) -> str:
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    guessed = mimetypes.guess_type(filename)[0] if filename else None
    return guessed if guessed and guessed.startswith("image/") else "image/png"


def _from_data_url(url: str) -> ImagePart:
    head, _, payload = url.partition(",")
    mime = head[len("data:") :].split(";")[0] or "image/png"
    if not head.endswith(";base64"):
        raise ConfigError("a data: URL image must be base64 encoded")
    return _checked_part(ImagePart(payload, mime), "the data: URL image")


def _checked_part(part: ImagePart, what: str = "an ImagePart") -> ImagePart:
    """``part`` itself when its data is base64 text of at most :data:`IMAGE_LIMIT` bytes."""
    data, mime = part.data, part.mime_type
    if not isinstance(data, str) or not isinstance(mime, str):
        raise ConfigError(f"{what} needs str data and mime_type")
    if len(data) > _ENCODED_LIMIT:  # checked before decoding: a huge text is not decoded
        raise ConfigError(_too_large(None))
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigError(f"{what} is not valid base64") from exc
    if not decoded:
        raise ConfigError(f"{what} is empty")
    if len(decoded) > IMAGE_LIMIT:
        raise ConfigError(_too_large(None))
    return part


# --------------------------------------------------------------------------- tools


def as_tools(tools: Any) -> tuple[ToolRegistry | None, tuple[ToolSchema, ...]]:
    """Tools with a handler (a registry) and tools the caller runs (schemas only).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an item that is no tool, a malformed dict, or
            two tools with one name.
    """
    if tools is None:
        return None, ()
    if isinstance(tools, ToolRegistry):
        return tools, ()
    if isinstance(tools, Tool) or (callable(tools) and not isinstance(tools, type)):
        tools = [tools]
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise ConfigError(f"tools must be a list of tools, not {type_name(tools)}")
    handled: list[Any] = []
    external: list[ToolSchema] = []
    for item in tools:
        if isinstance(item, ToolSchema) and callable(getattr(item, "as_tool", None)):
            handled.append(item)  # bound to the server it came from (McpServer.tools())
        elif isinstance(item, ToolSchema):
            external.append(item)
        elif isinstance(item, Mapping):
            external.append(schema_from_openai(item))
        elif isinstance(item, Tool) or callable(item):
            handled.append(item)
        else:
            raise ConfigError(
                f"{short_repr(item)} is not a tool: give a function, a @tool or a dict"
            )
    try:
        registry = ToolRegistry(handled) if handled else None
    except ToolDefinitionError as exc:
        raise ConfigError(exc.message) from exc
    names = [*(registry.names() if registry else []), *(s.name for s in external)]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ConfigError(f"two tools are named {clash[0]!r}: tool names must be unique")
    return registry, tuple(external)


def schema_from_openai(data: Mapping[str, Any]) -> ToolSchema:
    """A ``ToolSchema`` from ``{"type": "function", "function": {name, description,
    parameters}}`` (the bare ``function`` object is accepted too).

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the name or the parameters are missing or bad.
    """
    function = data.get("function", data)
    if not isinstance(function, Mapping):
        raise ConfigError(f"a tool dict needs a 'function' object: {short_repr(dict(data))}")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a tool dict needs a 'name': {short_repr(dict(data))}")
    description = function.get("description")
    parameters = function.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise ConfigError(f"tool {name!r}: 'parameters' must be a JSON Schema object")
    return ToolSchema(
        name,
        description if isinstance(description, str) else None,
        dict(parameters) if parameters is not None else None,
    )

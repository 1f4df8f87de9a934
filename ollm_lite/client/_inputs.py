"""Inputs as people hold them, turned into the library's types.

* prompts: a ``str``, a ``Message``, or a list of ``Message`` / ``{"role", "content"}`` dicts
  (OpenAI's message shape: ``content`` may be text or a list of ``text`` / ``image_url``
  parts; ``tool_calls``, ``tool_call_id`` and ``name`` are read too);
* images: a path (``str`` / ``os.PathLike``), ``bytes``, a ``data:`` URL or an ``ImagePart``
  (the MIME type comes from the file's first bytes, else its extension);
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
import mimetypes
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..tools import Tool, ToolDefinitionError, ToolRegistry
from ..types import ImagePart, Message, Part, TextPart, ToolCall, ToolSchema

__all__ = ["as_image", "as_images", "as_messages", "as_tools", "message_from_mapping"]

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
        return [_copy(prompt)]
    if isinstance(prompt, Mapping):
        return [message_from_mapping(prompt)]
    if isinstance(prompt, bytes | bytearray) or not isinstance(prompt, Iterable):
        raise ConfigError(
            "the prompt must be a str, a Message, or a list of messages "
            f"(Message or {{'role', 'content'}} dicts), not {type(prompt).__name__}"
        )
    messages = []
    for index, item in enumerate(prompt):
        if isinstance(item, Message):
            messages.append(_copy(item))
        elif isinstance(item, Mapping):
            try:
                messages.append(message_from_mapping(item))
            except ConfigError as exc:
                raise ConfigError(f"message {index}: {exc.message}") from exc
        else:
            raise ConfigError(
                f"message {index} must be a Message or a {{'role', 'content'}} dict, "
                f"not {type(item).__name__}"
            )
    if not messages:
        raise ConfigError("the prompt is an empty list of messages")
    return messages


def _copy(message: Message) -> Message:
    return dataclasses.replace(
        message, parts=list(message.parts), tool_calls=list(message.tool_calls)
    )


def message_from_mapping(data: Mapping[str, Any]) -> Message:
    """A message from OpenAI's chat shape ``{"role", "content", ...}``.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an unknown role or content of the wrong type.
    """
    role = data.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise ConfigError(f"role must be 'system', 'user', 'assistant' or 'tool', not {role!r}")
    parts = _parts(data.get("content"))
    calls = [_call(c) for c in data.get("tool_calls") or ()]
    name = data.get("name")
    call_id = data.get("tool_call_id")
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"name must be a str, not {type(name).__name__}")
    if call_id is not None and not isinstance(call_id, str):
        raise ConfigError(f"tool_call_id must be a str, not {type(call_id).__name__}")
    return Message(role, parts, name=name, tool_call_id=call_id, tool_calls=calls)


def _parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    if isinstance(content, list):
        parts: list[Part] = []
        for piece in content:
            kind = piece.get("type") if isinstance(piece, Mapping) else None
            if kind == "text" and isinstance(piece.get("text"), str):
                parts.append(TextPart(piece["text"]))
            elif kind == "image_url":
                url = piece.get("image_url")
                url = url.get("url") if isinstance(url, Mapping) else url
                parts.append(as_image(url))
            else:
                raise ConfigError(f"unsupported content part {piece!r}")
        return parts
    raise ConfigError(f"content must be a str or a list of parts, not {type(content).__name__}")


def _call(data: Any) -> ToolCall:
    function = data.get("function") if isinstance(data, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ConfigError(f"a tool call must look like OpenAI's, not {data!r}")
    arguments = function.get("arguments")
    if not isinstance(arguments, str | dict | type(None)):
        raise ConfigError("tool call arguments must be JSON text or an object")
    return ToolCall.from_arguments(str(data.get("id") or ""), function["name"], arguments)


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
    if not isinstance(images, Iterable):
        raise ConfigError(f"images must be a list, not {type(images).__name__}")
    return [as_image(item) for item in images]


def as_image(item: Any) -> ImagePart:
    """One image as an ``ImagePart``: a path, ``bytes``, a ``data:`` URL or an ``ImagePart``.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a missing or unreadable file, an empty image, an
            ``http(s)`` URL (download it first) or another type.
    """
    if isinstance(item, ImagePart):
        return item
    if isinstance(item, bytes | bytearray):
        return _from_bytes(bytes(item), None)
    if isinstance(item, str) and item.startswith("data:"):
        return _from_data_url(item)
    if isinstance(item, str) and item.startswith(("http://", "https://")):
        raise ConfigError(f"images are sent inline: download {item} and pass the file instead")
    if isinstance(item, str | os.PathLike):
        path = Path(item)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the image {str(path)!r}: {exc.strerror}") from exc
        return _from_bytes(data, path.name)
    raise ConfigError(f"an image must be a path, bytes or an ImagePart, not {type(item).__name__}")


def _from_bytes(data: bytes, filename: str | None) -> ImagePart:
    if not data:
        raise ConfigError(f"the image {filename or ''} is empty".replace("  ", " "))
    return ImagePart(base64.b64encode(data).decode("ascii"), _mime(data, filename))


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
    try:
        base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigError("the data: URL image is not valid base64") from exc
    return ImagePart(payload, mime)


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
        raise ConfigError(f"tools must be a list of tools, not {type(tools).__name__}")
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
            raise ConfigError(f"{item!r} is not a tool: give a function, a @tool or a dict")
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
        raise ConfigError(f"a tool dict needs a 'function' object: {dict(data)!r}")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a tool dict needs a 'name': {dict(data)!r}")
    description = function.get("description")
    parameters = function.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise ConfigError(f"tool {name!r}: 'parameters' must be a JSON Schema object")
    return ToolSchema(
        name,
        description if isinstance(description, str) else None,
        dict(parameters) if parameters is not None else None,
    )

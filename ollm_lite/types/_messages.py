"""Messages and tool values: parts, ``Message``, ``ToolCall``, ``ToolSchema``, ``ToolResult``.

Public through :mod:`ollm_lite.types`, which re-exports every name here. Pure values: slotted
dataclasses with small helpers and no I/O.

Invariant: ``ToolCall.args`` is always a dict and ``ToolCall.arguments`` always the JSON text of
the call as the model produced it (or ``json.dumps(args)`` when the wire carried an object).
Unparseable arguments never raise: ``args == {}`` and ``arguments`` keeps the raw text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

from .._safe_text import safe_str

__all__ = [
    "ErrorInfo",
    "ImagePart",
    "Message",
    "Part",
    "ProviderBlock",
    "Role",
    "TextPart",
    "ToolCall",
    "ToolResult",
    "ToolSchema",
    "parse_tool_arguments",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
_ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")


# --------------------------------------------------------------------------- message parts


@dataclass(frozen=True, slots=True)
class TextPart:
    """A piece of text inside a message."""

    text: str
    type: ClassVar[Literal["text"]] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image inside a message, as base64 data (no ``data:`` URL prefix)."""

    data: str
    mime_type: str = "image/png"
    type: ClassVar[Literal["image"]] = "image"


Part: TypeAlias = TextPart | ImagePart


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a tool requested by the model, complete (never a fragment)."""

    id: str
    """Identifier the tool result must echo (generated when the backend sends none)."""
    name: str
    """Name of the tool to run."""
    args: dict[str, Any]
    """Parsed arguments; ``{}`` when the model's JSON could not be parsed."""
    arguments: str
    """The raw JSON text of the arguments, as the model produced it."""

    @classmethod
    def from_arguments(cls, id: str, name: str, arguments: str | dict[str, Any] | None) -> ToolCall:
        """Build a call from wire arguments given as JSON text or as an already-parsed object."""
        if isinstance(arguments, dict):
            return cls(id=id, name=name, args=arguments, arguments=json.dumps(arguments))
        text = arguments or ""
        return cls(id=id, name=name, args=parse_tool_arguments(text), arguments=text)


def parse_tool_arguments(text: str) -> dict[str, Any]:
    """Parse a tool call's JSON arguments; anything that is not a JSON object gives ``{}``."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class ProviderBlock:
    """A piece of an assistant turn that only the wire which produced it reads, kept as the
    server sent it so that it goes back unchanged when the turn is part of a later request.

    Anthropic's Messages API requires the ``thinking`` blocks of an assistant turn, with their
    ``signature``, and its ``redacted_thinking`` blocks to come back untouched
    (https://platform.claude.com/docs/en/build-with-claude/extended-thinking); Gemini requires
    a function call's ``thoughtSignature`` back with the call
    (https://ai.google.dev/gemini-api/docs/thought-signatures). Every other wire ignores them.
    """

    wire: str
    """The wire that made the block and reads it back: ``"anthropic"`` or ``"gemini"``."""
    data: dict[str, Any]
    """The block as JSON data, opaque to everything but that wire."""


@dataclass(slots=True)
class Message:
    """One message of a conversation in the library's internal format."""

    role: Role
    parts: list[Part] = field(default_factory=list)
    name: str | None = None
    """For ``tool`` messages: the name of the tool that produced the result."""
    tool_call_id: str | None = None
    """For ``tool`` messages: the id of the call this message answers."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """For ``assistant`` messages: the tool calls the model made in this turn."""
    provider_blocks: tuple[ProviderBlock, ...] = ()
    """For ``assistant`` messages: what the server needs back with this turn (thinking
    blocks and their signatures, thought signatures), in the order it sent them."""

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"Message role must be one of {', '.join(_ROLES)}, not {self.role!r}")

    @property
    def text(self) -> str:
        """All text parts joined, without separators."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def images(self) -> list[ImagePart]:
        """The image parts of the message."""
        return [p for p in self.parts if isinstance(p, ImagePart)]

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls("system", [TextPart(text)])

    @classmethod
    def user(cls, text: str, images: Iterable[ImagePart] = ()) -> Message:
        """A user message with optional images."""
        parts: list[Part] = [TextPart(text)] if text else []
        parts.extend(images)
        return cls("user", parts)

    @classmethod
    def assistant(cls, text: str, tool_calls: Sequence[ToolCall] = ()) -> Message:
        """An assistant message, with the tool calls it made (if any)."""
        return cls("assistant", [TextPart(text)] if text else [], tool_calls=list(tool_calls))

    @classmethod
    def tool(cls, result: ToolResult, call: ToolCall) -> Message:
        """The message that returns ``result`` for ``call`` to the model."""
        return cls("tool", [TextPart(result.to_json())], name=call.name, tool_call_id=call.id)


# --------------------------------------------------------------------------- tools


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool as the model sees it: its name, description and JSON Schema parameters."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """A failure as data: a human message, a stable code and optional details."""

    message: str
    code: str
    details: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form ``{"code", "message", "details"?}``."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of running a tool: ``ok`` with ``data``, or not ``ok`` with ``error``."""

    ok: bool
    data: Any = None
    error: ErrorInfo | None = None

    def to_json(self) -> str:
        """``{"ok": true, "data": ...}`` or ``{"ok": false, "error": {...}}`` as JSON text.

        Never raises: data that JSON cannot encode is written as its ``str()`` (its type name
        when even that fails).
        """
        err = self.error if isinstance(self.error, ErrorInfo) else None
        err = err or ErrorInfo("tool failed", "TOOL_ERROR")
        payload: dict[str, Any] = (
            {"ok": True, "data": self.data} if self.ok else {"ok": False, "error": err.to_dict()}
        )
        try:
            return json.dumps(payload, ensure_ascii=False, default=safe_str)
        except Exception:  # circular, too deep, NaN, non-str keys, a hook that raises ...
            if self.ok:
                payload["data"] = safe_str(self.data)
            else:
                payload["error"] = {"code": safe_str(err.code), "message": safe_str(err.message)}
            return json.dumps(payload, ensure_ascii=False, default=safe_str)

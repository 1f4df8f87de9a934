"""Pure mapping between the library's types and Gemini's REST format (``v1beta``).

No I/O here: :func:`request_body` builds ``generateContent`` bodies, :class:`ChatStreamState`
turns each streamed ``GenerateContentResponse`` into provider events, :func:`clean_schema`
drops the JSON Schema keywords Gemini's ``parameters`` reject.

Wire facts (``../shared/PROTOCOLS.md`` §6): camelCase fields; roles ``user``/``model``; the
system prompt is ``systemInstruction``; function calls arrive whole (``args`` is an object) and
``finishReason`` is ``STOP`` even after calls; ``usageMetadata`` is cumulative on every chunk;
the stream has no ``[DONE]``; tool results go back as ``functionResponse`` parts whose
``response`` must be an object.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..types import (
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    FinishReason,
    ImagePart,
    Message,
    ModelInfo,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    TextPart,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    Usage,
)
from .base import usage_from

__all__ = [
    "ChatStreamState",
    "clean_schema",
    "contents_from_messages",
    "model_info_from_gemini",
    "request_body",
]

_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
}
#: Finish reasons that mean the model failed to produce a usable turn.
_FAILED = {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"}

# JSON Schema keywords Gemini's OpenAPI-subset ``parameters`` reject.
_UNSUPPORTED_KEYWORDS = frozenset(
    {
        "$schema",
        "$id",
        "$ref",
        "$defs",
        "definitions",
        "additionalProperties",
        "patternProperties",
        "unevaluatedProperties",
        "dependentRequired",
        "dependentSchemas",
        "const",
        "examples",
        "if",
        "then",
        "else",
        "not",
        "contentMediaType",
        "contentEncoding",
        "prefixItems",
        "uniqueItems",
        "default",
    }
)


def clean_schema(schema: Any) -> Any:
    """``schema`` without the keywords Gemini rejects; ``["x", "null"]`` → ``nullable``."""
    if isinstance(schema, list):
        return [clean_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _UNSUPPORTED_KEYWORDS:
            continue
        if key == "type" and isinstance(value, list):
            kinds = [k for k in value if k != "null"]
            if len(kinds) < len(value):
                out["nullable"] = True
            out["type"] = kinds[0] if len(kinds) == 1 else (kinds or ["string"])[0]
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: clean_schema(sub) for name, sub in value.items()}
        else:
            out[key] = clean_schema(value)
    return out


def _response_object(text: str) -> dict[str, Any]:
    """A tool message's content as the object ``functionResponse.response`` must be."""
    try:
        value = json.loads(text)
    except ValueError:
        return {"result": text}
    return value if isinstance(value, dict) else {"result": value}


def contents_from_messages(
    messages: list[Message], signatures: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Messages as Gemini ``contents`` (system messages are left to ``systemInstruction``).

    Consecutive tool results are merged into one ``user`` turn, as Gemini expects.
    """
    signatures = signatures or {}
    contents: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            part: dict[str, Any] = {
                "functionResponse": {
                    "name": message.name or "",
                    "response": _response_object(message.text),
                }
            }
            if message.tool_call_id and not message.tool_call_id.startswith("call_"):
                part["functionResponse"]["id"] = message.tool_call_id
            previous = contents[-1] if contents else None
            if previous is not None and previous.get("_tool"):
                previous["parts"].append(part)
            else:
                contents.append({"role": "user", "parts": [part], "_tool": True})
            continue
        parts: list[dict[str, Any]] = []
        for item in message.parts:
            if isinstance(item, TextPart):
                if item.text:
                    parts.append({"text": item.text})
            elif isinstance(item, ImagePart):
                parts.append({"inlineData": {"mimeType": item.mime_type, "data": item.data}})
        for call in message.tool_calls:
            fc: dict[str, Any] = {"name": call.name, "args": call.args}
            if call.id and not call.id.startswith("call_"):
                fc["id"] = call.id
            call_part: dict[str, Any] = {"functionCall": fc}
            signature = signatures.get(call.id)
            if signature:
                call_part["thoughtSignature"] = signature
            parts.append(call_part)
        if not parts:
            parts.append({"text": ""})
        contents.append(
            {"role": "model" if message.role == "assistant" else "user", "parts": parts}
        )
    for content in contents:
        content.pop("_tool", None)
    return contents


def request_body(
    request: ProviderRequest, signatures: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The JSON body of ``generateContent`` / ``streamGenerateContent`` for ``request``.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when ``tool_choice`` forces a tool that is not offered.
    """
    body: dict[str, Any] = {"contents": contents_from_messages(request.messages, signatures)}
    system = [m.text for m in request.messages if m.role == "system"]
    if request.system_prompt:
        system.insert(0, request.system_prompt)
    if system:
        body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": t.name,
                        "description": t.description or "",
                        "parameters": clean_schema(
                            t.parameters or {"type": "object", "properties": {}}
                        ),
                    }
                    for t in request.tools
                ]
            }
        ]
        choice = request.tool_choice
        if isinstance(choice, dict):
            name = choice.get("name")
            if name not in {t.name for t in request.tools}:
                raise ConfigError(f"tool_choice names {name!r}, which is not among the tools")
            config: dict[str, Any] = {"mode": "ANY", "allowedFunctionNames": [name]}
        else:
            config = {"mode": "NONE" if choice == "none" else "AUTO"}
        body["toolConfig"] = {"functionCallingConfig": config}
    opts = request.options
    generation: dict[str, Any] = {}
    for key, value in (
        ("temperature", opts.temperature),
        ("maxOutputTokens", opts.max_tokens),
        ("topP", opts.top_p),
        ("topK", opts.top_k),
        ("seed", opts.seed),
        ("presencePenalty", opts.presence_penalty),
        ("frequencyPenalty", opts.frequency_penalty),
    ):
        if value is not None:
            generation[key] = value
    if opts.stop:
        generation["stopSequences"] = list(opts.stop)
    fmt = request.response_format
    if fmt is not None:
        generation["responseMimeType"] = "application/json"
        if isinstance(fmt, dict):
            generation["responseSchema"] = clean_schema(fmt)
    if generation:
        body["generationConfig"] = generation
    if opts.extra_body:
        body.update(opts.extra_body)
    return body


class ChatStreamState:
    """Per-stream state: each SSE event is a whole ``GenerateContentResponse``."""

    __slots__ = ("_calls", "_finish", "_loads", "error", "signatures", "skipped", "usage")

    def __init__(self) -> None:
        self._calls = 0
        self._finish: str | None = None
        self._loads = json.loads
        self.usage: Usage | None = None
        self.error: ErrorEvent | None = None
        self.signatures: dict[str, str] = {}
        self.skipped = 0

    @property
    def done(self) -> bool:
        """True once an error was seen (nothing after it is read)."""
        return self.error is not None

    def handle(self, data: str) -> list[ProviderEvent]:
        """Events for one SSE ``data`` payload."""
        try:
            chunk = self._loads(data)
        except ValueError:
            self.skipped += 1
            return []
        if isinstance(chunk, list) and len(chunk) == 1:  # the array form of errors
            chunk = chunk[0]
        if not isinstance(chunk, dict):
            self.skipped += 1
            return []
        return self.handle_object(chunk)

    def handle_object(self, chunk: dict[str, Any]) -> list[ProviderEvent]:
        """Events for one decoded response object."""
        error = chunk.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else str(error)
            details: dict[str, Any] = {}
            if isinstance(error, dict):
                # Google's code is the HTTP status the error would have had; its status
                # string ("INTERNAL") goes beside it, as for errors before the stream.
                if isinstance(error.get("code"), int) and not isinstance(error["code"], bool):
                    details["status"] = error["code"]
                if isinstance(error.get("status"), str):
                    details["server_status"] = error["status"]
            self.error = ErrorEvent(
                ErrorInfo(
                    f"Gemini reported an error mid-stream: {message}",
                    "LLM_BAD_RESPONSE",
                    details or None,
                )
            )
            return []
        usage = chunk.get("usageMetadata")
        if isinstance(usage, dict):
            self.usage = _usage(usage)
        feedback = chunk.get("promptFeedback")
        candidates = chunk.get("candidates")
        if not candidates:
            if isinstance(feedback, dict) and feedback.get("blockReason"):
                reason = feedback["blockReason"]
                self.error = ErrorEvent(
                    ErrorInfo(
                        f"Gemini blocked the prompt ({reason})",
                        "LLM_BAD_RESPONSE",
                        {"block_reason": reason},
                    )
                )
            return []
        candidate = candidates[0]
        out: list[ProviderEvent] = []
        content = candidate.get("content") or {}
        for part in content.get("parts") or ():
            if not isinstance(part, dict):
                continue
            text = part.get("text")
            call = part.get("functionCall")
            if isinstance(call, dict):
                out.append(ToolCallEvent(self._call(call, part.get("thoughtSignature"))))
            elif text:
                out.append(ThinkingEvent(text) if part.get("thought") else TextEvent(text))
        finish = candidate.get("finishReason")
        if finish and finish != "FINISH_REASON_UNSPECIFIED":
            self._finish = finish
        return out

    def _call(self, call: dict[str, Any], signature: Any) -> ToolCall:
        call_id = call.get("id") or f"call_{self._calls}"
        self._calls += 1
        args = call.get("args")
        tool_call = ToolCall.from_arguments(
            str(call_id), str(call.get("name", "")), args if isinstance(args, dict) else {}
        )
        if isinstance(signature, str) and signature:
            self.signatures[tool_call.id] = signature
        return tool_call

    def end(self) -> ProviderEvent:
        """The terminal event (call once, after the last payload)."""
        if self.error is not None:
            return self.error
        if self._finish is None:
            return ErrorEvent(
                ErrorInfo(
                    "stream ended early: Gemini sent no finishReason; the text so far is "
                    "incomplete",
                    "LLM_BAD_RESPONSE",
                )
            )
        if self._finish in _FAILED:
            return ErrorEvent(
                ErrorInfo(
                    f"Gemini could not finish the turn ({self._finish})",
                    "LLM_BAD_RESPONSE",
                    {"finish_reason": self._finish},
                )
            )
        if self._calls and self._finish == "STOP":
            return FinishEvent("tool", self.usage)
        return FinishEvent(_FINISH.get(self._finish, "stop"), self.usage)


def _usage(meta: dict[str, Any]) -> Usage:
    extra = {
        k: v
        for k, v in meta.items()
        if k not in ("promptTokenCount", "candidatesTokenCount", "totalTokenCount")
    }
    return usage_from(
        meta.get("promptTokenCount"),
        meta.get("candidatesTokenCount"),
        meta.get("totalTokenCount"),
        **extra,
    )


def model_info_from_gemini(entry: dict[str, Any]) -> ModelInfo:
    """A ``models`` entry; ``inputTokenLimit`` is the context window."""
    name = str(entry.get("name", "")).removeprefix("models/")
    methods = entry.get("supportedGenerationMethods") or []
    if "generateContent" in methods:
        kind: Any = "chat"
    elif "embedContent" in methods or "batchEmbedContents" in methods:
        kind = "embedding"
    else:
        kind = None
    limit = entry.get("inputTokenLimit")
    return ModelInfo(
        name=name,
        details={k: v for k, v in entry.items() if k != "name"},
        context_length=limit if isinstance(limit, int) else None,
        capabilities=list(methods),
        kind=kind,
    )

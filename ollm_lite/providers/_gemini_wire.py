"""Pure mapping between the library's types and Gemini's REST format (``v1beta``).

No I/O here: :func:`request_body` builds ``generateContent`` bodies, :class:`StreamDecoder`
cuts the streamed body into JSON texts, :class:`ChatStreamState` turns each streamed
``GenerateContentResponse`` into provider events, :func:`clean_schema` drops the JSON Schema
keywords Gemini's ``parameters`` reject.

Wire facts (Gemini API reference, https://ai.google.dev/api/generate-content): camelCase fields;
roles ``user``/``model``; the system prompt is ``systemInstruction``; function calls arrive whole
(``args`` is an object) and ``finishReason`` is ``STOP`` even after calls; ``usageMetadata`` is
cumulative on every chunk; the stream has no ``[DONE]``; tool results go back as
``functionResponse`` parts whose ``response`` must be an object. Errors can arrive inside the 200
stream, as a ``data:`` event or as bare JSON lines without ``data:`` (Google's SDK reads both).

Tool-call ids: a ``functionCall`` without an ``id`` gets a generated one, ``call_<n>``
(:func:`is_generated_id`); generated ids stay on this side and are never sent to Google.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..types import (
    ImagePart,
    Message,
    ProviderRequest,
    TextPart,
)
from ._gemini_answers import (
    GENERATED_ID_PREFIX as GENERATED_ID_PREFIX,
    ChatStreamState as ChatStreamState,
    StreamDecoder as StreamDecoder,
    generated_ids as generated_ids,
    mid_stream_error as mid_stream_error,
    model_info_from_gemini as model_info_from_gemini,
)
from .base import merge_body

__all__ = [
    "GENERATED_ID_PREFIX",
    "ChatStreamState",
    "StreamDecoder",
    "clean_schema",
    "contents_from_messages",
    "generated_ids",
    "is_generated_id",
    "mid_stream_error",
    "model_info_from_gemini",
    "request_body",
]


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


def is_generated_id(call_id: str | None) -> bool:
    """True for an id this side made up (``call_…``): it is never sent to Google as ``id``.

    Ids from other backends with the same prefix (OpenAI's ``call_…``) are held back too, as
    Google did not issue them either.
    """
    return call_id is not None and call_id.startswith(GENERATED_ID_PREFIX)


def _response_object(text: str) -> dict[str, Any]:
    """A tool message's content as the object ``functionResponse.response`` must be."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {"result": text}
    return value if isinstance(value, dict) else {"result": value}


def _own_signatures(message: Message) -> dict[str, str]:
    """``{call id: thoughtSignature}`` from the Gemini provider blocks of ``message``."""
    out: dict[str, str] = {}
    for block in message.provider_blocks:
        if block.wire != "gemini":
            continue
        call_id, signature = block.data.get("id"), block.data.get("thoughtSignature")
        if isinstance(call_id, str) and isinstance(signature, str) and signature:
            out[call_id] = signature
    return out


def contents_from_messages(
    messages: list[Message], signatures: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Messages as Gemini ``contents`` (system messages are left to ``systemInstruction``).

    Consecutive tool results are merged into one ``user`` turn, as Gemini expects. A call's
    ``thoughtSignature`` comes from its message's Gemini provider blocks, else from
    ``signatures`` (what a provider remembers of the calls it returned by ``chat()``, for
    histories built by hand from a ``ChatResult``, which has no room for them).
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
            if message.tool_call_id and not is_generated_id(message.tool_call_id):
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
        own = _own_signatures(message)
        for call in message.tool_calls:
            fc: dict[str, Any] = {"name": call.name, "args": call.args}
            if call.id and not is_generated_id(call.id):
                fc["id"] = call.id
            call_part: dict[str, Any] = {"functionCall": fc}
            signature = own.get(call.id) or signatures.get(call.id)
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


def _thinking_config(think: Any) -> dict[str, Any] | None:
    if think is None:
        return None
    if think is False:
        return {"thinkingBudget": 0}
    if think is True:
        return {"thinkingBudget": -1, "includeThoughts": True}
    if not isinstance(think, str) or not think:
        raise ConfigError(f"think must be true, false or a thinking level, not {think!r}")
    return {"thinkingLevel": think, "includeThoughts": True}


def _add_tools(body: dict[str, Any], request: ProviderRequest) -> None:
    """``functionDeclarations`` and ``toolConfig`` (a forced tool must be among the tools)."""
    tools = request.tools or []
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
                for t in tools
            ]
        }
    ]
    choice = request.tool_choice
    if isinstance(choice, dict):
        name = choice.get("name")
        if name not in {t.name for t in tools}:
            raise ConfigError(f"tool_choice names {name!r}, which is not among the tools")
        config: dict[str, Any] = {"mode": "ANY", "allowedFunctionNames": [name]}
    else:
        config = {"mode": {"none": "NONE", "required": "ANY"}.get(str(choice), "AUTO")}
    body["toolConfig"] = {"functionCallingConfig": config}


def request_body(
    request: ProviderRequest, signatures: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The JSON body of ``generateContent`` / ``streamGenerateContent`` for ``request``.

    ``tool_choice="required"`` is ``functionCallingConfig.mode = "ANY"``. ``think``:
    ``False`` → ``thinkingConfig.thinkingBudget = 0``, ``True`` → a dynamic budget (``-1``)
    with ``includeThoughts``, a level (``"low"``, ``"high"``) → ``thinkingLevel`` with
    ``includeThoughts`` (Gemini API "Thinking" guide). ``keep_alive`` has no Gemini
    equivalent and is not sent. ``options.extra_body`` is merged last: nested objects key by
    key (so ``{"generationConfig": {"thinkingConfig": …}}`` keeps the sampling options),
    anything else replaces.

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
        _add_tools(body, request)
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
    thinking = _thinking_config(request.think)
    if thinking is not None:
        generation["thinkingConfig"] = thinking
    if generation:
        body["generationConfig"] = generation
    return merge_body(body, opts.extra_body) if opts.extra_body else body

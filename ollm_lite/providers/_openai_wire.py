"""Pure mapping between the library's types and the OpenAI Chat Completions wire format.

No I/O here: :func:`chat_body` builds request bodies, and a few helpers read ``/v1/models`` and
``/v1/embeddings`` answers; what comes back from a chat (streamed chunks and whole answers) is
read by :mod:`~ollm_lite.providers._openai_answers`, whose names are re-exported here. Wire
facts follow openai-python's types and the vLLM / llama.cpp / LM Studio sources quoted in
:mod:`~ollm_lite.providers.backends`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import BadResponse, ConfigError
from ..types import (
    ImagePart,
    Message,
    ModelInfo,
    Part,
    ProviderRequest,
    TextPart,
    ToolCall,
    ToolSchema,
)
from ._openai_answers import (
    ChatStreamState as ChatStreamState,
    _int,
    choice_zero as choice_zero,
    error_payload as error_payload,
    result_from_answer as result_from_answer,
    usage_from_openai as usage_from_openai,
)
from ._openai_tool_calls import ToolCallAssembler as ToolCallAssembler, new_call_id as new_call_id
from .base import merge_body, system_first

if TYPE_CHECKING:
    from ._backend_base import Backend

__all__ = [
    "choice_zero",
    "ChatStreamState",
    "ToolCallAssembler",
    "chat_body",
    "embeddings_from",
    "merge_body",
    "message_from_openai",
    "message_to_openai",
    "messages_to_openai",
    "model_info_from_openai",
    "result_from_answer",
    "tools_to_openai",
    "usage_from_openai",
]


# --------------------------------------------------------------------------- requests


def _image_url(part: ImagePart) -> dict[str, Any]:
    data = part.data
    url = data if data.startswith("data:") else f"data:{part.mime_type};base64,{data}"
    return {"type": "image_url", "image_url": {"url": url}}


def message_to_openai(message: Message) -> dict[str, Any]:
    """One message in the Chat Completions shape.

    Text-only content is a string; a user message with images becomes a content list of
    ``text`` and ``image_url`` (data URL) parts. An assistant's tool calls carry their raw
    ``arguments`` text (``json.dumps(args)`` when there is none); a tool result carries its
    ``tool_call_id``.
    """
    role = message.role
    if role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.text}
    images = message.images
    if images and role == "user":
        content: Any = [{"type": "text", "text": message.text}] if message.text else []
        content.extend(_image_url(p) for p in images)
    else:
        content = message.text
    out: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant" and message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments or json.dumps(call.args),
                },
            }
            for call in message.tool_calls
        ]
    return out


def messages_to_openai(
    messages: Sequence[Message], system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` list, with ``system_prompt`` (when given) as the first message."""
    return system_first(system_prompt, map(message_to_openai, messages))


def message_from_openai(obj: dict[str, Any]) -> Message:
    """A Chat Completions message as a :class:`Message` (the inverse of
    :func:`message_to_openai` on canonical messages: text first, then images).

    Every part must have its documented JSON type: ``content`` a string, a list of ``text``
    and ``image_url`` parts (an image as a ``data:<type>;base64,`` URL) or ``null``;
    ``tool_calls`` a list of ``{id, function: {name, arguments}}``; ``tool_call_id`` a string.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` naming the first part of the message that is wrong.
    """
    if not isinstance(obj, dict) or obj.get("role") not in ("system", "user", "assistant", "tool"):
        raise BadResponse(f"not a chat message: {obj!r:.200}")
    call_id = obj.get("tool_call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise BadResponse("tool_call_id must be a string")
    calls = obj.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise BadResponse("tool_calls must be a list")
    return Message(
        obj["role"],
        _parts_from_openai(obj.get("content")),
        tool_call_id=call_id,
        tool_calls=[_call_from_openai(index, call) for index, call in enumerate(calls or ())],
    )


def _parts_from_openai(content: Any) -> list[Part]:
    if content is None or isinstance(content, str):
        return [TextPart(content)] if content else []
    if not isinstance(content, list):
        raise BadResponse("content must be a string, a list of parts or null")
    parts: list[Part] = []
    for index, item in enumerate(content):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text" and isinstance(item.get("text"), str):
            parts.append(TextPart(item["text"]))
            continue
        image = item.get("image_url") if kind == "image_url" else None
        url = image.get("url") if isinstance(image, dict) else None
        head, sep, data = url.partition(";base64,") if isinstance(url, str) else ("", "", "")
        if not (sep and head.startswith("data:") and data):
            raise BadResponse(
                f"content[{index}] must be {{type: text, text}} or {{type: image_url, "
                "image_url: {url: 'data:<type>;base64,<data>'}}"
            )
        parts.append(ImagePart(data, head.removeprefix("data:") or "image/png"))
    return parts


def _call_from_openai(index: int, call: Any) -> ToolCall:
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    call_id = call.get("id") if isinstance(call, dict) else None
    if (
        not isinstance(name, str)
        or not isinstance(arguments, str | dict | None)
        or not isinstance(call_id, str | None)
    ):
        raise BadResponse(
            f"tool_calls[{index}] must be {{id, type: function, function: {{name, arguments}}}}"
        )
    return ToolCall.from_arguments(call_id or new_call_id(), name, arguments)


def tools_to_openai(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """``tools`` as ``[{"type": "function", "function": {name, description, parameters}}]``."""
    out = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out


def _response_format(fmt: Any, backend: Backend) -> dict[str, Any]:
    if fmt == "json":
        return {"type": "json_object"}
    if isinstance(fmt, dict):
        if fmt.get("type") in ("json_schema", "json_object", "text"):
            return fmt  # already in the wire shape
        if backend.schema_format == "json_object":
            return {"type": "json_object", "schema": fmt}
        return {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt}}
    raise ConfigError(f"response_format must be None, 'json' or a JSON Schema dict, not {fmt!r}")


def _add_think(body: dict[str, Any], think: Any, backend: Backend) -> None:
    if think is None:
        return
    if isinstance(think, bool):
        if backend.thinking_switch == "chat_template_kwargs":
            body["chat_template_kwargs"] = {"enable_thinking": think}
        elif not think:
            body["reasoning_effort"] = "none"
        return
    if not isinstance(think, str) or not think:
        raise ConfigError(f"think must be true, false or an effort level, not {think!r}")
    body["reasoning_effort"] = think


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|h|m|s)")


def keep_alive_seconds(value: str | float) -> int | None:
    """``keep_alive`` as whole seconds: a number of seconds or a Go-style duration
    (``"5m"``, ``"1h30m"``, ``"90s"``); ``None`` for a negative value (keep forever: send
    nothing).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for text that is no duration.
    """
    if isinstance(value, bool):
        raise ConfigError(f"keep_alive must be seconds or a duration like '5m', not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip()
        sign = -1.0 if text.startswith("-") else 1.0
        body = text.lstrip("+-")
        try:
            seconds = float(body) * sign
        except ValueError:
            pieces = _DURATION.findall(body)
            if not body or "".join(n + u for n, u in pieces) != body:
                raise ConfigError(
                    f"keep_alive must be seconds or a duration like '5m', not {value!r}"
                ) from None
            scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
            seconds = sign * sum(float(n) * scale[u] for n, u in pieces)
    if seconds < 0:
        return None
    return math.ceil(seconds)


def _add_tools(body: dict[str, Any], request: ProviderRequest) -> None:
    """``tools`` and ``tool_choice`` (a forced tool must be among the tools)."""
    tools = list(request.tools or ())
    choice = request.tool_choice
    if isinstance(choice, dict):
        wanted = choice.get("name")
        if not any(t.name == wanted for t in tools):
            raise ConfigError(f"tool_choice names {wanted!r}, which is not among the tools")
    if tools:
        body["tools"] = tools_to_openai(tools)
        if isinstance(choice, dict):
            body["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        elif choice in ("none", "required"):
            body["tool_choice"] = choice


def chat_body(
    request: ProviderRequest,
    backend: Backend,
    *,
    stream: bool = True,
    extend_extra: bool = True,
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/chat/completions`` for ``request``.

    ``stream_options.include_usage`` is sent when streaming and the backend accepts it.
    ``tool_choice`` is left out for ``"auto"`` (every server's default when tools are given),
    sent as ``"none"`` or ``"required"``, or as ``{"type": "function", "function": {"name":
    ...}}`` to force a tool. ``response_format``: ``"json"`` → ``{"type": "json_object"}``, a
    JSON Schema → ``{"type": "json_schema", ...}`` (``{"type": "json_object", "schema": ...}``
    for the llama.cpp servers). ``repeat_penalty`` goes under the
    backend's own key. ``think``: an effort level → ``reasoning_effort``; ``True``/``False``
    the backend's way (:attr:`~ollm_lite.providers.backends.Backend.thinking_switch`).
    ``keep_alive`` → the backend's key in seconds (LM Studio ``ttl``); other servers keep
    their models loaded and get nothing.
    ``options.extra_body`` is merged last (nested objects key by key), unless ``extend_extra``
    is false (the caller merges it itself).

    Raises:
        ConfigError: ``CONFIG_INVALID`` when a forced tool is not among ``request.tools`` or
            ``response_format`` has an unknown shape.
    """
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages_to_openai(request.messages, request.system_prompt),
        "stream": stream,
    }
    if stream and backend.include_usage:
        body["stream_options"] = {"include_usage": True}
    opts = request.options
    for key, value in (
        ("temperature", opts.temperature),
        ("max_tokens", opts.max_tokens),
        ("top_p", opts.top_p),
        ("top_k", opts.top_k),
        (backend.repeat_penalty_key, opts.repeat_penalty),
        ("seed", opts.seed),
        ("stop", opts.stop),
        ("presence_penalty", opts.presence_penalty),
        ("frequency_penalty", opts.frequency_penalty),
    ):
        if value is not None:
            body[key] = value
    _add_tools(body, request)
    if request.response_format is not None:
        body["response_format"] = _response_format(request.response_format, backend)
    _add_think(body, request.think, backend)
    if request.keep_alive is not None and backend.keep_alive_key is not None:
        seconds = keep_alive_seconds(request.keep_alive)
        if seconds is not None:
            body[backend.keep_alive_key] = seconds
    extra = opts.extra_body
    return merge_body(body, extra) if extra and extend_extra else body


# --------------------------------------------------------------------------- models, embeddings


def model_info_from_openai(entry: Any) -> ModelInfo:
    """One ``/v1/models`` entry as a :class:`ModelInfo`.

    ``context_length`` is what the server runs with: vLLM's ``max_model_len`` or llama.cpp's
    ``meta.n_ctx``. The trained maximum (``meta.n_ctx_train``) is never reported as the
    context length; it is kept in ``details["trained_context_length"]``.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` for an entry without an ``id``.
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        raise BadResponse(f"the server listed a model without an id: {entry!r:.200}")
    details: dict[str, Any] = {}
    for key in ("owned_by", "created", "root", "parent", "object"):
        if entry.get(key) is not None:
            details[key] = entry[key]
    context = _int(entry.get("max_model_len"))
    source = "max_model_len" if context is not None else None
    meta = entry.get("meta")
    if isinstance(meta, dict):
        details["meta"] = meta
        if _int(meta.get("n_ctx_train")) is not None:
            details["trained_context_length"] = meta["n_ctx_train"]
        if context is None and _int(meta.get("n_ctx")) is not None:
            context, source = meta["n_ctx"], "meta.n_ctx"
    details["context_length_source"] = source
    kind: Any = None
    if entry.get("type") in ("embeddings", "embedding"):
        kind = "embedding"
    elif entry.get("type") in ("llm", "vlm"):
        kind = "chat"
    return ModelInfo(name=entry["id"], details=details, context_length=context, kind=kind)


def embeddings_from(answer: Any, expected: int, *, model: str) -> list[list[float]]:
    """The vectors of one ``/v1/embeddings`` answer, in input order (sorted by ``index``).

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` when there is no ``data`` list, the count is wrong,
            or a vector is not a list of numbers.
    """
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise BadResponse(
            f"the /v1/embeddings answer for {model!r} has no 'data' list", model=model
        )
    if len(data) != expected:
        raise BadResponse(
            f"/v1/embeddings returned {len(data)} vectors for {expected} texts with {model!r}",
            model=model,
        )
    items = sorted(
        (d for d in data if isinstance(d, dict)),
        key=lambda d: _int(d.get("index")) or 0,
    )
    vectors: list[list[float]] = []
    for item in items:
        vec = item.get("embedding")
        if not isinstance(vec, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vec
        ):
            raise BadResponse(
                f"/v1/embeddings returned a vector that is not a list of numbers for {model!r}",
                model=model,
            )
        vectors.append(vec)
    if len(vectors) != expected:
        raise BadResponse(f"/v1/embeddings returned malformed entries for {model!r}", model=model)
    return vectors

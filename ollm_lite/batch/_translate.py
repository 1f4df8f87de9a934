"""Batch request bodies to provider requests, and provider answers back to OpenAI objects.

A ``/v1/chat/completions`` body (OpenAI's Chat Completions request,
https://platform.openai.com/docs/api-reference/chat/create) becomes a
:class:`~ollm_lite.types.ProviderRequest`, so each provider sends it in its own wire format
(Ollama ``/api/chat``, Gemini ``generateContent``, the OpenAI-compatible servers) exactly as a
chat call would. The answer comes back as an OpenAI ``chat.completion`` object whatever the
provider's wire was; a ``/v1/embeddings`` body becomes an ``embed`` call and an embeddings
``list`` object.

Known keys are translated; any other key of a chat body (``logprobs``, ``logit_bias`` …) is
passed through as ``GenerationOptions.extra_body``, i.e. sent verbatim to the server. Keys
that make no sense for one blocking answer (``stream: true``, ``n`` > 1) are problems
reported before anything is sent.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, fields, replace
from typing import Any

from ..chat._call_settings import CallSettings
from ..errors import ConfigError, OllmError
from ..providers._openai_wire import message_from_openai
from ..types import (
    ChatResult,
    EmbeddingResult,
    GenerationOptions,
    Message,
    ProviderRequest,
    ToolSchema,
)
from ._format import CHAT_URL, BatchInput

__all__ = [
    "ChatJob",
    "EmbedJob",
    "Job",
    "chat_completion",
    "embeddings_list",
    "job_for",
    "with_defaults",
]

#: Keys with no meaning for one blocking answer, dropped rather than sent.
_DROPPED = frozenset({"stream", "stream_options", "n", "user", "metadata", "store"})
#: Chat Completions keys of a generation option named otherwise, the first found wins (OpenAI's
#: newer ``max_completion_tokens``; vLLM's ``repetition_penalty``). Every other number option
#: is read under its ``GenerationOptions`` field name.
_KEYS: dict[str, tuple[str, ...]] = {
    "max_tokens": ("max_completion_tokens", "max_tokens"),
    "repeat_penalty": ("repeat_penalty", "repetition_penalty"),
}
#: The number options: name → (body keys, int or float).
_NUMBERS: dict[str, tuple[tuple[str, ...], type]] = {
    f.name: (_KEYS.get(f.name, (f.name,)), int if str(f.type).startswith("int") else float)
    for f in fields(GenerationOptions)
    if f.name not in ("stop", "extra_body")
}


class BodyProblem(ValueError):
    """Internal: why a body cannot be sent (becomes one line of a BatchFileError)."""


@dataclass(frozen=True, slots=True)
class ChatJob:
    """A chat request ready for ``provider.chat``."""

    custom_id: str
    request: ProviderRequest


@dataclass(frozen=True, slots=True)
class EmbedJob:
    """An embeddings request ready for ``provider.embed``."""

    custom_id: str
    texts: list[str]
    model: str
    timeout: float | None = None
    """The line's deadline in seconds (the client's ``timeout``); ``None``: none."""


Job = ChatJob | EmbedJob


def job_for(
    item: BatchInput, default_model: str | None, defaults: CallSettings | None = None
) -> Job:
    """The provider call for one input line, over the client's ``defaults`` (see
    :func:`with_defaults`).

    Raises:
        BodyProblem: the body cannot be sent (no model, no messages, ``stream: true`` …).
    """
    body = item.body
    model = body.get("model", default_model)
    if model is None:
        raise BodyProblem("body has no model and no default model was given")
    if not isinstance(model, str) or not model:
        raise BodyProblem(f"body.model must be a non-empty string, not {model!r}")
    if item.url == CHAT_URL:
        request = chat_request(body, model)
        if defaults is not None:
            request = with_defaults(request, body, defaults)
        return ChatJob(item.custom_id, request)
    timeout = defaults.timeout if defaults is not None else None
    return EmbedJob(item.custom_id, _embed_texts(body), model, timeout)


#: Body keys that carry the reasoning switch on one wire or another (then ``think`` is the
#: line's own, sent verbatim).
_THINK_KEYS = ("think", "reasoning_effort", "reasoning")


def with_defaults(
    request: ProviderRequest, body: dict[str, Any], defaults: CallSettings
) -> ProviderRequest:
    """``request`` with the client's options wherever the line's ``body`` does not set the
    same thing: the body is the request (OpenAI's batch format), the client fills the gaps.

    Generation options fill the fields the body leaves unset; ``extra_body`` keys are added
    unless the body has that key; ``think`` and ``keep_alive`` unless the body carries its own
    (sent verbatim, they would win on the wire anyway); ``tool_choice`` when the body has none;
    ``headers`` and ``timeout`` (the line's deadline) always, as a body cannot say them.

    Raises:
        BodyProblem: the client's ``tool_choice`` needs a tool this line does not offer.
    """
    own = request.options
    given = defaults.generation
    filled = {
        f.name: getattr(given, f.name)
        for f in fields(own)  # every option the request has, however many there are
        if f.name != "extra_body" and getattr(own, f.name) is None and hasattr(given, f.name)
    }
    extra = {k: v for k, v in given.extra_body.items() if k not in body}
    options = replace(own, **filled, extra_body={**extra, **own.extra_body})
    tool_choice = request.tool_choice
    if body.get("tool_choice") is None and defaults.tool_choice != "auto":
        from ..client._prepare import check_tool_choice

        try:
            check_tool_choice(defaults.tool_choice, None, tuple(request.tools or ()))
        except ConfigError as exc:
            raise BodyProblem(f"the client's default {exc.message}") from None
        tool_choice = defaults.tool_choice
    own_think = any(key in body for key in _THINK_KEYS)
    return replace(
        request,
        options=options,
        tool_choice=tool_choice,
        think=request.think if own_think else defaults.think,
        keep_alive=request.keep_alive if "keep_alive" in body else defaults.keep_alive,
        headers={**(defaults.headers or {}), **request.headers},
        timeout=defaults.timeout,
    )


def _embed_texts(body: dict[str, Any]) -> list[str]:
    unknown = sorted(set(body) - {"model", "input", "encoding_format", "user"})
    if unknown:
        raise BodyProblem(f"unsupported embeddings key(s): {', '.join(unknown)}")
    if body.get("encoding_format", "float") != "float":
        raise BodyProblem("only encoding_format 'float' is supported")
    value = body.get("input")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise BodyProblem("body.input must be a string or a non-empty list of strings")


def chat_request(body: dict[str, Any], model: str) -> ProviderRequest:
    """A Chat Completions body as a :class:`ProviderRequest` for ``model``.

    Raises:
        BodyProblem: for missing or malformed messages, ``stream: true`` or ``n`` > 1.
    """
    if body.get("stream") not in (None, False):
        raise BodyProblem("stream must be false or absent in a batch (one whole answer a line)")
    if body.get("n", 1) != 1:
        raise BodyProblem("n must be 1 (one answer a line)")
    messages = _messages(body.get("messages"))
    extra = {k: v for k, v in body.items() if k not in _KNOWN and k not in _DROPPED}
    tools = _tools(body.get("tools"))
    tool_choice: Any = "auto"
    choice = body.get("tool_choice")
    if choice in ("auto", "none"):
        tool_choice = choice
    elif isinstance(choice, dict) and "function" in choice:
        function = choice["function"]
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise BodyProblem("body.tool_choice must be {type: function, function: {name}}")
        tool_choice = {"name": name}
    elif isinstance(choice, str | dict):
        extra["tool_choice"] = choice  # "required" and other server-specific values
    elif choice is not None:
        raise BodyProblem("body.tool_choice must be a string or an object")
    return ProviderRequest(
        model=model,
        messages=messages,
        tools=tools,
        tool_choice=tool_choice,
        options=_options(body, extra),
        response_format=_response_format(body.get("response_format")),
    )


_KNOWN = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "response_format",
        "stop",
        *(key for keys, _ in _NUMBERS.values() for key in keys),
    }
)


_ROLES = ("system", "user", "assistant", "tool")


def _messages(value: Any) -> list[Message]:
    if not isinstance(value, list) or not value:
        raise BodyProblem("body.messages must be a non-empty list")
    out = []
    for index, item in enumerate(value):
        if not isinstance(item, dict) or item.get("role") not in _ROLES:
            raise BodyProblem(
                f"body.messages[{index}] is not a chat message (role system, user, "
                "assistant or tool)"
            )
        try:
            out.append(message_from_openai(item))
        except OllmError as exc:
            raise BodyProblem(f"body.messages[{index}].{exc.message}") from None
    return out


def _tools(value: Any) -> list[ToolSchema] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise BodyProblem("body.tools must be a list")
    out = []
    for index, item in enumerate(value):
        function = item.get("function") if isinstance(item, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise BodyProblem(f"body.tools[{index}] must be {{type: function, function: {{name}}}}")
        assert isinstance(function, dict)
        params = function.get("parameters")
        description = function.get("description")
        if not isinstance(params, dict | None) or not isinstance(description, str | None):
            raise BodyProblem(
                f"body.tools[{index}].function: parameters must be an object and description "
                "a string"
            )
        out.append(ToolSchema(name, description, params))
    return out or None


def _number(body: dict[str, Any], key: str, kind: type) -> Any:
    value = body.get(key)
    if value is None:
        return None
    ok = isinstance(value, kind) if kind is int else isinstance(value, int | float)
    if not ok or isinstance(value, bool):
        raise BodyProblem(f"body.{key} must be a number, not {value!r}")
    return value


def _options(body: dict[str, Any], extra: dict[str, Any]) -> GenerationOptions:
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    elif stop is not None and not (
        isinstance(stop, list) and all(isinstance(s, str) for s in stop)
    ):
        raise BodyProblem("body.stop must be a string or a list of strings")
    numbers = {}
    for name, (keys, kind) in _NUMBERS.items():
        for key in keys:
            value = _number(body, key, kind)
            if value is not None:
                numbers[name] = value
                break
    return GenerationOptions(stop=stop, extra_body=extra, **numbers)


def _response_format(value: Any) -> Any:
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return "json"
    if kind == "json_schema":
        spec = value.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if isinstance(schema, dict):
            return schema
    raise BodyProblem(
        "body.response_format must be {type: text | json_object} or "
        "{type: json_schema, json_schema: {schema: {...}}}"
    )


# --------------------------------------------------------------------------- answers


def chat_completion(result: ChatResult, model: str) -> dict[str, Any]:
    """``result`` as an OpenAI ``chat.completion`` object (one choice)."""
    wire = result.to_openai()
    message: dict[str, Any] = {"role": "assistant", "content": result.content}
    if wire["tool_calls"]:
        message["tool_calls"] = wire["tool_calls"]
    if result.thinking:
        message["reasoning_content"] = result.thinking
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": wire["finish_reason"],
                "logprobs": None,
            }
        ],
        "usage": wire["usage"],
    }


def embeddings_list(result: EmbeddingResult, model: str) -> dict[str, Any]:
    """``result`` as an OpenAI embeddings ``list`` object."""
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": list(vector)}
            for i, vector in enumerate(result.vectors)
        ],
        "model": result.model or model,
        "usage": None,
    }
